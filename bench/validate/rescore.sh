#!/usr/bin/env bash
# bench/validate/rescore.sh — score a model change on references already measured: re-simulate
# every scenario of a stored validate_cpu.sh pass (its --out DIR: each scenario's calibration
# under cache/calibration/, its reference executions in S/measured.json) with this build, and
# compare the prediction with the same executions. A fresh pass mixes the model's error with the
# host's drift between a calibration and its reference (10-20 % on the 2-core build machine on a
# bad day: bench/results/validate_cpu.md); the same references for both models leave only the
# model's. Optional overrides of the calibrated topology's keys (`section.key=value`, e.g.
# `device.mem_efficiency=0.9`) try a value without a new calibration. Prints markdown rows.
#
#   bench/validate/rescore.sh [--build DIR] [--set section.key=value]... PASSDIR [SCENARIO...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build
sets=()
pass=
scenarios=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --set) sets+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "rescore.sh: unknown option $1" >&2; exit 2 ;;
    *) if [ -z "$pass" ]; then pass=$1; else scenarios+=("$1"); fi; shift ;;
  esac
done
paralab=$build/apps/paralab
[ -x "$paralab" ] || { echo "rescore.sh: no $paralab (build first: bash scripts/setup.sh)" >&2; exit 2; }
[ -n "$pass" ] && [ -d "$pass" ] || { echo "rescore.sh: give the --out DIR of a validate_cpu.sh pass" >&2; exit 2; }
command -v python3 >/dev/null || { echo "rescore.sh: needs python3 to read the JSON results" >&2; exit 2; }
if [ ${#scenarios[@]} -eq 0 ]; then
  for d in "$pass"/*/; do [ -f "$d/measured.json" ] && scenarios+=("$(basename "$d")"); done
fi
[ ${#scenarios[@]} -gt 0 ] || { echo "rescore.sh: no scenario in $pass has a measured.json" >&2; exit 2; }
work=$(mktemp -d /tmp/paralab-rescore-XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "rescored with $build${sets:+; overrides: ${sets[*]}}"
echo
echo "| scenario | predicted s | measured s | step error | op MAPE | against the calibration's executions: prediction |"
echo "|---|---|---|---|---|---|"
for s in "${scenarios[@]}"; do
  # The calibration validate made for this scenario: its file name holds the scenario's name.
  # (cpu-np<ranks>-<scenario>-<12 hex>-...: cpu-tp2's must not match cpu-tp2-dp2-zero3's)
  cal=$(find "$pass/cache/calibration" -name "*.toml" 2>/dev/null | grep -E "/cpu-np[0-9]+-$s-[0-9a-f]{12}-[^/]*\.toml$" | head -1 || true)
  if [ -z "$cal" ] || [ ! -f "$pass/$s/measured.json" ]; then
    echo "| $s | no calibration or measured.json in $pass | | | | |"; continue
  fi
  # The calibration with the overrides applied (a key replaced in its section, or added to it).
  python3 - "$cal" "$work/$s.toml" "${sets[@]}" <<'PY'
import re, sys
src, dst, sets = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = open(src).read().split("\n")
for kv in sets:
    if "=" not in kv or "." not in kv.split("=", 1)[0]:
        sys.exit("rescore.sh: --set wants section.key=value, got " + kv)
    path, value = kv.split("=", 1)
    section, key = path.rsplit(".", 1)
    start = next((i for i, l in enumerate(lines) if l.split("#")[0].strip() == "[" + section + "]"), None)
    if start is None:
        sys.exit("rescore.sh: the calibration has no [%s] section (from --set %s)" % (section, kv))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    hit = [i for i in range(start + 1, end) if re.match(r"\s*" + re.escape(key) + r"\s*=", lines[i])]
    if hit: lines[hit[0]] = "%s = %s" % (key, value)
    else: lines.insert(start + 1, "%s = %s" % (key, value))
open(dst, "w").write("\n".join(lines))
PY
  if ! "$paralab" simulate "$root/scenarios/$s.toml" --set "cluster.topology=$work/$s.toml" --trace "$work/$s.json" \
      >/dev/null 2>"$work/$s.err"; then
    echo "| $s | simulate failed: $(head -c 200 "$work/$s.err" | tr '\n|' '  ') | | | | |"; continue
  fi
  "$paralab" compare "$work/$s.json" "$pass/$s/measured.json" --json >"$work/$s.cmp.json"
  python3 - "$work/$s.cmp.json" "$work/$s.toml" "$s" <<'PY'
import json, re, sys
c = json.load(open(sys.argv[1]))
t = open(sys.argv[2]).read()  # the fastest half's median step (older calibrations: the median)
m = re.search(r"^step_fast_s\s*=\s*([0-9.eE+-]+)", t, re.M) or re.search(r"^step_median_s\s*=\s*([0-9.eE+-]+)", t, re.M)
vs = "%+.1f %%" % (100 * (c["predicted_step_time_s"] / float(m.group(1)) - 1)) if m else "-"
print("| %s | %.4g | %.4g | %+.1f %% | %.1f %% | %s |" % (
    sys.argv[3], c["predicted_step_time_s"], c["measured_step_time_s"], c["step_time_error_pct"], c["op_mape_pct"], vs))
PY
done
