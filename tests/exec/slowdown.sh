#!/bin/bash
# slowdown.sh PARALAB SCENARIO SLOW_RANK FACTOR DIR -- MPIRUN...
# `execute --slow-rank R --slowdown F` on a 2-rank scenario under mpirun: the run verifies
# (--verify), rank R made the extra runs its plan says (> 0) and the other rank none, and the
# second step's loss (after the first step's accumulated gradients, reductions and update) is
# bit for bit the unslowed run's: the extra runs change no result. Nothing here times anything.
set -eu
paralab=$1 scenario=$2 slow=$3 factor=$4 dir=$5
shift 5
[ "$1" = "--" ] && shift
rm -rf "$dir"
mkdir -p "$dir"
common=(--steps 2 --json --watchdog 60)
"$@" -np 2 "$paralab" execute "$scenario" "${common[@]}" >"$dir/base.json"
"$@" -np 2 "$paralab" execute "$scenario" "${common[@]}" --verify --slow-rank "$slow" --slowdown "$factor" \
  >"$dir/slow.json"
python3 - "$dir" "$slow" "$factor" <<'PY'
import json, sys
d, slow, factor = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
base = json.load(open(d + "/base.json"))
s = json.load(open(d + "/slow.json"))
assert s["verify"]["passed"], s["verify"]
assert s["slowdown"] == {"rank": slow, "factor": factor}, s.get("slowdown")
assert "slowdown" not in base
extra = {r["rank"]: r["extra_runs"] for r in s["ranks"]}
assert extra[slow] > 0 and all(n == 0 for r, n in extra.items() if r != slow), extra
ops = {r["rank"]: r["ops_run"] for r in s["ranks"]}
# Every compute op of the slowed rank ran floor(F) times at least: its extra runs are that many
# per op beyond the first, at most ops_run * (ceil(F) - 1).
assert extra[slow] <= ops[slow] * (int(factor + 0.999999) - 1), (extra, ops)
assert s["loss"] == base["loss"], (s["loss"], base["loss"])
print("ok: rank %d made %d extra runs (%d ops); loss %.9g in both runs; verify passed" % (slow, extra[slow], ops[slow], s["loss"]))
PY
