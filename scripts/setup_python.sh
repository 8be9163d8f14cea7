#!/usr/bin/env bash
# Installs what the Python package needs to build and test on a fresh Debian machine with PyPI
# access, then builds and installs flashattn itself (CPU backend unless FLASHATTN_CUDA says so).
#
#   scripts/setup_python.sh            # tools, Python deps, flashattn
#   python3 -m pytest tests/python     # CPU tests; GPU tests skip with a message
#
# jax (CPU build, about 100 MB) tests flashattn.array on JAX arrays; its GPU test runs on the GPU machine.
# torch comes from PyPI pinned to the GPU machine's version. PyPI's Linux wheel links the CUDA
# libraries, so its nvidia-* dependencies (about 3 GB unpacked, about a minute to download and
# install here) are needed even to import it on a CPU-only machine.
set -euo pipefail

PYTHON=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.11.0}
TRANSFORMERS_VERSION=${TRANSFORMERS_VERSION:-5.17.0}
cd "$(dirname "$0")/.."

missing=0
for tool in cmake ninja g++; do command -v "$tool" >/dev/null || missing=1; done
if [ "$missing" = 1 ] && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends cmake ninja-build g++ python3-dev python3-pip python3-venv
fi

start=$(date +%s)
"$PYTHON" -m pip install -q --upgrade pip
"$PYTHON" -m pip install -q \
  "torch==${TORCH_VERSION}" \
  "transformers==${TRANSFORMERS_VERSION}" \
  "nanobind>=3.1,<3.2" "scikit-build-core>=1.1,<1.2" \
  numpy pytest jax
echo "setup_python: dependencies installed in $(( $(date +%s) - start )) s"

# Two jobs: CI machines have two cores. CUDA kernels only where asked for (FLASHATTN_CUDA=AUTO/ON).
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} FLASHATTN_CUDA=${FLASHATTN_CUDA:-OFF} \
  "$PYTHON" -m pip install -q --no-build-isolation .
echo "setup_python: flashattn built and installed in $(( $(date +%s) - start )) s"
"$PYTHON" -c "import flashattn; print('flashattn', flashattn.__version__, 'cuda_available:', flashattn.cuda_available())"
