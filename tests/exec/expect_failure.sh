#!/bin/bash
# expect_failure.sh BOUND_S REGEX OUTFILE -- COMMAND...
# Runs COMMAND and passes when it exits non-zero within BOUND_S seconds, its output (stdout and
# stderr) matches the extended regex REGEX, and OUTFILE (an output the command was asked to
# write) does not exist: a failed run never leaves a result behind.
set -u
bound=$1 regex=$2 outfile=$3
shift 3
[ "$1" = "--" ] && shift
rm -f "$outfile"
start=$(date +%s.%N)
output=$(timeout $((bound + 30)) "$@" 2>&1)
rc=$?
end=$(date +%s.%N)
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
fail() {
  echo "FAIL: $1 (exit $rc after ${elapsed} s)"
  echo "--- output ---"
  echo "$output"
  exit 1
}
[ $rc -ne 0 ] || fail "the command succeeded"
[ $rc -ne 124 ] || fail "the command hung (killed by timeout)"
awk -v e="$elapsed" -v b="$bound" 'BEGIN { exit !(e <= b) }' || fail "it took longer than ${bound} s"
echo "$output" | grep -Eq -- "$regex" || fail "the output does not match /$regex/"
[ ! -e "$outfile" ] || fail "$outfile was written"
ls "$outfile".tmp.* >/dev/null 2>&1 && fail "a temporary $outfile.tmp.* was left behind"
echo "ok: exit $rc after ${elapsed} s; output matches /$regex/"
echo "$output" | grep -E -- "$regex" | head -3
exit 0
