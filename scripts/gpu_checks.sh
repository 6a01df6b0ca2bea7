#!/usr/bin/env bash
# paralab — every check that needs a GPU, in one command (docs/cuda_backend.md):
#   [gpu] tests of kernels/ and of the cuda backend, a single-GPU `paralab execute --backend cuda`
#   of scenarios/gpu-1.toml (summary, trace, simulation and compare), short copies of gpu-1,
#   gpu-1-llama, gpu-1-fp8, gpu-1-fp16, gpu-1-offload and the quickstart on one GPU with --verify, `paralab
#   validate --backend cuda` of the single-GPU scenarios (issue #7's 5 % bar; it calibrates the
#   GPU first), the kernels' bandwidth bench (vs device copy, goal >= 70 %),
#   the backend's GEMM bench (vs cuBLAS alone, goal >= 95 %) and compute-sanitizer last (slowest).
# Every check runs under `timeout ${CHECK_TIMEOUT:-300}`, so one hang costs one check, not the lease;
# ONLY="tests_exec_cuda_cpu gpu_tests_kernels ..." runs just the named checks.
# Results (logs, JSON, summary.md) go to bench/results/gpu/ or --out DIR.
#
#   bash scripts/gpu_checks.sh                      # build in build-gpu/ here and run (needs a GPU)
#   bash scripts/gpu_checks.sh --bundle-only        # build here (no GPU needed), pack .gpubundle/
#   bash scripts/gpu_checks.sh --bundle .gpubundle [--out DIR]   # run from a bundle (no build tools)
#
# The bundle route is for machines that cannot build paralab (no package registry): the
# binaries are built on a machine that can, with MPI off (the lent machines have none; --gpus
# covers several GPUs), and run against the CUDA, cuBLAS and NCCL libraries of the GPU machine.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

BUILD_DIR=${BUILD_DIR:-build-gpu}
OUT_DIR=""
BUNDLE=""
BUNDLE_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) BUNDLE=$2; shift 2 ;;
    --bundle-only) BUNDLE_ONLY=1; shift ;;
    --out) OUT_DIR=$2; shift 2 ;;
    *) echo "usage: $0 [--bundle-only | --bundle DIR] [--out DIR]"; exit 2 ;;
  esac
done
if [ -n "$BUNDLE" ]; then BUNDLE=$(cd "$BUNDLE" && pwd) || { echo "gpu_checks: no bundle $BUNDLE"; exit 2; }; fi
RESULTS=${OUT_DIR:-$ROOT/bench/results/gpu}
# Binaries built elsewhere find the scenarios, presets and topologies of this checkout.
export PARALAB_DATA_DIR=$ROOT PARALAB_SOURCE_DIR=$ROOT
TARGETS="paralab paralab_cuda_backend paralab_gpu_tests_kernels paralab_gpu_tests_exec_cuda paralab_tests_exec_cuda paralab_bench_kernels paralab_bench_exec_cuda paralab_fp8_probe"

build() {
  local arch=${CUDA_ARCH:-}
  if [ -z "$arch" ] && command -v nvidia-smi >/dev/null 2>&1; then
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
  fi
  arch=${arch:-90}
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
        -DPARALAB_WITH_MPI=OFF -DPARALAB_EXEC_NATIVE=OFF || return 1
  cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target $TARGETS || return 1
}

bin() {  # path of a built executable, from the bundle or the build tree
  local name=$1
  if [ -n "$BUNDLE" ]; then echo "$BUNDLE/bin/$name"; return; fi
  find "$BUILD_DIR" -type f -name "$name" -perm -u+x | head -1
}

if [ "$BUNDLE_ONLY" = 1 ]; then
  build || { echo "gpu_checks: build failed"; exit 1; }
  rm -rf .gpubundle && mkdir -p .gpubundle/bin .gpubundle/lib
  for t in $TARGETS; do
    [ "$t" = paralab_cuda_backend ] && continue  # a plugin, below
    f=$(bin "$t")
    [ -n "$f" ] || { echo "gpu_checks: $t not built"; exit 1; }
    cp "$f" .gpubundle/bin/ && strip .gpubundle/bin/"$t"
  done
  # The CUDA backend plugin, beside the binary that loads it (docs/cuda_backend.md, "Loading").
  plugin=$(find "$BUILD_DIR" -type f -name libparalab_cuda_backend.so | head -1)
  [ -n "$plugin" ] || { echo "gpu_checks: libparalab_cuda_backend.so not built"; exit 1; }
  cp "$plugin" .gpubundle/bin/ && strip --strip-unneeded .gpubundle/bin/libparalab_cuda_backend.so
  # Shared libraries the GPU machine lacks (its own CUDA, cuBLAS and NCCL are used).
  for lib in $(ldd .gpubundle/bin/paralab | awk '/=>/ {print $3}' | grep -E 'toml'); do cp -L "$lib" .gpubundle/lib/; done
  # The device tool carries at most 64 MiB: compress the binaries (unpacked on the GPU machine).
  tar -C .gpubundle -cJf .gpubundle/bin.tar.xz bin && rm -rf .gpubundle/bin
  mkdir -p .git/info; grep -qx '/.gpubundle/' .git/info/exclude 2>/dev/null || echo '/.gpubundle/' >> .git/info/exclude
  du -sh .gpubundle
  echo "gpu_checks: bundle ready; on the GPU machine: bash scripts/gpu_checks.sh --bundle .gpubundle --out \$OUT"
  exit 0
