#!/usr/bin/env bash
# paralab — set everything up and run the whole test suite (the README's test command, and CI's).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Open MPI refuses to run as root unless told; CI containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "${JOBS:-$(nproc)}"
