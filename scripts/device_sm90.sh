#!/usr/bin/env bash
# One call on the GPU machine for the sm90 forward: tests, compute-sanitizer on a small set, and
# timing side by side with PyTorch SDPA (cuDNN and FlashAttention-2 backends) in the same run.
# Expects binaries built on the development machine in .sm90-device/ (carried; see docs/perf.md);
# builds here instead when they are missing or do not start. Logs and JSON go to $OUT; table last.
# Usage: scripts/device_sm90.sh [tests|bench|all]   (default all)
set -u
what=${1:-all}
OUT=${OUT:-/tmp/sm90-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
BIN=.sm90-device
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$PWD/$BIN/lib

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv 2>&1

if ! "$BIN/flashattn_gpu_tests" --gtest_list_tests > /dev/null 2>&1; then
  echo "carried binaries do not start here; building" | tee "$OUT/build.log"
  cmake -B build-device -G Ninja -DFLASHATTN_CUDA=ON -DFLASHATTN_CUDA_ARCHS=90a -DFLASHATTN_BUILD_TOOLS=OFF \
    -DFLASHATTN_GTEST_SOURCE="$PWD/.deps/googletest" >> "$OUT/build.log" 2>&1 &&
    cmake --build build-device -j16 >> "$OUT/build.log" 2>&1
  mkdir -p "$BIN"
  cp build-device/tests/cpp/gpu/flashattn_gpu_tests build-device/flashattn_sm90_bench build-device/flashattn_sm90_variants "$BIN/" 2>/dev/null
  tail -5 "$OUT/build.log"
fi

# A hang (a barrier that never completes) would eat every later timeout: try one case first.
timeout 30 "$BIN/flashattn_gpu_tests" --gtest_filter='*Sm90*small_d128_bf16' > "$OUT/smoke.log" 2>&1
rc=$?
echo "smoke exit $rc"; grep -E "OK \]|FAILED \]|Failure|Expected|Which is|relative|logsumexp|NaN|outside" "$OUT/smoke.log" | head -20
if [ $rc -eq 124 ]; then echo "smoke test hung; stopping"; exit 1; fi

if [ "$what" != bench ]; then
  timeout 120 "$BIN/flashattn_gpu_tests" --gtest_filter='*Sm90*' > "$OUT/tests.log" 2>&1
  echo "tests exit $?"
  grep -E "^\[  (FAILED|PASSED) |Failure|error|Expected|Which is|relative|logsumexp|NaN|outside" "$OUT/tests.log" | head -60
  small='*Sm90*small_d128_bf16*:*Sm90*varlen_bf16*:*Sm90*causal_long_q_masked_rows_fp16*:*Sm90*persistent_many_tiles*'
  for tool in memcheck racecheck synccheck; do
    timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/flashattn_gpu_tests" --gtest_filter="$small" \
      > "$OUT/sanitizer_$tool.log" 2>&1
    echo "compute-sanitizer $tool exit $? ($(grep -c 'OK \]' "$OUT/sanitizer_$tool.log") tests ok): $(grep -m2 -E 'ERROR SUMMARY|RACECHECK SUMMARY|Error' "$OUT/sanitizer_$tool.log" | tr '\n' ' ')"
  done
fi

if [ "$what" != tests ]; then
  timeout 60 "$BIN/flashattn_sm90_bench" 20 > "$OUT/ours.jsonl" 2>&1
  echo "bench exit $?"; grep -v "^{" "$OUT/ours.jsonl" | tail -3
  [ -x "$BIN/flashattn_sm90_variants" ] && timeout 60 "$BIN/flashattn_sm90_variants" > "$OUT/variants.log" 2>&1 && cat "$OUT/variants.log"
  PYTHONUNBUFFERED=1 timeout 150 python3 benchmarks/cpp/sm90_peers.py "$OUT/ours.jsonl" "$OUT/results.json"
fi
