#!/usr/bin/env bash
# paralab tests — `paralab validate` end to end: a quick calibration into a fresh cache (which
# executes the scenario and fits its corrections), simulate, execute (validate launches mpirun
# itself), compare; the JSON has DESIGN.md's fields and the report is written; a second run takes
# the calibration from the cache and reports how much its executions differ.
#   validate_smoke.sh PARALAB SCENARIO WORKDIR
set -euo pipefail
paralab=$1
scenario=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
export PARALAB_CACHE_DIR="$work/cache"
shrink=(--set model.num_layers=2 --set training.global_batch_size=2)

"$paralab" validate "$scenario" --backend cpu --quick-calibration --steps 1 --runs 3 --json \
  --report "$work/report.html" --out-dir "$work/traces" "${shrink[@]}" >"$work/out.json" 2>"$work/err.txt" || {
  echo "validate failed:"; cat "$work/err.txt"; exit 1; }
for key in '"predicted"' '"measured"' '"step_time_error_pct"' '"op_mape_pct"' '"step_time_s"'; do
  grep -q "$key" "$work/out.json" || { echo "validate --json lacks $key"; cat "$work/out.json"; exit 1; }
done
grep -q "calibrating this machine" "$work/err.txt" || { echo "no calibration was made"; cat "$work/err.txt"; exit 1; }
test -s "$work/report.html" || { echo "no report"; exit 1; }
test -s "$work/traces/predicted.json" && test -s "$work/traces/measured-0.json" && test -s "$work/traces/measured.json" || {
  echo "no traces kept"; ls "$work/traces"; exit 1; }
# The compared measurement scores another prediction as validate scored this one.
"$paralab" compare "$work/traces/predicted.json" "$work/traces/measured.json" --json >"$work/cmp.json" || {
  echo "compare of the kept traces failed"; exit 1; }
python3 - "$work/out.json" "$work/cmp.json" "$work/err.txt" <<'PY' || exit 1
import json, re, sys
v, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
e = v["execute"]
assert e["runs"] == 3 and e["launches"] == 3 and len(e["runs_step_time_s"]) == 3, e
assert abs(c["op_mape_pct"] - v["op_mape_pct"]) < 1e-6 * max(1.0, v["op_mape_pct"]), (c["op_mape_pct"], v["op_mape_pct"])
# The median-step execution is the reference's base; its breakdown names idle time: no pipeline,
# so no bubble, its gaps are host time.
assert v["measured"]["bubble_fraction"] == 0, v["measured"]["bubble_fraction"]
assert v["measured"]["breakdown"]["host_s"] > 0, v["measured"]["breakdown"]
for k in ("run_to_run_op_mape_pct", "run_to_run_step_spread_pct", "reference_spread_pct"):
    assert e[k] is not None and e[k] >= 0, (k, e)
# The calibration executed the scenario: validate holds its executions against those steps.
x = v["calibration"]["executed"]
assert x["executions"] >= 3 and x["step_median_s"] > 0, x
assert abs(x["host_drift_pct"] - 100 * (x["measured_step_median_s"] / x["step_median_s"] - 1)) < 1e-6, x
# The calibrated file: schema 2, corrections fitted to those executions, no host-noise key.
cal = open(v["calibration"]["file"]).read()
assert re.search(r"^schema_version = 2 ", cal, re.M), "no schema version"
assert "[[calibration.correction]]" in cal and "[[calibration.execution]]" in cal
for gone in ("poll_spin_us", "sync_skew_us", "compute_tail", "dispatch_us", "wake_us"):
    assert gone not in cal, gone
# Every warning on stderr is in the JSON.
err = open(sys.argv[3]).read()
def tail(line): return line[line.index("warning: "):].strip()
logged = [tail(l) for l in err.splitlines() if "warning: " in l]
assert sorted(tail(w) for w in v["warnings"] if "warning: " in w) == sorted(logged), (v["warnings"], logged)
PY
ls "$work"/cache/calibration/*/cpu-np2-*.toml >/dev/null || { echo "no cached calibration"; exit 1; }
# 2 ranks on a host of 2 or more cores do not share cores: the calibration counts the union of
# the ranks' affinities, not one rank's.
if [ "$(nproc)" -ge 2 ]; then
  cal=$(ls "$work"/cache/calibration/*/cpu-np2-*.toml | head -1)
  grep -Eq '^cores = ([2-9]|[1-9][0-9]+) ' "$cal" || {
    echo "the calibration counts fewer cores than the host's $(nproc) for 2 ranks:"; grep -E '^cores' "$cal"; exit 1; }
fi

"$paralab" validate "$scenario" --backend cpu --steps 1 --runs 4 "${shrink[@]}" >"$work/out2.txt" 2>"$work/err2.txt" || {
  echo "second validate failed:"; cat "$work/err2.txt"; exit 1; }
grep -q "(cached)" "$work/err2.txt" || { echo "the second run did not use the cache"; cat "$work/err2.txt"; exit 1; }
grep -q "step time   predicted" "$work/out2.txt" || { echo "no table"; cat "$work/out2.txt"; exit 1; }
grep -q "^host        the calibration executed this scenario at a median .* s per step" "$work/out2.txt" || {
  echo "no host drift line"; cat "$work/out2.txt"; exit 1; }
grep -q "^runs        4 executions in 4 launches, " "$work/out2.txt" || { echo "no runs line"; cat "$work/out2.txt"; exit 1; }
# Four executions: how much they differ is reported, and real runs never agree on every op.
noise=$(sed -n 's/^noise       one execution differs from another by \([0-9.]*\)% per op.*/\1/p' "$work/out2.txt")
[ -n "$noise" ] || { echo "no run-to-run noise line"; cat "$work/out2.txt"; exit 1; }
awk -v x="$noise" 'BEGIN { exit !(x > 0) }' || { echo "run-to-run op MAPE is $noise%, expected > 0"; cat "$work/out2.txt"; exit 1; }
echo "validate smoke: ok"
