#!/usr/bin/env bash
# paralab tests — `paralab calibrate` spreads its in-situ executions over launches
# (analysis/in_situ_run.hpp): one rank in plain child processes, 2 ranks under mpirun started by
# calibrate itself; a job someone else launched is the only launch; bad counts are refused.
#   calibrate_launches.sh PARALAB SCENARIO_DIR WORKDIR -- MPIRUN...
set -euo pipefail
paralab=$1 scenarios=$2 work=$3
shift 3
[ "$1" = "--" ] && shift
mpirun=("$@")
rm -rf "$work"
mkdir -p "$work"
small=(--no-sweep --no-comm --reps 1 --set model.num_layers=1 --set training.global_batch_size=2)
entry() {  # entry FILE KEY -> the [[calibration.execution]] value of KEY
  sed -n "/^\[\[calibration.execution\]\]/,/^$/s/^$2 = //p" "$1"
}

# One rank, 3 launches: the earlier two are child processes of this one.
"$paralab" calibrate --backend cpu --out "$work/one.toml" "$scenarios/cpu-1rank-fp16.toml" "${small[@]}" \
  --in-situ-launches 3 --json >"$work/one.json" 2>"$work/one.err" || { echo "1-rank calibrate failed"; cat "$work/one.err"; exit 1; }
[ "$(entry "$work/one.toml" launches)" = 3 ] || { echo "1 rank: expected 3 launches"; cat "$work/one.toml" | grep -A7 'calibration.execution'; exit 1; }
[ "$(entry "$work/one.toml" executions)" -ge 3 ] || { echo "1 rank: fewer executions than launches"; exit 1; }
# The scenario simulated on the file, against the executions the file records: a warning (JSON
# and stderr) exactly when the two are more than 10 % apart (analysis/in_sample.hpp).
"$paralab" simulate "$scenarios/cpu-1rank-fp16.toml" "${small[@]:4}" --set "cluster.topology=$work/one.toml" --json \
  >"$work/one.sim.json" || { echo "simulate on the calibration failed"; exit 1; }
python3 - "$work/one.json" "$work/one.sim.json" "$(entry "$work/one.toml" step_fast_s)" "$work/one.err" <<'PY' || exit 1
import json, sys
c, p, fast = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3].split()[0])
pct = 100 * (p["step_time_s"] / fast - 1)
warned = [w for w in c["warnings"] if "from the calibration's own executions" in w]
assert (len(warned) == 1) == (abs(pct) > 10), (pct, c["warnings"])
assert all(w.startswith("cpu-1rank-fp16: warning: the prediction") for w in warned), warned
assert len(warned) == open(sys.argv[4]).read().count("own executions of this scenario"), warned
print("1 rank: in-sample %+.1f %%, %d warning(s)" % (pct, len(warned)))
PY

# Two ranks, the default: calibrate starts 4 jobs under mpirun, and removes the traces after.
tmp=${TMPDIR:-/tmp}
before=$(ls -d "$tmp"/paralab-in-situ-* 2>/dev/null | sort || true)
# --in-sample-bound 0: any distance between the scenario simulated on the file and its
# executions is warned of, by the measuring job, through the parent's stderr.
"$paralab" calibrate --backend cpu --out "$work/two.toml" "$scenarios/cpu-tp2.toml" "${small[@]}" --in-sample-bound 0 \
  >"$work/two.out" 2>"$work/two.err" || { echo "2-rank calibrate failed"; cat "$work/two.err"; exit 1; }
grep -q "^paralab calibrate: cpu-tp2: warning: the prediction .* from the calibration's own executions of this scenario .*, beyond 0%" \
  "$work/two.err" || { echo "2 ranks: no in-sample warning at bound 0"; cat "$work/two.err"; exit 1; }
[ "$(entry "$work/two.toml" launches)" = 4 ] || { echo "2 ranks: expected 4 launches"; grep -A7 'calibration.execution' "$work/two.toml"; exit 1; }
after=$(ls -d "$tmp"/paralab-in-situ-* 2>/dev/null | sort || true)
[ "$before" = "$after" ] || { echo "left a directory of in-situ traces behind:"; comm -13 <(echo "$before") <(echo "$after"); exit 1; }

# Launched by someone else: this job is the only launch.
"${mpirun[@]}" -np 2 "$paralab" calibrate --backend cpu --out "$work/own.toml" "$scenarios/cpu-tp2.toml" "${small[@]}" \
  >"$work/own.out" 2>"$work/own.err" || { echo "calibrate under mpirun failed"; cat "$work/own.err"; exit 1; }
[ "$(entry "$work/own.toml" launches)" = 1 ] || { echo "under mpirun: expected 1 launch"; exit 1; }

# Four ranks: the executed scenario's compute points come from its executions, also where the
# ranks outnumber the cores (then only replays are timed by CPU time).
"$paralab" calibrate --backend cpu --out "$work/four.toml" "$scenarios/cpu-pp4.toml" --no-sweep --no-comm --reps 1 \
  --set model.num_layers=8 --set training.global_batch_size=4 --in-situ-launches 2 >"$work/four.out" 2>"$work/four.err" || {
  echo "4-rank calibrate failed"; cat "$work/four.err"; exit 1; }
points=$(grep -c '^\[\[calibration.gemm\]\]  # ' "$work/four.toml" || true)
executed=$(grep -c '^\[\[calibration.gemm\]\]  # execution cpu-pp4, ' "$work/four.toml" || true)
[ "$points" -gt 0 ] && [ "$points" = "$executed" ] || {
  echo "4 ranks: $executed of $points GEMM points from the execution"; grep '^\[\[calibration.gemm' "$work/four.toml" | head; exit 1; }
if [ "$(nproc)" -lt 4 ]; then
  grep -q "replayed compute ops timed by thread CPU time, executed ones by their execution" "$work/four.toml" || {
    echo "4 ranks on $(nproc) cores: the header does not say how compute was timed"; head -20 "$work/four.toml"; exit 1; }
fi

# Bad counts.
for bad in 0 21 x; do
  if "$paralab" calibrate --backend cpu --out "$work/bad.toml" "$scenarios/cpu-tp2.toml" --in-situ-launches "$bad" 2>"$work/bad.err"; then
    echo "--in-situ-launches $bad was accepted"; exit 1
  fi
  grep -q -- "--in-situ-launches needs a whole number in \[1, 20\], got '$bad'" "$work/bad.err" || { echo "unclear error for $bad:"; cat "$work/bad.err"; exit 1; }
done
echo "calibrate launches: ok"
