#!/usr/bin/env bash
# Configures and builds flashattn into build/release (or $FLASHATTN_BUILD_DIR).
# Where no GPU is present but nvcc is, the CUDA kernels are still compiled (so CI checks they
# build) but only a reduced set: bf16, head dim 128, no sm90 variant harness. FLASHATTN_HDIMS /
# FLASHATTN_DTYPES / FLASHATTN_BUILD_SM90_VARIANTS / FLASHATTN_CUDA override.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${FLASHATTN_BUILD_DIR:-build/release}
args=(-DCMAKE_BUILD_TYPE=Release -DFLASHATTN_CUDA="${FLASHATTN_CUDA:-AUTO}")
if ! nvidia-smi -L >/dev/null 2>&1; then
  args+=(-DFLASHATTN_HDIMS="${FLASHATTN_HDIMS:-128}" -DFLASHATTN_DTYPES="${FLASHATTN_DTYPES:-bf16}")
  # Nor the sm90 variant harness, which only a GPU runs and which alone takes ~19 minutes here.
  args+=(-DFLASHATTN_BUILD_SM90_VARIANTS="${FLASHATTN_BUILD_SM90_VARIANTS:-OFF}")
else
  [ -n "${FLASHATTN_HDIMS:-}" ] && args+=(-DFLASHATTN_HDIMS="$FLASHATTN_HDIMS")
  [ -n "${FLASHATTN_DTYPES:-}" ] && args+=(-DFLASHATTN_DTYPES="$FLASHATTN_DTYPES")
fi
cmake -S . -B "$build_dir" -G Ninja "${args[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
