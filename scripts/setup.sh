#!/usr/bin/env bash
# paralab — set everything up on a fresh Debian 12 machine: install the packages paralab needs
# (by name, from Debian), configure and build. Idempotent; safe to rerun.
#   bash scripts/setup.sh            # Release build in ./build
#   BUILD_DIR=b BUILD_TYPE=Debug bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
JOBS=${JOBS:-$(nproc)}

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libboost-graph-dev libtomlplusplus-dev libeigen3-dev nlohmann-json3-dev catch2 libyaml-cpp-dev
  libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin
  clang libclang-rt-14-dev
  chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "paralab setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "paralab setup: built $BUILD_DIR/apps/paralab"
