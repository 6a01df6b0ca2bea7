#!/bin/bash
# bad_input.sh PARALAB SOURCE_DIR: files a command cannot use are bad input (exit code 2, a
# message naming the file), not exit code 1, and refused before anything runs.
# - `paralab compare`: results of two scenarios, an unreadable file, a file that is not JSON or
#   not a paralab result, a missing argument. A valid pair exits 0.
# - `paralab validate --calibration FILE`: no such file, a file that is not a valid topology;
#   refused before any execution or calibration starts.
# - every command's output file (--trace, --trace-steps, --report, --out, --csv, --dump-ir) in
#   a folder that does not exist, or naming a folder: refused before the work that fills it.
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

# validate_expect PATTERN ARGS...: validate ARGS exits 2 at once, its stderr matches PATTERN,
# and nothing was executed or calibrated.
validate_expect() {
  local pattern=$1
  shift
  local err rc
  err=$(PARALAB_CACHE_DIR="$work/cache" "$paralab" validate "$src/scenarios/cpu-tp2.toml" --backend cpu "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q -- "$pattern" <<< "$err" || grep -q -E "executing|calibrating" <<< "$err"; then
    echo "FAIL: validate $* -> exit $rc (want 2, nothing run), stderr: $err"
    fail=1
  else
    echo "ok: validate $* -> $rc"
  fi
}
validate_expect "--calibration = $work/none.toml: no such file" --calibration "$work/none.toml"
printf 'name = "x"\n[device\n' > "$work/broken.toml"
validate_expect "broken.toml:2: TOML syntax error" --calibration "$work/broken.toml"
printf 'name = "x"\n' > "$work/partial.toml"
validate_expect "partial.toml" --calibration "$work/partial.toml"
validate_expect "--runs needs a whole number in \[1, 100\], got '0'" --runs 0
validate_expect "--steps needs a whole number in \[1, 100\], got 'two'" --steps two
validate_expect "--warmup needs a number in \[0, 3600\], got '-1'" --warmup -1
printf 'name = "x"\n[device]\nkind = "cpu"\npeak_fp32_tflops = 1\nmemory_gib = 1\nmem_bw_gbps = 1\ndispatch_us = 3\n[node]\ndevices_per_node = 2\nintra = "shm"\nintra_bw_gbps = 1\n' > "$work/schema1.toml"
validate_expect "calibrate --upgrade" --calibration "$work/schema1.toml"

# output ARGS...: the command exits 2 at once, naming the option's path, and writes nothing.
output() {
  local err rc
  err=$(PARALAB_CACHE_DIR="$work/cache" timeout 30 "$paralab" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q -E "(does not exist|is a folder, not a file)" <<< "$err" ||
     grep -q -E "executing|calibrating" <<< "$err"; then
    echo "FAIL: $* -> exit $rc (want 2 at once), stderr: $err"
    fail=1
  else
    echo "ok: $1 ... -> $rc: $err"
  fi
}
nodir=$work/no-such-folder
output simulate "$src/scenarios/cpu-tp2.toml" --trace "$nodir/t.json"
output simulate "$src/scenarios/cpu-tp2.toml" --trace "$work"
output inspect "$src/scenarios/cpu-tp2.toml" --dump-ir "$nodir/ir.json"
output plan "$src/scenarios/cpu-tp2.toml" --csv "$nodir/plan.csv"
output calibrate --backend cpu --out "$nodir/cal.toml"
output validate "$src/scenarios/cpu-tp2.toml" --backend cpu --report "$nodir/r.html"
output execute "$src/scenarios/cpu-1rank-fp16.toml" --backend cpu --trace "$nodir/t.json"
output execute "$src/scenarios/cpu-1rank-fp16.toml" --backend cpu --steps 2 --trace-steps "$nodir/step"
output compare "$work/tp2.json" "$work/tp2.json" --report "$nodir/r.html"
[ -e "$nodir" ] && { echo "FAIL: $nodir was created"; fail=1; }
exit $fail
