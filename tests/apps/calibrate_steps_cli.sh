#!/bin/bash
# calibrate_steps_cli.sh PARALAB SOURCE_DIR: `paralab calibrate --from-step-time` end to end. Two
# runs of a TP8 x DP2 GPT on two DGX A100 nodes, "measured" 1.25x and 1.4x their simulation
# (different compute / communication mixes), are fitted; the written topology loads and
# simulates each run to its measured step; one run fits one term and names the rest; bad input
# exits 2 naming file, line and key.
set -u
paralab=$1 src=$2
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
fail=0
cat > "$work/gpt.toml" <<'TOML'
[model]
num_layers = 4
hidden_size = 2048
num_attention_heads = 16
ffn_hidden_size = 8192
vocab_size = 32000
seq_length = 2048
[training]
global_batch_size = 16
micro_batch_size = 1
precision = "bf16"
[parallel]
tensor = 8
pipeline = 1
data = 2
[cluster]
topology = "dgx-a100"
nodes = 2
TOML
step() { "$paralab" simulate "$work/gpt.toml" "$@" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["step_time_s"])'; }
a=$(step) b=$(step --set training.global_batch_size=2)
ma=$(python3 -c "print($a * 1.25)") mb=$(python3 -c "print($b * 1.4)")
cat > "$work/runs.toml" <<TOML
[[run]]
label = "gbs16"
scenario = "gpt.toml"
step_time_s = $ma
[[run]]
label = "gbs2"
scenario = "gpt.toml"
set = "training.global_batch_size=2"
step_time_s = $mb
TOML
if ! "$paralab" calibrate --from-step-time "$work/runs.toml" --out "$work/fitted.toml" > "$work/out.txt" 2>&1; then
  echo "FAIL: calibrate --from-step-time: $(cat "$work/out.txt")"; exit 1
fi
grep -q "^fitted      compute" "$work/out.txt" || { echo "FAIL: no compute term: $(cat "$work/out.txt")"; fail=1; }
grep -q "^fitted      communication" "$work/out.txt" || { echo "FAIL: no communication term: $(cat "$work/out.txt")"; fail=1; }
grep -q "^not fitted  dispatch.*needs more runs" "$work/out.txt" || { echo "FAIL: dispatch not explained: $(cat "$work/out.txt")"; fail=1; }
fa=$(step --set cluster.topology="$work/fitted.toml") fb=$(step --set training.global_batch_size=2 --set cluster.topology="$work/fitted.toml")
python3 - "$fa" "$ma" "$fb" "$mb" <<'PY' || fail=1
import sys
fa, ma, fb, mb = map(float, sys.argv[1:])
for got, want, name in ((fa, ma, "gbs16"), (fb, mb, "gbs2")):
    if abs(got / want - 1) > 1e-3:
        print("FAIL: %s simulates to %.6g s with the fitted topology, measured %.6g s" % (name, got, want)); sys.exit(1)
PY
# One run: one term, the others named.
head -4 "$work/runs.toml" > "$work/one.toml"
"$paralab" calibrate --from-step-time "$work/one.toml" --out "$work/one-fit.toml" --json > "$work/one.json" || { echo "FAIL: one run"; fail=1; }
python3 - "$work/one.json" <<'PY' || fail=1
import json, sys
t = {x["name"]: x for x in json.load(open(sys.argv[1]))["terms"]}
assert t["compute"]["fitted"] and not t["communication"]["fitted"], t
assert "needs more runs" in t["communication"]["why_not"], t
PY
# Bad input: a run without its step time; no --out.
printf '[[run]]\nscenario = "gpt.toml"\n' > "$work/bad.toml"
"$paralab" calibrate --from-step-time "$work/bad.toml" --out "$work/x.toml" 2> "$work/bad.err"
rc=$?
{ [ $rc -eq 2 ] && grep -q "bad.toml:[0-9]*: run.step_time_s: required key is missing" "$work/bad.err"; } || { echo "FAIL: missing step time: rc $rc, $(cat "$work/bad.err")"; fail=1; }
"$paralab" calibrate --from-step-time "$work/runs.toml" 2> "$work/noout.err"
rc=$?
{ [ $rc -eq 2 ] && grep -q -- "--out FILE is required" "$work/noout.err"; } || { echo "FAIL: no --out: rc $rc, $(cat "$work/noout.err")"; fail=1; }
[ $fail -eq 0 ] && echo "calibrate --from-step-time: ok"
exit $fail
