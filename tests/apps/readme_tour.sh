#!/bin/bash
# readme_tour.sh PARALAB SOURCE_DIR: runs the commands of the README's "A tour" block that need
# neither mpirun nor minutes (inspect, simulate), as a newcomer would paste them, from a scratch
# directory that sees the repository's scenarios/ and bench/ and the built binary at
# ./build/apps/paralab. Fails when one exits non-zero, or when the block has gone missing. The
# mpirun line is covered by the exec tests (every scenario under --verify), the plan line by
# tests/plan (its sweep takes minutes).
set -u
paralab=$1 src=$2
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
ln -s "$src/scenarios" "$work/scenarios"
ln -s "$src/bench" "$work/bench"
mkdir -p "$work/build/apps"
ln -s "$paralab" "$work/build/apps/paralab"
cd "$work" || exit 1
# The block: from "## A tour" to its code fence's end; comments dropped, continuation lines joined.
cmds=$(awk '/^## A tour/ {t = 1; next} t && /^```/ {if (f) exit; f = 1; next} t && f' "$src/README.md" |
       sed -e 's/[[:space:]]#.*$//' | awk '{ if (sub(/\\[[:space:]]*$/, "")) printf "%s ", $0; else print }')
ran=0 status=0
while IFS= read -r c; do
  [ -z "${c// /}" ] && continue
  case "$c" in
    mpirun*|*" plan "*) echo "skipped: $c"; continue ;;
  esac
  ran=$((ran + 1))
  if out=$(bash -c "$c" 2>&1 </dev/null); then
    echo "ok: $c"
  else
    echo "FAIL: $c"
    echo "$out" | tail -5
    status=1
  fi
done <<< "$cmds"
if [ "$ran" -lt 3 ]; then
  echo "FAIL: only $ran commands found in README.md's tour"
  exit 1
fi
exit $status
