#!/usr/bin/python3
"""Model updates under load (issue 10's "ten model updates during a 2-minute
load"): not part of ctest (it takes minutes); its output goes in the note.

    reload_soak.py KILN POKE_BIN [--model FILE] [--shape NAME=DIMS]...
                   [--duration S] [--updates N] [--concurrency C] [--threads T]
                   [--max-batch B]

Starts `kiln serve` (poll mode, every second) on a repository holding FILE
(default models/tinycnn/model.onnx) as version 1 with validation gates
(max_abs_error 0.01, min_cosine 0.999), runs `kiln loadgen --concurrency C`
for S seconds (default 120), and makes N updates (default 10) evenly over
it: each a new version directory (FILE again, moved in whole), every other
one also announced with POST /v2/repository/models/M/load; the middle one
is FILE with one weight poked by POKE_BIN (validate_poke: the last float
initializer's element 0 plus 5), which validation must reject.  Prints the
loadgen report, each update's outcome from /v2/repository/index, and a
verdict: zero failed requests, and no answer from the poked version.
Exit 1 otherwise.  Debian's Python, standard library only."""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("kiln")
ap.add_argument("poke")
here = os.path.dirname(os.path.abspath(__file__))
ap.add_argument("--model", default=os.path.join(here, "..", "..", "models", "tinycnn",
                                                "model.onnx"))
ap.add_argument("--shape", action="append", default=[])
ap.add_argument("--duration", type=float, default=120)
ap.add_argument("--updates", type=int, default=10)
ap.add_argument("--concurrency", type=int, default=32)
ap.add_argument("--threads", type=int, default=0)
ap.add_argument("--max-batch", type=int, default=8)
a = ap.parse_args()


def http(method, url, body=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


tmp = tempfile.mkdtemp(prefix="kiln_reload_soak.")
repo = os.path.join(tmp, "repo")
name = "m"
os.makedirs(os.path.join(repo, name, "1"))
shutil.copy(a.model, os.path.join(repo, name, "1", "model.onnx"))
with open(os.path.join(repo, name, "config.json"), "w") as f:
    json.dump({"max_batch_size": a.max_batch,
               "dynamic_batching": {"max_queue_delay_microseconds": 2000},
               "validation": {"max_abs_error": 0.01, "min_cosine": 0.999}}, f)
lst = subprocess.run([a.poke, a.model, "--list"], capture_output=True, text=True, check=True)
poke_name = lst.stdout.split("\n")[-2].split()[0]
args = [a.kiln, "serve", "--repository", repo, "--host", "127.0.0.1", "--port", "0",
        "--repository-poll-secs", "1", "--log", os.path.join(tmp, "serve.log")]
if a.threads:
    args += ["--threads", str(a.threads)]
srv = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
url = None
for line in srv.stdout:
    m = re.search(r"listening on (http://\S+)", line)
    if m:
        url = m.group(1)
        break
assert url, "kiln serve did not start"
deadline = time.time() + 300
while time.time() < deadline:
    try:
        if http("GET", url + "/v2/models/%s/ready" % name)[0] == 200:
            break
    except OSError:
        pass
    time.sleep(0.2)
lg = {}


def load():
    cmd = [a.kiln, "loadgen", url, "--model", name, "--concurrency", str(a.concurrency),
           "--duration", str(a.duration), "--warmup", "0", "--json"]
    for s in a.shape:
        cmd += ["--shape", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    lg["out"], lg["err"] = p.stdout, p.stderr


th = threading.Thread(target=load)
t0 = time.time()
th.start()
bad_version = None
for k in range(a.updates):
    time.sleep(max(0, t0 + a.duration * (k + 1) / (a.updates + 1) - time.time()))
    version = k + 2
    stage = os.path.join(tmp, "stage")
    os.makedirs(stage)
    if k == a.updates // 2:
        bad_version = version
        subprocess.run([a.poke, a.model, os.path.join(stage, "model.onnx"), poke_name, "0",
                        "5.0"], check=True, capture_output=True)
    else:
        shutil.copy(a.model, os.path.join(stage, "model.onnx"))
    os.rename(stage, os.path.join(repo, name, str(version)))
    how = "new directory"
    if k % 2:
        st, _ = http("POST", url + "/v2/repository/models/%s/load" % name, {}, timeout=300)
        how += ", POST load (HTTP %d)" % st
    print("%6.1f s: version %d%s: %s" % (time.time() - t0, version,
                                         " (poked)" if version == bad_version else "", how),
          flush=True)
th.join()
st, index = http("POST", url + "/v2/repository/index", {})
srv.send_signal(signal.SIGTERM)
srv.wait(timeout=60)
r = json.loads(lg["out"]) if lg.get("out") else None
print("loadgen:", json.dumps(r) if r else lg.get("err"))
for e in index if isinstance(index, list) else []:
    if e.get("name") == name:
        print("  index: version %s %s %s" % (e.get("version"), e.get("state"),
                                             e.get("reason", "")))
versions = (r or {}).get("versions", {})
ok = r is not None and r["failed"] == 0 and str(bad_version) not in versions
print("verdict: %s: %d requests, %d failed, versions answering %s, poked version %s %s" % (
    "ok" if ok else "FAIL", r["requests"] if r else 0, r["failed"] if r else -1, versions,
    bad_version, "never answered" if str(bad_version) not in versions else "ANSWERED"))
shutil.rmtree(tmp, ignore_errors=True)
raise SystemExit(0 if ok else 1)
