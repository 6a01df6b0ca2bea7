#!/bin/bash
# compare_errors.sh PARALAB SOURCE_DIR: `paralab compare` on files that cannot be compared is bad
# input (exit code 2, a message naming the file or both scenarios), not a crash or exit code 1:
# results of two scenarios, an unreadable file, a file that is not a paralab result, a summary
# missing its fields. A valid pair exits 0.
set -u
paralab=$1 src=$2
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
fail=0
"$paralab" simulate "$src/scenarios/cpu-tp2.toml" --trace "$work/tp2.json" > /dev/null || { echo "FAIL: simulate cpu-tp2"; exit 1; }
"$paralab" simulate "$src/scenarios/cpu-cp2.toml" --trace "$work/cp2.json" > /dev/null || { echo "FAIL: simulate cpu-cp2"; exit 1; }
echo '{"a": 1}' > "$work/other.json"
echo 'not json' > "$work/garbage.json"
# expect CODE PATTERN ARGS...: compare ARGS exits CODE and its stderr matches PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 2
  local err rc
  err=$("$paralab" compare "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -q -- "$pattern" <<< "$err"; then
    echo "FAIL: compare $* -> exit $rc (want $code), stderr: $err"
    fail=1
  else
    echo "ok: compare $(basename "$1") $(basename "${2:-}") -> $rc"
  fi
}
expect 0 '' "$work/tp2.json" "$work/tp2.json"
expect 2 "different scenarios: .*tp2.json is 'cpu-tp2'.*cp2.json is 'cpu-cp2'" "$work/tp2.json" "$work/cp2.json"
expect 2 "cannot read $work/none.json" "$work/tp2.json" "$work/none.json"
expect 2 "garbage.json: not JSON" "$work/garbage.json" "$work/tp2.json"
expect 2 "other.json: not a paralab result" "$work/tp2.json" "$work/other.json"
expect 2 "MEASURED" "$work/tp2.json"
exit $fail
