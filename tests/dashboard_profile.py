#!/usr/bin/env python3
"""Puts a hand-made `kiln profile --json` (docs: format kiln-profile v1) into a
dashboard page: measured = 1.3 x predicted, a timeline and a sweep, so the
page's measured-time charts are exercised before kiln profile exists.
  dashboard_profile.py INSPECT.json PAGE.html OUT.html"""
import json, sys

insp = json.load(open(sys.argv[1]))
steps, live, tl = [], 0, []
for i, s in enumerate(insp["step_list"]):
    io = s.get("io", {})
    med = max(io.get("predicted_us", 1.0) * 1.3, 0.1)
    live = (live + sum(4 * max(1, abs(d) if isinstance(d, int) else 1) for o in s["outputs"]
                       for d in [1]) * 1000) % (insp["arena_bytes"] + 1)
    steps.append({"index": i, "name": s["name"], "op": s["op"], "onnx_nodes": s["onnx_nodes"],
                  "tactic": s["tactic"], "tiling": s["tiling"], "inputs": s["inputs"],
                  "outputs": s["outputs"], "flops": s["flops"], "bytes_read": s["bytes_read"],
                  "bytes_written": s["bytes_written"], "mean_us": med, "median_us": med,
                  "min_us": med * 0.9, "share": 0, "gflops": s["flops"] / (med * 1e3),
                  "gbs": (s["bytes_read"] + s["bytes_written"]) / (med * 1e3),
                  "predicted_us": io.get("predicted_us"), "bound": io.get("bound"),
                  "intensity": io.get("intensity"), "io_bytes": io.get("bytes"),
                  "arena_live_bytes": live})
    tl.append({"step": i, "name": s["name"], "arena_live_bytes": live})
size = lambda k: {"arena_bytes": insp["arena_bytes"] * k, "weights_bytes": insp["weights_bytes"],
                  "peak_rss_bytes": 30e6 + insp["arena_bytes"] * k, "p50_ms": 0.5 * k}
prof = {"format": "kiln-profile", "version": 1, "model": insp["model"] + " </script><b>&\"",
        "threads": 1, "runs": 5, "warmup": 1,
        "latency_ms": {"mean": 1, "median": 1, "p90": 1, "p99": 1, "min": 1, "max": 1},
        "steps": steps, "machine": insp.get("machine"),
        "memory": {"arena_bytes": insp["arena_bytes"], "weights_bytes": insp["weights_bytes"],
                   "peak_rss_bytes": 30e6, "timeline": tl},
        "sweep": {"name": "sequence", "sizes": [{"value": v, "optimized": size(v),
                                                 "unoptimized": size(2 * v)} for v in (1, 2, 4)]}}
page = open(sys.argv[2]).read()
text = json.dumps(prof).replace("</", "<\\/")
marker = '<script type="application/json" id="kiln-profile">null</script>'
assert marker in page
open(sys.argv[3], "w").write(page.replace(marker, '<script type="application/json" id="kiln-profile">'
                                          + text + "</script>"))
