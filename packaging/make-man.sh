#!/usr/bin/env bash
# The man pages, from the CLI's own help (help2man), so that they cannot drift from it:
#   bitgrad.1          `bitgrad --help`, with a COMMANDS section naming one page per command
#   bitgrad-CMD.1      `bitgrad CMD --help`, for every command `bitgrad --help` lists
# with the text of MANDIR/common.h2m in every page, MANDIR/bitgrad.h2m in bitgrad.1 and
# MANDIR/CMD.h2m, where there is one, in bitgrad-CMD.1 (help2man's include files); written
# gzipped (as Debian ships them) into OUTDIR. SOURCE_DATE_EPOCH, when set, dates them
# (reproducible pages); the build sets it to the commit's date.
# Usage: packaging/make-man.sh BITGRAD OUTDIR VERSION MANDIR [HELP2MAN]
set -euo pipefail
bin=$1 out=$2 version=$3 mandir=$4 help2man=${5:-help2man}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the commands and their one-line descriptions: the "Subcommands:" section of bitgrad --help
"$bin" --help >"$tmp/help"
mapfile -t cmds < <(awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1}' "$tmp/help")
if [ ${#cmds[@]} -eq 0 ]; then
  echo "make-man: no commands in '$bin --help'" >&2
  exit 1
fi
describe() {  # the command's description, its first letter in lower case
  local d
  d=$(awk -v c="$1" '/^Subcommands:/ {on = 1; next} on && $1 == c {$1 = ""; sub(/^ +/, ""); print}' "$tmp/help")
  printf '%s' "${d,}"
}
roff_escape() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g'; }

page() {  # NAME HELP-COMMAND DESCRIPTION INCLUDE...
  local name=$1 cmd=$2 desc=$3
  shift 3
  printf '#!/bin/sh\n%s\n' "$cmd" >"$tmp/help-$name"
  chmod +x "$tmp/help-$name"
  local inc=()
  for f in "$@"; do inc+=(--include "$f"); done
  "$help2man" --no-info --no-discard-stderr --section 1 --version-string "$name $version" \
    --name "$desc" "${inc[@]}" --output "$tmp/$name.1" "$tmp/help-$name"
  # help2man calls a failing program's output a page: a page without its OPTIONS is an error
  if ! grep -q '^\.SH OPTIONS' "$tmp/$name.1"; then
    echo "make-man: no OPTIONS in $name.1 ('$cmd' failed?)" >&2
    exit 1
  fi
  gzip -9n <"$tmp/$name.1" >"$out/$name.1.gz"
}

# bitgrad.1: the commands as a section of their own, each naming its page
{
  echo "[COMMANDS]"
  echo "Each command has its own page and its own \\fB\\-\\-help\\fR:"
  for c in "${cmds[@]}"; do
    echo ".TP"
    echo ".BR bitgrad\\-$c (1)"
    describe "$c" | roff_escape
    echo
  done
  echo "[SEE ALSO]"
  n=0
  for c in "${cmds[@]}"; do
    n=$((n + 1))
    if [ $n -lt ${#cmds[@]} ]; then printf '.BR bitgrad\\-%s (1),\n' "$c"; else printf '.BR bitgrad\\-%s (1).\n' "$c"; fi
  done
} >"$tmp/main.h2m"
# the commands' table leaves bitgrad --help's output for the COMMANDS section
page bitgrad "\"$bin\" --help | awk '/^Subcommands:/ {exit} {print}'" \
  "bitwise reproducible automatic differentiation and training" "$mandir/bitgrad.h2m" "$tmp/main.h2m" "$mandir/common.h2m"

# bitgrad-CMD.1: the description (the help's first line) begins DESCRIPTION, before the
# arguments' table the help puts there, followed by MANDIR/CMD.h2m's [<DESCRIPTION] text
for c in "${cmds[@]}"; do
  d=$(describe "$c")
  {
    echo "[<DESCRIPTION]"
    printf '%s.\n' "${d^}" | roff_escape
    echo "[SEE ALSO]"
    echo ".BR bitgrad (1)."
  } >"$tmp/$c.h2m"
  own=()
  if [ -f "$mandir/$c.h2m" ]; then own=("$mandir/$c.h2m"); fi
  page "bitgrad-$c" "\"$bin\" $c --help | tail -n +2" "$d" "$tmp/$c.h2m" "${own[@]}" "$mandir/common.h2m"
done
echo "make-man: $((${#cmds[@]} + 1)) pages in $out"
