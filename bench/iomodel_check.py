#!/usr/bin/env python3
"""The IO model against measured step times (issue 7's check).

usage: bench/iomodel_check.py [--threads T] [--runs N] [--worst K] ENGINE...

For every step of every engine: the prediction and the measured median of
`kiln bench ENGINE --per-step --json --threads T --runs N`.  Prints
the Spearman rank correlation over all steps, the median ratio of predicted
to measured, and the steps the model gets most wrong.  Steps under 2 us in
both are left out of the worst list (timer and dispatch noise), never out
of the correlation.
"""
import argparse, json, math, os, statistics, subprocess

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--runs", type=int, default=20)
ap.add_argument("--worst", type=int, default=10)
ap.add_argument("--kiln", default=os.path.join(root, "build", "kiln"))
ap.add_argument("engines", nargs="+")
a = ap.parse_args()

def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r

def spearman(x, y):
    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((p - mx) * (q - my) for p, q in zip(rx, ry))
    den = (sum((p - mx) ** 2 for p in rx) * sum((q - my) ** 2 for q in ry)) ** 0.5
    return num / den if den else 0.0

rows = []
for eng in a.engines:
    out = json.loads(subprocess.run([a.kiln, "bench", eng, "--per-step", "--json", "--threads",
                                     str(a.threads), "--runs", str(a.runs)],
                                    check=True, capture_output=True, text=True).stdout)
    name = os.path.basename(eng)
    for i, s in enumerate(out["step_list"]):
        rows.append((name, i, s["name"], s["op"], s["tactic"], s["bound"], s["predicted_us"],
                     s["median_us"]))

pred = [r[6] for r in rows]
meas = [r[7] for r in rows]
rho = spearman(pred, meas)
ratios = [p / m for p, m in zip(pred, meas) if m > 0]
print(f"{len(rows)} steps of {len(a.engines)} engines at {a.threads} thread(s): "
      f"Spearman {rho:.3f}, median predicted/measured {statistics.median(ratios):.2f} "
      f"(quartiles {statistics.quantiles(ratios, n=4)[0]:.2f} .. "
      f"{statistics.quantiles(ratios, n=4)[2]:.2f})")
for name in sorted(set(r[0] for r in rows)):
    sub = [r for r in rows if r[0] == name]
    rr = [r[6] / r[7] for r in sub if r[7] > 0]
    print(f"  {name:28s} {len(sub):4d} steps  Spearman {spearman([r[6] for r in sub], [r[7] for r in sub]):.3f}"
          f"  median ratio {statistics.median(rr):.2f}  sum predicted {sum(r[6] for r in sub):9.1f} us"
          f"  sum measured {sum(r[7] for r in sub):9.1f} us")
print("by what the model says bounds the step:")
for bound in sorted(set(r[5] for r in rows)):
    sub = [r for r in rows if r[5] == bound]
    rr = [r[6] / r[7] for r in sub if r[7] > 0]
    print(f"  {bound:10s} {len(sub):4d} steps  median ratio {statistics.median(rr):.2f}"
          f"  measured {sum(r[7] for r in sub):9.1f} us")
wrong = sorted((r for r in rows if max(r[6], r[7]) >= 2.0),
               key=lambda r: -abs(math.log(max(r[6], 1e-3) / max(r[7], 1e-3))))
print(f"most wrong (|log ratio|, steps of at least 2 us):")
print(f"  {'engine':20s} {'step':>4s} {'op':18s} {'tactic':20s} {'bound':8s} {'pred us':>9s} {'meas us':>9s} {'ratio':>6s}  name")
for r in wrong[:a.worst]:
    print(f"  {r[0]:20.20s} {r[1]:4d} {r[3]:18.18s} {r[4] or 'reference':20.20s} {r[5]:8s} "
          f"{r[6]:9.1f} {r[7]:9.1f} {r[6] / r[7]:6.2f}  {r[2]}")
