#!/bin/bash
# variation_cli.sh PARALAB SOURCE_DIR: simulate's per-rank options end to end. A straggler is
# priced against the cluster without it (and at 2x and 4x the replicas), --samples reports
# ordered percentiles and the same numbers for 1 and 2 threads, and bad flags are usage errors.
set -u
paralab=$1 src=$2
scn=$src/bench/sim/straggler/gpt-1.7b-16.toml
fail() { echo "FAIL: $*"; exit 1; }
out=$("$paralab" simulate "$scn" --slow-rank 5 --slowdown 1.3 --growth --json) || fail "straggler run"
python3 - "$out" <<'PY' || fail "straggler JSON"
import json, sys
j = json.loads(sys.argv[1])
assert j["step_time_s"] > j["without_stragglers_step_time_s"] > 0, j
assert abs(j["straggler_cost_s"] - (j["step_time_s"] - j["without_stragglers_step_time_s"])) < 1e-12
g = j["straggler_growth"]
assert [x["replicas_factor"] for x in g] == [2, 4] and [x["gpus"] for x in g] == [32, 64], g
assert all(x["step_time_s"] > x["without_stragglers_step_time_s"] for x in g), g
assert j["simulated_ranks"] > 2 and j["simulated_ranks"] < 16, j["simulated_ranks"]
PY
a=$("$paralab" simulate "$scn" --set variation.gpu_speed_cv=0.05 --samples 5 --threads 1 --json) || fail "samples, 1 thread"
b=$("$paralab" simulate "$scn" --set variation.gpu_speed_cv=0.05 --samples 5 --threads 2 --json) || fail "samples, 2 threads"
python3 - "$a" "$b" <<'PY' || fail "samples JSON"
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
keys = ["samples", "step_time_p50_s", "step_time_p90_s", "step_time_p99_s", "mean_mfu", "critical_ranks"]
for k in keys:
    assert a[k] == b[k], (k, a[k], b[k])
assert a["samples"] == 5
assert a["step_time_p50_s"] <= a["step_time_p90_s"] <= a["step_time_p99_s"]
assert sum(c["samples"] for c in a["critical_ranks"]) == 5
PY
for bad in "--slow-rank 5" "--slowdown 2" "--slow-rank 99 --slowdown 2" "--slow-rank 1 --slowdown 0.5" "--samples 0" "--samples 2.5" "--growth"; do
  # shellcheck disable=SC2086
  "$paralab" simulate "$scn" $bad > /dev/null 2>&1
  [ $? -eq 2 ] || fail "'$bad' is not a usage error"
done
echo "ok"
