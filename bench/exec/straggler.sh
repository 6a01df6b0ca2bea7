#!/usr/bin/env bash
# bench/exec/straggler.sh — a straggler executed for real against its prediction: per scenario,
# `paralab validate --backend cpu` without and with `--slow-rank R --slowdown F` (the executions
# repeat rank R's compute ops, the simulation adds rank R as a straggler), PASSES times each,
# alternating, on one calibration of this machine per scenario (made first, without slowdown).
# Prints markdown rows for bench/results/straggler_exec.md: measured and predicted step without
# and with the slowdown (median over passes of each pass's median execution), the increases, and
# the predicted increase's error as a percentage of the measured one. Target: within 20 %.
# STRAGGLER_RESCORE=1 with --out DIR only re-reads the results already there.
#
#   bench/exec/straggler.sh [--build DIR] [--passes P] [--rank R] [--factor F] [--out DIR] [SCENARIO...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build passes=3 rank=1 factor=2 out=$(mktemp -d /tmp/paralab-straggler-XXXXXX)
scenarios=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --rank) rank=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "straggler.sh: unknown option $1" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
[ ${#scenarios[@]} -gt 0 ] || scenarios=(cpu-dp2-zero2 cpu-tp2)
paralab=$build/apps/paralab
[ -x "$paralab" ] || { echo "straggler.sh: no $paralab (build first: bash scripts/setup.sh)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "straggler.sh: needs python3 to read the JSON results" >&2; exit 2; }
mkdir -p "$out"
export PARALAB_CACHE_DIR=$out/cache
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "results in $out; $(nproc) CPUs ($cpu), load $(cut -d' ' -f1-3 /proc/loadavg), rank $rank, factor $factor"
for s in "${scenarios[@]}"; do
  calib=$out/$s.calibration.toml
  [ -f "$calib" ] || "$paralab" calibrate "$root/scenarios/$s.toml" --backend cpu --out "$calib" >"$out/$s.calibrate.log" 2>&1 || {
    echo "calibrate $s failed:"; tail -20 "$out/$s.calibrate.log"; exit 1; }
done
for p in $(seq 1 "$passes"); do
  [ -n "${STRAGGLER_RESCORE:-}" ] && break  # only re-read the results already in --out
  for s in "${scenarios[@]}"; do
    for mode in base slow; do
      flags=()
      [ "$mode" = slow ] && flags=(--slow-rank "$rank" --slowdown "$factor")
      "$paralab" validate "$root/scenarios/$s.toml" --backend cpu --calibration "$out/$s.calibration.toml" --json \
        "${flags[@]}" >"$out/$s.$mode.$p.json" 2>"$out/$s.$mode.$p.err" || {
        echo "validate $s $mode (pass $p) failed:"; tail -20 "$out/$s.$mode.$p.err"; exit 1; }
    done
  done
done
python3 - "$out" "$passes" "${scenarios[@]}" <<'PY'
import json, statistics as st, sys
out, passes, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
# A pass's measured step: the median of its executions (the target's), or the fastest of them.
def load(n, mode, pick):
    v = [json.load(open("%s/%s.%s.%d.json" % (out, n, mode, p))) for p in range(1, passes + 1)]
    return [pick(x["execute"]["runs_step_time_s"]) for x in v], [x["predicted"]["step_time_s"] for x in v]
for title, pick in (("median execution of each pass", st.median), ("fastest execution of each pass", min)):
    print("\n%s; median over %d passes\n" % (title, passes))
    print("| scenario | measured base / slowed (s) | measured increase | predicted base / slowed (s) | predicted increase | error of predicted increase | base passes (s) | slowed passes (s) | within 20 % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in names:
        mb, pb = load(n, "base", pick)
        ms, ps = load(n, "slow", pick)
        m0, m1, p0, p1 = st.median(mb), st.median(ms), st.median(pb), st.median(ps)
        dm, dp = m1 - m0, p1 - p0
        err = 100.0 * (dp - dm) / dm if dm != 0 else float("nan")
        print("| %s | %.4g / %.4g | %+.4g s (%+.0f %%) | %.4g / %.4g | %+.4g s (%+.0f %%) | %+.1f %% | %s | %s | %s |" % (
            n, m0, m1, dm, 100 * dm / m0, p0, p1, dp, 100 * dp / p0, err,
            " / ".join("%.4g" % x for x in mb), " / ".join("%.4g" % x for x in ms), "yes" if abs(err) <= 20 else "no"))
PY
