#!/usr/bin/env bash
# make_reference.sh: export kiln's models (when missing) and make the ONNX
# Runtime reference outputs for each of their test sets.  Idempotent: a model
# is exported once, and a reference is remade only when it is missing or older
# than the model or its inputs.
#
#   scripts/make_reference.sh [--models a,b] [--force] [--threads T] [--no-check]
#
#   --models   comma-separated subset (default: all, see export_models.py --list)
#   --force    remake the ORT references (models are not re-exported; run
#              export_models.py --force for that)
#   --threads  ORT intra-op threads for the references (default 1)
#   --no-check skip comparing ORT's outputs with PyTorch's own
#
# Layout (cache = $KILN_CACHE, default ~/.cache/kiln/models):
#   <cache>/<name>/model.onnx
#   <cache>/<name>/test_data_set_<k>/input_<i>.pb    (export_models.py)
#   <cache>/<name>/test_data_set_<k>/output_<i>.pb   (ONNX Runtime, this script)
#   <cache>/<name>/torch_outputs/test_data_set_<k>/output_<i>.pb (PyTorch)
#
# Needs /usr/bin/python3 with torch, torchvision, onnx, numpy (Debian packages)
# and node + npm (onnxruntime-node is installed into scripts/node_modules).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY=${KILN_PYTHON:-/usr/bin/python3}
cache="${KILN_CACHE:-$HOME/.cache/kiln/models}"
models=all
force=0
threads=1
check=1
# Tolerance for ORT vs PyTorch (both fp32, different kernels).
check_rtol=${KILN_CHECK_RTOL:-1e-3}
check_atol=${KILN_CHECK_ATOL:-1e-4}

while [ $# -gt 0 ]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --models=*) models="${1#*=}"; shift ;;
    --force) force=1; shift ;;
    --threads) threads="$2"; shift 2 ;;
    --threads=*) threads="${1#*=}"; shift ;;
    --no-check) check=0; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "make_reference.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
export KILN_CACHE="$cache"

if [ ! -d "$here/node_modules/onnxruntime-node" ]; then
  echo "== installing onnxruntime-node into $here/node_modules"
  (cd "$here" && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
fi

echo "== exporting models into $cache"
"$PY" "$here/export_models.py" --models "$models" --out "$cache"

if [ "$models" = all ]; then
  mapfile -t names < <("$PY" "$here/export_models.py" --list)
else
  IFS=, read -r -a names <<<"$models"
fi

fail=0
for name in "${names[@]}"; do
  mdir="$cache/$name"
  for ddir in "$mdir"/test_data_set_*; do
    [ -d "$ddir" ] || continue
    set_name=$(basename "$ddir")
    need=$force
    if [ ! -f "$ddir/output_0.pb" ] || [ "$mdir/model.onnx" -nt "$ddir/output_0.pb" ]; then
      need=1
    else
      for f in "$ddir"/input_*.pb; do
        [ "$f" -nt "$ddir/output_0.pb" ] && need=1
      done
    fi
    if [ "$need" = 1 ]; then
      tmp=$(mktemp -d "$mdir/.ort_out.XXXXXX")
      start=$(date +%s%N)
      node "$here/ort_run.js" "$mdir/model.onnx" --input-dir "$ddir" --output-dir "$tmp" \
        --threads "$threads" --quiet
      rm -f "$ddir"/output_*.pb
      mv "$tmp"/output_*.pb "$ddir"/
      rmdir "$tmp"
      printf '%-16s %s: ORT reference written (%d ms)\n' "$name" "$set_name" \
        $(( ($(date +%s%N) - start) / 1000000 ))
    else
      printf '%-16s %s: ORT reference up to date\n' "$name" "$set_name"
    fi
    tdir="$mdir/torch_outputs/$set_name"
    if [ "$check" = 1 ] && [ -d "$tdir" ]; then
      echo "   ORT vs PyTorch:"
      if ! "$PY" "$here/compare_outputs.py" "$ddir" "$tdir" \
          --rtol "$check_rtol" --atol "$check_atol" | sed 's/^/     /'; then
        fail=1
      fi
    fi
  done
done

if [ "$fail" = 1 ]; then
  echo "make_reference.sh: ORT and PyTorch disagree beyond rtol $check_rtol atol $check_atol" >&2
  exit 1
fi
echo "== references ready in $cache"
