#!/bin/bash
# compare_roundtrip.sh PARALAB SCENARIO NP DIR MPIRUN...
# Simulates and executes SCENARIO, then compares the two traces: the measured trace must join
# the predicted one op by op (same op ids), and both summaries must carry the DESIGN.md fields.
set -eu
paralab=$1 scenario=$2 np=$3 dir=$4
shift 4
mkdir -p "$dir"
rm -f "$dir"/*.json
"$paralab" simulate "$scenario" --trace "$dir/predicted.json" > /dev/null
"$@" -np "$np" "$paralab" execute "$scenario" --backend cpu --trace "$dir/measured.json" --json > "$dir/measured-summary.json"
"$paralab" compare "$dir/predicted.json" "$dir/measured.json" --json > "$dir/compare.json"
for key in step_time_s tokens_per_s model_tflops_per_gpu hardware_tflops_per_gpu mfu bubble_fraction \
           peak_memory_gib fits_in_memory breakdown events world_size; do
  grep -q "\"$key\"" "$dir/measured-summary.json" || { echo "measured summary lacks $key"; exit 1; }
done
grep -q '"kind": "measured"' "$dir/measured-summary.json" || { echo "not a measured summary"; exit 1; }
grep -q '"per_op": true' "$dir/compare.json" || { echo "compare did not join per op"; cat "$dir/compare.json"; exit 1; }
joined=$(grep -o '"ops_joined": [0-9]*' "$dir/compare.json" | grep -o '[0-9]*$')
[ "${joined:-0}" -gt 0 ] || { echo "no ops joined"; cat "$dir/compare.json"; exit 1; }
echo "ok: $joined ops joined; $(grep -o '"step_time_error_pct": [-0-9.e+]*' "$dir/compare.json")"
