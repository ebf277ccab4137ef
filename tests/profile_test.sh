#!/usr/bin/env bash
# kiln profile on the bundled tinycnn (a model and an engine, 1 and 2
# threads): the table, the JSON (every step once, shares adding up to 1,
# the memory timeline), the Chrome trace (one X event per step per run on
# the calling thread, each run's steps adding up to its measured time
# (within 10% in the best run), worker events inside their step's, process and thread
# metadata, the memory counter), the sweep (each size optimized and not,
# arena growing with the batch), the report page, and usage and input
# errors.  The JSON and trace checks use /usr/bin/python3's json module
# (scripts/install_deps.sh installs python3).
#   tests/profile_test.sh KILN_BIN SOURCE_DIR
set -u
kiln=$1
src=$2
model=$src/models/tinycnn/model.onnx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3 || true)
n_fail=0
fail() { echo "FAIL $1: $2"; [ -s "$tmp/err" ] && head -n 5 "$tmp/err" | sed 's/^/    stderr: /'; n_fail=$((n_fail + 1)); }
pass() { echo "ok $1"; }

# checks a profile's JSON and trace: check_json JSON TRACE THREADS RUNS
check_json() {
  [ -n "$py" ] || { echo "FAIL: no python3 to read the JSON (scripts/install_deps.sh)"; return 1; }
  "$py" - "$@" <<'EOF'
import json, sys
prof, trace, threads, runs = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3]), int(sys.argv[4])
def need(c, what):
    if not c:
        print("  " + what); sys.exit(1)
need(prof["format"] == "kiln-profile" and prof["version"] == 1, "format kiln-profile v1")
need(prof["threads"] == threads and prof["runs"] == runs, "threads and runs as asked")
steps = prof["steps"]
need(len(steps) > 5 and [s["index"] for s in steps] == list(range(len(steps))), "every step once, in order")
need(abs(sum(s["share"] for s in steps) - 1) < 1e-6, "shares add up to 1")
for s in steps:
    need(s["median_us"] > 0 and s["min_us"] <= s["median_us"] <= s["max_us"], s["name"] + ": min <= median <= max")
    for k in ("onnx_nodes", "tactic", "flops", "bytes_read", "bytes_written", "gflops", "gbs",
              "predicted_us", "bound", "arena_live_bytes", "outputs"):
        need(k in s, s["name"] + ": has " + k)
need(any(s["flops"] > 0 and s["gflops"] > 0 for s in steps), "achieved GFLOP/s")
mem = prof["memory"]
need(len(mem["timeline"]) == len(steps), "a timeline entry per step")
need(0 < max(e["arena_live_bytes"] for e in mem["timeline"]) <= mem["arena_bytes"], "live arena within the arena")
need(mem["weights_bytes"] > 0 and mem["peak_rss_bytes"] > 0, "weights and peak RSS")
need(prof["latency_ms"]["min"] <= prof["latency_ms"]["median"] <= prof["latency_ms"]["max"], "latency order")
need("wall_clock_start_us" in prof and "host" in prof, "wall clock and host for kiln trace merge")
ev = trace["traceEvents"]
need(trace["otherData"]["format"] == "kiln-trace" and trace["otherData"]["wall_clock_start_us"] > 1e15, "otherData")
meta = {(e["name"], e["tid"]) for e in ev if e["ph"] == "M"}
need(("process_name", 0) in meta and all(("thread_name", t) in meta for t in range(threads)), "process and thread names")
runs_ev = [e for e in ev if e["ph"] == "X" and e.get("cat") == "run"]
st = [e for e in ev if e["ph"] == "X" and e.get("cat") != "run"]
need(len(runs_ev) == runs, "one event per run")
main = [e for e in st if e["tid"] == 0]
need(len(main) == runs * len(steps), "one X event per step per run on the calling thread (%d, expected %d)" % (len(main), runs * len(steps)))
for e in st:
    for k in ("op", "tactic", "inputs", "outputs"):
        need(k in e["args"], "event args have " + k)
    need(0 <= e["tid"] < threads and e["dur"] >= 0, "thread and duration")
by = {}
for e in main:
    by.setdefault(e["args"]["step"], []).append(e)
for w in (e for e in st if e["tid"] != 0):
    need(any(m["ts"] - 0.002 <= w["ts"] and w["ts"] + w["dur"] <= m["ts"] + m["dur"] + 0.002
             for m in by[w["args"]["step"]]), "a worker's event inside its step's")
# The steps are disjoint inside their run, so they add up to at most its
# time; the rest is the run's setup and the few instructions between steps.
# Within 10% on a quiet machine, but a loaded one can preempt the caller
# there: the best run must be within 10%, every run within the run.
cover = []
for r in runs_ev:
    inside = [e for e in main if r["ts"] <= e["ts"] < r["ts"] + r["dur"]]
    need(len(inside) == len(steps), "each run holds every step")
    total = sum(e["dur"] for e in inside) / 1e3
    need(total <= r["args"]["latency_ms"] * 1.001 + 0.002,
         "steps add up to no more than the run's time (%.4f of %.4f ms)" % (total, r["args"]["latency_ms"]))
    cover.append(total / r["args"]["latency_ms"])
need(max(cover) > 0.9, "the steps cover the run's time within 10%% in some run (%s)" % cover)
need(len([e for e in ev if e["ph"] == "C"]) == runs * len(steps), "a memory counter per step per run")
EOF
}

