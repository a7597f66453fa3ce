#!/usr/bin/env bash
# The consumer test (docs/install.md): bitgrad used the way a C++ user uses it, from an
# installed tree.
#   run.sh --build BUILD_DIR   installs BUILD_DIR into a temporary prefix (cmake --install) and
#                              tests that (ctest's Consumer.Installed, so `make test`)
#   run.sh --system            tests the bitgrad installed in /usr (the Debian package;
#                              scripts/package-check.sh)
# Checks:
#   1. headers: what the installed headers include is installed, <bitgrad/bitgrad.hpp> includes
#      every public header, and the installed headers are include/bitgrad's (no internal header);
#   2. CMake: this directory's project finds bitgrad with find_package(bitgrad X.Y CONFIG
#      REQUIRED COMPONENTS shared static) for the installed X.Y.z and builds main.cpp against the
#      shared and the static library; X.(Y+1) and X.(Y-1) get CMake's version error, and the
#      static library without zlib the package's reason;
#   3. the consumer's training loop (2 threads, 2 loader workers), shared and static, prints the
#      fingerprint the installed CLI prints for consumer.toml (1 thread);
#   4. pkg-config: main.cpp built with `g++ $(pkg-config --cflags --libs bitgrad)`, the same;
#   5. the installed Python module: its version, and a Session's fingerprint is the CLI's;
#   6. (--build) bitgrad as a subproject (add_subdirectory) defines its library and nothing
#      else (configure only: the library's build is the main build's);
#   7. (--build) main.cpp compiles with the source tree's include/ as its only include path.
# CONSUMER_STEPS (30) steps; needs the Fashion-MNIST files (dataset-fashion-mnist).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
steps=${CONSUMER_STEPS:-30}
mode=${1:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bitgrad-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "consumer: FAILED: $*" >&2
  exit 1
}
# runs a command with its output in a log, shown when it fails
logged() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$*"
  fi
}
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

case $mode in
  --build)
    [ $# -eq 2 ] || fail "usage: run.sh --build BUILD_DIR | --system"
    build=$(cd "$2" && pwd)
    prefix=$tmp/prefix
    logged "$tmp/install.log" cmake --install "$build" --prefix "$prefix"
    echo "consumer: installed $build into $prefix"
    ;;
  --system)
    prefix=/usr
    ;;
  *) fail "usage: run.sh --build BUILD_DIR | --system" ;;
