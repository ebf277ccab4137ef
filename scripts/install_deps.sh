#!/usr/bin/env bash
# Installs the Debian 12 packages kiln needs to build and test, when missing.
#   scripts/install_deps.sh [--models]
# --models adds what scripts/make_reference.sh needs (PyTorch, ONNX, numpy,
# Node.js) to export the real models and make ONNX Runtime's references, and
# scikit-learn (its digits data set) for scripts/train_models.py.
# Runs apt-get as root, or through sudo.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
      libprotobuf-c-dev protobuf-c-compiler libcmocka-dev libonnx-testdata
      libxxhash-dev libcjson-dev libmicrohttpd-dev libcurl4-openssl-dev
      chromium python3 curl
      python3-dev python3-numpy python3-setuptools python3-wheel python3-venv python3-pytest)
if [ "${1:-}" = --models ]; then
  pkgs+=(python3-torch python3-torchvision python3-onnx python3-numpy python3-sklearn nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from elsewhere than Debian: accept any on PATH.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<< "${missing[*]:-}"
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
