#!/usr/bin/env bash
# The bash completion (packaging/bitgrad.bash-completion): commands, options, option values,
# configuration files and run directories for a few command lines; and for every command
# `bitgrad --help` lists, the options offered are exactly those of `bitgrad CMD --help`.
# Usage: completion_test.sh COMPLETION_SCRIPT BITGRAD
set -uo pipefail
script=$(realpath "$1") bin=$(realpath "$2")
# shellcheck source=/dev/null
source "$script"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
mkdir -p runs/a runs/b conf
touch a.toml b.toml notes.txt report.html conf/c.toml

# completes the last word of a command line given as words (readline's split at '=' included)
complete_words() {
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _bitgrad
  printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | sort
}
expect() {  # WANT (space-separated) WORDS...
  local want got
  want=$(printf '%s\n' $1 | sort)
  shift
  got=$(complete_words "$@")
  if [ "$got" != "$want" ]; then
    echo "completion: '$*': got [$(echo $got)], want [$(echo $want)]"
    fail=1
  fi
}
expect "train" bitgrad tr
expect "sample selftest sensitivity serve" bitgrad s
expect "--help --version" bitgrad --
expect "--checkpoint-every" bitgrad train a.toml --ch
expect "--no-epoch-checkpoints --no-progress" bitgrad train --no
expect "avx2 avx512" bitgrad selftest --isa a
expect "avx2 avx512" bitgrad selftest --isa = a
expect "none ops steps" bitgrad train a.toml --trace ""
expect "a.toml b.toml conf runs" bitgrad train ""
expect "conf/c.toml" bitgrad audit conf/
expect "runs/a runs/b" bitgrad diff runs/
expect "runs/a runs/b" bitgrad train a.toml --resume runs/
expect "conf report.html runs" bitgrad report runs/a -o ""
expect "" bitgrad train a.toml --threads ""
expect "--top-k --tokens --temperature --threads" bitgrad sample runs/a --t

# every command's options, as its --help lists them
mapfile -t cmds < <("$bin" --help | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
[ ${#cmds[@]} -ge 8 ] || { echo "completion: the commands of '$bin --help': ${cmds[*]}"; fail=1; }
expect "${cmds[*]} --help --version" bitgrad ""
for c in "${cmds[@]}"; do
  want=$("$bin" "$c" --help | grep -oE '^  (-[a-zA-Z],)?--[a-z0-9-]+(,--[a-z0-9-]+)?' | tr ',' '\n' | tr -d ' ' | grep -- '^--' | sort -u)
  got=$(complete_words bitgrad "$c" --)
  if [ -z "$want" ] || [ "$got" != "$want" ]; then
    echo "completion: bitgrad $c --: offers [$(echo $got)], its --help lists [$(echo $want)]"
    fail=1
  fi
done
[ $fail -eq 0 ] && echo "completion: OK (${#cmds[@]} commands, their options, values, files and directories)"
exit $fail
