#!/usr/bin/env bash
# One call on the GPU machine for the sm90 forward: tests, compute-sanitizer on a small set, the
# variant harness (current kernel vs other tile shapes / schedules / an older baseline, same
# process) and timing side by side with PyTorch SDPA (cuDNN and FlashAttention-2 backends).
# Expects binaries built on the development machine in .sm90-device/ (carried; see docs/perf.md):
#   flashattn_gpu_tests [flashattn_gpu_tests_alt] flashattn_sm90_bench [flashattn_sm90_variants]
# (flashattn_gpu_tests_alt: the same tests built with the other default, e.g. the other tile
# schedule; tested and sanitized too when present). Builds here instead when they do not start.
# Usage: scripts/device_sm90.sh [tests|bench|all]   (default all)
# Env: SM90_FP16=0 skips the fp16 timing pass; SM90_SWEEP=0 skips the API sweep and the peers
# (harness only); SM90_VARIANT_ARGS (reps rounds hdim) for the harness; SM90_SANITIZE: the gtest
# filter compute-sanitizer runs (default: a representative set); SM90_TESTS: the test filter ('*Sm90*').
# $OUT receives at most 8 files: logs.tgz, results.json, variants.jsonl; the summary prints last.
set -u
what=${1:-all}
OUT=${OUT:-/tmp/sm90-out}
LOG=/tmp/sm90-logs
mkdir -p "$OUT" "$LOG"
cd "$(dirname "$0")/.."
BIN=.sm90-device
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$PWD/$BIN/lib
summary=$LOG/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
finish() {
  tar -czf "$OUT/logs.tgz" -C "$LOG" . 2>/dev/null
  echo "==== summary"
  cat "$summary"
}
trap finish EXIT

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv 2>&1 | tee "$LOG/gpu.txt"

if ! "$BIN/flashattn_gpu_tests" --gtest_list_tests > /dev/null 2>&1; then
  note "carried binaries do not start here; building"
  cmake -B build-device -G Ninja -DFLASHATTN_CUDA=ON -DFLASHATTN_CUDA_ARCHS=90a -DFLASHATTN_BUILD_TOOLS=OFF \
    -DFLASHATTN_GTEST_SOURCE="$PWD/.deps/googletest" > "$LOG/build.log" 2>&1 &&
    cmake --build build-device -j16 >> "$LOG/build.log" 2>&1
  mkdir -p "$BIN"
  cp build-device/tests/cpp/gpu/flashattn_gpu_tests build-device/flashattn_sm90_bench build-device/flashattn_sm90_variants "$BIN/" 2>/dev/null
  tail -5 "$LOG/build.log"
fi

tests=(flashattn_gpu_tests)
[ -x "$BIN/flashattn_gpu_tests_alt" ] && tests+=(flashattn_gpu_tests_alt)

# A hang (a barrier that never completes) would eat every later timeout: one case first.
for t in "${tests[@]}"; do
  timeout 30 "$BIN/$t" --gtest_filter='*Sm90*small_d128_bf16' > "$LOG/smoke_$t.log" 2>&1
  rc=$?
  note "smoke $t exit $rc"
  if [ $rc -eq 124 ]; then note "smoke test of $t hung; stopping"; exit 1; fi
done

if [ "$what" != bench ]; then
  # Every kernel the API can pick at least once: static / dynamic / tall / packed, cluster pairs,
  # the split tail (both), short rows, d96 and d192.
  small=${SM90_SANITIZE:-'*Sm90*small_d128_bf16*:*Sm90*varlen_bf16*:*Sm90*causal_long_q_masked_rows_fp16*:*Sm90*persistent_many_tiles*:*Sm90*small_d256_bf16*:*Sm90*varlen_window_d256*:*Sm90*seqused_varlen_causal_bf16*:*Sm90*seqused_qk_fixed_causal_d256*:*Sm90GqaPacking*g4_varlen_causal_bf16*:*Sm90GqaPacking*g8_persistent_q1_k1000_fp16*:*Sm90GqaPacking*g4_q64_k700_d256_causal_softcap_fp16*:*Sm90ClusterPairs*waves_q512_k256_gqa*:*Sm90SplitTail*thin_tail*:*Sm90ClusterSplitTail*gqa_softcap*:*short_rows_gqa_window*:*Sm90Forward*ragged_d96_bf16*:*Sm90Forward*causal_d192_fp16*:*Sm90*seqused_qk_fixed_window_d192*'}
  for t in "${tests[@]}"; do
    timeout 150 "$BIN/$t" --gtest_filter="${SM90_TESTS:-*Sm90*}" > "$LOG/tests_$t.log" 2>&1
    note "tests $t exit $?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$LOG/tests_$t.log" | tr '\n' ' ')"
    grep -E "^\[  FAILED  \]|Failure|Expected|Which is|relative L2|logsumexp off|NaN|outside" "$LOG/tests_$t.log" | head -30 | tee -a "$summary"
    for tool in memcheck racecheck synccheck; do
      timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/$t" --gtest_filter="$small" \
        > "$LOG/sanitizer_${tool}_$t.log" 2>&1
      note "compute-sanitizer $tool $t exit $? ($(grep -c 'OK \]' "$LOG/sanitizer_${tool}_$t.log") tests ok): $(grep -m2 -E 'ERROR SUMMARY|RACECHECK SUMMARY|Error' "$LOG/sanitizer_${tool}_$t.log" | tr '\n' ' ')"
    done
  done
fi

if [ "$what" != tests ]; then
  if [ -x "$BIN/flashattn_sm90_variants" ]; then
    timeout 240 "$BIN/flashattn_sm90_variants" ${SM90_VARIANT_ARGS:-} > "$OUT/variants.jsonl" 2> "$LOG/variants.err"
    note "variants exit $?"
    python3 benchmarks/cpp/sm90_variants_table.py "$OUT/variants.jsonl" | tee -a "$summary"
  fi
  [ "${SM90_SWEEP:-1}" = 1 ] || exit 0
  timeout 90 "$BIN/flashattn_sm90_bench" 20 > "$LOG/ours.jsonl" 2> "$LOG/bench.err"
  note "bench bf16 exit $?"
  if [ "${SM90_FP16:-1}" = 1 ]; then
    timeout 90 "$BIN/flashattn_sm90_bench" 20 fp16 >> "$LOG/ours.jsonl" 2>> "$LOG/bench.err"
    note "bench fp16 exit $?"
  fi
  PYTHONUNBUFFERED=1 timeout 200 python3 benchmarks/cpp/sm90_peers.py "$LOG/ours.jsonl" "$OUT/results.json" > "$LOG/peers.log" 2>&1
  note "peers exit $?"
  cat "$LOG/peers.log" >> "$summary"
fi