# 1. an ONNX model at 1 and 2 threads
for t in 1 2; do
  if "$kiln" profile "$model" --shape input=2x3x32x32 --threads $t --runs 4 --trace "$tmp/t$t.json" \
       >"$tmp/table" 2>"$tmp/err" &&
     grep -q "profiled runs" "$tmp/table" && grep -q "/c1/Conv" "$tmp/table" &&
     grep -q "memory: arena" "$tmp/table"; then pass "table_threads_$t"; else fail "table_threads_$t" "no table"; fi
  if "$kiln" profile "$model" --shape input=2x3x32x32 --threads $t --runs 8 --json \
       --trace "$tmp/t$t.json" >"$tmp/p$t.json" 2>"$tmp/err" &&
     check_json "$tmp/p$t.json" "$tmp/t$t.json" $t 8; then pass "json_trace_threads_$t"
  else fail "json_trace_threads_$t" "bad profile JSON or trace"; fi
done

# the table is sorted by time: the first row's mean is the largest
if awk '/^  #/{t=1;next} t&&NF>10{print $5}' "$tmp/table" | head -n 20 >"$tmp/means" &&
   [ -s "$tmp/means" ] && sort -g -r "$tmp/means" | cmp -s - "$tmp/means"; then pass table_sorted
else fail table_sorted "rows not in decreasing time"; fi

# 2. an engine, with the report
if "$kiln" build "$model" -o "$tmp/m.kiln" --shape input=1x3x32x32 >/dev/null 2>"$tmp/err" &&
   "$kiln" profile "$tmp/m.kiln" --runs 3 --report "$tmp/r.html" --trace "$tmp/te.json" --json \
     >"$tmp/pe.json" 2>"$tmp/err" &&
   check_json "$tmp/pe.json" "$tmp/te.json" "$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["threads"])' "$tmp/pe.json")" 3 &&
   grep -q '<script type="application/json" id="kiln-profile">{' "$tmp/r.html"; then pass engine_report
else fail engine_report "engine profile or report"; fi

# 2b. an engine built without --shape (dynamic batch), profiled at batch 4:
# its steps' FLOPs, bytes and predictions are those of the shapes it ran
# (4x a batch-4 model's, not the static ones where the batch counts as 1)
if "$kiln" build "$model" -o "$tmp/dyn.kiln" >/dev/null 2>"$tmp/err" &&
   "$kiln" profile "$tmp/dyn.kiln" --shape input=4x3x32x32 --runs 3 --json \
     >"$tmp/d4.json" 2>"$tmp/err" &&
   "$kiln" build "$model" -o "$tmp/m4.kiln" --shape input=4x3x32x32 >/dev/null 2>"$tmp/err" &&
   "$kiln" profile "$tmp/m4.kiln" --runs 3 --json >"$tmp/s4.json" 2>"$tmp/err" &&
   "$py" - "$tmp/d4.json" "$tmp/s4.json" <<'EOF'
import json, sys
dyn, fixed = (json.load(open(p))["steps"] for p in sys.argv[1:3])
assert len(dyn) == len(fixed), (len(dyn), len(fixed))
for a, b in zip(dyn, fixed):
    assert a["name"] == b["name"], (a["name"], b["name"])
    for k in ("flops", "bytes_read", "bytes_written"):
        assert a[k] == b[k], (a["name"], k, a[k], b[k])
    assert abs(a["predicted_us"] - b["predicted_us"]) <= 1e-6 * max(1.0, b["predicted_us"]), a["name"]
assert sum(s["flops"] for s in dyn) > 0
EOF
then pass dynamic_engine_costs; else fail dynamic_engine_costs "step costs of a dynamic engine"; fi

# 3. the sweep: each size optimized and not, in its own process
if "$kiln" profile "$model" --runs 3 --sweep batch=1,4 --json >"$tmp/s.json" 2>"$tmp/err" &&
   "$py" - "$tmp/s.json" <<'EOF'
import json, sys
sw = json.load(open(sys.argv[1]))["sweep"]
assert sw["name"] == "batch" and [z["value"] for z in sw["sizes"]] == [1, 4], sw
for z in sw["sizes"]:
    for v in ("optimized", "unoptimized"):
        q = z[v]
        assert q["arena_bytes"] > 0 and q["weights_bytes"] > 0 and q["peak_rss_bytes"] > 0 and q["p50_ms"] > 0, q
a, b = sw["sizes"]
assert b["optimized"]["arena_bytes"] > a["optimized"]["arena_bytes"], "arena grows with the batch"
assert "4x3x32x32" in b["optimized"]["inputs"], b
EOF
then pass sweep_batch; else fail sweep_batch "sweep JSON"; fi
if "$kiln" profile "$model" --runs 2 --sweep input=1x3x32x32,2x3x32x32 >"$tmp/table" 2>"$tmp/err" &&
   grep -q "^  2x3x32x32 " "$tmp/table"; then pass sweep_input; else fail sweep_input "sweep by input dims"; fi

# 4. errors: usage (2) and input (1), one line each
expect() { # NAME STATUS ARGS...
  local name=$1 want=$2
  shift 2
  "$kiln" profile "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq "$want" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ]; then pass "$name"
  else fail "$name" "exit $rc (want $want), $(wc -l <"$tmp/err") stderr lines"; fi
}
expect no_model 2
expect bad_runs 2 "$model" --runs 0
expect bad_option 2 "$model" --frobnicate
expect bad_sweep 2 "$model" --sweep batch
expect bad_sweep_size 2 "$model" --sweep batch=1,x
expect missing_file 1 "$tmp/nope.onnx"
expect sweep_unknown_dim 1 "$model" --sweep seq=1,2
expect sweep_engine 1 "$tmp/m.kiln" --sweep batch=1,2
expect unwritable_trace 1 "$model" --shape input=1x3x32x32 --runs 1 --trace "$tmp/no/such/dir/t.json"

[ $n_fail -eq 0 ] && echo "profile: all passed" || echo "profile: $n_fail failed"
exit $((n_fail > 0))
