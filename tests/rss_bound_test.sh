#!/usr/bin/env bash
# Resident memory at its floor (docs/MEMORY.md, "Resident memory"): for
# every bundled model (SOURCE_DIR/models/*/model.onnx), the peak RSS of
# `kiln bench ENGINE` stays within the engine's packed weights + its arena
# + 16 MiB, where the process's fixed part (code, libraries, stacks, the
# bench's buffers) and everything kept in original form must fit in the
# 16 MiB.  Checked on 1 and 2 threads, and with the engine's packed blocks
# made for another ISA than the one it runs on (KILN_ISA=avx2 and
# portable: the load repacks, and must not keep the originals it read);
# and tinycnn's arena planned for a batch of 512 must not be resident when
# runs are at batch 1.
#
# usage: rss_bound_test.sh KILN_BIN SOURCE_DIR
# Prints "ok NAME" or "FAIL NAME: why" per case.
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
KILN=$1
SRC=$2
SLACK=$((16 * 1048576))
[ -x "$KILN" ] || { echo "FAIL: $KILN is not executable" >&2; exit 1; }
# Sanitized (KILN_SANITIZED=1, set by the build): AddressSanitizer's shadow
# memory and quarantine are most of the RSS; the bound is about kiln's own
if [ "${KILN_SANITIZED:-0}" = 1 ]; then
  echo "rss_bound: skipped in the sanitized build (its RSS is the sanitizer's)"
  exit 77
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
n_ok=0
n_fail=0

# integer KEY of the JSON object in file F (kiln's own output: one line
# per key is not promised, so match "KEY": N anywhere)
key() { grep -o "\"$1\": [0-9]*" "$2" | head -1 | sed 's/.*: //'; }

check() { # NAME ENGINE [ENV...] -- bench args (ARENA=0 in ENV: count no arena)
  local name=$1 engine=$2
  shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local packed arena peak
  if ! env "${envs[@]}" "$KILN" inspect "$engine" --json >"$TMP/inspect" 2>"$TMP/err" ||
     ! env "${envs[@]}" "$KILN" bench "$engine" --runs 20 --json "$@" >"$TMP/bench" 2>>"$TMP/err"; then
    echo "FAIL $name: $(head -c 300 "$TMP/err")"
    n_fail=$((n_fail + 1))
    return
  fi
  packed=$(key packed_bytes "$TMP/inspect")
  arena=$(key arena_bytes "$TMP/inspect")
  case " ${envs[*]} " in *" ARENA=0 "*) arena=0 ;; esac
  peak=$(key peak_rss_bytes "$TMP/bench")
  if [ -z "$packed" ] || [ -z "$arena" ] || [ -z "$peak" ]; then
    echo "FAIL $name: no packed_bytes, arena_bytes or peak_rss_bytes in kiln's JSON"
    n_fail=$((n_fail + 1))
    return
  fi
  local bound=$((packed + arena + SLACK))
  if [ "$peak" -le "$bound" ]; then
    echo "ok $name: peak RSS $((peak / 1024)) KiB <= packed $((packed / 1024)) + arena $((arena / 1024)) + 16384 KiB"
    n_ok=$((n_ok + 1))
  else
    echo "FAIL $name: peak RSS $((peak / 1024)) KiB > packed $((packed / 1024)) + arena $((arena / 1024)) + 16384 KiB"
    n_fail=$((n_fail + 1))
  fi
}

for model in "$SRC"/models/*/model.onnx; do
  [ -f "$model" ] || continue
  m=$(basename "$(dirname "$model")")
  engine=$TMP/$m.kiln
  if ! "$KILN" build "$model" -o "$engine" >/dev/null 2>"$TMP/err"; then
    echo "FAIL $m build: $(head -c 300 "$TMP/err")"
    n_fail=$((n_fail + 1))
    continue
  fi
  check "$m 1 thread" "$engine" -- --threads 1
  check "$m 2 threads" "$engine" -- --threads 2
  check "$m repacked for avx2" "$engine" KILN_ISA=avx2 -- --threads 1
  check "$m repacked for portable" "$engine" KILN_ISA=portable -- --threads 1
done

# An arena planned for a --profile's MAX (tinycnn at batch 512: 40 MiB) and
# runs at batch 1: only what they write becomes resident, so the bound
# holds without the arena.
model=$SRC/models/tinycnn/model.onnx
if [ -f "$model" ]; then
  engine=$TMP/tinycnn_profile.kiln
  if "$KILN" build "$model" --profile input=1x3x32x32:1x3x32x32:512x3x32x32 \
      --tactics heuristic -o "$engine" >/dev/null 2>"$TMP/err"; then
    check "tinycnn planned for batch 512, run at 1, without its arena" "$engine" ARENA=0 -- \
      --threads 1 --shape input=1x3x32x32
  else
    echo "FAIL tinycnn profile build: $(head -c 300 "$TMP/err")"
    n_fail=$((n_fail + 1))
  fi
fi

echo "$n_ok ok, $n_fail failed"
[ "$n_fail" -eq 0 ] && [ "$n_ok" -gt 0 ]
