#!/usr/bin/env bash
# One script for a GPU-machine session (the machine is offline: torch, nanobind and
# scikit-build-core are preinstalled; GoogleTest comes as a carried source tree in .deps/).
#
#   scripts/device_session.sh build   # full kernel set, C++ tests, CLI and the Python extension
#   scripts/device_session.sh test    # C++ GPU tests, compute-sanitizer subsets, Python GPU tests
#   scripts/device_session.sh bench   # side-by-side GPU benchmark and CPU benchmark vs PyTorch
#   scripts/device_session.sh cli     # `flashattn check` and `flashattn bench` on the CUDA backend
#   scripts/device_session.sh verify  # tests (sm80 forward forced too), sanitizers, CLI, quick bench
#   scripts/device_session.sh probe   # Python GPU tests, host/kernel profile, clock probe, quick bench
#   scripts/device_session.sh measure # MEASURE_* tests, sanitizers, sustained-window harness, package
#   scripts/device_session.sh clock   # clock_probe.py per line of CLOCK_RUNS (in-process sustained A/B)
#   scripts/device_session.sh gpubench  # bench_gpu.py with GPU_BENCH_ARGS only (e.g. an --ours-env A/B)
#   scripts/device_session.sh sweep   # issue 4's protocol sweep: forward rows and decode rows, clocks sampled
#   scripts/device_session.sh builds-ab  # bench_decode on reduced builds differing in one define (AB_BUILDS)
#   scripts/device_session.sh tma-probe  # the packed decode kernel's K / V loads alone (TMA stream probe)
#   scripts/device_session.sh one-wg  # the one-warpgroup packed d64 kernel: build, decode A/B
#   scripts/device_session.sh one-wg-tests  # after one-wg, warm: its tests and sanitizers
#   scripts/device_session.sh one-wg-all  # both in one call
#   scripts/device_session.sh one-wg-why  # its tie explained: equal splits, Nsight Compute beside cuDNN
#   scripts/device_session.sh one-wg-rule  # its default rule (<= 16 GQA tiles): tests, decode, memcheck
#   scripts/device_session.sh sliced  # the sliced decode kernel (16-row tiles): tests, d64 decode, sanitizers
#   scripts/device_session.sh sliced-time  # its d64 / d128 decode timings alone
#   scripts/device_session.sh sliced-time-check  # those timings, then the tests over session 94's review
#   scripts/device_session.sh sliced-why  # Nsight Compute on it, the rule's kernel and cuDNN (d64 decode)
#   scripts/device_session.sh sliced-splits  # its d64 tile counts 136-512, and its split shapes at equal pieces
#   scripts/device_session.sh sliced-next  # sliced-splits, then sliced-why's profiles
#   scripts/device_session.sh sliced-rule  # the sliced kernel's default rule: timed against =0, tested (session 96)
#   scripts/device_session.sh decode-cost  # d64 split decode: do_bench, graph replay, back to back, host us a call
#   scripts/device_session.sh decode-next  # the sliced rule at short caches, its tests, decode-cost, forced pieces (session 97)
#   scripts/device_session.sh decode-settle  # 8 tiles in both harnesses, pieces forced and not; Nsight at 136 tiles
#   scripts/device_session.sh shares  # the sliced kernel's key shares: build, tests, d64 decode A/B (session 98)
#   scripts/device_session.sh shares-check  # after shares, warm: their sanitizers, the d128 decode rows with and without
#   scripts/device_session.sh pdl     # the FLASHATTN_SM90_PDL build: its stream-order test and control, back_to_back
#   scripts/device_session.sh all
#   scripts/device_session.sh sweep-or MODE  # the sweep if the card is an H200 (issue 4 is judged
#                                           # there; `nvidia-h200` often gives an H100), else MODE
#
# Logs, JSON and charts go to $OUT; short summaries print last.
#
# BUILD_TARGETS: the targets to build (space-separated) instead of everything, e.g.
# "flashattn flashattn_gpu_tests _C": the default target builds the variant harness too, which
# alone can take most of a call's 600 s (session 58).
# BUILD_CMAKE_ARGS: more cmake options for the build, e.g. -DFLASHATTN_SM90_BASELINE=$PWD/.base for
# an older sm90 kernel in the variant harness (benchmarks/cpp/sm90_baseline.cu; carry ".base").
#
# Before the first call of a session, on the development machine:
#   mkdir -p .deps && cp -r /usr/src/googletest .deps/ && echo /.deps/ >> .git/info/exclude
# and name ".deps" in the run call's carry list. A call made within 30 s of the previous one finds
# the machine warm and the build folder still there (the build then takes seconds).
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
OUT=${OUT:-/tmp/flashattn-device}
mkdir -p "$OUT"
BUILD=build-device
jobs=$(nproc)

# BUILD_LOG: the log's name in $OUT (build.log); BUILD_PACKAGE: the package folder the extension
# goes into (python/flashattn, where the package imports it from).
build() {
  local start=$(date +%s) log="$OUT/${BUILD_LOG:-build.log}"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHATTN_CUDA=ON -DFLASHATTN_BUILD_PYTHON=ON \
    -DPython_EXECUTABLE="$(command -v python3)" -DFLASHATTN_GTEST_SOURCE="$PWD/.deps/googletest" ${BUILD_CMAKE_ARGS:-} \
    > "$log" 2>&1 &&
    cmake --build "$BUILD" -j "$jobs" ${BUILD_TARGETS:+--target $BUILD_TARGETS} >> "$log" 2>&1
  local rc=$?
  cp "$BUILD"/python/_C*.so "${BUILD_PACKAGE:-python/flashattn}/" 2>/dev/null
  echo "build exit $rc in $(( $(date +%s) - start )) s"
  [ $rc = 0 ] || tail -30 "$log"
  # The whole kernel set's machine code: no spills, HMMA / HGMMA in the main kernels.
  [ $rc = 0 ] && python3 scripts/check_sass.py "$BUILD/libflashattn.a" 2>&1 | tail -20
  # ptxas's wgmma serialisation notes (C7510-C7516: every wgmma of the kernel waited for at once).
  echo "ptxas wgmma serialisation notes: $(grep -c 'Potential Performance Loss: wgmma' "$log")"
  grep -o 'Potential Performance Loss: wgmma.*function .[A-Za-z0-9_]*' "$log" | cut -c1-200 | sort | uniq | head -5
  return $rc
}

