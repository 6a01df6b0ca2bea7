#!/bin/bash
# layout_invariance.sh PARALAB SCENARIO TOL -- MPIRUN...
# Every layout of a scenario trains the same model on the same data (exec/fill.hpp), so with
# dropout off its loss is the same on every layout up to fp32 rounding. Runs SCENARIO on one
# rank and on the layouts below (tensor and sequence parallelism, pipelines with every
# schedule, context parallelism, data parallelism with each ZeRO stage, recomputation, unfused
# attention) and fails if any loss differs from the one-rank loss by more than TOL (relative).
# Extra arguments for every run come from $LAYOUT_EXTRA: with `--steps 2` the measured loss is
# the second step's, after the first step's backward pass, gradient reductions and optimizer
# update (use SGD without clipping: its first step does not depend on optimizer state, which
# lives in layout-dependent buckets, nor on the gradient norm, whose IR accounting counts
# replicated parameters once per tensor rank).
# Not listed: sequence parallelism with ZeRO-2/3 — the IR omits the tensor-parallel all-reduce
# of replicated parameters' gradients there (ir/param_store.cpp: emit_replicated_grad_reduce),
# so their gradients are partial and the second step's loss differs (docs/executor.md).
set -u
paralab=$1 scenario=$2 tol=$3
shift 3
[ "$1" = "--" ] && shift
common="--set model.hidden_dropout=0 --set model.attention_dropout=0 ${LAYOUT_EXTRA:-}"
run() {  # run NP SETS... -> prints the loss
  local np=$1
  shift
  local out
  if [ "$np" = 1 ]; then
    out=$("$paralab" execute "$scenario" --json $common --set cluster.devices_per_node=1 "$@" 2>&1)
  else
    out=$("${mpirun[@]}" -np "$np" "$paralab" execute "$scenario" --json $common \
          --set cluster.devices_per_node="$np" "$@" 2>&1)
  fi
  local loss
  loss=$(echo "$out" | grep -o '"loss": [-0-9.e+]*' | head -1 | awk '{print $2}')
  if [ -z "$loss" ]; then
    echo "FAIL: no loss from: $np ranks $*" >&2
    echo "$out" | tail -20 >&2
    echo "nan"
    return
  fi
  echo "$loss"
}
mpirun=("$@")
layouts=(
  "1|--set parallel.tensor=1 --set parallel.pipeline=1 --set parallel.context=1 --set parallel.data=1"
  "2|--set parallel.tensor=2 --set parallel.pipeline=1 --set parallel.context=1 --set parallel.data=1 --set parallel.sequence_parallel=true"
  "2|--set parallel.tensor=2 --set parallel.pipeline=1 --set parallel.context=1 --set parallel.data=1 --set parallel.sequence_parallel=false --set training.attention=unfused"
  "2|--set parallel.tensor=1 --set parallel.pipeline=2 --set parallel.context=1 --set parallel.data=1 --set parallel.schedule=gpipe"
  "2|--set parallel.tensor=1 --set parallel.pipeline=2 --set parallel.context=1 --set parallel.data=1 --set training.recompute=full"
  "2|--set parallel.tensor=1 --set parallel.pipeline=1 --set parallel.context=2 --set parallel.data=1"
  "2|--set parallel.tensor=1 --set parallel.pipeline=1 --set parallel.context=1 --set parallel.data=2 --set parallel.zero_stage=1"
  "2|--set parallel.tensor=1 --set parallel.pipeline=1 --set parallel.context=1 --set parallel.data=2 --set parallel.zero_stage=3"
  "4|--set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.context=1 --set parallel.data=1 --set parallel.sequence_parallel=false"
  "4|--set parallel.tensor=1 --set parallel.pipeline=4 --set parallel.context=1 --set parallel.data=1 --set parallel.schedule=interleaved --set parallel.virtual_pipeline_stages=2"
  "4|--set parallel.tensor=2 --set parallel.pipeline=1 --set parallel.context=1 --set parallel.data=2 --set parallel.sequence_parallel=true --set parallel.zero_stage=1"
  "4|--set parallel.tensor=2 --set parallel.pipeline=1 --set parallel.context=1 --set parallel.data=2 --set parallel.sequence_parallel=false --set parallel.zero_stage=2"
  "4|--set parallel.tensor=2 --set parallel.pipeline=1 --set parallel.context=2 --set parallel.data=1 --set parallel.sequence_parallel=true"
)
ref=""
status=0
for l in "${layouts[@]}"; do
  np=${l%%|*}
  sets=${l#*|}
  # shellcheck disable=SC2086
  loss=$(run "$np" $sets)
  if [ -z "$ref" ]; then
    ref=$loss
    [[ "$ref" =~ ^-?[0-9] ]] || { echo "FAIL: no reference loss"; exit 1; }
    printf "%-8s %s ranks  (reference)  %s\n" "$loss" "$np" "$sets"
    continue
  fi
  ok=$(awk -v a="$loss" -v b="$ref" -v t="$tol" 'BEGIN { if (a !~ /^-?[0-9]/ || b !~ /^-?[0-9]/) { print "FAILED"; exit }
                                                        d = a - b; if (d < 0) d = -d; print (d <= t * (b < 0 ? -b : b)) ? "ok" : "DIFFERS" }')
  printf "%-8s %s ranks  %-8s %s\n" "$loss" "$np" "$ok" "$sets"
  [ "$ok" = ok ] || status=1
done
exit $status
