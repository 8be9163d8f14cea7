#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs the C++ tests (label cpu; label gpu
# skips itself where no GPU exists) and the Python tests.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/build.sh
build_dir=${FLASHATTN_BUILD_DIR:-build/release}

status=0
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" || status=1

if [ -x scripts/test_python.sh ]; then
  ./scripts/test_python.sh || status=1
fi
exit $status