# archive_logs PATTERN...: few files come back from a call, so the files of $OUT matching the
# patterns travel as one archive, logs.tgz (nullglob: a pattern without files, such as no *.err,
# once failed the tar and left every log behind).
archive_logs() {
  (cd "$OUT" && shopt -s nullglob && local files=($@) && [ ${#files[@]} -gt 0 ] &&
    tar czf logs.tgz "${files[@]}" && rm -f "${files[@]}")
}

# gtest_run LOG SECONDS LABEL [gtest args...]: the C++ GPU tests, a one-line summary and the failures.
gtest_run() {
  local log="$OUT/$1" seconds=$2 label=$3
  shift 3
  timeout "$seconds" "$BUILD/tests/cpp/gpu/flashattn_gpu_tests" "$@" > "$log" 2>&1
  echo "$label exit $?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \]" "$log" | head -20
}

# decode_bench NAME SECONDS LABEL ARGS...: benchmarks/bench_decode.py ARGS on the package built
# here, JSON and log to $OUT/NAME.json / .log; its exit and row lines printed.
decode_bench() {
  local name=$1 seconds=$2 label=$3
  shift 3
  PYTHONPATH="$PWD/python" timeout "$seconds" python3 benchmarks/bench_decode.py "$@" --out "$OUT/$name.json" \
    > "$OUT/$name.log" 2>&1
  echo "$label exit $?"; grep '^b=' "$OUT/$name.log"
}

# sanitize SECONDS FILTER TOOL...: compute-sanitizer over the tests FILTER selects, per tool.
sanitize() {
  local seconds=$1 filter=$2
  shift 2
  for tool in "$@"; do
    timeout "$seconds" compute-sanitizer --tool "$tool" --error-exitcode 9 "$BUILD/tests/cpp/gpu/flashattn_gpu_tests" \
      --gtest_filter="$filter" > "$OUT/sanitizer_$tool.log" 2>&1
    echo "compute-sanitizer $tool exit $? ($(grep -c 'OK \]' "$OUT/sanitizer_$tool.log") tests): $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log")"
  done
}

cpp_tests() {
  gtest_run gpu_tests.log 300 "C++ GPU tests"
  # SANITIZE_EXTRA: more gtest patterns (':'-separated) for the kernels a session changed.
  sanitize 150 "*Sanitize*:*Sm90*small_d128_bf16*:*Sm90*varlen_bf16*:Sm90Paged.*${SANITIZE_EXTRA:+:$SANITIZE_EXTRA}" memcheck racecheck synccheck
}

# PYTEST_K: a pytest -k expression, those Python GPU tests only (e.g. 'kvcache or paged').
python_tests() {
  PYTHONPATH="$PWD/python" timeout ${PY_TIMEOUT:-400} python3 -m pytest tests/python -m gpu -q -rs -p no:cacheprovider \
    ${PYTEST_K:+-k "$PYTEST_K"} > "$OUT/pytest_gpu.log" 2>&1
  echo "Python GPU tests exit $?: $(tail -1 "$OUT/pytest_gpu.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/pytest_gpu.log" | head -20
}

gpu_bench() {
  PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1 timeout ${GPU_BENCH_TIMEOUT:-400} python3 benchmarks/bench_gpu.py ${GPU_BENCH_ARGS:-} \
    --out "$OUT/gpu_bf16.json" --png-dir "$OUT" > "$OUT/bench_gpu.log" 2> "$OUT/bench_gpu.err"
  echo "GPU bench exit $?"
  tail -3 "$OUT/bench_gpu.err"
  cat "$OUT/bench_gpu.log"
}

cli_gpu() {
  # The README's main job on a GPU machine: `flashattn bench` and `flashattn check` on the CUDA backend.
  local cli="$BUILD/tools/flashattn/flashattn"
  timeout 120 "$cli" check --backend cuda --no-progress > "$OUT/cli_check_cuda.log" 2>&1
  echo "flashattn check --backend cuda exit $?: $(tail -1 "$OUT/cli_check_cuda.log")"
  timeout ${CLI_TIMEOUT:-240} "$cli" bench --backend cuda --no-progress ${CLI_BENCH_ARGS:-} > "$OUT/cli_bench_cuda.log" 2>&1
  echo "flashattn bench --backend cuda exit $?"
  tail -25 "$OUT/cli_bench_cuda.log"
}

# The session's last call: every test once, the sm80 forward forced on Hopper for its own tests,
# the sanitizers, the CLI on the GPU and a quick side-by-side benchmark, within one call's limit.
# VERIFY_SKIP may name steps to leave out ("sm80 cli") when the device budget is short.
verify() {
  gtest_run gpu_tests.log ${VERIFY_TEST_TIMEOUT:-240} "C++ GPU tests"
  if [[ " ${VERIFY_SKIP:-} " != *" sm80 "* ]]; then
    FLASHATTN_CUDA_KERNELS=sm80 gtest_run gpu_tests_sm80.log 100 "C++ GPU tests, sm80 forward forced" \
      --gtest_filter='*Sm80*:*Seqused*'
  fi
  PY_TIMEOUT=150 python_tests
  # The newest paths only (the kernel owners ran the full sanitizer sets on their last versions).
  sanitize 60 "${VERIFY_SANITIZE:-*GpuSeqused*varlen_q_k_causal*:*Sm90*seqused_q_fixed_causal*:*Sm90ForwardDirect.SeqUsed*}" \
    memcheck racecheck
  [[ " ${VERIFY_SKIP:-} " == *" cli "* ]] || CLI_TIMEOUT=60 CLI_BENCH_ARGS="--quick ${CLI_BENCH_ARGS:-}" cli_gpu
  # VERIFY_BENCH_ARGS="" times the whole protocol sweep (all head dims, fwd and bwd: ~4 min with
  # bench_gpu.py's 3 rotated rounds; --rounds 1 about a third of that).
  GPU_BENCH_TIMEOUT=${VERIFY_BENCH_TIMEOUT:-150} GPU_BENCH_ARGS="${VERIFY_BENCH_ARGS---quick --headdims 128}" gpu_bench
  archive_logs './*.log'
}

# Where the package's time goes: the per-kernel profile of one forward + backward (short causal),
# and the clocks / power / host cost of ours and the peers under sustained load (clock_probe.py).
probe() {
  PY_TIMEOUT=150 python_tests
  PYTHONPATH="$PWD/python" timeout 60 python3 benchmarks/profile_backward.py --causal > "$OUT/profile_backward.log" 2>&1
  echo "profile_backward exit $?"; tail -25 "$OUT/profile_backward.log"
  PYTHONPATH="$PWD/python" timeout 120 python3 benchmarks/clock_probe.py ${PROBE_ARGS:---headdim 128 --seqlen 8192} \
    --out "$OUT/clock_probe.json" > "$OUT/clock_probe.log" 2>&1
  echo "clock_probe exit $?"; tail -8 "$OUT/clock_probe.log"
  GPU_BENCH_TIMEOUT=${PROBE_BENCH_TIMEOUT:-150} GPU_BENCH_ARGS="${PROBE_BENCH_ARGS---quick}" gpu_bench
  archive_logs './*.log'
}

# Sustained-window A/B (docs/perf.md, v8). With nvidia-smi sampling throughout: the C++ GPU tests
# MEASURE_TESTS selects and compute-sanitizer over MEASURE_SANITIZE (each skipped when empty); the
# variant harness with 200 ms windows (MEASURE_WINDOW_MS) per variant and round (MEASURE_ROUNDS,
# 2; twice the number of variants a line selects puts each in every position once each way, as an
# A/B of a few percent needs) after an untimed window (the short
# windows of v1-v7 ran at a higher clock than sustained work), one line of MEASURE_HARNESS
# ("hdim variants,... [protocol_only]") per head dim (protocol shapes only; a third field of 0, or
# MEASURE_PROTOCOL_ONLY=0 for every line, adds the decode-like GQA shapes, where the *_used_k
# variants run); MEASURE_NCU (one backward launch under Nsight Compute),
# MEASURE_PYTEST=1 (the Python GPU tests); MEASURE_PY_SANITIZE (a pytest -k expression: those Python
# GPU tests under compute-sanitizer); MEASURE_PACKAGE: bench_gpu.py arguments for one package run
# (MEASURE_PACKAGE_TIMEOUT seconds, 150 by default).
measure() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader,nounits -lms 100 -f "$OUT/smi.csv" > /dev/null 2>&1 &
  local smi=$!
  if [ -n "${MEASURE_TESTS:-}" ]; then
    timeout 30 "$BUILD/tests/cpp/gpu/flashattn_gpu_tests" --gtest_filter='*Sm90*small_d128_bf16' > "$OUT/smoke.log" 2>&1
    local rc=$?
    echo "smoke exit $rc"
    if [ $rc = 124 ]; then kill $smi; return 1; fi
    # MEASURE_GUARD: the suites of a kernel not yet run on a GPU, alone and briefly first, so a hang
    # costs a minute rather than the whole test run's limit.
    if [ -n "${MEASURE_GUARD:-}" ]; then
      gtest_run guard.log 60 "guard ($MEASURE_GUARD)" --gtest_filter="$MEASURE_GUARD"
      if ! grep -qE '^\[  PASSED  \]' "$OUT/guard.log"; then tail -5 "$OUT/guard.log"; fi
    fi
    # MEASURE_TESTS_TIMEOUT: seconds for them (240; `*Sm90*` with the backward's 138 cases needs more).
    gtest_run gpu_tests.log ${MEASURE_TESTS_TIMEOUT:-240} "C++ GPU tests ($MEASURE_TESTS)" --gtest_filter="$MEASURE_TESTS"
  fi
  # MEASURE_SM80_TESTS: a filter of C++ GPU tests run again with the sm80 forward forced.
  if [ -n "${MEASURE_SM80_TESTS:-}" ]; then
    FLASHATTN_CUDA_KERNELS=sm80 gtest_run gpu_tests_sm80.log 150 "C++ GPU tests, sm80 forced ($MEASURE_SM80_TESTS)" \
      --gtest_filter="$MEASURE_SM80_TESTS"
  fi
  [ -n "${MEASURE_SANITIZE:-}" ] && sanitize ${MEASURE_SANITIZE_TIMEOUT:-120} "$MEASURE_SANITIZE" memcheck racecheck synccheck
  local line
  while read -r line; do
    [ -n "$line" ] || continue
    set -- $line
    timeout 200 "$BUILD/flashattn_sm90_variants" 0 "${MEASURE_ROUNDS:-2}" "$1" 0 -1 "$2" 1 "${MEASURE_WINDOW_MS:-200}" \
      "${3:-${MEASURE_PROTOCOL_ONLY:-1}}" \
      >> "$OUT/harness.jsonl" 2>> "$OUT/harness.err"
    echo "harness hdim $1 exit $?"
  done <<< "${MEASURE_HARNESS:-}"
  [ -s "$OUT/harness.jsonl" ] && python3 benchmarks/cpp/sm90_variants_table.py "$OUT/harness.jsonl"
  # MEASURE_HOST_COST=1: host time per call of the C++ API and of the CUDA runtime calls it makes
  # (flashattn_host_cost), then of the package's pieces beside FA2's (benchmarks/host_cost.py).
  if [ -n "${MEASURE_HOST_COST:-}" ]; then
    timeout 60 "$BUILD/flashattn_host_cost" > "$OUT/host_cost_cpp.jsonl" 2> "$OUT/host_cost_cpp.err"
    echo "host_cost (C++) exit $?"; cat "$OUT/host_cost_cpp.jsonl"; tail -3 "$OUT/host_cost_cpp.err"
    PYTHONPATH="$PWD/python" timeout 90 python3 benchmarks/host_cost.py > "$OUT/host_cost_py.log" 2>&1
    echo "host_cost.py exit $?"; cat "$OUT/host_cost_py.log" | tail -20
  fi
  # MEASURE_PROFILE: benchmarks/profile_backward.py arguments (per-kernel CUDA time of one package
  # forward + backward beside FA2's, and the host time per call).
  if [ -n "${MEASURE_PROFILE:-}" ]; then
    PYTHONPATH="$PWD/python" timeout 90 python3 benchmarks/profile_backward.py $MEASURE_PROFILE > "$OUT/profile_backward.log" 2>&1
    echo "profile_backward exit $?"; tail -30 "$OUT/profile_backward.log"
  fi
  # MEASURE_NCU: benchmarks/ncu_backward.py arguments; Nsight Compute's speed-of-light, pipe,
  # memory and warp-stall sections for one launch of the main backward kernel at that shape.
  if [ -n "${MEASURE_NCU:-}" ]; then
    PYTHONPATH="$PWD/python" timeout 180 ncu --clock-control none --kernel-name regex:backward_kernel --launch-skip 2 \
      --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
      python3 benchmarks/ncu_backward.py $MEASURE_NCU > "$OUT/ncu.log" 2>&1
    echo "ncu exit $?"; grep -vE '^==PROF==|^\s*$|^    -{5}' "$OUT/ncu.log" | tail -90
  fi
  # MEASURE_NCU_FWD: "hdim seqlen causal variant" entries separated by ';', each Nsight Compute's
  # full set for one launch of our forward (the variant harness) and of cuDNN's at that shape
  # (benchmarks/cpp/sm90_ncu.sh; summaries print, CSVs go to $OUT/ncu_fwd<i>/ncu.tgz).
  if [ -n "${MEASURE_NCU_FWD:-}" ]; then
    local i=0 entry
    IFS=';' read -ra entries <<< "$MEASURE_NCU_FWD"
    for entry in "${entries[@]}"; do
      i=$((i + 1))
      OUT="$OUT/ncu_fwd$i" SM90_VARIANTS_BIN="$BUILD/flashattn_sm90_variants" timeout 240 bash benchmarks/cpp/sm90_ncu.sh $entry \
        > "$OUT/ncu_fwd$i.log" 2>&1
      echo "ncu forward ($entry) exit $?"; grep -vE '^total|^d|^-' "$OUT/ncu_fwd$i.log" | tail -60
    done
  fi
  # MEASURE_NCU_DECODE: benchmarks/ncu_decode.py arguments; every kernel of one decode call of
  # ours and of cuDNN under Nsight Compute (launch shape, speed of light, memory, warp stalls).
  if [ -n "${MEASURE_NCU_DECODE:-}" ]; then
    PYTHONPATH="$PWD/python" timeout 180 ncu --clock-control none --nvtx --nvtx-include "ncu_flashattn/" \
      --nvtx-include "ncu_cudnn/" --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis \
      --print-details all --metrics dram__bytes_read.sum,dram__bytes_read.sum.per_second,lts__t_sector_hit_rate.pct,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum \
      python3 benchmarks/ncu_decode.py $MEASURE_NCU_DECODE > "$OUT/ncu_decode.log" 2>&1
    echo "ncu decode exit $?"; grep -vE '^==PROF==|^\s*$|^    -{5}' "$OUT/ncu_decode.log" | cut -c1-150 | tail -150
  fi
  # MEASURE_SM80_VARIANTS: "hdim seqlen causal" entries separated by ';', each a run of the sm80
  # backward's variant harness (benchmarks/cpp/sm80_bwd_variants.cu) in the order
  # MEASURE_SM80_ORDER (SM80_VARIANT, interleaved for an A/B), MEASURE_SM80_REPS launches each.
  if [ -n "${MEASURE_SM80_VARIANTS:-}" ]; then
    local variants_entry
    IFS=';' read -ra variants_entries <<< "$MEASURE_SM80_VARIANTS"
    for variants_entry in "${variants_entries[@]}"; do
      SM80_VARIANT=${MEASURE_SM80_ORDER:-0} timeout 120 "$BUILD/flashattn_sm80_bwd_variants" $variants_entry \
        ${MEASURE_SM80_REPS:-60} >> "$OUT/sm80_variants.log" 2>&1
      echo "sm80 variants ($variants_entry) exit $?"
    done
    grep "^variant" "$OUT/sm80_variants.log"
  fi
  # MEASURE_PYTEST=1: the Python GPU tests.
  [ -n "${MEASURE_PYTEST:-}" ] && PY_TIMEOUT=200 python_tests
  # MEASURE_PY_SANITIZE: a pytest -k expression; the Python GPU tests it selects under each
  # compute-sanitizer tool (paths the package builds from the library's calls, e.g. cache_leftpad's).
  if [ -n "${MEASURE_PY_SANITIZE:-}" ]; then
    local tool
    for tool in memcheck racecheck synccheck; do
      PYTHONPATH="$PWD/python" timeout ${MEASURE_PY_SANITIZE_TIMEOUT:-120} compute-sanitizer --tool $tool \
        --error-exitcode 9 python3 -m pytest tests/python -m gpu -q -p no:cacheprovider -k "$MEASURE_PY_SANITIZE" \
        > "$OUT/py_sanitizer_$tool.log" 2>&1
      echo "compute-sanitizer $tool on pytest -k '$MEASURE_PY_SANITIZE' exit $?: $(grep -m1 -E '[0-9]+ passed|failed|error' "$OUT/py_sanitizer_$tool.log") $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/py_sanitizer_$tool.log")"
    done
  fi
  if [ -n "${MEASURE_PACKAGE:-}" ]; then
    # MEASURE_PACKAGE_ENV: arguments of env(1) for the package run alone, e.g.
    # "-u FLASHATTN_SM80_FORWARD_TILES FLASHATTN_CUDA_KERNELS=sm80" (a variable read once per process).
    env ${MEASURE_PACKAGE_ENV:-} PYTHONPATH="$PWD/python" timeout ${MEASURE_PACKAGE_TIMEOUT:-150} python3 benchmarks/bench_gpu.py $MEASURE_PACKAGE --out "$OUT/package.json" \
      > "$OUT/package.log" 2>&1
    echo "package exit $?"; tail -25 "$OUT/package.log"
  fi
  # MEASURE_DECODE: benchmarks/bench_decode.py arguments (the protocol's decode rows; "--rounds 3"
  # for the defaults), e.g. --ours-env FLASHATTN_SM90_PACK_GQA=0 for an A/B. MEASURE_DECODE_EACH:
  # space-separated NAME=VALUE settings, the run once each with that setting made for the whole
  # process (decode_<n>.json; the --ours-env slot's host time binds short decode calls, session
  # 70), e.g. "FLASHATTN_SM90_L2_PROMOTION=256 FLASHATTN_SM90_L2_PROMOTION=none" with "--rows 0".
  if [ -n "${MEASURE_DECODE:-}" ]; then
    eval "set -- $MEASURE_DECODE"  # keeps quoted settings with ';' in them whole
    local setting name n=0
    for setting in ${MEASURE_DECODE_EACH:-""}; do
      name=decode${MEASURE_DECODE_EACH:+_$((n += 1))}
      env ${setting:+"$setting"} PYTHONPATH="$PWD/python" timeout ${MEASURE_DECODE_TIMEOUT:-150} \
        python3 benchmarks/bench_decode.py "$@" --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
      echo "decode${setting:+ ($setting)} exit $?"; tail -8 "$OUT/$name.log"
    done
  fi
  # MEASURE_DECODE_PROFILE: benchmarks/decode_profile.py arguments (each implementation's and
  # --ours-env setting's kernels and device times a decode call, its back-to-back and host time);
  # runs separated by '|' (each with MEASURE_DECODE_PROFILE_TIMEOUT seconds, a log of its own;
  # not ';', which --ours-env takes between settings).
  if [ -n "${MEASURE_DECODE_PROFILE:-}" ]; then
    local run=0 entry entries
    IFS='|' read -ra entries <<< "$MEASURE_DECODE_PROFILE"
    for entry in "${entries[@]}"; do
      [ -n "${entry// /}" ] || continue  # an empty run (a stray '|') would run the default shapes
      run=$((run + 1))
      eval "set -- $entry"
      PYTHONPATH="$PWD/python" timeout ${MEASURE_DECODE_PROFILE_TIMEOUT:-150} python3 benchmarks/decode_profile.py "$@" \
        > "$OUT/decode_profile_$run.log" 2>&1
      echo "decode_profile $run exit $?"; grep -v 'UserWarning\|_warn_once' "$OUT/decode_profile_$run.log" | tail -60
    done
  fi
  kill $smi
  archive_logs './*.log' './*.csv' './*.err'
}

