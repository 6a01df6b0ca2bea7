#!/bin/bash
# trace_steps.sh PARALAB SCENARIO DIR MPIRUN...
# `execute --trace-steps PREFIX` writes one trace per step after the warm-up (PREFIX-0.json ...),
# each its own step: its step time is the one the summary lists for it, the last is the
# `--trace` file, and every one joins the prediction op by op. `--measure S` stops the steps
# once S seconds have passed (at least one, at most --steps), and needs --steps.
set -eu
paralab=$1 scenario=$2 dir=$3
shift 3
rm -rf "$dir"
mkdir -p "$dir"
shrink=(--set model.num_layers=2 --set training.global_batch_size=2)
"$paralab" simulate "$scenario" "${shrink[@]}" --trace "$dir/predicted.json" >/dev/null
"$@" -np 2 "$paralab" execute "$scenario" "${shrink[@]}" --steps 3 --warmup 0.05 --trace-steps "$dir/s" \
  --trace "$dir/last.json" --json >"$dir/summary.json"
for k in 0 1 2; do
  "$paralab" compare "$dir/predicted.json" "$dir/s-$k.json" --json >"$dir/cmp-$k.json" || { echo "step $k's trace does not join"; exit 1; }
done
[ ! -e "$dir/s-3.json" ] || { echo "a fourth trace for three steps"; ls "$dir"; exit 1; }
python3 - "$dir" <<'PY' || exit 1
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
w, steps = s["warmup_steps"], s["step_times_s"]
assert w >= 1 and len(steps) == w + 3, (w, steps)
ops = []
for k in range(3):
    t = json.load(open("%s/s-%d.json" % (d, k)))
    p = t["otherData"]["paralab"]
    assert abs(p["step_time_s"] - steps[w + k]) < 1e-9, (k, p["step_time_s"], steps)
    x = sorted((e["pid"], e["args"]["op_id"], e["ts"], e["dur"]) for e in t["traceEvents"] if e.get("ph") == "X")
    assert x, "step %d has no ops" % k
    c = json.load(open("%s/cmp-%d.json" % (d, k)))
    assert c["per_op"] and c["ops_joined"] == len(x), (k, c["ops_joined"], len(x))
    ops.append(x)
# Each its own step (each on its own time origin): no two are the same measurement.
assert ops[0] != ops[1] and ops[1] != ops[2] and ops[0] != ops[2], "two steps' traces are identical"
last = json.load(open(d + "/last.json"))
assert sorted((e["pid"], e["args"]["op_id"], e["ts"], e["dur"]) for e in last["traceEvents"] if e.get("ph") == "X") == ops[2], \
    "--trace's step is not the last of --trace-steps"
PY
# A window shorter than any step: one step after the warm-up; a long one: all of --steps.
"$@" -np 2 "$paralab" execute "$scenario" "${shrink[@]}" --steps 50 --measure 0.0001 --warmup 0.05 --json >"$dir/short.json"
"$@" -np 2 "$paralab" execute "$scenario" "${shrink[@]}" --steps 3 --measure 600 --warmup 0.05 --json >"$dir/long.json"
python3 - "$dir" <<'PY' || exit 1
import json, sys
for name, want in (("short", 1), ("long", 3)):
    s = json.load(open("%s/%s.json" % (sys.argv[1], name)))
    got = len(s["step_times_s"]) - s["warmup_steps"]
    assert got == want, (name, got, want)
PY
# Usage errors: exit 2, naming the option.
set +e
out=$("$paralab" execute "$scenario" --measure 1 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--measure needs --steps" <<<"$out" || { echo "--measure without --steps: exit $rc: $out"; exit 1; }
out=$("$paralab" execute "$scenario" --steps 2 --measure -1 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--measure" <<<"$out" || { echo "--measure -1: exit $rc: $out"; exit 1; }
echo "ok: 3 step traces, each its own step; --measure bounds the steps"
