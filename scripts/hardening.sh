#!/usr/bin/env bash
# paralab — hardening in CI (docs/hardening.md), after scripts/test.sh:
#   1. the whole test suite built with AddressSanitizer + UndefinedBehaviorSanitizer (gcc,
#      -fno-sanitize-recover=all, -O1 -g, assertions and the simulator's invariant checks on,
#      CUDA off: GPU tests skip anyway) and run by ctest, halting on the first report;
#   2. the libFuzzer targets (clang 14) over scenario and topology loading, validation, IR
#      generation and the simulator, seeded from the repository's own files, for a bounded time.
# Environment: JOBS (default nproc), FUZZ_SECONDS (per target, default 60; the two targets run
# side by side), ASAN_BUILD_DIR (build-asan), FUZZ_BUILD_DIR (build-fuzz),
# HARDENING_SKIP=asan|fuzz to run one half only.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
SKIP=${HARDENING_SKIP:-}

t_start=$(date +%s)
phase_start=$t_start
declare -a timings=()
phase() {  # phase NAME: records the time since the previous phase ended
  local now
  now=$(date +%s)
  timings+=("$1: $((now - phase_start)) s")
  phase_start=$now
}

# clang and its runtimes (libFuzzer) come with scripts/setup.sh's packages.
if ! command -v clang++ >/dev/null || ! command -v g++ >/dev/null; then
  echo "paralab hardening: clang++ and g++ are needed; run scripts/setup.sh first" >&2
  exit 2
fi
phase "packages"

# ---- 1. the test suite under ASan + UBSan --------------------------------------------------
if [ "$SKIP" != "asan" ]; then
  cmake -S . -B "$ASAN_BUILD_DIR" -G Ninja -DCMAKE_CXX_COMPILER=g++ \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
    -DCMAKE_CXX_FLAGS="-fno-sanitize-recover=all" \
    -DPARALAB_SANITIZE=address,undefined -DPARALAB_WITH_CUDA=OFF -DPARALAB_BENCH=OFF >/dev/null
  cmake --build "$ASAN_BUILD_DIR" -j "$JOBS"
  phase "sanitizer build"

  # Halt at the first report. Leaks: Open MPI's own allocations at exit are suppressed, nothing
  # else (tests/hardening/lsan-mpi.supp). Suppressions match a leak's allocation stack, and Open
  # MPI's libraries have no frame pointers, so the MPI tests (label `mpi`) unwind malloc stacks
  # the slow, complete way and keep Open MPI's components loaded to the end (symbolized stacks);
  # the rest run with the fast unwinder.
  # intercept_tls_get_addr=0: gcc 12's runtime guesses a dynamic TLS block's bounds from a
  # glibc 2.19 header whenever the block starts 16 bytes into a page (google/sanitizers#1322);
  # on glibc 2.36 that guess is wrong, the leak check then scans a bogus range
  # (0x411b-0x40000521d, seen with log_threads=1 at the exit of `execute` on 4 MPI ranks) and
  # the tracer dies of SIGSEGV. Static TLS and every stack are still scanned; only dlopen'ed
  # libraries' TLS (Open MPI's components) is no longer a root, whose allocations are
  # suppressed anyway.
  asan_base="halt_on_error=1:abort_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:print_summary=1:intercept_tls_get_addr=0"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:print_summary=1"
  export LSAN_OPTIONS="suppressions=$root/tests/hardening/lsan-mpi.supp:print_suppressions=0"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mca_base_component_disable_dlclose=1
  ASAN_OPTIONS="$asan_base" ctest --test-dir "$ASAN_BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 600 -LE mpi
  # Label `timing`: tests asserting measured time, meaningless at sanitizer speed; their code
  # paths run in other tests here.
  ASAN_OPTIONS="$asan_base:fast_unwind_on_malloc=0" ctest --test-dir "$ASAN_BUILD_DIR" --output-on-failure --timeout 600 -L mpi -LE timing
  unset UBSAN_OPTIONS LSAN_OPTIONS
  phase "sanitizer tests"
fi

# ---- 2. fuzzing ----------------------------------------------------------------------------
if [ "$SKIP" != "fuzz" ]; then
  cmake -S fuzz -B "$FUZZ_BUILD_DIR" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
  cmake --build "$FUZZ_BUILD_DIR" -j "$JOBS"
  phase "fuzz build"

  corpus="$FUZZ_BUILD_DIR/corpus"
  bash fuzz/make_corpus.sh "$corpus"
  mkdir -p "$FUZZ_BUILD_DIR/artifacts"
  export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  pids=()
  for target in scenario topology; do
    "$FUZZ_BUILD_DIR/paralab_fuzz_$target" "$corpus/$target" \
      -dict="$corpus/config.dict" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
      -max_len=16384 -print_final_stats=1 -artifact_prefix="$FUZZ_BUILD_DIR/artifacts/$target-" \
      > "$FUZZ_BUILD_DIR/fuzz-$target.log" 2>&1 &
    pids+=($!)
  done
  failed=0
  for i in 0 1; do
    target=$([ $i -eq 0 ] && echo scenario || echo topology)
    if ! wait "${pids[$i]}"; then
      failed=1
      echo "paralab hardening: fuzz target $target FAILED; the input is in $FUZZ_BUILD_DIR/artifacts/:"
      tail -n 60 "$FUZZ_BUILD_DIR/fuzz-$target.log"
    else
      echo "paralab hardening: fuzz target $target: $(grep -E 'stat::number_of_executed_units' "$FUZZ_BUILD_DIR/fuzz-$target.log" | awk '{print $2}') inputs in ${FUZZ_SECONDS} s, no finding; corpus $(ls "$corpus/$target" | wc -l) files"
    fi
  done
  unset ASAN_OPTIONS UBSAN_OPTIONS
  phase "fuzzing"
  [ $failed -eq 0 ] || exit 1
fi

echo "paralab hardening: passed in $(( $(date +%s) - t_start )) s"
for t in "${timings[@]}"; do echo "  $t"; done
