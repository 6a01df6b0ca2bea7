#!/usr/bin/env bash
# bench/validate/validate_cpu.sh — the CPU backend's accuracy on this machine (issue 7's goal:
# step time within 10 %, per-op MAPE within 15 %): `paralab validate` (runs: its default, or K) of quickstart
# and every scenarios/cpu-*.toml, each with a fresh calibration, and with --pairs two
# back-to-back executions of each compared with each other (`paralab compare A B`: how much
# the machine alone moves a step). Prints markdown rows for bench/results/validate_cpu.md.
# Run it on an otherwise idle machine; on 2 cores it takes 8-9.5 minutes on the faster build
# hosts and 11-12 on the slowest (bench/results/validate_cpu.md; a few more with --pairs),
# after 10 s of bench/host's core steadiness (how much the cores themselves move) and 10 s of
# its cross-core copies (how much the path between them moves).
#
# Each calibration's in-situ launches run between blocks of its executions (validate's default,
# --interleave); --calibrate-first: before them (validate --calibrate-first); --in-situ-launches
# K: how many (default 4).
#
#   bench/validate/validate_cpu.sh [--build DIR] [--runs K] [--pairs] [--interleave | --calibrate-first] [--in-situ-launches K] [--out DIR] [SCENARIO...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build runs= pairs=0 first= out=$(mktemp -d /tmp/paralab-validate-XXXXXX)
scenarios=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --pairs) pairs=1; shift ;;
    --interleave) first="$first --interleave"; shift ;;
    --calibrate-first) first="$first --calibrate-first"; shift ;;
    --in-situ-launches) first="$first --in-situ-launches $2"; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
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
export PARALAB_CACHE_DIR=$out/cache  # fresh calibrations
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
# A virtualized host may name only the vendor ("AMD EPYC"): family/model tell the core apart.
cpu="$cpu, family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1) model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)"
virt=$(systemd-detect-virt 2>/dev/null || true)
echo "results in $out; $(nproc) CPUs ($cpu${virt:+, $virt guest}), load $(cut -d' ' -f1-3 /proc/loadavg)"
# How steady the cores are before the pass (bench/host/host_steadiness.cpp): a core whose
# throughput rate moves by more than the accuracy bar between windows sets a floor under it.
steady=$build/bench/host/paralab_host_steadiness
if [ -x "$steady" ]; then
  echo
  echo "host steadiness, 10 s before the pass (passes per ms, min / p10 / median / p90 / max):"
  "$steady" --seconds 10 | sed 's/^/    /'
fi
# How steady the path between cores is (bench/host/cross_core.cpp): on a VM whose vCPUs move
# between cores that share a cache and cores that do not, a copy between them has two rates,
# and the CPU backend's collectives two durations with them.
cross=$build/bench/host/paralab_host_cross_core
if [ -x "$cross" ]; then
  echo
  echo "cross-core copies, 10 s before the pass (512 KiB written on one CPU, copied on another):"
  "$cross" --seconds 10 | sed 's/^/    /'
fi
echo
echo "| scenario | predicted s | measured s | step error | op MAPE | runs differ: op MAPE | halves differ: op MAPE | step spread | compute per rank: predicted / measured median (min-max) ms | against the calibration's executions: runs / prediction |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for s in "${scenarios[@]}"; do
  # The work directory (predicted.json, measured-K.json, measured.json) stays in $out/$s, for
  # `paralab compare` of another prediction against the same executions.
  "$paralab" validate "$root/scenarios/$s.toml" --backend cpu ${runs:+--runs "$runs"} $first --out-dir "$out/$s" --json \
    >"$out/$s.json" 2>"$out/$s.err" || {
    echo "| $s | failed: see $out/$s.err | | | | | | | | |"; continue; }
  python3 - "$out/$s.json" "$s" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); e = d["execute"]
