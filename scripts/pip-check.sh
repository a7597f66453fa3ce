#!/usr/bin/env bash
# `pip install .` as a user does it (docs/python.md "Installing with pip"): a fresh virtual
# environment that sees Debian's packages (NumPy, torch), a fresh build of the module by the
# in-tree backend (packaging/python/bitgrad_build.py), offline; then the installed module's selftest
# fingerprint, which must be the CLI's when the CLI is built. Usage: scripts/pip-check.sh [BUILD]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
start=$SECONDS
env -u PYTHONPATH -u BITGRAD_BUILD_DIR PIP_DEFAULT_TIMEOUT=5 PIP_RETRIES=0 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$tmp/venv/bin/pip" install --no-cache-dir "$root" >"$tmp/pip.log" 2>&1 || { tail -40 "$tmp/pip.log"; exit 1; }
echo "pip-check: pip install . built and installed bitgrad in $((SECONDS - start)) s ($(grep -o 'bitgrad-[0-9.]*-[^ ]*\.whl' "$tmp/pip.log" | head -1))"
got=$(cd "$tmp" && env -u PYTHONPATH "$tmp/venv/bin/python" -c "import bitgrad; print(bitgrad.selftest()['fingerprint'])")
echo "pip-check: the installed module's selftest fingerprint $got"
if [ -x "$root/$build/bin/bitgrad" ]; then
  want=$("$root/$build/bin/bitgrad" selftest | awk '/^fingerprint/ {print $2}')
  [ "$got" = "$want" ] || { echo "pip-check: FAILED: the CLI's is $want"; exit 1; }
  echo "pip-check: the same as the CLI's"
fi
