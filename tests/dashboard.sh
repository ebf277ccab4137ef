#!/usr/bin/env bash
# The HTML dashboards in headless Chromium.
#   tests/dashboard.sh KILN_BIN OUT_DIR
# kiln inspect --html of ResNet-50 and BERT-base (the big graphs), and
# kiln profile --report of tinycnn and bert_tiny (measured times, the
# timeline, and a sweep for bert_tiny; the same page, so small models are
# enough): chromium --dump-dom checks each page set data-rendered="ok" (no
# script error, recorded by window.onerror) and drew the graph,
# bottlenecks, bars and roofline; --screenshot saves OUT_DIR/NAME.png
# (1400x1000).  Each launch of Chromium costs seconds, so the pages are
# these four; KILN_LONG_TESTS=1 checks both pages of all four models.
# Exit 77 (skipped) without chromium or models, unless KILN_REQUIRE_MODELS=1
# (CI), where missing models fail.
set -u
kiln=$1
out=$2
cache="${KILN_CACHE:-$HOME/.cache/kiln/models}"
mkdir -p "$out"
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
  [ "${KILN_REQUIRE_MODELS:-0}" = 1 ] && { echo "dashboard: chromium is missing (scripts/install_deps.sh)" >&2; exit 1; }
  echo "dashboard: chromium not installed; skipped"
  exit 77
fi
flags=(--headless --no-sandbox --disable-gpu --virtual-time-budget=10000 --hide-scrollbars)
fail=0 ran=0
check() { # NAME HTML
  local name=$1 html=$2 dom="$out/$1.dom.html"
  # one launch (seconds each) dumps the DOM and takes the screenshot
  rm -f "$out/$name.png"
  timeout 120 "$chrome" "${flags[@]}" --window-size=1400,1000 --screenshot="$out/$name.png" \
    --dump-dom "file://$html" >"$dom" 2>/dev/null
  local summary
  summary=$(grep -o '<pre id="kiln-summary" hidden="">[^<]*' "$dom" | sed 's/.*hidden="">//')
  if ! grep -q 'data-rendered="ok"' "$dom"; then
    echo "dashboard: $name did not render: $summary" >&2; fail=1; return
  fi
  for id in graph-svg bottlenecks bars roofline diagrams; do
    grep -q "id=\"$id\"" "$dom" || { echo "dashboard: $name lacks #$id" >&2; fail=1; }
  done
  for key in '"graph":{"nodes":[1-9]' '"bottlenecks":[1-9]' '"bars":[1-9]' '"roofs":[1-9]' '"roofline":[1-9]'; do
    echo "$summary" | grep -q "$key" || { echo "dashboard: $name: $key not drawn: $summary" >&2; fail=1; }
  done
  [ -s "$out/$name.png" ] || { echo "dashboard: no screenshot for $name" >&2; fail=1; }
  echo "dashboard: $name ok: $summary; screenshot $out/$name.png"
  ran=$((ran + 1))
}
for m in resnet50 bert_base tinycnn bert_tiny; do
  f="$cache/$m.onnx"
  [ -f "$f" ] || f="$cache/$m/model.onnx"
  if [ ! -f "$f" ]; then
    case $m in resnet50 | bert_base)
      if [ "${KILN_REQUIRE_MODELS:-0}" = 1 ]; then
        echo "dashboard: $m is missing from $cache (run scripts/make_reference.sh)" >&2; fail=1
      fi ;;
    esac
    continue
  fi
  # the sizes the models run at (dynamic dims would count as 1)
  case $m in
    bert*) shape=(--shape input_ids=1x128 --shape attention_mask=1x128 --shape token_type_ids=1x128) ;;
    tinycnn) shape=(--shape input=1x3x32x32) ;;
    *) shape=(--shape input=1x3x224x224) ;;
  esac
  case $m in resnet50 | bert_base) pages=inspect ;; *) pages=profile ;; esac
  [ "${KILN_LONG_TESTS:-0}" = 1 ] && pages="inspect profile"
  if [[ $pages == *inspect* ]]; then
    "$kiln" inspect "$f" "${shape[@]}" --html "$out/$m.html" || { echo "dashboard: kiln inspect --html $m failed" >&2; fail=1; continue; }
    check "$m" "$out/$m.html"
  fi
  [[ $pages == *profile* ]] || continue
  # the report of a profile: measured times, the timeline and (bert_tiny) a sweep
  sweep=()
  [ "$m" = bert_tiny ] && sweep=(--sweep sequence=32,64,128)
  if "$kiln" profile "$f" --runs 3 --warmup 1 "${sweep[@]}" --report "$out/${m}_profile.html" >"$out/${m}_profile.txt" 2>&1; then
    check "${m}_profile" "$out/${m}_profile.html"
    for key in '"predicted":[1-9]' '"memory":[1-9]' '"profile":true'; do
      grep -q "$key" "$out/${m}_profile.dom.html" || { echo "dashboard: ${m}_profile: $key not drawn" >&2; fail=1; }
    done
    if [ "$m" = bert_tiny ] && ! grep -q '"sweep":3' "$out/${m}_profile.dom.html"; then
      echo "dashboard: ${m}_profile: the sweep was not drawn" >&2; fail=1
    fi
  else
    echo "dashboard: kiln profile --report $m failed: $(tail -n 1 "$out/${m}_profile.txt")" >&2; fail=1
  fi
done
if [ "$ran" = 0 ] && [ "$fail" = 0 ]; then
  echo "dashboard: no models in $cache; skipped"
  exit 77
fi
exit $fail
