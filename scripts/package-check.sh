#!/usr/bin/env bash
# The Debian package as CI checks it (docs/install.md#the-debian-package): the .deb that
# `make package` made from BUILD_DIR is inspected (contents, dependencies), installed with
# apt-get (its dependencies from Debian's archive), checked from /usr — `bitgrad selftest` from
# /usr/bin gives the build's fingerprint, `man bitgrad` and every command's page, the bash
# completion, the consumer test (tests/consumer/run.sh --system: CMake, pkg-config, the Python
# module) — then purged, and nothing of it may be left.
#   --upgrade-from OLD.deb   install OLD.deb first and the new package over it (dpkg's upgrade
#                            path): the new version's files only, nothing of the old one left,
#                            and a program linked against the old libbitgrad.so (same SONAME)
#                            runs on the new one with the same fingerprint
# Needs root (or sudo); a bitgrad package installed before is replaced and removed.
# Usage: scripts/package-check.sh [BUILD_DIR] [--upgrade-from OLD.deb]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=build
old=""
while [ $# -gt 0 ]; do
  case $1 in
    --upgrade-from)
      old=$(realpath "$2")
      shift 2
      ;;
    *)
      build=$1
      shift
      ;;
  esac
done
build=$(cd "$build" && pwd)
cd "$root"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
fail() {
  echo "package-check: FAILED: $*" >&2
  exit 1
}
say() { echo "package-check: $*"; }