# benchmarks/clock_probe.py once per line of CLOCK_RUNS (its arguments): sustained in-process A/B
# of implementations, e.g. "--headdim 128 --seqlen 512 --causal --impls flashattn_groups_l2,flashattn_groups_one".
clock_runs() {
  local line i=0
  while read -r line; do
    [ -n "$line" ] || continue
    i=$((i + 1))
    PYTHONPATH="$PWD/python" timeout 120 python3 benchmarks/clock_probe.py $line --out "$OUT/clock_$i.json" \
      > "$OUT/clock_$i.log" 2>&1
    echo "clock_probe $line: exit $?"; tail -n +2 "$OUT/clock_$i.log" | grep -v '^{'
  done <<< "${CLOCK_RUNS:-}"
}

# The protocol sweep issue 4 is judged by (benchmark-protocol.md): the package's forward rows
# (bench_gpu.py --fwd-only, 3 rounds, 6 for the rows up to 1k keys) with nvidia-smi sampled, then the
# decode rows (bench_decode.py, 3 rounds). Each short row's rounds with their clock and host time
# (round_clocks.py) go to short_rounds.txt; the two tables print last. SWEEP_TIMEOUT (package,
# 300 s) and SWEEP_DECODE_TIMEOUT (130 s) bound the parts; on an H100 the whole took ~185 s in
# session 72 before the short rows' 6 rounds (~40 s more).
sweep() {
  PYTHONPATH="$PWD/python" timeout ${SWEEP_TIMEOUT:-300} python3 benchmarks/bench_gpu.py --fwd-only --rounds 3 \
    --smi-out "$OUT/sweep-smi.csv" --out "$OUT/sweep.json" > "$OUT/sweep.log" 2>&1
  echo "sweep exit $?"
  PYTHONPATH="$PWD/python" timeout ${SWEEP_DECODE_TIMEOUT:-130} python3 benchmarks/bench_decode.py --rounds 3 \
    --out "$OUT/decode.json" > "$OUT/decode.log" 2>&1
  echo "decode exit $?"
  if [ -s "$OUT/sweep.json" ] && [ -s "$OUT/sweep-smi.csv" ]; then
    python3 benchmarks/round_clocks.py "$OUT/sweep.json" "$OUT/sweep-smi.csv" |
      awk '/^d/ { short = ($2 == "n512" || $2 == "n1024") } short' > "$OUT/short_rounds.txt"
  fi
  # The tables the two scripts print last (bench_gpu's TFLOP/s table, bench_decode's row lines).
  grep '^b=' "$OUT/decode.log"
  sed -n '/^TFLOP\/s (ratio/,$p' "$OUT/sweep.log"
  archive_logs './*.log' './*.csv'
}

