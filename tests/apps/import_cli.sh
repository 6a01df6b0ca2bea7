#!/bin/bash
# import_cli.sh PARALAB SOURCE_DIR: `paralab import` on the public example files of
# tests/data/import/ (README.md there names their sources): every converted scenario loads in
# `paralab inspect` with the source's layout and size; what was not converted is named on
# stderr and at the top of the written file; bad input exits 2 naming file, line and argument.
set -u
paralab=$1 src=$2
data=$src/tests/data/import
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
fail=0
# convert NAME EXPECT ARGS...: import ARGS into NAME.toml, then `inspect` it; EXPECT is in its table.
convert() {
  local name=$1 expect=$2
  shift 2
  local tool=$1
  shift
  if ! "$paralab" import "$tool" --out "$work/$name.toml" "$@" 2> "$work/$name.err"; then
    echo "FAIL: import $tool $* -> $(cat "$work/$name.err")"
    fail=1
    return
  fi
  local out
  out=$("$paralab" inspect "$work/$name.toml" 2>&1)
  if [ $? -ne 0 ] || ! grep -q -- "$expect" <<< "$out"; then
    echo "FAIL: inspect $name.toml (want '$expect'): $out"
    fail=1
  elif ! grep -q "^# Converted by \`paralab import" "$work/$name.toml"; then
    echo "FAIL: $name.toml has no header"
    fail=1
  else
    echo "ok: $name -> $expect"
  fi
}
convert gpt3-175b "TP8 PP16 CP1 DP12" megatron --file "$data/train_gpt3_175b_distributed.sh" --gpus 1536
convert llama3-8b "TP1 PP1 CP1 DP8" megatron --file "$data/train_llama3_8b_h100_fp8.sh"
convert mixtral "parameters 46.70 B total, 12.88 B active" megatron --file "$data/train_mixtral_8x7b_distributed.sh" --gpus 32
# On the script's own node of 8, PP4 leaves 2 ranks per stage for EP8: refused at the script's line.
if "$paralab" import megatron --file "$data/train_mixtral_8x7b_distributed.sh" --out "$work/mixtral-8.toml" 2> "$work/mixtral-8.err"; then
  echo "FAIL: EP8 on 2 ranks per stage was imported"; fail=1
elif ! grep -q "train_mixtral_8x7b_distributed.sh:85: --expert-model-parallel-size = 8: .*does not divide a pipeline stage's ranks" "$work/mixtral-8.err"; then
  echo "FAIL: the EP error does not name the script's line: $(cat "$work/mixtral-8.err")"; fail=1
fi
convert nemo-175b "TP4 PP8 CP1 DP32  (v=6, interleaved, ZeRO-1" nemo "$data/nemo_launcher_gpt3_175b.yaml"
convert nemo-gpt "parameters 124 M" nemo "$data/megatron_gpt_config.yaml"
convert args "TP2 PP1 CP1 DP4" megatron --gpus 8 -- --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \
  --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 256 \
  --tensor-model-parallel-size 2 --sequence-parallel --bf16 --vocab-size 50257 --num-experts 8

# What was not converted: on stderr and in the file.
grep -q -- "--save-interval, --save, --load" "$work/gpt3-175b.err" || { echo "FAIL: ignored arguments not on stderr"; fail=1; }
grep -q -- "^#     --save-interval, --save, --load" "$work/gpt3-175b.toml" || { echo "FAIL: ignored arguments not in the file"; fail=1; }
grep -q "^num_experts = 8 .*# --num-experts 8 (the command line)" "$work/args.toml" ||
  { echo "FAIL: --num-experts not converted"; fail=1; }
grep -q "^num_layers = 96 .*# --num-layers 96 (.*train_gpt3_175b_distributed.sh:29)" "$work/gpt3-175b.toml" ||
  { echo "FAIL: a key without its origin"; fail=1; }
# Without --out the scenario goes to stdout.
"$paralab" import nemo "$data/megatron_gpt_config.yaml" 2>/dev/null > "$work/stdout.toml" &&
  "$paralab" inspect "$work/stdout.toml" > /dev/null || { echo "FAIL: import to stdout"; fail=1; }

# bad CODE PATTERN ARGS...: import ARGS exits CODE with PATTERN on stderr and writes nothing.
bad() {
  local code=$1 pattern=$2
  shift 2
  local err rc
  err=$("$paralab" import "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -q -- "$pattern" <<< "$err"; then
    echo "FAIL: import $* -> exit $rc (want $code, '$pattern'): $err"
    fail=1
  else
    echo "ok: $rc: $err" | head -1
  fi
}
bad 2 "train_gpt3_175b_distributed.sh:57: --pipeline-model-parallel-size = 16: .*does not divide the run's 8 GPUs" \
  megatron --file "$data/train_gpt3_175b_distributed.sh"
bad 2 "NeMo 2.0 and Megatron-Bridge recipes are Python programs" nemo "$work/recipe.py"
bad 2 "unknown tool 'deepspeed'" deepspeed x.json
bad 2 "--out $work/none/x.toml: its folder" nemo "$data/megatron_gpt_config.yaml" --out "$work/none/x.toml"
bad 2 "the command line: --num-layers = x: expected an integer" megatron --num-layers x
printf 'model:\n  num_layers: 4\n    hidden_size: 8\n' > "$work/broken.yaml"
bad 2 "broken.yaml:3:.*YAML syntax error" nemo "$work/broken.yaml"
[ -e "$work/none" ] && { echo "FAIL: wrote into a missing folder"; fail=1; }
exit $fail
