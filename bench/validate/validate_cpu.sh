#!/usr/bin/env bash
# bench/validate/validate_cpu.sh — the CPU backend's accuracy on this machine: `paralab validate`
# of quickstart and every scenarios/cpu-*.toml, each with a fresh calibration (its executions
# right before the reference's), PASSES times over; then per scenario the median over passes of
# |step error|, op MAPE, how much the executions differ, their tail and the host's drift since
# calibrating. Prints markdown rows for bench/results/validate_cpu.md (docs/calibration.md,
# "Validate"). Budget (issue 63): median |step error| within 15 %, median op MAPE within 25 %.
#
#   bench/validate/validate_cpu.sh [--build DIR] [--passes P] [--out DIR] [SCENARIO...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build passes=3 out=$(mktemp -d /tmp/paralab-validate-XXXXXX)
scenarios=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    -*) echo "validate_cpu.sh: unknown option $1" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
paralab=$build/apps/paralab
[ -x "$paralab" ] || { echo "validate_cpu.sh: no $paralab (build first: bash scripts/setup.sh)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "validate_cpu.sh: needs python3 to read the JSON results" >&2; exit 2; }
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(quickstart)
  for f in "$root"/scenarios/cpu-*.toml; do scenarios+=("$(basename "$f" .toml)"); done
fi
mkdir -p "$out"
export PARALAB_CACHE_DIR=$out/cache
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "results in $out; $(nproc) CPUs ($cpu), load $(cut -d' ' -f1-3 /proc/loadavg), paralab $(git -C "$root" rev-parse --short HEAD)"
for p in $(seq 1 "$passes"); do
  for s in "${scenarios[@]}"; do
    "$paralab" validate "$root/scenarios/$s.toml" --backend cpu --recalibrate --json >"$out/$s.$p.json" 2>"$out/$s.$p.err" || {
      echo "validate $s (pass $p) failed:"; tail -20 "$out/$s.$p.err"; exit 1; }
  done
done
python3 - "$out" "$passes" "${scenarios[@]}" <<'PY'
import json, statistics as st, sys
out, passes, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print()
print("| scenario | step error per pass | median abs step error | op MAPE per pass | median op MAPE | run-to-run op MAPE | tail | host drift | within budget |")
print("|---|---|---|---|---|---|---|---|---|")
for n in names:
    v = [json.load(open("%s/%s.%d.json" % (out, n, p))) for p in range(1, passes + 1)]
    step = [x["step_time_error_pct"] for x in v]
    mape = [x["op_mape_pct"] for x in v]
    r2r = st.median(x["execute"]["run_to_run_op_mape_pct"] or 0 for x in v)
    tail = st.median(x["execute"]["tail_pct"] or 0 for x in v)
    drift = [x["calibration"].get("executed", {}).get("host_drift_pct", 0) for x in v]
    ok = st.median(abs(e) for e in step) <= 15 and st.median(mape) <= 25
    print("| %s | %s | %.1f %% | %s | %.1f %% | %.1f %% | %.1f %% | %s | %s |" % (
        n, " / ".join("%+.1f" % e for e in step), st.median(abs(e) for e in step), " / ".join("%.1f" % m for m in mape),
        st.median(mape), r2r, tail, " / ".join("%+.0f" % d for d in drift), "yes" if ok else "no"))
PY
