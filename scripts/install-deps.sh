#!/usr/bin/env bash
# Installs bitgrad's build, test and benchmark dependencies from Debian's archive.
# Idempotent: packages already present are skipped, so a warm machine pays nothing.
set -euo pipefail

PKGS=(
  # build and test
  g++ clang cmake ninja-build make pkg-config libgtest-dev libbenchmark-dev
  # libFuzzer (make fuzz)
  libclang-rt-14-dev
  # data parallel (MPI)
  openmpi-bin libopenmpi-dev
  # hosts over a real network in one machine (tests/dist/hosts_netns.sh): ip, tc, unshare
  iproute2 util-linux
  # runtime libraries
  libxxhash-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev zlib1g-dev
  # data of the main job
  dataset-fashion-mnist
  # the text corpus of examples/fortunes_gpt.toml
  fortunes
  # report test (headless rendering)
  chromium
  # oracles and peers (tests and benchmarks only)
  libopenblas-dev libblis-openmp-dev libblis-dev libmpfr-dev libgmp-dev python3-numpy python3-torch
  # ONNX conformance: the backend node tests and the reader of their protobufs
  libonnx-testdata python3-onnx
  # ONNX import round trips (issue 31): torchvision's model definitions (ResNet-18) exported by PyTorch
  python3-torchvision
  # the Python module (src/python) and its tests
  python3-dev pybind11-dev libdlpack-dev python3-pytest python3-hypothesis
  # pip install . into a virtual environment (packaging/python/bitgrad_build.py)
  python3-venv
  # the serve tests' HTTP/1.1 client (tests/serve; the compiled library and its pkg-config file)
  libcpp-httplib-dev
  # packaging: man pages from the CLI's help, the Debian package's dependencies (dpkg-shlibdeps,
  # file), `man` to check the pages
  help2man dpkg-dev file man-db
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
