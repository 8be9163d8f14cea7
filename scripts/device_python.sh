#!/usr/bin/env bash
# On the GPU machine (offline; torch, transformers, nanobind and scikit-build-core preinstalled):
# builds flashattn with its CUDA backend, installs it, and runs the GPU tests, then the CPU ones.
#
#   bash scripts/device_python.sh            # build + GPU tests + CPU tests
#   PYTEST_ARGS="-x -k sdpa" bash scripts/device_python.sh
#
# Writes the pytest logs and a JUnit XML under $OUT when that is set.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/flashattn-python}
mkdir -p "$OUT"

start=$(date +%s)
# FLASHATTN_HDIMS / FLASHATTN_DTYPES / FLASHATTN_CUDA_ARCHS in the environment narrow the kernel set.
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} FLASHATTN_CUDA=${FLASHATTN_CUDA:-ON} \
  python3 -m pip install --no-build-isolation --no-deps --no-index -q . 2>&1 | tail -40 | tee "$OUT/build.log"
echo "device_python: built and installed in $(( $(date +%s) - start )) s"
python3 -c "import flashattn; print('flashattn', flashattn.__version__, 'cuda_available:', flashattn.cuda_available())" || exit 1

status=0
python3 -m pytest tests/python -m gpu -rs -q ${PYTEST_ARGS:-} --junitxml="$OUT/gpu.xml" 2>&1 | tee "$OUT/gpu.log" | tail -60
[ "${PIPESTATUS[0]}" = 0 ] || status=1
python3 -m pytest tests/python -m "not gpu" -q ${PYTEST_ARGS:-} --junitxml="$OUT/cpu.xml" 2>&1 | tee "$OUT/cpu.log" | tail -15
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
