#!/bin/sh
# libkiln-trace and `kiln trace merge` (tests/CMakeLists.txt builds the
# programs): the threaded sample, linked to the agent shared and static, is
# run under each KN_TRACE_* variable and its traces checked by trace_check
# (cJSON); then two runs started at different times are merged.
# usage: trace_test.sh SAMPLE SAMPLE_STATIC TRACE_CHECK KILN WORKDIR
set -u
SAMPLE=$1 SAMPLE_STATIC=$2 CHECK=$3 KILN=$4 DIR=$5
rm -rf "$DIR" && mkdir -p "$DIR" || exit 1
cd "$DIR" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { "$CHECK" "$@" || fail "trace_check $*"; }
# The environment the test starts with must not change what the agent does.
unset KN_TRACE KN_TRACE_FILE KN_TRACE_SAMPLE KN_TRACE_MIN_US KN_TRACE_MAX_EVENTS KN_TRACE_SIGNAL \
  KN_TRACE_CLOCK

# The sample: 3 workers and the main thread, fib(14) (1219 calls) twice per
# worker and once on the main thread, 8819 calls recorded in all (sample.c).
for exe in "$SAMPLE" "$SAMPLE_STATIC"; do
  n=$(basename "$exe")
  KN_TRACE_FILE=$n.json "$exe" || fail "$n exited $?"
  check "$n.json" --min-x 8819 --max-x 8819 --min-tids 4 --name fib --name leaf_work \
    --name worker --name main --name slow_call --name sample_scope --no-name hidden_call \
    --name deep --name jump_test --no-name thrower \
    --thread-name worker-0 --thread-name worker-1 --thread-name worker-2 \
    --thread-name main-thread --other events=8819
done

# KN_TRACE_CLOCK=monotonic: clock_gettime instead of the TSC, same trace
KN_TRACE_CLOCK=monotonic KN_TRACE_FILE=mono.json "$SAMPLE" || fail "monotonic-clock run exited $?"
check mono.json --min-x 8819 --max-x 8819 --name slow_call
grep -q '"clock":"CLOCK_MONOTONIC"' mono.json || fail "KN_TRACE_CLOCK=monotonic not in otherData.clock"

