#!/bin/bash
# no_device.sh EXPECT_FAILURE OUTFILE -- COMMAND...: on a machine without a usable GPU, COMMAND
# (a `paralab execute --backend cuda`) must fail within 30 s saying that a CUDA GPU is needed,
# and leave no OUTFILE. Exits 77 (ctest: skipped) where a GPU is visible.
set -u
expect=$1 outfile=$2
shift 2
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "skipped: a GPU is visible"
  exit 77
fi
exec "$expect" 30 "error: .*needs a CUDA GPU.*--backend cpu" "$outfile" -- "$@"