fi

mkdir -p "$RESULTS"
SUMMARY="$RESULTS/summary.md"
echo "# paralab GPU checks $(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$SUMMARY"
declare -i FAILED=0
check() {  # check NAME COMMAND...: runs, logs to NAME.log, records pass/fail
  local name=$1
  shift
  # ONLY="name1 name2 ...": run just these checks (the others are not listed).
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
  echo "== $name: $*"
  local t0=$(date +%s)
  timeout -k 10 "${CHECK_TIMEOUT:-300}" "$@" > "$RESULTS/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && echo "(timed out after ${CHECK_TIMEOUT:-300} s)" >> "$RESULTS/$name.log"
  local dt=$(( $(date +%s) - t0 ))
  if [ $rc -eq 0 ]; then echo "| $name | pass | ${dt} s |" >> "$SUMMARY"
  else echo "| $name | FAIL (exit $rc) | ${dt} s |" >> "$SUMMARY"; FAILED+=1; tail -30 "$RESULTS/$name.log"; fi
  return 0
}

if [ -n "$BUNDLE" ]; then
  # Libraries: the bundle's, the CUDA toolkit's, and NCCL wherever the machine has it (pip wheels).
  LIBS="$BUNDLE/lib"
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && LIBS="$LIBS:$d"; done
  for py in python3 /opt/torch/.venv/bin/python3; do
    for pkg in nccl cublas cuda_runtime; do
      d=$($py -c "import nvidia.$pkg, os; print(os.path.join(list(nvidia.$pkg.__path__)[0], 'lib'))" 2>/dev/null) && LIBS="$LIBS:$d"
    done
  done
  export LD_LIBRARY_PATH="$LIBS:${LD_LIBRARY_PATH:-}"
  if [ -f "$BUNDLE/bin.tar.xz" ]; then  # unpack outside the (read-only) carried folder
    mkdir -p /tmp/paralab-bundle && tar -C /tmp/paralab-bundle -xJf "$BUNDLE/bin.tar.xz"
    cp -r "$BUNDLE/lib" /tmp/paralab-bundle/ 2>/dev/null
    BUNDLE=/tmp/paralab-bundle
  fi
else
  check build build
fi
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" > "$RESULTS/environment.log"
{ nvidia-smi; nvcc --version; ldd "$(bin paralab)"; } >> "$RESULTS/environment.log" 2>&1
echo "" >> "$SUMMARY"; echo "| check | result | time |" >> "$SUMMARY"; echo "|---|---|---|" >> "$SUMMARY"

PARALAB=$(bin paralab)
# 0. Which cuBLASLt FP8 configurations run here (all of the backend's were refused on an H200
#    with cuBLASLt 13.1; docs/cuda_backend.md, "FP8"): seconds, and it says which difference
#    matters, so it runs first, before anything a lease might cut short.
check fp8_probe "$(bin paralab_fp8_probe)" --out "$RESULTS/fp8_probe.json"
# 1. Tests: CPU planning tests of the backend, then the [gpu] tests.
check tests_exec_cuda_cpu "$(bin paralab_tests_exec_cuda)"
check gpu_tests_kernels "$(bin paralab_gpu_tests_kernels)"
check gpu_tests_exec_cuda "$(bin paralab_gpu_tests_exec_cuda)"
# 2. Single-GPU execute of the GPU-sized scenario, its simulation and the comparison.
check simulate_gpu1 "$PARALAB" simulate scenarios/gpu-1.toml --json --trace "$RESULTS/gpu-1.predicted.json"
check execute_gpu1 "$PARALAB" execute scenarios/gpu-1.toml --backend cuda --json --steps 2 --trace "$RESULTS/gpu-1.measured.json"
cp "$RESULTS/execute_gpu1.log" "$RESULTS/gpu-1.execute.json" 2>/dev/null
check compare_gpu1 "$PARALAB" compare "$RESULTS/gpu-1.predicted.json" "$RESULTS/gpu-1.measured.json"
# 3. Issue #7 on one GPU: validate (calibrate this GPU, simulate, execute, compare) the single-GPU
#    scenarios; the step error bar is 5 %. Calibrations are cached under $RESULTS/cache.
for sc in ${VALIDATE_SCENARIOS:-gpu-1 gpu-1-llama gpu-1-fp8 gpu-1-fp16 gpu-1-offload cpu-1rank-fp16}; do
  check "validate_$sc" env PARALAB_CACHE_DIR="$RESULTS/cache" "$PARALAB" validate "scenarios/$sc.toml" --backend cuda \
    --json --report "$RESULTS/validate_$sc.html"
  cp "$RESULTS/validate_$sc.log" "$RESULTS/validate_$sc.json" 2>/dev/null