# default file name: kiln-trace.<pid>.json in the working directory
rm -f kiln-trace.*.json
"$SAMPLE" || fail "sample exited $?"
set -- kiln-trace.*.json
[ -f "$1" ] && [ $# -eq 1 ] || fail "no default kiln-trace.<pid>.json written"
[ -f "$1" ] && check "$1" --min-x 8819
rm -f kiln-trace.*.json

# KN_TRACE=0: nothing recorded, no file
KN_TRACE=0 KN_TRACE_FILE=off.json "$SAMPLE" || fail "KN_TRACE=0 sample exited $?"
[ ! -e off.json ] || fail "KN_TRACE=0 wrote off.json"

# KN_TRACE_SAMPLE=10: one call in 10 per thread (about 8820 / 10, up to one
# more per thread), the rest counted
KN_TRACE_SAMPLE=10 KN_TRACE_FILE=sample10.json "$SAMPLE" || fail "sampled run exited $?"
check sample10.json --min-x 878 --max-x 888 --other sampled_out_events=7900 --other sample=10

# KN_TRACE_MIN_US=1500: only calls of 1.5 ms or more (slow_call sleeps 3)
KN_TRACE_MIN_US=1500 KN_TRACE_FILE=min.json "$SAMPLE" || fail "min-duration run exited $?"
check min.json --min-dur 1500 --name slow_call --no-name leaf_work --max-x 20 \
  --other short_events=8000

# KN_TRACE_MAX_EVENTS=100: 100 events kept, the others counted as dropped
KN_TRACE_MAX_EVENTS=100 KN_TRACE_FILE=cap.json "$SAMPLE" || fail "capped run exited $?"
check cap.json --min-x 100 --max-x 100 --other dropped_events=8719 --other max_events=100

# A bad value is one warning line and the default
KN_TRACE_SAMPLE=abc KN_TRACE_FILE=bad.json "$SAMPLE" 2> bad.err || fail "bad KN_TRACE_SAMPLE run exited $?"
[ "$(wc -l < bad.err)" -eq 1 ] && grep -q "KN_TRACE_SAMPLE" bad.err || fail "no one-line warning for KN_TRACE_SAMPLE=abc"
check bad.json --min-x 8819

# KN_TRACE_SIGNAL: the sample raises SIGUSR1 half way and copies what the
# flusher wrote (valid JSON, the first half) before doing the second half
KN_TRACE_SIGNAL=USR1 KN_TRACE_FILE=sig.json "$SAMPLE" signal || fail "signal run exited $?"
check sig.json.mid --min-x 7000 --max-x 8000 --thread-name worker-2
check sig.json --min-x 15000

# kiln trace merge: two processes, the second started 300 ms later
KN_TRACE_FILE=a.json "$SAMPLE" || fail "sample a exited $?"
sleep 0.3
KN_TRACE_FILE=b.json "$SAMPLE_STATIC" || fail "sample b exited $?"
cat > profile.json <<'JSON'
{"format":"kiln-profile","version":1,"host":"node7","process":"kiln","wall_clock_start_us":1700000000000000,
 "steps":[{"name":"conv_0","median_us":120.0,"mean_us":125.0,"runs":10},
          {"name":"gemm_1","median_us":40.0,"mean_us":41.5,"runs":10}]}
JSON
"$KILN" trace merge a.json b.json profile.json -o all.json > merge.out 2> merge.err ||
  fail "kiln trace merge exited $?: $(cat merge.err)"
check all.json --merged --pids 2 --min-x 17638 --max-x 17638 --later b.json a.json 250000 \
  --thread-name worker-0 --name fib
for want in "trace_sample (a.json)" "trace_sample_static (b.json)" "node7: kiln (profile.json)" \
  fib slow_call conv_0 gemm_1 "merged 3 sources into all.json"; do
  grep -qF "$want" merge.out || fail "merge summary lacks '$want'"
done
[ ! -s merge.err ] || fail "merge wrote to stderr: $(cat merge.err)"
"$KILN" trace merge a.json b.json --json > merge.json || fail "merge --json exited $?"
"$CHECK" merge.json 2>&1 | grep -q "no traceEvents" || fail "merge --json is not JSON"

# a trace without wall clock: kept at offset 0 with a one-line warning
printf '{"traceEvents":[{"name":"x","ph":"X","ts":5,"dur":2,"pid":1,"tid":1},{"name":"c","ph":"C","ts":5,"pid":1,"args":{"v":3}}]}\n' > nowall.json
"$KILN" trace merge a.json nowall.json -o nowall_all.json > /dev/null 2> nowall.err ||
  fail "merge of a trace without wall clock exited $?"
[ "$(wc -l < nowall.err)" -eq 1 ] && grep -q "nowall.json: no otherData.wall_clock_start_us" nowall.err ||
  fail "no one-line warning for a trace without wall clock: $(cat nowall.err)"
check nowall_all.json --merged --pids 2

# bad input: one line naming the file, exit 1
echo 'not json' > notjson.json
echo '{"foo":1}' > noevents.json
for bad in notjson.json noevents.json missing.json; do
  "$KILN" trace merge a.json "$bad" -o bad_all.json > /dev/null 2> bad.err
  rc=$?
  [ $rc -eq 1 ] || fail "merge of $bad exited $rc, expected 1"
  [ "$(wc -l < bad.err)" -eq 1 ] && grep -q "$bad" bad.err || fail "merge of $bad: not one line naming it: $(cat bad.err)"
done
[ ! -e bad_all.json ] || fail "a failed merge wrote its output"
"$KILN" trace merge > /dev/null 2>&1; [ $? -eq 2 ] || fail "merge without inputs is not a usage error"
"$KILN" trace frob a.json > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown trace subcommand is not a usage error"

if [ $fails -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "trace: all checks passed"
