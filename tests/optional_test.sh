#!/usr/bin/env bash
# The CLI's optional components (README.md, "Optional components"):
#
# usage: optional_test.sh KILN_BIN [HAVE_SERVE HAVE_LOADGEN]
#
# kiln serve (libmicrohttpd) and kiln loadgen (libcurl) are left out of a
# build without their library: the command is still listed, --help still
# shows its usage, ending with a note, and running it exits 1 with one
# line on stderr naming the library and the package to install.  In a
# build with it, `kiln CMD` runs kiln-CMD from kiln's folder: `kiln CMD`
# alone is a one-line usage error naming what is missing, and a kiln
# copied away from kiln-CMD says in one line that it cannot run it.  Which kind of build KILN_BIN is, it says itself (`kiln CMD` with
# no arguments); HAVE_SERVE and HAVE_LOADGEN (ON or OFF, from the
# configuration) must then agree.  ctest runs it on build/kiln and on
# build/tests/kiln_bare, the CLI compiled as a build without either makes
# it.  Prints "ok NAME" or "FAIL NAME: why"; exit 1 when one failed.
set -u
KILN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out ERR=$TMP/err
n_ok=0 n_fail=0
pass() { echo "ok $1"; n_ok=$((n_ok + 1)); }
fail() { echo "FAIL $1: $2"; n_fail=$((n_fail + 1)); }
kiln() { timeout 20 "$KILN" "$@" >"$OUT" 2>"$ERR"; rc=$?; }
# check NAME CONDITION...: the condition (a command) holds, else FAIL with
# what the last run printed
check() {
  local name=$1
  shift
  if "$@"; then pass "$name"
  else fail "$name" "exit $rc; stdout: $(head -c 300 "$OUT"); stderr: $(head -c 300 "$ERR")"; fi
}
one_line() { [ "$(wc -l <"$ERR")" -eq 1 ] && [ ! -s "$OUT" ]; }
has() { grep -qF -- "$2" "$1"; }
lacks() { ! grep -qF -- "$2" "$1"; }

kiln --help
listed=$(cat "$OUT")
for c in "serve:libmicrohttpd:libmicrohttpd-dev:--repository DIR is required:${2:-}" \
         "loadgen:libcurl:libcurl4-openssl-dev:URL is required:${3:-}"; do
  IFS=: read -r cmd lib pkg req want <<<"$c"
  if grep -qE "^  $cmd +[a-z]" <<<"$listed"; then pass "help_lists_$cmd"
  else fail "help_lists_$cmd" "kiln --help does not list $cmd"; fi
  kiln "$cmd"
  if [ "$rc" -eq 1 ] && has "$ERR" "built without $lib"; then
    echo "note: this kiln was built without $lib: kiln $cmd is checked as left out"
    [ "$want" = ON ] && fail "${cmd}_configured" "configured with $lib, but kiln $cmd says not"
    check "${cmd}_left_out_one_line" one_line
    msg="kiln: kiln $cmd is not available: this kiln was built without $lib"
    msg+=" (install $pkg, then configure and build kiln again)"
    check "${cmd}_left_out_message" has "$ERR" "$msg"
    kiln "$cmd" --port 1 --model m http://127.0.0.1:1
    check "${cmd}_left_out_any_args" [ "$rc" -eq 1 ]
    check "${cmd}_left_out_any_args_message" has "$ERR" "install $pkg"
    kiln "$cmd" --help
    check "${cmd}_left_out_help" [ "$rc" -eq 0 ]
    check "${cmd}_left_out_help_usage" has "$OUT" "usage: kiln $cmd "
    check "${cmd}_left_out_help_note" has "$OUT" "This kiln was built without $lib"
  else
    [ "$want" = OFF ] && fail "${cmd}_configured" "configured without $lib, but kiln $cmd runs"
    check "${cmd}_usage_error" [ "$rc" -eq 2 ]
    check "${cmd}_usage_one_line" one_line
    check "${cmd}_usage_names_what_is_missing" has "$ERR" "$req"
    kiln "$cmd" --help
    check "${cmd}_help" [ "$rc" -eq 0 ]
    check "${cmd}_help_usage" has "$OUT" "usage: kiln $cmd "
    check "${cmd}_help_no_note" lacks "$OUT" "built without"
    # kiln runs kiln-$cmd from its own folder: a kiln copied away from it
    # says in one line which file it cannot run
    mkdir -p "$TMP/alone"
    cp "$KILN" "$TMP/alone/kiln"
    saved=$KILN KILN=$TMP/alone/kiln
    kiln "$cmd" --port 1 --model m http://127.0.0.1:1
    KILN=$saved
    check "${cmd}_component_missing" [ "$rc" -eq 1 ]
    check "${cmd}_component_missing_one_line" one_line
    check "${cmd}_component_missing_names_it" has "$ERR" "$TMP/alone/kiln-$cmd cannot be run"
  fi
done
echo "optional: $n_ok ok, $n_fail failed"
[ "$n_fail" -eq 0 ]
