#!/bin/bash
# schedule_bubble.sh PARALAB SCENARIO DIR MPIRUN...
# The zero-bubble schedule executed for real: scenarios/cpu-pp2-zb.toml runs in ZB-H1 and in
# 1F1B on 2 ranks; each run's timeline joins its prediction op by op (compare, with a report),
# and ZB-H1's bubble (time a stage waits on its pipeline peer, from the executed timelines, as
# the breakdown defines it; the median of five traced steps) is below 1F1B's, measured and
# predicted. The predicted gap is about
# 10 points of the step (Qi et al.: (p-1)(F+B-W) against (p-1)(F+B+W)); the test asks only the
# order, which host noise does not reverse.
set -eu
paralab=$1 scenario=$2 dir=$3
shift 3
rm -rf "$dir"
mkdir -p "$dir"
for s in zb-h1 1f1b; do
  "$paralab" simulate "$scenario" --set parallel.schedule=$s --trace "$dir/$s-predicted.json" >/dev/null
  "$@" -np 2 "$paralab" execute "$scenario" --set parallel.schedule=$s --steps 5 --watchdog 60 \
    --trace-steps "$dir/$s-step" --trace "$dir/$s-measured.json" --json >"$dir/$s-summary.json"
  "$paralab" compare "$dir/$s-predicted.json" "$dir/$s-measured.json" --json --report "$dir/$s-report.html" \
    >"$dir/$s-compare.json" || { echo "$s: the executed timeline does not join its prediction"; exit 1; }
  for k in 0 1 2 3 4; do
    "$paralab" compare "$dir/$s-predicted.json" "$dir/$s-step-$k.json" --json >"$dir/$s-compare-$k.json" ||
      { echo "$s: step $k's timeline does not join its prediction"; exit 1; }
  done
done
python3 - "$dir" <<'PY' || exit 1
import json, sys
d = sys.argv[1]
b = {}
for s in ("zb-h1", "1f1b"):
    c = json.load(open("%s/%s-compare.json" % (d, s)))
    assert c["per_op"] and c["ops_joined"] > 0, (s, c.get("ops_joined"))
    # Measured: the median over the five traced steps (one step can be a noisy one).
    steps = sorted(json.load(open("%s/%s-compare-%d.json" % (d, s, k)))["bubble_fraction"]["measured"] for k in range(5))
    b[s] = {"predicted": c["bubble_fraction"]["predicted"], "measured": steps[2]}
    print("%-6s bubble predicted %.1f %%, measured %.1f %% (median of %s)" %
          (s, 100 * b[s]["predicted"], 100 * b[s]["measured"], ", ".join("%.1f" % (100 * x) for x in steps)))
for k in ("predicted", "measured"):
    assert b["zb-h1"][k] < b["1f1b"][k], "%s: ZB-H1's bubble %.3f is not below 1F1B's %.3f" % (k, b["zb-h1"][k], b["1f1b"][k])
# The report draws ZB-H1's split backward: B and W passes coloured apart.
html = open(d + "/zb-h1-report.html").read()
assert '"W weight gradient"' in html and '"B input gradient"' in html, "the report does not name F, B and W"
PY