# package_build NAME CMAKE_ARGS: the extension alone, built in folder NAME (log NAME.log) with
# CMAKE_ARGS, into /tmp/python-NAME: a copy of the package holding this build's extension only
# (python/flashattn may hold another's).
package_build() {
  local name=$1
  rm -rf "/tmp/python-$name" && cp -r python "/tmp/python-$name" && rm -f "/tmp/python-$name"/flashattn/_C*.so || return 1
  ( BUILD=$name BUILD_LOG=$name.log BUILD_PACKAGE="/tmp/python-$name/flashattn" BUILD_TARGETS=_C BUILD_CMAKE_ARGS="$2" build )
}

# The programmatic-dependent-launch build (CMake option FLASHATTN_SM90_PDL, docs/design.md): two
# reduced builds of the extension (head dims 64 and 128, bf16), one with the kernel's wait and one without
# (FLASHATTN_SM90_UNSAFE_NO_GRID_WAIT, the control: tests/python/test_gpu_stream_order.py must fail
# there), the test on each, then benchmarks/back_to_back.py with and without PDL on the first.
# ~30-40 s a build on 16 cores (session 74). The option is on by default since then (every other
# mode builds with it); the option named here keeps this mode's meaning if the default moves.
pdl() {
  local b timed_build=""
  for b in build-pdl build-pdl-nowait; do
    local flags=""
    [ "$b" = build-pdl-nowait ] && flags="-DCMAKE_CUDA_FLAGS=-DFLASHATTN_SM90_UNSAFE_NO_GRID_WAIT"
    package_build "$b" "-DFLASHATTN_HDIMS=64;128 -DFLASHATTN_DTYPES=bf16 -DFLASHATTN_BUILD_SM90_VARIANTS=OFF -DFLASHATTN_SM90_PDL=ON $flags" ||
      continue
    [ "$b" = build-pdl ] && timed_build=$b
    PYTHONPATH="/tmp/python-$b" timeout 60 python3 -m pytest -q -p no:cacheprovider tests/python/test_gpu_stream_order.py \
      -m gpu > "$OUT/stream_order_$b.log" 2>&1
    echo "$b: stream-order test exit $? ($(tail -1 "$OUT/stream_order_$b.log"))"
  done
  if [ -n "$timed_build" ]; then
    PYTHONPATH="/tmp/python-$timed_build" timeout 120 python3 benchmarks/back_to_back.py --rounds 5 \
      --ours-env FLASHATTN_SM90_PDL=0 2>&1 | tee "$OUT/back_to_back.txt"
  fi
  archive_logs './*.log'
}

