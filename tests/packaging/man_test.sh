#!/usr/bin/env bash
# The man pages the build made (packaging/make-man.sh): one for bitgrad and one per command
# `bitgrad --help` lists, each rendering without a groff warning, with its NAME, its options as
# the command's --help lists them, and bitgrad.1 naming every command's page.
# Usage: man_test.sh MAN_DIR BITGRAD
set -uo pipefail
dir=$1 bin=$2
fail=0
warnings=$(mktemp)
trap 'rm -f "$warnings"' EXIT
render() { MANWIDTH=200 man --warnings -l "$1" 2>"$warnings"; }
mapfile -t cmds < <("$bin" --help | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
[ ${#cmds[@]} -ge 8 ] || { echo "man: the commands of '$bin --help': ${cmds[*]}"; exit 1; }
for name in bitgrad "${cmds[@]/#/bitgrad-}"; do
  page=$dir/$name.1.gz
  if [ ! -f "$page" ]; then
    echo "man: no $page"
    fail=1
    continue
  fi
  text=$(render "$page")
  if [ -s "$warnings" ]; then
    echo "man: $name.1: $(cat "$warnings")"
    fail=1
  fi
  grep -q "^NAME" <<<"$text" && grep -qE "^ +$name - " <<<"$text" || { echo "man: $name.1 has no NAME '$name - ...'"; fail=1; }
  if [ "$name" == bitgrad ]; then
    for c in "${cmds[@]}"; do
      grep -q "bitgrad-$c(1)" <<<"$text" || { echo "man: bitgrad.1 does not name bitgrad-$c(1)"; fail=1; }
    done
  else
    for o in $("$bin" "${name#bitgrad-}" --help | grep -oE '^  (-[a-zA-Z],)?--[a-z0-9-]+' | sed 's/.*,//'); do
      grep -qE -- "^ +(-[a-zA-Z],)?$o\b" <<<"$text" || { echo "man: $name.1 does not list $o"; fail=1; }
    done
  fi
done
[ $fail -eq 0 ] && echo "man: OK ($((${#cmds[@]} + 1)) pages)"
exit $fail
