#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs `flashattn bench` (on the GPU where one
# is present, else on the CPU). Extra arguments go to `flashattn bench`.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/build.sh
exec "${FLASHATTN_BUILD_DIR:-build/release}/tools/flashattn/flashattn" bench "$@"
