#!/usr/bin/env bash
# paralab tests — `paralab validate` end to end: a quick calibration into a fresh cache,
# simulate, execute (validate launches mpirun itself), compare; the JSON has DESIGN.md's
# fields and the report is written; a second run (four executions) takes the calibration from
# the cache and reports how much its executions differ, one from another and half from half.
#   validate_smoke.sh PARALAB SCENARIO WORKDIR
set -euo pipefail
paralab=$1
scenario=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
export PARALAB_CACHE_DIR="$work/cache"
shrink=(--set model.num_layers=2 --set training.global_batch_size=2)

"$paralab" validate "$scenario" --backend cpu --quick-calibration --steps 1 --json \
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
python3 - "$work/out.json" "$work/cmp.json" <<'PY' || exit 1
import json, sys
v, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
runs = v["execute"]["runs"]
assert 7 <= runs <= 15, "default runs %d outside 7-15" % runs
assert abs(c["op_mape_pct"] - v["op_mape_pct"]) < 1e-6 * max(1.0, v["op_mape_pct"]), (c["op_mape_pct"], v["op_mape_pct"])
# The fastest half of the runs is compared, centred on its median: an even half less its slowest
# (analysis/run_noise.hpp, centred_fast_half).
steps = v["execute"]["runs_step_time_s"]
fast = sorted(steps)[:(runs + 1) // 2]
centred = fast[:2 * ((len(fast) - 1) // 2) + 1]
assert v["execute"]["compared_runs"] == len(centred), v["execute"]
assert abs(v["measured"]["step_time_s"] - fast[(len(fast) - 1) // 2]) < 1e-12, (v["measured"]["step_time_s"], fast)
# Compute busy per rank (cpu-tp2: 2 ranks): one sample per rank and compared run, the prediction's beside them.
b = v["execute"]["compute_per_rank_s"]
assert b["samples"] == 2 * len(centred), (b, runs)
assert 0 < b["min"] <= b["median"] <= b["max"], b
assert b["predicted"] > 0, b
assert v["execute"]["run_to_run_compute_spread_pct"] >= 0
# The calibration made now executed the scenario in situ: validate holds its runs against those
# steps (the machine's drift since calibrating) and the prediction against them (the model's).
x = v["calibration"]["executed"]
assert x["executions"] >= 1 and x["step_median_s"] > 0, x
# Their fastest and slowest steps beside the median (how far the pace moved while calibrating),
# and the fastest half's median, which the drift and the in-sample error are taken against.
assert 0 < x["step_min_s"] <= x["step_fast_s"] <= x["step_median_s"] <= x["step_max_s"], x
# Spread over the default 4 launches of the calibration job (analysis/in_situ_run.hpp), one or more each,
# which validate ran between blocks of its own executions (--interleave, the default).
assert x["launches"] == 4 and x["executions"] >= 4, x
# Its in-situ figures come from the executions centred on that step: of n, the fastest
# 2 * ((ceil(n/2) - 1) // 2) + 1 (analysis/run_noise.hpp, centred_fast_half).
import re
half = (x["executions"] + 1) // 2
tail = re.search(r"^compute_tail = .*median of (\d+) executions", open(v["calibration"]["file"]).read(), re.M)
assert tail and int(tail.group(1)) == 2 * ((half - 1) // 2) + 1, (tail and tail.group(0), x["executions"])
assert x["interleaved"] is True, x
assert abs(x["measured_step_median_s"] - sorted(steps)[(runs - 1) // 2]) < 1e-12, x
assert abs(x["measured_step_fast_s"] - fast[(len(fast) - 1) // 2]) < 1e-12, x
assert abs(x["host_drift_pct"] - 100 * (x["measured_step_fast_s"] / x["step_fast_s"] - 1)) < 1e-6, x
assert abs(x["predicted_error_pct"] - 100 * (v["predicted"]["step_time_s"] / x["step_fast_s"] - 1)) < 1e-6, x
# An interleaved calibration is not made again: one in-sample figure, the prediction's.
assert len(v["calibration"]["in_sample_pct"]) == 1 and abs(v["calibration"]["in_sample_pct"][0] - x["predicted_error_pct"]) < 1e-6, v["calibration"]
# A prediction beyond 10 % from those executions is a warning (the calibration disagrees with
# itself), within it none.
assert any("from the calibration's own executions" in w for w in v["warnings"]) == (abs(x["predicted_error_pct"]) > 10), (x, v["warnings"])
# The reference's own reproducibility: even runs' per-op medians against the odd runs'.
half = v["execute"]["split_half_op_mape_pct"]
# With fewer than 4 runs there are no halves to compare: null, not a 0 that reads as "no noise".
assert (half is not None and half > 0) if runs >= 4 else (half is None), (half, runs)
assert v["execute"]["run_to_run_op_mape_pct"] >= 0 and v["execute"]["run_to_run_step_spread_pct"] >= 0, v["execute"]
PY
# The reference-noise warning is logged exactly when the halves differ beyond the op bar (15 %).
python3 - "$work/out.json" "$work/err.txt" <<'PY' || exit 1
import json, sys
v = json.load(open(sys.argv[1]))
half = v["execute"]["split_half_op_mape_pct"]
err = open(sys.argv[2]).read()
warned = "warning: the per-op medians of the even and the odd runs differ" in err
assert warned == (half is not None and half > 15.0), ("reference-noise warning", warned, half)
# The JSON carries every warning stderr had, and no other (a progress bar's escapes may lead a line).
def tail(line): return line[line.index("warning: "):].strip()
logged = [tail(l) for l in err.splitlines() if "warning: " in l]
assert sorted(tail(w) for w in v["warnings"]) == sorted(logged), (v["warnings"], logged)
assert any("per-op medians of the even and the odd" in w for w in v["warnings"]) == warned, v["warnings"]
# A class of communication at two speeds: a JSON entry and a warning each, 2x apart or more.
speeds = v["execute"]["comm_two_speeds"]
assert isinstance(speeds, list), speeds
for c in speeds:
    assert c["slow_us"] >= 2 * c["fast_us"] > 0 and c["fast_launches"] >= 2 and c["slow_launches"] >= 2, c
    assert c["ops_per_run"] >= 10, c
assert sum("ran at two speeds" in w for w in v["warnings"]) == len(speeds), (speeds, v["warnings"])
# Each class of collective the calibration executed, against these runs: a warning for each 2x apart.
x = v["calibration"].get("executed")
calls = x["calls"] if x else []
for c in calls:
    assert c["executed_us"] > 0 and c["measured_us"] > 0 and c["ops"] > 0, c
drift = [c for c in calls if c["measured_us"] >= 2 * c["executed_us"] or 2 * c["measured_us"] <= c["executed_us"]]
assert sum("changed speed since it was calibrated" in w for w in v["warnings"]) == len(drift), (calls, v["warnings"])
PY
ls "$work"/cache/calibration/*/cpu-np2-*.toml >/dev/null || { echo "no cached calibration"; exit 1; }
# The order on stderr: in-situ launch 1, runs, launch 2, runs, launch 3, runs, the measuring job, runs.
python3 - "$work/err.txt" <<'PY' || exit 1
import re, sys
events = []
for line in open(sys.argv[1]):
    if m := re.match(r"calibration: in-situ launch (\d) of 4", line): events.append("L" + m.group(1))
    elif line.startswith("calibration: the measuring job"): events.append("M")
    elif line.startswith("executing (launch"): events.append("r")
    elif line.startswith("simulated:"): events.append("S")
order = re.sub("r+", "r", "".join(events))
assert order == "L1rL2rL3rMrS", ("validate's calibration launches and runs interleave so: " + order, events)
PY
# 2 ranks on a host of 2 or more cores do not share cores: mpirun binds each to a core of its
# own, and the calibration counts the union of the ranks' affinities, not one rank's.
if [ "$(nproc)" -ge 2 ]; then
  cal=$(ls "$work"/cache/calibration/*/cpu-np2-*.toml | head -1)
  grep -Eq '^cores = ([2-9]|[1-9][0-9]+) ' "$cal" && ! grep -q 'ranks > .* cores' "$cal" || {
    echo "the calibration counts fewer cores than the host's $(nproc) for 2 ranks:"; grep -E '^cores|ranks >' "$cal"; exit 1; }
fi

"$paralab" validate "$scenario" --backend cpu --steps 1 --runs 4 "${shrink[@]}" >"$work/out2.txt" 2>"$work/err2.txt" || {
  echo "second validate failed:"; cat "$work/err2.txt"; exit 1; }
grep -q "(cached)" "$work/err2.txt" || { echo "the second run did not use the cache"; cat "$work/err2.txt"; exit 1; }
grep -q "step time   predicted" "$work/out2.txt" || { echo "no table"; cat "$work/out2.txt"; exit 1; }
grep -q "^host        the calibration executed this scenario at .* s per step (its fastest half's median; [0-9]*$" "$work/out2.txt" &&
  grep -Eq "^            executions in 4 launches, [0-9.e-]+ \.\. [0-9.e-]+ s, median [0-9.e-]+ s\); these runs " "$work/out2.txt" || {
  echo "no host drift line"; cat "$work/out2.txt"; exit 1; }
# Four runs: a fast half of 2, whose median is the fastest, compared alone (centred_fast_half).
grep -q "^compute     busy per rank .* predicted; measured .* (median of 2 ranks x compared runs" "$work/out2.txt" || {
  echo "no compute line for 2 ranks x the fastest 1 of 4 runs"; cat "$work/out2.txt"; exit 1; }
grep -q "^runs        4 executions in 4 launches, .* (the fastest compared, op by op)$" "$work/out2.txt" || {
  echo "no runs line comparing the fastest of 4"; cat "$work/out2.txt"; exit 1; }
# Four executions: how much they differ is reported, and real runs never agree on every op.
noise=$(sed -n 's/^noise       the executions differ from each other by \([0-9.]*\)% per op.*/\1/p' "$work/out2.txt")
[ -n "$noise" ] || { echo "no run-to-run noise line"; cat "$work/out2.txt"; exit 1; }
awk -v x="$noise" 'BEGIN { exit !(x > 0) }' || { echo "run-to-run op MAPE is $noise%, expected > 0"; cat "$work/out2.txt"; exit 1; }
half=$(sed -n 's/^reference   the per-op medians of the even and the odd runs differ by \([0-9.]*\)% (MAPE).*/\1/p' "$work/out2.txt")
[ -n "$half" ] || { echo "no split-half reference line"; cat "$work/out2.txt"; exit 1; }
awk -v x="$half" 'BEGIN { exit !(x > 0) }' || { echo "split-half op MAPE is $half%, expected > 0"; cat "$work/out2.txt"; exit 1; }
# --calibrate-first: the calibration is made first, then the executions; --in-situ-launches sets how
# many launches its executions spread over. By default each launch measures the steps that fit
# in 0.4 s after its warm-up, at most 8, each an execution with its own trace.
# --in-sample-bound 0: every calibration is at odds with its own executions, so the one made
# now is made again (the default --calibration-attempts 2) and the less at odds kept.
"$paralab" validate "$scenario" --backend cpu --quick-calibration --recalibrate --calibrate-first --in-situ-launches 2 --runs 3 --json \
  --in-sample-bound 0 --out-dir "$work/traces3" "${shrink[@]}" >"$work/out3.json" 2>"$work/err3.txt" || {
  echo "validate (calibrate first) failed:"; cat "$work/err3.txt"; exit 1; }
python3 - "$work/out3.json" "$work/err3.txt" "$work/traces3" "$PARALAB_CACHE_DIR" <<'PY' || exit 1
import glob, json, os, sys
v = json.load(open(sys.argv[1]))
x = v["calibration"]["executed"]
assert v["calibration"]["made_now"] and x["interleaved"] is False and x["launches"] == 2, x
err = open(sys.argv[2]).read()
# Two calibrations, the one kept the less at odds: its figure is the prediction's distance from
# the executions validate reports, and the log says when the earlier one was kept.
pcts = v["calibration"]["in_sample_pct"]
assert len(pcts) == 2 and err.count("calibrating again (2 of 2)") == 1, (pcts, err)
kept = min(pcts, key=abs)
assert abs(x["predicted_error_pct"] - kept) < 1e-6, (x, pcts)
assert ("the earlier one is less at odds" in err) == (abs(pcts[0]) <= abs(pcts[1])), (pcts, err)
assert any("from the calibration's own executions" in w and "beyond 0%" in w for w in v["warnings"]), v["warnings"]
# The cache holds the kept file alone: no attempt's file left beside it.
cached = glob.glob(os.path.join(sys.argv[4], "calibration", "*", "*"))
assert os.path.abspath(v["calibration"]["file"]) in map(os.path.abspath, cached), (cached, v["calibration"])
assert not [f for f in cached if f.endswith(".again.toml")], cached
assert "in-situ launch 1 of 4" not in err and err.index("calibrating") < err.index("executing (launch 1 of 3)"), err
e = v["execute"]
runs, launch = e["runs"], e["runs_launch"]
assert e["launches"] == 3 and 3 <= runs <= 24 and len(launch) == runs == len(e["runs_step_time_s"]), e
assert launch == sorted(launch) and set(launch) == {0, 1, 2} and max(launch.count(l) for l in range(3)) <= 8, launch
assert "--steps 8 --measure 0.4" in e["command"], e["command"]
# Every execution's trace under its own name, no launch's left behind.
names = sorted(os.listdir(sys.argv[3]))
assert all(os.path.isfile("%s/measured-%d.json" % (sys.argv[3], k)) for k in range(runs)), names
assert not os.path.exists("%s/measured-%d.json" % (sys.argv[3], runs)) and not [n for n in names if n.startswith("launch-")], names
steps = e["runs_step_time_s"]
fast = sorted(steps)[:(runs + 1) // 2]
assert abs(v["measured"]["step_time_s"] - fast[(len(fast) - 1) // 2]) < 1e-12, (v["measured"]["step_time_s"], fast)
# Its launch's summary, with the compared step's figures.
assert "warmup_steps" in v["measured"] and "loss" in v["measured"], sorted(v["measured"])
# Three launches: halves by launch (even against odd) when there are at least 4 executions.
half = e["split_half_op_mape_pct"]
assert (half is not None and half > 0) if runs >= 4 else half is None, (half, runs)
PY
echo "validate smoke: ok"
