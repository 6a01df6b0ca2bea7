#!/bin/bash
# no_cuda_loaded.sh PARALAB SOURCE_DIR: inspect, simulate, plan, compare and --help load no
# CUDA, cuBLAS or NCCL library (the CUDA backend is a plugin `execute --backend cuda` loads;
# docs/cuda_backend.md, "Loading"): the dynamic loader's own log (LD_DEBUG=files) of each run
# must name none of them, and the binary must not need them.
set -u
paralab=$1 src=$2
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
pattern='libcuda|libcudart|libcublas|libnccl|paralab_cuda_backend'
q=$src/scenarios/quickstart.toml
"$paralab" simulate "$q" --json >"$work/predicted.json" 2>/dev/null || fail "simulate"
run() {
  LD_DEBUG=files LD_DEBUG_OUTPUT="$work/ld" "$paralab" "$@" >/dev/null 2>&1 || fail "paralab $*"
  if cat "$work"/ld.* | grep -E "$pattern" | head -3 | grep -q .; then
    cat "$work"/ld.* | grep -E "$pattern" | head -3
    fail "paralab $* loaded a CUDA library"
  fi
  grep -q "file=" "$work"/ld.* || fail "no loader log for paralab $* (LD_DEBUG unsupported?)"
  rm -f "$work"/ld.*
  echo "ok: paralab $*"
}
run --help
run inspect "$q"
run simulate "$q"
run plan "$src/tests/apps/data/plan_tiny.toml" --threads 1
run compare "$work/predicted.json" "$work/predicted.json"
if command -v readelf >/dev/null; then
  readelf -d "$paralab" | grep NEEDED | grep -E "$pattern" && fail "the binary needs a CUDA library"
  echo "ok: the binary needs no CUDA library"
fi
exit 0
