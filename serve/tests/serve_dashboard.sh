#!/usr/bin/env bash
# kiln serve's live dashboard (GET /dashboard) in headless Chromium, with
# the server under load:
#   serve/tests/serve_dashboard.sh KILN_BIN SOURCE_DIR OUT_DIR
# Starts `kiln serve` on a free port with models/tinycnn, keeps kiln loadgen
# sending to it, then loads the page twice (--dump-dom, a few seconds apart)
# and checks that it rendered without a script error (data-rendered="ok"),
# polled /metrics several times and saw the counters move between polls,
# drew every chart of the model (points on each canvas, from the summary the
# page keeps in #serve-summary), and that the second load saw more requests
# than the first.  A screenshot goes to OUT_DIR/serve_dashboard.png.
# Exit 77 (skipped) without chromium, unless KILN_REQUIRE_MODELS=1 (CI),
# and when this kiln was built without libcurl (no kiln loadgen for the load).
set -u
kiln=$1 src=$2 out=$3
mkdir -p "$out"
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
  [ "${KILN_REQUIRE_MODELS:-0}" = 1 ] && { echo "serve_dashboard: chromium is missing (scripts/install_deps.sh)" >&2; exit 1; }
  echo "serve_dashboard: chromium not installed; skipped"
  exit 77
fi
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
fail=0
# the page's parser and histogram_quantile on their own, when node is here
if command -v node >/dev/null; then
  node "$src/serve/tests/dashboard_js_test.js" "$src/serve/dashboard.js" || fail=1
fi
# a kiln built without libcurl answers `kiln loadgen` with exit 1 and a line
# saying so: no load for the page, the rest is skipped
lg=$("$kiln" loadgen 2>&1)
if [ $? = 1 ] && [[ $lg == *"built without libcurl"* ]]; then
  echo "serve_dashboard: $lg"
  echo "serve_dashboard: the page is checked under kiln loadgen's load; skipped"
  [ "$fail" = 0 ] && exit 77
  exit 1
fi
tmp=$(mktemp -d)
server_pid="" load_pid=""
cleanup() {
  [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/repo/tinycnn/1"
cp "$src/models/tinycnn/model.onnx" "$tmp/repo/tinycnn/1/"
echo '{"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 1000}}' \
  >"$tmp/repo/tinycnn/config.json"
"$kiln" serve --repository "$tmp/repo" --host 127.0.0.1 --port 0 --threads 1 \
  >"$tmp/serve.out" 2>"$out/serve_dashboard.stderr" &
server_pid=$!
url=""
for _ in $(seq 1 300); do
  url=$(grep -o 'http://[0-9.]*:[0-9]*' "$tmp/serve.out" | head -n 1)
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$url" ] || { echo "serve_dashboard: kiln serve did not start: $(tail -n 3 "$out/serve_dashboard.stderr")" >&2; exit 1; }
for _ in $(seq 1 300); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/v2/models/tinycnn/ready")" = 200 ] && break
  sleep 0.1
done
"$kiln" loadgen "$url" --model tinycnn --concurrency 4 --duration 60 --warmup 0 \
  --shape input=2x3x32x32 >"$tmp/loadgen.out" 2>&1 &
load_pid=$!
sleep 1
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=4000)
page="$url/dashboard?interval=250"
# two loads of the page 2 s apart; the second also takes the screenshot
# (one launch of Chromium costs seconds)
timeout 60 "$chrome" "${flags[@]}" --dump-dom "$page" >"$out/serve_dashboard.1.html" 2>/dev/null
sleep 2
rm -f "$out/serve_dashboard.png"
timeout 60 "$chrome" "${flags[@]}" --window-size=1300,1100 --screenshot="$out/serve_dashboard.png" \
  --dump-dom "$page" >"$out/serve_dashboard.2.html" 2>/dev/null
"$py" - "$out/serve_dashboard.1.html" "$out/serve_dashboard.2.html" <<'PY' || fail=1
import json, re, sys
def summary(path):
    dom = open(path, encoding="utf-8", errors="replace").read()
    body = re.search(r"<body([^>]*)>", dom)
    m = re.search(r'<pre id="serve-summary" hidden="">([^<]*)', dom)
    return (body.group(1) if body else ""), (json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&")) if m and m.group(1) else None)
bad = []
sums = []
for k, path in enumerate(sys.argv[1:], 1):
    attrs, s = summary(path)
    sums.append(s)
    if 'data-rendered="ok"' not in attrs:
        bad.append("load %d: not rendered (%s): %s" % (k, attrs.strip(), s and s.get("errors")))
        continue
    if not s or s.get("samples", 0) < 4 or s.get("failed"):
        bad.append("load %d: %r polls of /metrics, %r failed" % (k, s and s.get("samples"), s and s.get("failed")))
        continue
    if s.get("changed", 0) < 2:
        bad.append("load %d: the counters moved in %r polls, want >= 2" % (k, s.get("changed")))
    m = (s.get("models") or {}).get("tinycnn")
    if not m:
        bad.append("load %d: no tinycnn section (models %r)" % (k, list((s.get("models") or {}))))
        continue
    for chart in ("throughput", "latency", "stages", "batch", "depth", "util", "outcomes"):
        if not (m.get("drawn") or {}).get(chart):
            bad.append("load %d: chart %s drew nothing (%r)" % (k, chart, m.get("drawn")))
    # rates and latency under load: the highest interval's, as the last
    # interval of Chromium's virtual time may be too short for a request
    # to end in it
    peak = m.get("peak") or {}
    if not (peak.get("infer_rate") or 0) > 0 or not (peak.get("p99_ms") or 0) > 0:
        bad.append("load %d: no interval with infer_rate and p99 above 0 (peak %r, last %r)"
                   % (k, peak, m.get("last")))
if not bad and len(sums) == 2:
    r1 = sums[0]["models"]["tinycnn"]["totals"]["requests"]
    r2 = sums[1]["models"]["tinycnn"]["totals"]["requests"]
    if not r2 > r1:
        bad.append("the second load saw %r requests, the first %r: no update" % (r2, r1))
for b in bad:
    print("serve_dashboard: " + b, file=sys.stderr)
if not bad:
    m = sums[1]["models"]["tinycnn"]
    print("serve_dashboard: ok: %d polls, counters moved in %d, charts %s, requests %d -> %d"
          % (sums[1]["samples"], sums[1]["changed"], m["drawn"], sums[0]["models"]["tinycnn"]["totals"]["requests"], m["totals"]["requests"]))
sys.exit(1 if bad else 0)
PY
[ -s "$out/serve_dashboard.png" ] || { echo "serve_dashboard: no screenshot" >&2; fail=1; }
exit $fail