version=$("$build/bin/bitgrad" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
deb=$build/bitgrad_${version}_${arch}.deb
[ -f "$deb" ] || fail "no $deb (make package)"
say "$(basename "$deb"), $(du -h "$deb" | cut -f1)"

# ---- the package's contents and fields --------------------------------------------------------
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
contents=$(dpkg-deb --contents "$deb" | awk '{print $6}' | sed 's|^\./|/|')
owners=$(dpkg-deb --contents "$deb" | awk '{print $2}' | sort -u)
[ "$owners" == "root/root" ] || fail "files not owned by root/root: $owners"
soname=$(readelf -d "$build/lib/libbitgrad.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
for f in /usr/bin/bitgrad "/usr/lib/$multiarch/$soname" "/usr/lib/$multiarch/libbitgrad.so" "/usr/lib/$multiarch/libbitgrad.a" \
  /usr/include/bitgrad/bitgrad.hpp /usr/include/bitgrad/version_number.hpp "/usr/lib/$multiarch/cmake/bitgrad/bitgradConfig.cmake" \
  "/usr/lib/$multiarch/cmake/bitgrad/bitgradConfigVersion.cmake" "/usr/lib/$multiarch/pkgconfig/bitgrad.pc" \
  /usr/share/man/man1/bitgrad.1.gz /usr/share/man/man1/bitgrad-train.1.gz /usr/share/bash-completion/completions/bitgrad \
  /usr/lib/python3/dist-packages/bitgrad/__init__.py /usr/share/doc/bitgrad/CHANGELOG.md /usr/share/doc/bitgrad/examples/fashion_mlp.toml; do
  grep -qxF -- "$f" <<<"$contents" || fail "the package has no $f"
done
grep -q '^/usr/lib/python3/dist-packages/bitgrad/_bitgrad\.cpython-.*\.so' <<<"$contents" || fail "the package has no Python extension module"
if grep -q '__pycache__\|^/usr/local' <<<"$contents"; then fail "the package holds $(grep '__pycache__\|^/usr/local' <<<"$contents" | head -n 3)"; fi
depends=$(dpkg-deb --field "$deb" Depends)
for d in libc6 libstdc++6 libxxhash0 zlib1g python3 python3-numpy; do
  grep -qxF "$d" <<<"$(tr ',' '\n' <<<"$depends" | awk '{print $1}')" || fail "Depends lacks $d: $depends"
done
say "contents: $(wc -l <<<"$contents") paths; Depends: $depends"

# ---- install (over OLD.deb with --upgrade-from) -----------------------------------------------
if [ "$(dpkg-query -W -f='${Status}' bitgrad 2>/dev/null)" == "install ok installed" ]; then
  say "bitgrad $(dpkg-query -W -f='${Version}' bitgrad) is installed: it is replaced, and removed at the end"
fi
if [ -n "$old" ]; then
  old_version=$(dpkg-deb --field "$old" Version)
  $SUDO apt-get install -y -qq --allow-downgrades "$old" >/dev/null
  [ "$(dpkg-query -W -f='${Version}' bitgrad)" == "$old_version" ] || fail "$old did not install"
  old_files=$(dpkg -L bitgrad)
  say "installed $(basename "$old") ($old_version): $(/usr/bin/bitgrad --version)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # shellcheck disable=SC2046  # pkg-config's words are flags
  "${CXX:-g++}" -std=c++20 -O2 tests/consumer/main.cpp -o "$tmp/old_consumer" $(pkg-config --cflags --libs bitgrad)
  old_fingerprint=$("$tmp/old_consumer" 10 1 0 | awk '/^fingerprint/ {print $2}')
fi
$SUDO apt-get install -y -qq --allow-downgrades "$deb" >/dev/null
[ "$(dpkg-query -W -f='${Status} ${Version}' bitgrad)" == "install ok installed $version" ] ||
  fail "after apt-get install: $(dpkg-query -W -f='${Status} ${Version}' bitgrad)"
if [ -n "$old" ]; then
  # what only the old package had is gone; everything of the new one is there
  while read -r f; do
    [ -d "$f" ] && continue
    if ! grep -qxF -- "$f" <<<"$contents" && [ -e "$f" -o -L "$f" ]; then fail "upgrade: $f of $old_version is left"; fi
  done <<<"$old_files"
  say "upgraded $old_version -> $version: $(/usr/bin/bitgrad --version); the $(comm -23 <(sort <<<"$old_files") <(sed 's|/$||' <<<"$contents" | sort) | xargs) only $old_version had: gone"
  so=$(ldd "$tmp/old_consumer" | awk '/libbitgrad\.so/ {print $1 " => " $3}')
  got=$("$tmp/old_consumer" 10 1 0 | awk '/^fingerprint/ {print $2}')
  [ -n "$got" ] && [ "$got" == "$old_fingerprint" ] || fail "a program linked against $old_version's library: fingerprint '$got' after the upgrade, '$old_fingerprint' before"
  say "a program linked against $old_version's library ($so -> $(readlink "$(realpath -s "$(awk '{print $3}' <<<"$so")")")) runs on $version: fingerprint $got, as before"
fi
while read -r f; do
  [ -e "$f" ] || [ -L "$f" ] || fail "$f of the package is not installed"
done <<<"$contents"
say "installed: $(dpkg-query -W -f='${Package} ${Version} ${Architecture}, ${Installed-Size} KiB' bitgrad)"

# ---- from /usr --------------------------------------------------------------------------------
[ "$(command -v bitgrad)" == /usr/bin/bitgrad ] || fail "bitgrad on PATH is $(command -v bitgrad), not /usr/bin/bitgrad"
[ "$(/usr/bin/bitgrad --version)" == "$("$build/bin/bitgrad" --version)" ] || fail "/usr/bin/bitgrad --version: $(/usr/bin/bitgrad --version)"
want=$("$build/bin/bitgrad" selftest | awk '/^fingerprint/ {print $2}')
got=$(/usr/bin/bitgrad selftest | awk '/^fingerprint/ {print $2}')
[ -n "$got" ] && [ "$got" == "$want" ] || fail "/usr/bin/bitgrad selftest: fingerprint '$got', the build's is $want"
say "/usr/bin/bitgrad selftest: fingerprint $got, the build's"
# no AVX2/AVX-512 instruction outside the code paths in what the package ships (scripts/isa_leak_check.sh)
bash scripts/isa_leak_check.sh /usr/bin/bitgrad "/usr/lib/$multiarch/$soname" /usr/lib/python3/dist-packages/bitgrad/_bitgrad.cpython-*.so \
  >/dev/null || fail "the installed binaries hold AVX instructions outside the code paths (scripts/isa_leak_check.sh)"
say "no AVX2/AVX-512 instruction outside the code paths in /usr/bin/bitgrad, $soname and the Python module"
# (whole outputs to grep: under pipefail, a `grep -q` that stops reading fails the pipeline)
cache=$(/sbin/ldconfig -p)
grep -q "$soname .*=> .*/$multiarch/$soname" <<<"$cache" || fail "$soname is not in ld.so's cache"
[ "$(man -w bitgrad)" == /usr/share/man/man1/bitgrad.1.gz ] || fail "man -w bitgrad: $(man -w bitgrad 2>&1)"
page=$(MANPAGER=cat MANWIDTH=80 man bitgrad 2>&1)
grep -q "bitgrad - bitwise reproducible" <<<"$page" || fail "man bitgrad: $page"
bash tests/packaging/man_test.sh /usr/share/man/man1 /usr/bin/bitgrad >/dev/null || fail "the installed man pages (tests/packaging/man_test.sh)"
say "man bitgrad: $(grep -c . <<<"$page") lines; $(ls /usr/share/man/man1/bitgrad*.1.gz | wc -l) pages"
bash tests/packaging/completion_test.sh /usr/share/bash-completion/completions/bitgrad /usr/bin/bitgrad
bash tests/consumer/run.sh --system

# ---- remove -----------------------------------------------------------------------------------
$SUDO apt-get purge -y -qq bitgrad >/dev/null
status=$(dpkg-query -W -f='${Status}' bitgrad 2>/dev/null || true)
if [ -n "$status" ] && [ "$status" != "unknown ok not-installed" ]; then fail "after apt-get purge: $status"; fi
if dpkg -L bitgrad >/dev/null 2>&1; then fail "dpkg -L bitgrad still lists files"; fi
while read -r f; do
  case $f in */) continue ;; esac  # directories: shared ones stay, bitgrad's are checked below
  if [ -e "$f" ] || [ -L "$f" ]; then fail "after purge: $f is left"; fi
done <<<"$contents"
for d in /usr/include/bitgrad "/usr/lib/$multiarch/cmake/bitgrad" /usr/lib/python3/dist-packages/bitgrad /usr/share/doc/bitgrad; do
  [ ! -e "$d" ] || fail "after purge: $d is left ($(find "$d" | head -n 3 | xargs))"
done
cache=$(/sbin/ldconfig -p)
if grep -q libbitgrad <<<"$cache"; then fail "libbitgrad is still in ld.so's cache"; fi
say "purged: dpkg -L bitgrad lists nothing, none of the package's $(wc -l <<<"$contents") paths is left"
say "OK"
