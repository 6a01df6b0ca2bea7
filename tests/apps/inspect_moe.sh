#!/bin/bash
# inspect_moe.sh PARALAB SOURCE_DIR: `inspect` of mixture-of-experts presets prints their
# parameter counts, expert groups, routing imbalance and model FLOPs (table and --json); the
# commands that need step ops refuse such a model, naming the key.
set -u
paralab=$1 src=$2
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

scenario() {  # scenario PRESET EXTRA -> a file on 64 H100s
  printf '[model]\npreset = "%s"\n[training]\nglobal_batch_size = 512\n[parallel]\n%s\n[cluster]\ntopology = "dgx-h100"\nnodes = 8\n' \
    "$1" "$2" > "$work/$1.toml"
  echo "$work/$1.toml"
}

ds=$(scenario deepseek-v3 "expert = 64")
"$paralab" inspect "$ds" > "$work/ds.txt" 2>&1 || { cat "$work/ds.txt"; fail "inspect deepseek-v3"; }
grep -q "^parameters 671.03 B total, 37.55 B active per token, 11.61 B in 1 MTP module" "$work/ds.txt" ||
  { cat "$work/ds.txt"; fail "DeepSeek-V3's parameter line"; }
grep -q "EP64 ETP1 EDP1 .* experts per rank: 4" "$work/ds.txt" || { cat "$work/ds.txt"; fail "the expert groups"; }
"$paralab" inspect "$ds" --json --set model.moe_routing=zipf > "$work/ds.json" || fail "inspect --json"
python3 - "$work/ds.json" <<'PY' || fail "inspect --json of DeepSeek-V3"
import json, sys
j = json.load(open(sys.argv[1]))
assert abs(j["parameters_total"] / 671e9 - 1) < 0.01, j["parameters_total"]
assert abs(j["parameters_active"] / 37e9 - 1) < 0.02, j["parameters_active"]
assert j["parameters_mtp"] > 0
e = j["experts"]
assert (e["num_experts"], e["moe_router_topk"], e["moe_layers"], e["expert"]) == (256, 8, 58, 64), e
assert e["routing"]["model"] == "zipf" and e["routing"]["ep_rank_max_over_mean"] > 1.5, e["routing"]
assert 2.7e11 < j["model_flops_per_token"] < 2.9e11, j["model_flops_per_token"]
PY

mx=$(scenario mixtral-8x7b "expert = 8")
for cmd in simulate plan; do
  if "$paralab" $cmd "$mx" > "$work/$cmd.out" 2>&1; then fail "$cmd accepted a mixture of experts"; fi
  grep -q "model.num_experts = 8: mixture-of-experts layers .* not generated yet" "$work/$cmd.out" ||
    { cat "$work/$cmd.out"; fail "$cmd's refusal does not name model.num_experts"; }
done
if "$paralab" inspect "$mx" --dump-ir "$work/ir.json" > "$work/dump.out" 2>&1; then fail "inspect --dump-ir of MoE"; fi
grep -q "model.num_experts" "$work/dump.out" || fail "--dump-ir's refusal does not name the key"
# A bad expert layout is refused at load, naming the key and what is allowed.
if "$paralab" inspect "$mx" --set parallel.expert=3 > "$work/bad.out" 2>&1; then fail "EP 3 of 8 experts accepted"; fi
grep -q "parallel.expert = 3: does not divide model.num_experts (8)" "$work/bad.out" || { cat "$work/bad.out"; fail "EP error"; }
echo "ok: MoE presets inspected, step commands refuse them"