esac
bitgrad=$prefix/bin/bitgrad
[ -x "$bitgrad" ] || fail "no $bitgrad"
version=$("$bitgrad" --version | awk '{print $2}')
[[ $version =~ ^([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || fail "'$bitgrad --version' gives no version: $("$bitgrad" --version)"
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
pc=$(find "$prefix/lib" -maxdepth 3 -name bitgrad.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "no bitgrad.pc under $prefix/lib"
libdir=$(dirname "$(dirname "$pc")")
echo "consumer: bitgrad $version in $prefix (libraries in $libdir)"

# 1. the headers
inc=$prefix/include
[ -f "$inc/bitgrad/bitgrad.hpp" ] || fail "no $inc/bitgrad/bitgrad.hpp"
for h in "$inc"/bitgrad/*.hpp; do
  while read -r f; do
    [ -f "$inc/$f" ] || fail "$h includes \"$f\", which is not installed"
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$h")
  name=$(basename "$h")
  case $name in
    bitgrad.hpp | version_number.hpp) ;;  # version_number.hpp: through version.hpp
    *) grep -q "^#include \"bitgrad/$name\"" "$inc/bitgrad/bitgrad.hpp" || fail "<bitgrad/bitgrad.hpp> does not include bitgrad/$name" ;;
  esac
done
installed=$(cd "$inc/bitgrad" && ls)
public=$(cd "$source_dir/include/bitgrad" && ls *.hpp | sort)
[ "$installed" == "$public" ] || fail "installed headers differ from include/bitgrad: $(diff <(echo "$installed") <(echo "$public") | tr '\n' ' ')"
echo "consumer: $(echo "$installed" | wc -l) headers, <bitgrad/bitgrad.hpp> includes them all, their includes are installed"

# 2. CMake: find_package with the installed major.minor, and the refusals
cmake_consumer() {  # BUILD_DIR VERSION [CMAKE ARGS...]
  local dir=$1 want=$2
  shift 2
  cmake -S "$here" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCONSUMER_BITGRAD_VERSION="$want" -DCMAKE_PREFIX_PATH="$prefix" "$@"
}
logged "$tmp/cmake.log" cmake_consumer "$tmp/cmake" "$major.$minor"
grep -q "consumer: bitgrad $version from $libdir/cmake/bitgrad" "$tmp/cmake.log" || fail "find_package found another bitgrad: $(grep 'consumer:' "$tmp/cmake.log")"
logged "$tmp/build.log" cmake --build "$tmp/cmake"
refuse() {  # VERSION: find_package(bitgrad VERSION) must fail with CMake's version error
  if cmake_consumer "$tmp/v$1" "$1" >"$tmp/v$1.log" 2>&1; then fail "find_package(bitgrad $1) accepted bitgrad $version"; fi
  grep -q "compatible with requested version \"$1\"" "$tmp/v$1.log" || { cat "$tmp/v$1.log" >&2; fail "find_package(bitgrad $1): not the version error"; }
}
refuse "$major.$((minor + 1))"
refused="$major.$((minor + 1))"
if [ "$minor" -gt 0 ]; then
  refuse "$major.$((minor - 1))"
  refused+=" and $major.$((minor - 1))"
fi
echo "consumer: find_package(bitgrad $major.$minor) builds; $refused refused with CMake's version error"
# the static library without what it links: refused, naming it
if cmake_consumer "$tmp/nozlib" "$major.$minor" -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON >"$tmp/nozlib.log" 2>&1; then
  fail "COMPONENTS static without zlib accepted"
fi
grep -q "libbitgrad.a needs what it links: zlib" "$tmp/nozlib.log" || { cat "$tmp/nozlib.log" >&2; fail "COMPONENTS static without zlib: not the package's reason"; }
echo "consumer: COMPONENTS static without zlib refused: $(grep -o 'libbitgrad.a needs what it links: .*' "$tmp/nozlib.log")"
so=$(ldd "$tmp/cmake/consumer" | awk '/libbitgrad\.so/ {print $3}')
[ -n "$so" ] && [ "$(dirname "$(realpath "$so")")" == "$(realpath "$libdir")" ] ||
  fail "consumer does not run with $libdir's libbitgrad.so: $(ldd "$tmp/cmake/consumer" | grep bitgrad)"
if grep -q libbitgrad <<<"$(ldd "$tmp/cmake/consumer_static")"; then fail "consumer_static links libbitgrad.so"; fi

# 3. the fingerprints
fingerprint() { awk '/^fingerprint / {print $2}'; }
want=$("$bitgrad" train "$here/consumer.toml" --steps "$steps" --threads 1 --out "$tmp/run" --no-progress | fingerprint)
[[ $want =~ ^[0-9a-f]{32}$ ]] || fail "no fingerprint from $bitgrad train"
echo "consumer: $bitgrad train consumer.toml --steps $steps --threads 1: fingerprint $want"
check() {  # LABEL COMMAND...
  local label=$1 out got
  shift
  out=$("$@") || fail "$label: $* failed"
  got=$(echo "$out" | fingerprint)
  [ "$got" == "$want" ] || fail "$label: fingerprint '$got', the CLI's is $want ($(echo "$out" | head -n 1))"
  echo "consumer: $label: $(echo "$out" | head -n 1): fingerprint $got, the CLI's"
}
check "CMake, libbitgrad.so" "$tmp/cmake/consumer" "$steps" 2 2
check "CMake, libbitgrad.a" "$tmp/cmake/consumer_static" "$steps" 2 2

# 4. pkg-config
export PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
[ "$(pkg-config --modversion bitgrad)" == "$version" ] || fail "pkg-config --modversion bitgrad: $(pkg-config --modversion bitgrad), not $version"
[ "$(pkg-config --variable=prefix bitgrad)" == "$prefix" ] || fail "bitgrad.pc's prefix is $(pkg-config --variable=prefix bitgrad), not $prefix"
# shellcheck disable=SC2046  # pkg-config's words are flags
logged "$tmp/pc.log" "${CXX:-g++}" -std=c++20 -O2 "$here/main.cpp" -o "$tmp/consumer_pc" $(pkg-config --cflags --libs bitgrad) -Wl,-rpath,"$libdir"
check "pkg-config ($(pkg-config --cflags --libs bitgrad | xargs))" "$tmp/consumer_pc" "$steps" 1 3

# 5. the Python module (where it was built): on python3's path under /usr, PYTHONPATH elsewhere
pydir=$prefix/lib/python3/dist-packages
if [ -d "$pydir/bitgrad" ]; then
  [ "$prefix" == /usr ] || export PYTHONPATH=$pydir
  check "Python module ($pydir)" /usr/bin/python3 -c "
import bitgrad as bg
assert bg.__file__.startswith('$pydir/'), bg.__file__
assert bg.__version__ == '$version', bg.__version__
s = bg.Session('$here/consumer.toml', threads=2)
for _ in range($steps):
    s.step()
print(f'bitgrad {bg.__version__} from {bg.__file__}')
print('fingerprint', s.fingerprint())"
fi

# 6. a subproject builds only the library
if [ "$mode" == --build ]; then
  logged "$tmp/sub.log" cmake -S "$here" -B "$tmp/sub" "${generator[@]}" -DCONSUMER_BITGRAD_SOURCE="$source_dir"
  grep -q "consumer: bitgrad $version as a subproject: the library only" "$tmp/sub.log" || fail "subproject: $(grep consumer: "$tmp/sub.log")"
  echo "consumer: add_subdirectory(bitgrad) defines the library and none of bitgrad's tests, benchmarks, tools, examples or module"
  # 7. from the build tree, one include path: the source tree's include/ (no header is generated)
  logged "$tmp/onepath.log" "${CXX:-g++}" -std=c++20 -fsyntax-only -I "$source_dir/include" "$here/main.cpp"
  echo "consumer: main.cpp compiles with the source tree's include/ as its one include path"
fi
echo "consumer: OK"