b = e.get("compute_per_rank_s", {})
busy = "%.1f / %.1f (%.1f-%.1f)" % tuple(1e3 * b[k] for k in ("predicted", "median", "min", "max")) if b else "-"
x = d["calibration"].get("executed")
host = "%+.1f %% / %+.1f %%" % (x["host_drift_pct"], x["predicted_error_pct"]) if x else "-"
pct = lambda x: "-" if x is None else "%.1f %%" % x  # null: too few runs to tell
print("| %s | %.4g | %.4g | %+.1f %% | %.1f %% | %s | %s | %s | %s | %s |" % (
    sys.argv[2], d["predicted"]["step_time_s"], d["measured"]["step_time_s"], d["step_time_error_pct"],
    d["op_mape_pct"], pct(e["run_to_run_op_mape_pct"]), pct(e["split_half_op_mape_pct"]), pct(e["run_to_run_step_spread_pct"]), busy, host))
PY
done
# The classes of communication that ran at two speeds across a scenario's launches (validate's
# warning: the host switched speeds, analysis/comm_speeds.hpp).
echo
echo "communication at two speeds across the launches (validate's execute.comm_two_speeds), and 2x or more"
echo "from the calibration's executions (calibration.executed.calls):"
for s in "${scenarios[@]}"; do
  [ -s "$out/$s.json" ] || continue
  python3 - "$out/$s.json" "$s" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["execute"].get("comm_two_speeds", [])
print("    %s: %s" % (sys.argv[2], "; ".join("%s, %.4g us in %d launches, %.4g us in %d (%.1fx)" % (
    x["class"], x["fast_us"], x["fast_launches"], x["slow_us"], x["slow_launches"], x["slow_us"] / x["fast_us"]) for x in c) or "none"))
e = (d["calibration"].get("executed") or {}).get("calls", [])
far = [x for x in e if x["measured_us"] >= 2 * x["executed_us"] or 2 * x["measured_us"] <= x["executed_us"]]
print("    %s since calibrating: %s" % (sys.argv[2], "; ".join("%s, %.4g us, calibrated %.4g us (%.2fx)" % (
    x["class"], x["measured_us"], x["executed_us"], x["measured_us"] / x["executed_us"]) for x in far) or "none"))
PY
done
[ $pairs -eq 1 ] || exit 0

# Two executions compared with each other (raw intervals: communication not aligned).
echo
echo "| scenario | run A s | run B s | step difference | op MAPE | compute ops | communication ops |"
echo "|---|---|---|---|---|---|---|"
for s in "${scenarios[@]}"; do
  n=$("$paralab" inspect "$root/scenarios/$s.toml" --json 2>/dev/null |
      python3 -c "import json,sys; d=json.load(sys.stdin); print(d['world_size'])" 2>/dev/null || echo 1)
  for k in a b; do
    if [ "$n" -gt 1 ]; then
      mpirun -np "$n" --oversubscribe "$paralab" execute "$root/scenarios/$s.toml" --warmup 0.5 --trace "$out/$s.$k.json" >/dev/null 2>&1
    else
      "$paralab" execute "$root/scenarios/$s.toml" --warmup 0.5 --trace "$out/$s.$k.json" >/dev/null 2>&1
    fi
  done
  "$paralab" compare "$out/$s.a.json" "$out/$s.b.json" --json >"$out/$s.pair.json"
  python3 - "$out/$s.pair.json" "$s" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
comm = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast", "send", "recv", "sendrecv")
def mape(is_comm):
    n = sum(c["ops"] for c in d["by_class"] if (c["class"].split()[0] in comm) == is_comm)
    w = sum(c["ops"] * c["mape_pct"] for c in d["by_class"] if (c["class"].split()[0] in comm) == is_comm)
    return w / n if n else 0.0
print("| %s | %.4g | %.4g | %+.1f %% | %.1f %% | %.1f %% | %.1f %% |" % (
    sys.argv[2], d["predicted_step_time_s"], d["measured_step_time_s"], d["step_time_error_pct"], d["op_mape_pct"],
    mape(False), mape(True)))
PY
done
