#!/usr/bin/env bash
# One call on the GPU machine for the sm80 kernels: gpu tests, compute-sanitizer (memcheck,
# racecheck) on a small set, and bf16 timing side by side with PyTorch SDPA (FLASH = its
# FlashAttention-2, and CUDNN) in the same run. Logs and JSON under $OUT; the table prints last.
#
# Expects binaries built on the development machine in .sm80-device/ (carried: build with
# -DFLASHATTN_CUDA_ARCHS=80 so the API runs the sm80 forward on Hopper too, then copy
# flashattn_gpu_tests and flashattn_sm80_bench there); builds here when they are missing.
# Usage: scripts/device_sm80.sh [tests|bench|all|profile|v5|v6|v7|v7check|clock] [bench head dims...]
set -u
what=${1:-all}
shift || true
headdims=${*:-64 128 256}
OUT=${OUT:-/tmp/sm80-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
BIN=.sm80-device
t0=$(date +%s)
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

# clock mode: the SM clock, board power and clock-event reasons (nvidia-smi every 50 ms) while the
# backward runs back to back at one shape (SM80_CLOCK_SHAPE, default d128 8k non-causal): v5's
# kernel (variant 6) and the current one (0) alternating twice (flashattn_sm80_bwd_variants carried
# in $BIN, 300 repetitions), then FA2's backward (sm80_fa2_profile.py, 4 s). Medians over the
# samples under load (power above 300 W) print last.
if [ "$what" = clock ]; then
  shape=${SM80_CLOCK_SHAPE:-128 8192 0}
  fields=clocks.sm,power.draw,clocks_event_reasons.active
  run_sampled() {  # name, command...
    local name=$1
    shift
    nvidia-smi --query-gpu=$fields --format=csv,noheader,nounits -lms 50 > "$OUT/smi_$name.csv" 2>&1 &
    local smi=$!
    "$@" 2>&1 | tee -a "$OUT/clock.log"
    kill $smi
    wait $smi 2> /dev/null
  }
  for v in 6 0 6 0; do
    # shellcheck disable=SC2086
    SM80_VARIANT=$v run_sampled "v${v}_$SECONDS" timeout 30 "$BIN/flashattn_sm80_bwd_variants" $shape 300
  done
  # shellcheck disable=SC2086
  run_sampled fa2 timeout 40 python3 benchmarks/cpp/sm80_fa2_profile.py $shape 4
  python3 - "$OUT" << 'PY' | tee -a "$OUT/clock.log"
import glob, os, statistics, sys, collections
for f in sorted(glob.glob(os.path.join(sys.argv[1], "smi_*.csv")), key=os.path.getmtime):
    rows = []
    for line in open(f):
        parts = [x.strip() for x in line.split(",")]
        try:
            rows.append((float(parts[0]), float(parts[1]), parts[2] if len(parts) > 2 else ""))
        except (ValueError, IndexError):
            pass
    load = [r for r in rows if r[1] > 300]
    if not load:
        print(os.path.basename(f), "no samples under load of", len(rows))
        continue
    reasons = collections.Counter(r[2] for r in load).most_common(2)
    print(f"{os.path.basename(f)}: {len(load)} samples under load, SM clock median {statistics.median(r[0] for r in load):.0f} MHz"
          f" (min {min(r[0] for r in load):.0f}), power median {statistics.median(r[1] for r in load):.0f} W, reasons {reasons}")
PY
  (cd "$OUT" && tar czf logs.tgz --remove-files ./*.csv 2> /dev/null)
  exit 0
fi

# v7 mode (issue 3 part 7, helper s80d): binaries carried in $BIN (flashattn_gpu_tests and
# flashattn_sm80_bwd_variants built on the development machine; built here when missing). In order:
# (1) the same-process A/B of the variants in SM80_AB_ORDERS (default "0,8,9,10 10,9,8,0": each order is one
# process per shape, so every shape runs in both orders) at SM80_AB_SHAPES; (2) ncu --set full of ours
# (the variants in SM80_PROFILE_VARIANTS, default 0) and of FA2's main kernel at each shape of
# SM80_PROFILE_SHAPES ("" skips), with the details page and the per-SASS-line source page as CSV;
# (3) every GPU test with FLASHATTN_CUDA_KERNELS=sm80, the deterministic check twice more, and with
# SM80_SANITIZE=1 memcheck and racecheck on the Sm80Sanitize set. Summary last; logs in $OUT/*.tgz.
if [ "$what" = v7 ]; then
  start=$(date +%s)
  T=$BIN/flashattn_gpu_tests V=$BIN/flashattn_sm80_bwd_variants
  if ! "$V" 2>&1 | grep -q usage; then
    B=build-sm80-device
    cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHATTN_CUDA=ON -DFLASHATTN_CUDA_ARCHS=80 \
      -DFLASHATTN_SM80_SASS_80=OFF -DFLASHATTN_BUILD_TOOLS=OFF -DFLASHATTN_GTEST_SOURCE="$PWD/.deps/googletest" > "$OUT/build.log" 2>&1 &&
      timeout 200 cmake --build $B -j16 --target flashattn_gpu_tests flashattn_sm80_bwd_variants >> "$OUT/build.log" 2>&1
    echo "built here: exit $? at $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
    T=$B/tests/cpp/gpu/flashattn_gpu_tests V=$B/flashattn_sm80_bwd_variants
  fi
  while read -r shape; do
    [ -n "$shape" ] || continue
    for order in ${SM80_AB_ORDERS:-0,8,9,10 10,9,8,0}; do
      # shellcheck disable=SC2086
      SM80_VARIANT=$order timeout 25 "$V" $shape 20 2>&1 | grep -E "^variant|rror" | sed "s/^/[$order] /" >> "$OUT/ab.log"
    done
  done <<< "${SM80_AB_SHAPES:-$'128 8192 0\n128 2048 1\n128 512 1\n64 8192 0\n64 2048 1\n64 512 1\n256 8192 0\n256 2048 1\n256 512 1'}"
  echo "A/B done at $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
  mkdir -p /tmp/prof
  ncu_args=(--clock-control none --set full --import-source no -c 1 -f)
  while read -r shape; do
    [ -n "$shape" ] || continue
    tag=$(echo "$shape" | tr ' ' '_')
    for v in ${SM80_PROFILE_VARIANTS:-0}; do
      # shellcheck disable=SC2086
      SM80_VARIANT=$v timeout 60 ncu "${ncu_args[@]}" -k regex:backward_kernel -o /tmp/prof/ours${v}_$tag "$V" $shape 1 >> "$OUT/ncu_run.log" 2>&1
      echo "ncu ours variant $v $shape exit $? at $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
    done
    # shellcheck disable=SC2086
    timeout 90 ncu "${ncu_args[@]}" -k regex:flash_bwd_dq_dk_dv -o /tmp/prof/fa2_$tag python3 benchmarks/cpp/sm80_fa2_profile.py $shape >> "$OUT/ncu_run.log" 2>&1
    echo "ncu fa2 $shape exit $? at $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
  done <<< "${SM80_PROFILE_SHAPES-$'128 8192 0\n64 512 1'}"
  for rep in /tmp/prof/*.ncu-rep; do
    [ -f "$rep" ] || continue
    r=$(basename "$rep" .ncu-rep)
    timeout 30 ncu --import "$rep" --page details --print-details all > "/tmp/prof/${r}_details.txt" 2>&1
    timeout 30 ncu --import "$rep" --page source --csv --print-source sass > "/tmp/prof/${r}_sass.csv" 2>&1
    timeout 30 ncu --import "$rep" --page raw --csv > "/tmp/prof/${r}_raw.csv" 2>&1
  done
  (cd /tmp/prof && rm -f ./*.ncu-rep && tar czf "$OUT/prof.tgz" . 2> /dev/null)
  echo "profiles exported at $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
  FLASHATTN_CUDA_KERNELS=sm80 timeout ${SM80_TEST_TIMEOUT:-120} "$T" > "$OUT/tests.log" 2>&1
  echo "gpu tests exit $? at $(( $(date +%s) - start )) s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests ran' "$OUT/tests.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
  grep -E "^\[  FAILED  \]|Failure" "$OUT/tests.log" | head -20 | tee -a "$OUT/summary.txt"
  FLASHATTN_CUDA_KERNELS=sm80 timeout 40 "$T" --gtest_filter='*Deterministic*' --gtest_repeat=2 > "$OUT/deterministic.log" 2>&1
  echo "deterministic x2 exit $?: $(grep -cE '^\[       OK \]' "$OUT/deterministic.log") ok, $(grep -cE '^\[  FAILED  \]' "$OUT/deterministic.log") failed" | tee -a "$OUT/summary.txt"
  if [ "${SM80_SANITIZE:-0}" = 1 ]; then
    for tool in memcheck racecheck; do
      FLASHATTN_CUDA_KERNELS=sm80 timeout 75 compute-sanitizer --tool $tool --error-exitcode 9 "$T" \
        --gtest_filter='Sm80Sanitize.*' > "$OUT/sanitizer_$tool.log" 2>&1
      echo "compute-sanitizer $tool exit $? at $(( $(date +%s) - start )) s ($(grep -c 'OK \]' "$OUT/sanitizer_$tool.log") tests ok): $(grep -m2 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
    done
  fi
  cat "$OUT/ab.log" >> "$OUT/summary.txt"
  (cd "$OUT" && tar czf logs.tgz --remove-files ./*.log 2> /dev/null)
  cat "$OUT/summary.txt"
  exit 0
fi

# v7check mode (the second call of helper s80d, ~130 s): binaries carried in $BIN. The GPU tests
# (FLASHATTN_CUDA_KERNELS=sm80), memcheck and racecheck on the Sm80Sanitize set run side by side
# (the tests spend most of their time in the CPU reference), then the deterministic check twice,
# then alone the A/B of SM80_AB_ORDERS (default "11,0 0,11": v6 = variant 11 against the
# production kernel, both orders) at SM80_AB_SHAPES. Summary last.
if [ "$what" = v7check ]; then
  start=$(date +%s)
  T=$BIN/flashattn_gpu_tests V=$BIN/flashattn_sm80_bwd_variants
  (FLASHATTN_CUDA_KERNELS=sm80 timeout ${SM80_TEST_TIMEOUT:-100} "$T" > "$OUT/tests.log" 2>&1
   echo "gpu tests exit $? at $(( $(date +%s) - start )) s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests ran' "$OUT/tests.log" | tr '\n' ' ')" > "$OUT/tests.sum") &
  for tool in memcheck racecheck; do
    (FLASHATTN_CUDA_KERNELS=sm80 timeout 95 compute-sanitizer --tool $tool --error-exitcode 9 "$T" \
       --gtest_filter='Sm80Sanitize.*' > "$OUT/sanitizer_$tool.log" 2>&1
     echo "compute-sanitizer $tool exit $? at $(( $(date +%s) - start )) s ($(grep -c 'OK \]' "$OUT/sanitizer_$tool.log") tests ok): $(grep -m2 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tr '\n' ' ')" > "$OUT/$tool.sum") &
  done
  wait
  cat "$OUT/tests.sum" "$OUT/memcheck.sum" "$OUT/racecheck.sum" >> "$OUT/summary.txt"
  grep -E "^\[  FAILED  \]|Failure" "$OUT/tests.log" | head -20 >> "$OUT/summary.txt"
  FLASHATTN_CUDA_KERNELS=sm80 timeout 30 "$T" --gtest_filter='*Deterministic*' --gtest_repeat=2 > "$OUT/deterministic.log" 2>&1
  echo "deterministic x2 exit $?: $(grep -cE '^\[       OK \]' "$OUT/deterministic.log") ok, $(grep -cE '^\[  FAILED  \]' "$OUT/deterministic.log") failed" >> "$OUT/summary.txt"
  while read -r shape; do
    [ -n "$shape" ] || continue
    for order in ${SM80_AB_ORDERS:-11,0 0,11}; do
      # shellcheck disable=SC2086
      SM80_VARIANT=$order timeout 20 "$V" $shape 20 2>&1 | grep -E "^variant|rror" | sed "s/^/[$order] /" >> "$OUT/summary.txt"
    done
  done <<< "${SM80_AB_SHAPES:-$'128 8192 0\n128 2048 1\n64 2048 1\n256 512 1'}"
  echo "done at $(( $(date +%s) - start )) s" >> "$OUT/summary.txt"
  (cd "$OUT" && tar czf logs.tgz --remove-files ./*.log ./*.sum 2> /dev/null)
  cat "$OUT/summary.txt"
  exit 0
fi

# v6 mode (one call, everything inside ~330 s): build here (sm_90 machine code only, the sm80
# forward on Hopper), every GPU test of that build with FLASHATTN_CUDA_KERNELS=sm80 (the deterministic
# bitwise check among them, then once more repeated), memcheck and racecheck on the Sm80Sanitize set,
# the same-process A/B of flashattn_sm80_bwd_variants (variant 6 = v5's kernel, 0 = the current one,
# 7 = the current one without folded fragment offsets; both orders per shape), and ncu
# smsp__inst_executed of the main kernels at d128 8k. Summary last; logs in $OUT/logs.tgz.
if [ "$what" = v6 ]; then
  B=build-sm80-device
  start=$(date +%s)
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHATTN_CUDA=ON -DFLASHATTN_CUDA_ARCHS=80 \
    -DFLASHATTN_SM80_SASS_80=OFF -DFLASHATTN_BUILD_TOOLS=OFF -DFLASHATTN_GTEST_SOURCE="$PWD/.deps/googletest" > "$OUT/build.log" 2>&1 &&
    timeout ${SM80_BUILD_TIMEOUT:-170} cmake --build $B -j16 --target flashattn_gpu_tests flashattn_sm80_bwd_variants >> "$OUT/build.log" 2>&1
  echo "build exit $? at $(( $(date +%s) - start )) s" | tee "$OUT/summary.txt"
  tail -3 "$OUT/build.log"
  FLASHATTN_CUDA_KERNELS=sm80 timeout ${SM80_TEST_TIMEOUT:-100} $B/tests/cpp/gpu/flashattn_gpu_tests > "$OUT/tests.log" 2>&1
  echo "gpu tests exit $? at $(( $(date +%s) - start )) s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests ran' "$OUT/tests.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
  grep -E "^\[  FAILED  \]|Failure" "$OUT/tests.log" | head -20
  FLASHATTN_CUDA_KERNELS=sm80 timeout 40 $B/tests/cpp/gpu/flashattn_gpu_tests --gtest_filter='*Deterministic*' --gtest_repeat=2 \
    > "$OUT/deterministic.log" 2>&1
  echo "deterministic x2 exit $?: $(grep -cE '^\[       OK \]' "$OUT/deterministic.log") ok, $(grep -cE '^\[  FAILED  \]' "$OUT/deterministic.log") failed" | tee -a "$OUT/summary.txt"
  for tool in memcheck racecheck; do
    FLASHATTN_CUDA_KERNELS=sm80 timeout 75 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/cpp/gpu/flashattn_gpu_tests \
      --gtest_filter='Sm80Sanitize.*' > "$OUT/sanitizer_$tool.log" 2>&1
    echo "compute-sanitizer $tool exit $? at $(( $(date +%s) - start )) s ($(grep -c 'OK \]' "$OUT/sanitizer_$tool.log") tests ok): $(grep -m2 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
  done
  while read -r shape; do
    [ -n "$shape" ] || continue
    for order in 6,0,7 7,0,6; do
      # shellcheck disable=SC2086
      SM80_VARIANT=$order timeout 25 $B/flashattn_sm80_bwd_variants $shape 20 2>&1 | grep -E "^variant|rror" | sed "s/^/[$order] /" >> "$OUT/ab.log"
    done
  done <<< "${SM80_AB_SHAPES:-$'128 8192 0\n128 2048 1\n128 512 1\n64 8192 0\n64 2048 1\n64 512 1\n256 8192 0\n256 2048 1\n256 512 1'}"
  echo "A/B done at $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
  SM80_VARIANT=6,0,7 timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread \
    -k regex:backward_kernel --csv $B/flashattn_sm80_bwd_variants 128 8192 0 1 > "$OUT/ncu_d128_8k.csv" 2>&1
  echo "ncu exit $? at $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
  cat "$OUT/ab.log" >> "$OUT/summary.txt"
  grep -E "backward_kernel" "$OUT/ncu_d128_8k.csv" | grep -E "inst_executed|duration" | awk -F'","' '{print $5, $(NF-2), $(NF-1), $NF}' | head -24 >> "$OUT/summary.txt"
  (cd "$OUT" && tar czf logs.tgz --remove-files ./*.log ./*.csv 2> /dev/null)
  cat "$OUT/summary.txt"
  exit 0
fi

# v5 mode: build here (sm_90 machine code only), an A/B of the backward against the previous
# kernel (flashattn_sm80_bwd_variants built from the previous headers: $BIN/old_variants.o, linked
# here), ncu per-kernel times and instruction counts of one whole backward (ours old and new, FA2's)
# and warp-state sections of the main kernels, then the usual tests, sanitizers and sweep below.
if [ "$what" = v5 ]; then
  start=$(date +%s)
  # SM80_PREBUILT=1: the binaries (and old_variants) were built on the development machine and carried.
  [ "${SM80_PREBUILT:-0}" = 1 ] && [ -x "$BIN/flashattn_gpu_tests" ] || {
  cmake -S . -B build-sm80-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHATTN_CUDA=ON -DFLASHATTN_CUDA_ARCHS=80 \
    -DFLASHATTN_SM80_SASS_80=OFF -DFLASHATTN_BUILD_TOOLS=OFF -DFLASHATTN_GTEST_SOURCE="$PWD/.deps/googletest" > "$OUT/build.log" 2>&1 &&
    cmake --build build-sm80-device -j16 --target flashattn_gpu_tests flashattn_sm80_bench flashattn_sm80_bwd_variants >> "$OUT/build.log" 2>&1
  echo "build exit $? in $(( $(date +%s) - start )) s"; tail -3 "$OUT/build.log"
  mkdir -p "$BIN"
  cp build-sm80-device/tests/cpp/gpu/flashattn_gpu_tests build-sm80-device/flashattn_sm80_bench \
    build-sm80-device/flashattn_sm80_bwd_variants "$BIN/"
  if [ -f "$BIN/old_variants.o" ]; then
    c++ -O3 "$BIN/old_variants.o" -o "$BIN/old_variants" build-sm80-device/libflashattn.a -L/usr/local/cuda/lib64 \
      -lcudart -lgomp -lpthread -ldl -lrt >> "$OUT/build.log" 2>&1 || echo "old_variants link failed"
  fi
  }
  # A/B, alternating processes: old then new per shape.
  while read -r shape; do
    [ -n "$shape" ] || continue
    for which in old new; do
      exe="$BIN/flashattn_sm80_bwd_variants" vars=${SM80_AB_VARIANTS:-0}
      [ $which = old ] && exe="$BIN/old_variants" vars=0
      # shellcheck disable=SC2086
      SM80_VARIANT=$vars timeout 30 "$exe" $shape 20 2>&1 | grep -E "^variant|rror" | sed "s/^/$which /" | tee -a "$OUT/ab.log"
    done
  done <<< "${SM80_AB_SHAPES:-$'128 8192 0\n128 512 1\n64 8192 0\n256 8192 0'}"
  # Kernels of one backward and their times (ncu, a few metrics) at d128 512 causal, ours and FA2's,
  # and warp-state sections of both main kernels there.
  mkdir -p "$OUT/prof"
  metrics=gpu__time_duration.sum,smsp__inst_executed.sum,launch__grid_size,launch__registers_per_thread
  SM80_VARIANT=0 timeout 40 ncu --metrics $metrics --csv "$BIN/flashattn_sm80_bwd_variants" 128 512 1 1 \
    > "$OUT/prof/kernels_ours_512c.csv" 2>&1
  # SM80_PROFILE=ours: only the line above (our kernels' times), none of FA2's or the sections.
  if [ "${SM80_PROFILE:-all}" = all ]; then
  timeout 60 ncu --metrics $metrics --csv python3 benchmarks/cpp/sm80_fa2_profile.py 128 512 1 \
    > "$OUT/prof/kernels_fa2_512c.csv" 2>&1
  sections=(--section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats --section Occupancy)
  SM80_VARIANT=0 timeout 40 ncu "${sections[@]}" -k regex:backward_kernel -s 1 -c 1 "$BIN/flashattn_sm80_bwd_variants" 128 512 1 1 \
    > "$OUT/prof/sections_ours_512c.txt" 2>&1
  timeout 60 ncu "${sections[@]}" -k regex:flash_bwd_dq_dk_dv -s 1 -c 1 python3 benchmarks/cpp/sm80_fa2_profile.py 128 512 1 \
    > "$OUT/prof/sections_fa2_512c.txt" 2>&1
  fi
  (cd "$OUT" && tar czf prof.tgz --remove-files prof)
  echo "profiling done at $(( $(date +%s) - start )) s"
  what=${SM80_V5_THEN:-all}
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

# Correctness first (tests, sanitizers), so a call cut short still reports them; the timing table last.
if [ "$what" != bench ]; then
  timeout ${SM80_TEST_TIMEOUT:-240} "$BIN/flashattn_gpu_tests" --gtest_filter='*Sm80*' > "$OUT/tests.log" 2>&1
  echo "tests exit $? at $(( $(date +%s) - t0 )) s"
  grep -E "^\[  (PASSED|FAILED) |tests ran" "$OUT/tests.log" | head -5
  grep -E "^\[  FAILED  \]" "$OUT/tests.log" | head -40
  grep -E "Failure" "$OUT/tests.log" | head -20
  small='Sm80Sanitize.*'
  for tool in ${SM80_SANITIZERS-memcheck racecheck}; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/flashattn_gpu_tests" --gtest_filter="$small" \
      > "$OUT/sanitizer_$tool.log" 2>&1
    echo "compute-sanitizer $tool exit $? at $(( $(date +%s) - t0 )) s ($(grep -c 'OK \]' "$OUT/sanitizer_$tool.log") tests ok): $(grep -m2 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tr '\n' ' ')"
  done
fi

if [ "$what" != tests ]; then
  # One head dim at a time (ours, then the peers at the same shapes), the results archived after
  # each, so a call cut short keeps the head dims already done.
  rm -rf /tmp/sm80-sweep && mkdir -p /tmp/sm80-sweep
  for d in $headdims; do
    timeout 120 "$BIN/flashattn_sm80_bench" "${SM80_BENCH_REPS:-20}" "$d" > "/tmp/sm80-sweep/ours_d$d.jsonl" 2> "/tmp/sm80-sweep/ours_d$d.err"
    echo "bench d$d exit $? at $(( $(date +%s) - t0 )) s"
    PYTHONUNBUFFERED=1 timeout 150 python3 benchmarks/cpp/sm80_peers.py "/tmp/sm80-sweep/ours_d$d.jsonl" \
      "/tmp/sm80-sweep/results_d$d.json" 2> "/tmp/sm80-sweep/peers_d$d.err"
    echo "peers d$d exit $? at $(( $(date +%s) - t0 )) s"
    tail -2 "/tmp/sm80-sweep/peers_d$d.err"
    tar czf "$OUT/sweep.tgz" -C /tmp sm80-sweep
  done
  python3 -c "import json,glob,sys; json.dump(sum((json.load(open(f)) for f in sorted(glob.glob('/tmp/sm80-sweep/results_d*.json'))), []), open(sys.argv[1], 'w'), indent=1)" "$OUT/results.json"
fi

# At most 8 files come back from the device: the logs travel as one archive.
(cd "$OUT" && tar czf logs.tgz --remove-files ./*.log ./*.err ./*.txt ./*.jsonl ./*.csv 2> /dev/null)
ls "$OUT"
