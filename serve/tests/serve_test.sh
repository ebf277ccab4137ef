#!/usr/bin/env bash
# kiln serve from outside, against the KServe v2 / Open Inference Protocol:
#   serve/tests/serve_test.sh KILN_BIN SOURCE_DIR OUT_DIR [POKE_BIN]
# serve/tests/serve_test.py does the work (Debian's /usr/bin/python3,
# standard library only): a real server on a free port, a repository made
# from models/tinycnn in a temporary folder, kiln loadgen for the load.
# The server's log and stderr are kept in OUT_DIR.
set -u
kiln=$1 src=$2 out=$3 poke=${4:-}
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
[ -n "$py" ] || { echo "serve_test: python3 is missing (scripts/install_deps.sh)" >&2; exit 1; }
mkdir -p "$out"
exec timeout -s TERM 240 "$py" "$src/serve/tests/serve_test.py" "$kiln" "$src" "$out" ${poke:+"$poke"}