# One benchmark on reduced builds of the extension that differ in one compiler define: AB_BUILDS
# is space-separated NAME=FLAG entries (FLAG a -D option of the CUDA compiler, or empty for the
# baseline), AB_CMAKE_ARGS the reduction (head dim 64, bf16 by default), AB_DECODE bench_decode.py's
# arguments, run in the order of AB_BUILDS for AB_ROUNDS rounds (2), each in a process of its own
# (its peers beside it). E.g. AB_BUILDS="whole=-DFLASHATTN_SM90_PACKED_WHOLE_SOFTMAX half=" (session 90).
builds_ab() {
  local entry name flag round built=()
  for entry in ${AB_BUILDS:?builds-ab needs AB_BUILDS}; do
    name=${entry%%=*} flag=${entry#*=}
    package_build "build-ab-$name" \
      "${AB_CMAKE_ARGS:--DFLASHATTN_HDIMS=64 -DFLASHATTN_DTYPES=bf16} -DFLASHATTN_BUILD_SM90_VARIANTS=OFF ${flag:+-DCMAKE_CUDA_FLAGS=$flag}" &&
      built+=("$name")
  done
  eval "set -- ${AB_DECODE:-}"  # keeps quoted arguments (--rows '') whole
  for round in $(seq "${AB_ROUNDS:-2}"); do
    for name in "${built[@]}"; do
      PYTHONPATH="/tmp/python-build-ab-$name" timeout "${AB_TIMEOUT:-90}" python3 benchmarks/bench_decode.py "$@" \
        --out "$OUT/ab_${name}_$round.json" > "$OUT/ab_${name}_$round.log" 2>&1
      echo "$name, round $round: exit $?"; grep '^b=' "$OUT/ab_${name}_$round.log"
    done
  done
  archive_logs './*.log'
}

# The one-consumer-warpgroup packed kernel (sm90::PackGqaOneWgConfig, session 92). `one-wg`: the
# library, tests and extension, then its d64 decode timing against the two-warpgroup packed kernel
# (FLASHATTN_SM90_PACK_GQA_ONE_WG=0) and cuDNN in one process (ONE_WG_DECODE: bench_decode.py's
# arguments). `one-wg-tests` (after it, on the same warm machine, whose build is kept): the
# packed, key-split, paged, graph-capture and rule tests, which run each d64 packed case on both
# packed kernels, then the sanitizers on the d64 packed cases (two without d64 in their names).
ONE_WG_TESTS='*Sm90GqaPacking*:*PackGqaOneWg*:*Sm90KeySplit*:*Paged*:*GraphCapture*:*Sm90ApiPick*'
ONE_WG_SANITIZE='*Sm90GqaPacking*d64*:*Sm90GqaPacking*g8_persistent_q1_k1000_fp16*:*Sm90GqaPacking*g2_head_major_q17_k90_causal_fp16*:*PackGqaOneWg*'
one_wg() {
  : "${BUILD_TARGETS:=flashattn flashattn_gpu_tests _C}"
  build || return 1
  eval "set -- ${ONE_WG_DECODE:---rows '' --headdim 64 --rounds 2 --shape 2,32,8,32768 --shape 8,32,8,8192 --shape 1,32,8,32768 --shape 5,32,8,8192 --shape 4,32,32,8192}"
  PYTHONPATH="$PWD/python" timeout 150 python3 benchmarks/bench_decode.py "$@" --ours-env FLASHATTN_SM90_PACK_GQA_ONE_WG=1 \
    --ours-env FLASHATTN_SM90_PACK_GQA_ONE_WG=0 \
    --out "$OUT/one_wg_decode.json" > "$OUT/one_wg_decode.log" 2>&1
  echo "one-WG decode A/B exit $?"; tail -14 "$OUT/one_wg_decode.log"
}
one_wg_tests() {
  : "${BUILD_TARGETS:=flashattn flashattn_gpu_tests _C}"
  build > "$OUT/one_wg_rebuild.txt" || { cat "$OUT/one_wg_rebuild.txt"; return 1; }
  head -1 "$OUT/one_wg_rebuild.txt"
  one_wg_checks
}
# The tests and sanitizers of one-wg-tests on the build there is.
one_wg_checks() {
  gtest_run one_wg_tests.log 200 "packed tests (both packed kernels)" --gtest_filter="$ONE_WG_TESTS"
  # The paged and key-split cases with the one-warpgroup kernel on wherever it can run (=1; the rule takes only small GQA grids).
  FLASHATTN_SM90_PACK_GQA_ONE_WG=1 gtest_run one_wg_on_tests.log 120 "paged and key-split tests, one-WG kernel forced (=1)" \
    --gtest_filter='*Paged*:*Sm90KeySplits*'
  sanitize "${SANITIZE_SECONDS:-100}" "$ONE_WG_SANITIZE" memcheck racecheck synccheck
}

# Why the one-warpgroup kernel only tied the two-warpgroup one (session 93): the split count held
# equal (FLASHATTN_SM90_KEY_SPLITS, both kernels at 8 and 16 pieces), then Nsight Compute on one d64
# decode call of each packed kernel and of cuDNN at (2, 32 / 8, 32k): warp stalls, pipes, issue,
# the SASS lines the stalls sit on. Builds the extension only; `sweep` can follow on its build
# (whose archive then takes these logs too).
one_wg_why() {
  : "${BUILD_TARGETS:=_C}"
  build || return 1
  local s settings=()
  for s in 8 16; do
    settings+=(--ours-env "FLASHATTN_SM90_PACK_GQA_ONE_WG=1;FLASHATTN_SM90_KEY_SPLITS=$s"
               --ours-env "FLASHATTN_SM90_PACK_GQA_ONE_WG=0;FLASHATTN_SM90_KEY_SPLITS=$s")
  done
  decode_bench one_wg_splits 90 "one-WG at equal splits" --rows '' --headdim 64 --rounds 2 \
    --shape 1,32,8,32768 --shape 2,32,8,32768 "${settings[@]}"
  ncu_decode_switch FLASHATTN_SM90_PACK_GQA_ONE_WG one_wg "one-WG switch"
}

# The sliced decode kernel (session 94: 16-row mma.sync tiles, warps across each key block; on
# only with FLASHATTN_SM90_SLICED_DECODE=1): the library, tests and extension; its tests (packed
# cases, key splits, pages, graph capture) and the one-WG rule's checks not yet run on a GPU; d64
# decode with it against the rule's kernels beside cuDNN (the protocol's decode shapes at d64 and
# session 93's), d128 at the protocol's decode rows; the sanitizers on its cases.
sliced() {
  : "${BUILD_TARGETS:=flashattn flashattn_gpu_tests _C}"
  build || return 1
  gtest_run sliced_tests.log 200 "sliced decode and one-WG rule tests" \
    --gtest_filter='*SlicedDecode*:*PackGqaOneWg*:*Sm90GqaPacking.BothPacked*:*GraphCapture*:Sm90ApiPickOverride.*:Sm90Paged.*'
  sliced_decode_d64
  # In order of need: a call cut short by the device's time left still brings back what ran.
  local filter='*Sm90GqaPacking.SlicedDecode*:*Sm90KeySplits.SlicedDecode*ks3*'
  sanitize 60 "$filter" memcheck
  sliced_decode_d128
  sanitize 60 "$filter" racecheck synccheck
}

# Its timings alone (session 94 ran its tests and sanitizers clean): the extension, then d64 and
# d128 decode with it against the rule's kernels beside cuDNN.
sliced_time() {
  : "${BUILD_TARGETS:=_C}"
  build || return 1
  sliced_decode_d64
  sliced_decode_d128
}

# Its timings first, then (session 94's review came after its only call) the tests over the
# refactored visible-key span and split count: sliced, packed, key-split, paged, masks.
sliced_time_check() {
  : "${BUILD_TARGETS:=flashattn flashattn_gpu_tests _C}"
  sliced_time || return 1
  gtest_run sliced_check_tests.log 200 "sliced, packed, key-split, paged and mask tests" \
    --gtest_filter='*SlicedDecode*:*Sm90GqaPacking*:*Sm90KeySplit*:Sm90Paged.*:*Causal*:*Window*:*GraphCapture*'
}

# If the sliced kernel misses its prediction: Nsight Compute on one d64 decode call of it, of the
# rule's kernel and of cuDNN at (2, 32 / 8, 32k), as one_wg_why reads them (DRAM throughput, warp
# stalls, issue, the SASS lines the stalls sit on). Builds the extension only.
sliced_why() {
  : "${BUILD_TARGETS:=_C}"
  build || return 1
  ncu_decode_switch FLASHATTN_SM90_SLICED_DECODE sliced "sliced switch"
}

# ncu_decode_switch VARIABLE NAME LABEL: Nsight Compute on one d64 decode call at NCU_SHAPE (default
# (2, 32 / 8, 32k)) of ours with VARIABLE=1, of ours with VARIABLE=0 and of cuDNN, each to
# $OUT/ncu_NAME_<1|0|cudnn>.log; the launch, memory, warp-stall and issue lines printed.
ncu_decode_switch() {
  local variable=$1 name=$2 label=$3 which impl
  for which in 1 0 cudnn; do
    impl=flashattn; [ "$which" = cudnn ] && impl=cudnn
    env "$variable=${which/cudnn/0}" PYTHONPATH="$PWD/python" timeout 120 ncu --clock-control none \
      --nvtx --nvtx-include "ncu_$impl/" --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
      --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters --print-details all \
      ${NCU_METRICS:+--metrics "$NCU_METRICS"} python3 benchmarks/ncu_decode.py --headdim 64 --shape "${NCU_SHAPE:-2,32,8,32768}" --impls "$impl" \
      > "$OUT/ncu_${name}_$which.log" 2>&1
    echo "ncu ($impl, $label $which) exit $?"
    grep -E 'sliced|forward_kernel|combine|Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc Active|No Eligible|Warp Cycles Per Issued|Stall|Eligible Warps|Active Warps Per|Registers Per|Shared Memory Configuration|Block Size|Grid Size|Waves|Theoretical Occ|Achieved Occ|pipe|sm__ctas_launched|sm__cycles_active' \
      "$OUT/ncu_${name}_$which.log" | grep -v '^==' | cut -c1-160 | head -60
  done
}

# Session 95 timed it (H100, one round): d64 +7-8% over the rule's kernels at 256 / 512 tiles
# (no split), -7% / -16% at 128 / 8 tiles (split). Before a default rule: the tile counts between
# (136, 160, 192, 320), two rounds; and the split shapes with the pieces held equal
# (FLASHATTN_SM90_KEY_SPLITS) on both kernels, so what the split path costs shows apart from the
# piece count its rule picks.
sliced_splits() {
  : "${BUILD_TARGETS:=_C}"
  build || return 1
  decode_bench sliced_tiles 150 "sliced decode between 128 and 512 tiles" --rows '' --headdim 64 --rounds 2 \
    --shape 17,32,8,8192 --shape 5,32,32,32768 --shape 24,32,8,8192 --shape 40,32,8,4096 --shape 64,32,8,4096 \
    --shape 8,32,32,32768 --ours-env FLASHATTN_SM90_SLICED_DECODE=1
  local n settings=()
  for n in 2 8 16 33; do
    settings+=(--ours-env "FLASHATTN_SM90_SLICED_DECODE=1;FLASHATTN_SM90_KEY_SPLITS=$n"
               --ours-env "FLASHATTN_SM90_SLICED_DECODE=0;FLASHATTN_SM90_KEY_SPLITS=$n")
  done
  decode_bench sliced_equal_splits 240 "sliced against the rule's kernels at equal pieces" --rows '' --headdim 64 --rounds 2 \
    --shape 1,32,8,32768 --shape 2,32,8,32768 --shape 16,32,8,8192 "${settings[@]}"
}

# The sliced decode kernel's default rule (session 96: d64 decode steps of more tiles than SMs):
# the library, tests and extension; d64 decode by the rule against =0 (the packed kernels) beside
# cuDNN at 136-512 tiles, two rounds; the rule's, sliced and packed tests; memcheck on the rule's.
sliced_rule() {
  : "${BUILD_TARGETS:=flashattn flashattn_gpu_tests _C}"
  build || return 1
  decode_bench sliced_rule 170 "sliced rule against =0" --rows '' --headdim 64 --rounds 2 \
    --shape 17,32,8,8192 --shape 20,32,8,8192 --shape 24,32,8,8192 --shape 40,32,8,4096 --shape 64,32,8,4096 \
    --shape 5,32,32,32768 --shape 8,32,32,32768 --ours-env FLASHATTN_SM90_SLICED_DECODE=0
  gtest_run sliced_rule_tests.log 200 "sliced rule, sliced and packed tests" \
    --gtest_filter='*SlicedDecode*:*Sm90GqaPacking*:*Sm90KeySplit*:*ApiPick*:Sm90Paged.*:*GraphCapture*'
  sanitize 90 'Sm90SlicedDecode.ByRuleThroughTheApi:Sm90KeySplitParam.ThroughTheApi' memcheck
}

# Where the sliced kernel's 8-tile call loses its time (session 96: 36.9 us of kernels under Nsight
# against ~52 us in do_bench): the protocol figure, a CUDA-graph replay, back-to-back calls and
# host time per call, sliced (=1) against the packed kernels (=0) beside cuDNN, at the split shapes.
# Session 97: at its own pieces the 8-tile call read 44.5 us here; the ~52 us was a forced-pieces run.
decode_cost() {
  : "${BUILD_TARGETS:=_C}"
  build && decode_cost_rows
}

decode_cost_rows() {
  PYTHONPATH="$PWD/python" timeout 150 python3 benchmarks/host_exposure.py --headdim 64 \
    --decode 1,32,8,32768 --decode 2,32,8,32768 --decode 16,32,8,8192 --decode 64,32,8,4096 \
    --ours-env FLASHATTN_SM90_SLICED_DECODE=1 --ours-env FLASHATTN_SM90_SLICED_DECODE=0 \
    > "$OUT/decode_cost.log" 2>&1
  echo "decode call cost exit $?"; grep -E '^(b=|do_bench|  \()' "$OUT/decode_cost.log"
}

# Session 97's first call: the sliced rule at short caches (many tiles of few keys) against the
# packed kernels (=0) beside cuDNN, the sliced tests (rerun after session 96's test refactor), then
# decode-cost (where the 8-tile sliced call's time goes outside its kernels).
decode_next() {
  : "${BUILD_TARGETS:=flashattn flashattn_gpu_tests _C}"
  build || return 1
  decode_bench short_caches 120 "short caches, rule against =0" --rows '' --headdim 64 --rounds 2 \
    --shape 256,32,8,512 --shape 128,32,8,1024 --shape 64,32,8,1024 --shape 32,32,8,2048 --shape 64,32,32,1024 \
    --ours-env FLASHATTN_SM90_SLICED_DECODE=0
  gtest_run sliced_tests.log 90 "sliced decode tests" --gtest_filter='Sm90SlicedDecode*'
  decode_cost_rows
  # The rule's unsplit grids at 136-192 tiles fill half the two-CTA slots: forced 2 / 3 pieces.
  decode_bench rule_splits 90 "rule tiles forced to 2 / 3 pieces" --rows '' --headdim 64 --rounds 2 \
    --shape 17,32,8,8192 --shape 20,32,8,8192 --shape 24,32,8,8192 \
    --ours-env FLASHATTN_SM90_KEY_SPLITS=2 --ours-env FLASHATTN_SM90_KEY_SPLITS=3
}

# Session 97's open question: at (1, 32 / 8, 32k) the sliced call at its own 33 pieces read 44.5 us
# in host_exposure, but 51.6 us forced to 33 pieces in session 96's bench_decode. Both harnesses,
# one call, the same three settings; then Nsight at 136 tiles (rule against =0 and cuDNN), where
# cuDNN leads the rule by 8%.
decode_settle() {
  : "${BUILD_TARGETS:=_C}"
  build || return 1
  local envs=(--ours-env FLASHATTN_SM90_SLICED_DECODE=1 --ours-env "FLASHATTN_SM90_SLICED_DECODE=1;FLASHATTN_SM90_KEY_SPLITS=33"
              --ours-env FLASHATTN_SM90_SLICED_DECODE=0)
  decode_bench settle_bench 90 "8 tiles, bench_decode" --rows '' --headdim 64 --rounds 2 \
    --shape 1,32,8,32768 "${envs[@]}"
  PYTHONPATH="$PWD/python" timeout 90 python3 benchmarks/host_exposure.py --headdim 64 --decode 1,32,8,32768 \
    "${envs[@]}" > "$OUT/settle_host.log" 2>&1
  echo "8 tiles, host_exposure exit $?"; grep -E '^(b=|do_bench)' "$OUT/settle_host.log"
  # Per-SM spread (session 98): whether 136 CTAs put two on a few SMs that then set the time.
  NCU_SHAPE=17,32,8,8192 NCU_METRICS=sm__ctas_launched.min,sm__ctas_launched.max,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max \
    ncu_decode_switch FLASHATTN_SM90_SLICED_DECODE rule136 "136 tiles, sliced switch"
}

# Session 98: the sliced kernel's key shares (FLASHATTN_SM90_SLICED_SHARES; unset: its rule, on
# where whole tiles load the slots unevenly). `shares`: the library, tests and extension; the
# shares' tests, the sliced ones and the split suites (the combine kernel reads shares now);
# d64 decode by the rule against =0 beside cuDNN at 136-2048 tiles, two rounds. `shares-check`,
# warm after it: the sanitizers on the shares, and the protocol's d128 decode rows with the
# sliced kernel forced, shares and not; then flashattn.fa3_interface's GPU tests (session 99).
# The key shares are not on main yet (no GPU came in session 98): both modes first apply
# docs/pending/sliced-key-shares.patch to the device's copy of the tree where it still applies.
apply_pending_shares() {
  local patch=docs/pending/sliced-key-shares.patch
  if [ -f "$patch" ] && git apply --check "$patch" 2> /dev/null; then
    git apply "$patch" && echo "applied $patch"
  fi
}

shares() {
  : "${BUILD_TARGETS:=flashattn flashattn_gpu_tests _C}"
  apply_pending_shares
  build || return 1
  gtest_run shares_tests.log 150 "shares, sliced and split tests" \
    --gtest_filter='*SlicedDecode*:*SlicedKeyShares*:*Sm90GqaPacking.SlicedDecode*:*Sm90KeySplit*:*GraphCapture*'
  decode_bench shares_d64 170 "d64 decode, shares (rule) against =0" --rows '' --headdim 64 --rounds 2 \
    --shape 17,32,8,8192 --shape 20,32,8,8192 --shape 24,32,8,8192 --shape 40,32,8,4096 --shape 64,32,8,4096 \
    --shape 5,32,32,32768 --shape 8,32,32,32768 --shape 256,32,8,512 --ours-env FLASHATTN_SM90_SLICED_SHARES=0
}

shares_check() {
  apply_pending_shares
  sanitize 100 'Sm90SlicedDecode.KeySharesThroughTheApi' memcheck racecheck synccheck
  decode_bench shares_d128 90 "d128 protocol decode rows, sliced with and without shares" --headdim 128 --rounds 2 \
    --ours-env "FLASHATTN_SM90_SLICED_DECODE=1;FLASHATTN_SM90_SLICED_SHARES=1" \
    --ours-env "FLASHATTN_SM90_SLICED_DECODE=1;FLASHATTN_SM90_SLICED_SHARES=0"
  # Session 99: flashattn.fa3_interface's GPU tests (its first GPU run; the extension `shares` built).
  PYTEST_K='test_gpu_flash_attn_func_and_combine or test_gpu_varlen_seqused_and_kvcache_decode or test_gpu_kvcache_variable_length_queries or test_gpu_attention_chunk' PY_TIMEOUT=90 \
    python_tests
}

sliced_decode_d64() {
  decode_bench sliced_decode 150 "sliced decode bench" --rows '' --headdim 64 --rounds 2 \
    --shape 1,32,8,32768 --shape 2,32,8,32768 --shape 8,32,8,8192 --shape 16,32,8,8192 --shape 64,32,8,4096 \
    --shape 1,32,8,131072 --shape 8,32,32,32768 --ours-env FLASHATTN_SM90_SLICED_DECODE=1
}

sliced_decode_d128() {
  decode_bench sliced_decode_d128 120 "sliced decode d128 (protocol rows)" --headdim 128 --rounds 2 \
    --ours-env FLASHATTN_SM90_SLICED_DECODE=1
}

# The one-warpgroup kernel's default rule (session 93: GQA packed problems of at most 16 tiles):
# the library, tests and extension; the rule's and both kernels' tests; d64 decode by the rule
# against the two-warpgroup kernel (=0) beside cuDNN; memcheck on the rule's cases.
one_wg_rule() {
  : "${BUILD_TARGETS:=flashattn flashattn_gpu_tests _C}"
  build || return 1
  gtest_run one_wg_rule_tests.log 150 "one-WG rule and packed tests" \
    --gtest_filter='*PackGqaOneWg*:*Sm90GqaPacking*:*Sm90KeySplit*:*GraphCapture*:Sm90ApiPickOverride.*'
  decode_bench one_wg_rule_decode 80 "one-WG rule decode" --rows '' --headdim 64 --rounds 2 \
    --shape 1,32,8,32768 --shape 2,32,8,32768 --shape 3,32,8,16384 --ours-env FLASHATTN_SM90_PACK_GQA_ONE_WG=0
  sanitize 60 '*PackGqaOneWgRule*:Sm90ApiPickOverride.PackGqaOneWg*' memcheck
}

# The TMA stream probe (benchmarks/cpp/sm90_tma_stream_probe.cu, session 90): the packed decode
# kernel's K / V loads alone, every configuration once (TMA_PROBE_REPS launches each, 20); the
# JSON lines to tma_probe.jsonl and one short line each to the log.
tma_probe() {
  timeout 120 "$BUILD/flashattn_sm90_tma_stream_probe" "${TMA_PROBE_REPS:-20}" > "$OUT/tma_probe.jsonl" 2> "$OUT/tma_probe.err"
  echo "tma stream probe exit $?"; cat "$OUT/tma_probe.err"
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print("d%(headdim)d x%(heads_a_box)d %(layout)s b%(batch)d s%(seqlen)d p%(pieces)d ctas %(ctas)d (%(ctas_an_sm)d an SM) stages %(stages)d consume %(consume_cycles)d: %(tb_s).2f TB/s, %(gb_s_a_cta).1f GB/s a CTA" % r)
' "$OUT/tma_probe.jsonl"
}

cpu_bench() {
  # Two threads is what CI machines have; sixteen is this host. Longer sequences only at sixteen.
  for threads in 16 2; do
    local seqlens=1024,2048,4096
    [ "$threads" = 2 ] && seqlens=1024,2048
    OMP_NUM_THREADS=$threads PYTHONPATH="$PWD/python" timeout 200 python3 benchmarks/bench_cpu.py \
      --threads "$threads" --seqlens $seqlens --reps 3 --decode --out "$OUT/cpu_$threads.json" > "$OUT/bench_cpu_$threads.log" 2>&1
    echo "CPU bench ($threads threads) exit $?"
    cat "$OUT/bench_cpu_$threads.log"
  done
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader
lscpu | grep -m1 "Model name"
case "$what" in
  build) build ;;
  test) build && cpp_tests && python_tests ;;
  bench) build && cpu_bench && gpu_bench ;;
  cli) build && cli_gpu ;;
  verify) build && verify ;;
  probe) build && probe ;;
  clock) build && clock_runs ;;
  gpubench) build && gpu_bench ;;
  # MEASURE_BIN=<folder>: binaries built on the development machine (carried; flashattn_sm90_variants
  # and tests/cpp/gpu/flashattn_gpu_tests inside, libraries in lib/) instead of a build here.
  # Without harness or Nsight Compute work it builds the library, tests and extension only (a
  # `build` call before it does not carry BUILD_TARGETS over: session 60 lost a call's 600 s to
  # the harness's build inside `measure`).
  measure) if [ -n "${MEASURE_BIN:-}" ]; then BUILD=$MEASURE_BIN; export LD_LIBRARY_PATH="$PWD/$BUILD/lib"; else
      [ -z "${MEASURE_HARNESS:-}${MEASURE_NCU_FWD:-}${MEASURE_SM80_VARIANTS:-}${MEASURE_HOST_COST:-}" ] &&
        : "${BUILD_TARGETS:=flashattn flashattn_gpu_tests _C}"
      build; fi &&
    measure ;;
  sweep) : "${BUILD_TARGETS:=flashattn _C}"; build && sweep ;;
  pdl) pdl ;;
  builds-ab) builds_ab ;;
  tma-probe) : "${BUILD_TARGETS:=flashattn_sm90_tma_stream_probe}"; build && tma_probe ;;
  one-wg) one_wg ;;
  one-wg-tests) one_wg_tests ;;
  one-wg-all) one_wg && one_wg_checks ;;  # one call: what the call's limit cuts off comes last
  one-wg-why) one_wg_why ;;
  one-wg-rule) one_wg_rule ;;
  sliced) sliced ;;
  sliced-time) sliced_time ;;
  sliced-time-check) sliced_time_check ;;
  sliced-why) sliced_why ;;
  sliced-splits) sliced_splits ;;
  sliced-rule) sliced_rule ;;
  decode-cost) decode_cost ;;
  decode-next) decode_next ;;
  decode-settle) decode_settle ;;
  shares) shares ;;
  shares-check) shares_check ;;
  sliced-next) sliced_splits && ncu_decode_switch FLASHATTN_SM90_SLICED_DECODE sliced "sliced switch" ;;
  all) build && cpp_tests && python_tests && cli_gpu && cpu_bench && gpu_bench ;;
  sweep-or) if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then "$0" sweep; else "$0" "${2:?sweep-or needs the mode to run on other cards}"; fi ;;
  *) echo "device_session.sh: unknown mode '$what'" >&2; exit 2 ;;
esac
