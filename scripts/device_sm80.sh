#!/usr/bin/env bash
# One call on the GPU machine for the sm80 kernels: gpu tests, compute-sanitizer (memcheck,
# racecheck) on a small set, and bf16 timing side by side with PyTorch SDPA (FLASH = its
# FlashAttention-2, and CUDNN) in the same run. Logs and JSON under $OUT; the table prints last.
#
# Expects binaries built on the development machine in .sm80-device/ (carried: build with
# -DFLASHATTN_CUDA_ARCHS=80 so the API runs the sm80 forward on Hopper too, then copy
# flashattn_gpu_tests and flashattn_sm80_bench there); builds here when they are missing.
# Usage: scripts/device_sm80.sh [tests|bench|all|profile] [bench head dims...]
set -u
what=${1:-all}
shift || true
headdims=${*:-64 128 256}
OUT=${OUT:-/tmp/sm80-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
BIN=.sm80-device
export LD_LIBRARY_PATH="$PWD/$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

# Profile mode: variant timings of the backward main kernel (flashattn_sm80_bwd_variants, carried in
# $BIN) and ncu of ours and of FA2's backward at one shape; text reports under $OUT.
if [ "$what" = profile ]; then
  while read -r shape; do
    [ -n "$shape" ] || continue
    # shellcheck disable=SC2086
    timeout 60 "$BIN/flashattn_sm80_bwd_variants" $shape 10 2>&1 | tee -a "$OUT/variants.log"
  done <<< "${SM80_VARIANT_SHAPES:-$'128 8192 0\n128 1024 1\n64 8192 0\n64 1024 1\n256 8192 0\n256 1024 1'}"
  prof=${SM80_PROFILE_SHAPE:-128 8192 0}
  ncu_args=(--clock-control none --set full --import-source no -c 1 -f)
  # shellcheck disable=SC2086
  SM80_VARIANT=${SM80_PROFILE_VARIANT:-0} timeout 150 ncu "${ncu_args[@]}" -k regex:backward_kernel -o /tmp/ours \
    "$BIN/flashattn_sm80_bwd_variants" $prof 1 > "$OUT/ncu_run.log" 2>&1
  echo "ncu ours exit $?"
  reports=ours
  if [ "${SM80_PROFILE_FA2:-1}" = 1 ]; then
    # shellcheck disable=SC2086
    timeout 150 ncu "${ncu_args[@]}" -k regex:flash_bwd_dq_dk_dv -o /tmp/fa2 \
      python3 benchmarks/cpp/sm80_fa2_profile.py $prof >> "$OUT/ncu_run.log" 2>&1
    echo "ncu fa2 exit $?"
    reports="ours fa2"
  fi
  for r in $reports; do
    ncu --import /tmp/$r.ncu-rep --page details > "$OUT/${r}_details.txt" 2>&1
    ncu --import /tmp/$r.ncu-rep --page source --csv --print-source sass > "$OUT/${r}_sass.csv" 2>&1
    gzip -f "$OUT/${r}_sass.csv"
  done
  exit 0
fi

if ! "$BIN/flashattn_gpu_tests" --gtest_list_tests > /dev/null 2>&1; then
  echo "carried binaries do not start here; building" | tee "$OUT/build.log"
  cmake -B build-sm80-device -G Ninja -DFLASHATTN_CUDA=ON -DFLASHATTN_CUDA_ARCHS=80 -DFLASHATTN_BUILD_TOOLS=OFF \
    -DFLASHATTN_GTEST_SOURCE="$PWD/.deps/googletest" >> "$OUT/build.log" 2>&1 &&
    cmake --build build-sm80-device -j16 --target flashattn_gpu_tests flashattn_sm80_bench >> "$OUT/build.log" 2>&1
  mkdir -p "$BIN"
  cp build-sm80-device/tests/cpp/gpu/flashattn_gpu_tests build-sm80-device/flashattn_sm80_bench "$BIN/"
  tail -5 "$OUT/build.log"
fi

# Backward layout variants side by side (flashattn_sm80_bwd_variants, when carried) on the shapes
# in SM80_VARIANT_SHAPES (one "headdim seqlen causal" per line).
if [ -x "$BIN/flashattn_sm80_bwd_variants" ] && [ -n "${SM80_VARIANT_SHAPES:-}" ]; then
  while read -r shape; do
    [ -n "$shape" ] || continue
    # shellcheck disable=SC2086
    timeout 60 "$BIN/flashattn_sm80_bwd_variants" $shape 10 2>&1 | tee -a "$OUT/variants.log"
  done <<< "$SM80_VARIANT_SHAPES"
fi

if [ "$what" != tests ]; then
  # shellcheck disable=SC2086
  timeout 200 "$BIN/flashattn_sm80_bench" ${SM80_BENCH_REPS:-20} $headdims > "$OUT/ours.jsonl" 2> "$OUT/ours.err"
  echo "bench exit $?"
  tail -3 "$OUT/ours.err"
  PYTHONUNBUFFERED=1 timeout 240 python3 benchmarks/cpp/sm80_peers.py "$OUT/ours.jsonl" "$OUT/results.json" 2> "$OUT/peers.err"
  echo "peers exit $?"
  tail -3 "$OUT/peers.err"
fi

if [ "$what" != bench ]; then
  small='Sm80Sanitize.*'
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/flashattn_gpu_tests" --gtest_filter="$small" \
      > "$OUT/sanitizer_$tool.log" 2>&1
    echo "compute-sanitizer $tool exit $? ($(grep -c 'OK \]' "$OUT/sanitizer_$tool.log") tests ok): $(grep -m2 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tr '\n' ' ')"
  done
  timeout ${SM80_TEST_TIMEOUT:-240} "$BIN/flashattn_gpu_tests" --gtest_filter='*Sm80*' > "$OUT/tests.log" 2>&1
  echo "tests exit $?"
  grep -E "^\[  (PASSED|FAILED) |tests ran" "$OUT/tests.log" | head -5
  grep -E "^\[  FAILED  \]" "$OUT/tests.log" | head -40
  grep -E "Failure|out [0-9.e+-]+ \(naive" "$OUT/tests.log" | head -30
fi

# At most 8 files come back from the device: the logs travel as one archive.
(cd "$OUT" && tar czf logs.tgz --remove-files ./*.log ./*.err ./*.txt ./*.jsonl 2> /dev/null)
ls "$OUT"
