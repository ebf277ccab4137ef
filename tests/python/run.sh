#!/usr/bin/env bash
# The Python binding and the CMake package, from an installed prefix (scripts/test.sh
# runs it after the gcc build; docs/PYTHON.md):
#   tests/python/run.sh [BUILD_DIR] [PYTEST_ARGS...]      (BUILD_DIR default: build)
# Installs BUILD_DIR into BUILD_DIR/python/prefix, makes a venv of Debian's Python
# with its packages (numpy, pytest) in BUILD_DIR/python/venv, pip-installs python/
# into it offline against that prefix, and runs tests/python with pytest.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
shift || true
prefix=$build/python/prefix
venv=$build/python/venv
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
# Debian's Python is externally managed (PEP 668): a venv that sees its packages
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
(cd "$root" && KILN_PREFIX=$prefix CFLAGS="${CFLAGS:--Werror}" "$venv/bin/pip" install -q \
  --no-build-isolation --no-index --no-deps --force-reinstall ./python)
# from outside the source tree, so that the installed package is the one imported
cd "$build/python"
KILN_PREFIX=$prefix KILN_BIN=$build/kiln \
  exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/tests/python" "$@"
