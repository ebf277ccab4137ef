#!/usr/bin/python3
"""kiln loadgen on its own, against mock_v2.py:

    loadgen_test.py KILN

mock_v2.py (beside this file) is a small KServe v2 server that checks every
request against the protocol, answers the 7th, 14th, ... infer with 503 and
the 5th, 10th, ... (not also 7th) with a 200 whose binary output is cut
short.  Checked: loadgen counts as successes only the well-formed 200s and
sorts the rest by status; its requests follow the protocol (binary tensors,
ids, the timeout and priority parameters, one connection per client); the
open loop with JSON tensors; an unknown model exits 1.  Every check prints
"ok NAME" or "FAIL NAME: why"; exit 1 when one fails.  Python's standard
library only (Debian's /usr/bin/python3)."""
import http.client
import json
import os
import socket
import subprocess
import sys
import time

KILN = sys.argv[1]
T0 = time.time()
failures = []
passes = 0


def ok(name, cond, why=""):
    global passes
    if cond:
        passes += 1
        print("ok   %-44s (%.1f s)" % (name, time.time() - T0), flush=True)
    else:
        failures.append(name)
        print("FAIL %s: %s" % (name, why), flush=True)
    return cond


def get(port, path, timeout=10):
    """(status, the JSON body or None); status 0 when the connection fails."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data) if data else None
        except ValueError:
            return r.status, None
    except OSError:
        return 0, None
    finally:
        c.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(fn, timeout, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return fn()


def loadgen(url, model, *args, timeout=120):
    """kiln loadgen --json: (exit status, the JSON object or None, stderr)."""
    p = subprocess.run([KILN, "loadgen", url, "--model", model, "--json"] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    try:
        return p.returncode, json.loads(p.stdout), p.stderr
    except ValueError:
        return p.returncode, None, p.stderr + p.stdout


def main():
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    mock = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "mock_v2.py"), str(port), "--fail-every", "7",
        "--corrupt-every", "5"])
    try:
        up = wait_for(lambda: get(port, "/v2/models/mock", timeout=2)[0] == 200, 10)
        if not ok("mock_v2_started", up, "mock_v2.py not answering on port %d" % port):
            return
        conns0 = (get(port, "/stats")[1] or {}).get("connections", 0) + 1
        rc, lg, err = loadgen(url, "mock", "--requests", "70", "--warmup", "0",
                              "--concurrency", "3", "--shape", "x=2x4", "--timeout-us", "5000",
                              "--priority", "2")
        errs = (lg or {}).get("errors") or {}
        ok("loadgen_counts_success_only_for_good_200s", lg is not None and lg["requests"] == 70
           and lg["success"] == 48 and errs.get("503", {}).get("count") == 10
           and errs.get("malformed", {}).get("count") == 12 and lg["batch"] == 2,
           "%r %s" % (lg, err[-300:]))
        _, stats = get(port, "/stats")
        ok("loadgen_requests_follow_the_protocol", isinstance(stats, dict)
           and stats.get("bad") == 0 and stats.get("binary") == 70 and stats.get("ids") == 70
           and stats.get("timeout") == 5000 and stats.get("priority") == 2
           and stats.get("connections", 99) - conns0 <= 4,  # 3 clients + the metadata's
           "mock's view: %r (%d connections before loadgen)" % (stats, conns0))
        rc, lg, err = loadgen(url, "mock", "--rate", "200", "--duration", "0.5", "--warmup", "0",
                              "--json-data")
        _, stats2 = get(port, "/stats")
        ok("loadgen_open_loop_json_data", lg is not None and lg["mode"] == "open"
           and lg["requests"] > 40 and isinstance(stats2, dict) and stats2.get("bad") == 0
           and stats2.get("json", 0) >= lg["requests"], "%r, mock %r %s" % (lg, stats2,
                                                                            err[-300:]))
        rc, lg, err = loadgen(url, "nope", "--requests", "1")
        ok("loadgen_unknown_model_exit_1", rc == 1 and "404" in err, "exit %d: %s" % (rc, err))
    finally:
        mock.kill()
        mock.wait()


if __name__ == "__main__":
    main()
    print("loadgen_test: %d passed, %d failed%s in %.1f s" % (
        passes, len(failures), (": " + ", ".join(failures)) if failures else "",
        time.time() - T0))
    sys.exit(1 if failures else 0)