done
# 4. Verified runs: a short copy of gpu-1 (the CPU references of seq-2048 attention take minutes)
#    and the quickstart on one GPU.
check execute_gpu1_verify_short "$PARALAB" execute scenarios/gpu-1.toml --backend cuda --verify --set model.num_layers=2 \
  --set training.global_batch_size=4 --set model.seq_length=512
# The Llama copy keeps every op family of gpu-1-llama (RMSNorm, SwiGLU, RoPE, grouped-query
# flash attention, tied embeddings, full recompute) with a 32,000-token vocabulary, so the CPU
# references of its logits stay within the check's time.
check execute_llama_verify_short "$PARALAB" execute scenarios/gpu-1-llama.toml --backend cuda --verify \
  --set model.num_layers=2 --set training.global_batch_size=4 --set model.seq_length=512 --set model.vocab_size=32000
# Short copies of the FP8 scenario (e4m3 GEMMs, checked at FP8's tolerance) and of the fp16 one
# (loss scaling, SGD, unfused attention with dropout, selective recomputation).
check execute_fp8_verify_short "$PARALAB" execute scenarios/gpu-1-fp8.toml --backend cuda --verify \
  --set model.num_layers=2 --set training.global_batch_size=4 --set model.seq_length=512
check execute_fp16_verify_short "$PARALAB" execute scenarios/gpu-1-fp16.toml --backend cuda --verify \
  --set model.num_layers=2 --set training.global_batch_size=4 --set model.seq_length=512
# Optimizer offload: pinned host state, copies on the copy engines, the host's AdamW (docs/offload.md).
check execute_offload_verify_short "$PARALAB" execute scenarios/gpu-1-offload.toml --backend cuda --verify \
  --set model.num_layers=2 --set training.global_batch_size=4 --set model.seq_length=512
check execute_quickstart_verify "$PARALAB" execute scenarios/quickstart.toml --backend cuda --verify \
  --set parallel.tensor=1 --set cluster.devices_per_node=1
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${NGPU:-0}" -ge 2 ]; then
  check execute_quickstart_gpus2 "$PARALAB" execute scenarios/quickstart.toml --backend cuda --gpus 2 --verify
fi
# 5. Benches.
check bench_kernels "$(bin paralab_bench_kernels)" --out "$RESULTS/bench_kernels.json"
check bench_exec_cuda "$(bin paralab_bench_exec_cuda)" --scenario scenarios/gpu-1.toml --out "$RESULTS/bench_exec_cuda.json"
# FP8: each linear GEMM with its quantization against bf16 cuBLAS alone, and the quantization kernels.
check bench_exec_cuda_fp8 "$(bin paralab_bench_exec_cuda)" --scenario scenarios/gpu-1-fp8.toml --out "$RESULTS/bench_exec_cuda_fp8.json"
# 6. compute-sanitizer (kernels: all; backend: device ops and one whole step), slowest last.
if [ "${SKIP_SANITIZER:-0}" = 1 ]; then
  echo "| compute-sanitizer | skipped (SKIP_SANITIZER=1) | |" >> "$SUMMARY"
elif command -v compute-sanitizer >/dev/null 2>&1; then
  check memcheck_kernels compute-sanitizer --tool memcheck --error-exitcode 1 "$(bin paralab_gpu_tests_kernels)"
  check memcheck_exec_cuda compute-sanitizer --tool memcheck --error-exitcode 1 "$(bin paralab_gpu_tests_exec_cuda)" \
    "~[step]~[multi],*fp16 with loss scaling and SGD*"
  check racecheck_attention compute-sanitizer --tool racecheck --error-exitcode 1 "$(bin paralab_gpu_tests_kernels)" "[attention]"
else
  echo "| compute-sanitizer | not found | |" >> "$SUMMARY"
fi

echo "" >> "$SUMMARY"
echo "$FAILED failed. Logs and JSON beside this file." >> "$SUMMARY"
cat "$SUMMARY"
[ $FAILED -eq 0 ]
