#!/usr/bin/env bash
# Installs what building and testing flashattn needs on a fresh Debian/Ubuntu machine:
# a C++17 compiler, CMake, Ninja and GoogleTest. The CUDA toolkit is optional (the CUDA backend
# is built where nvcc exists) and is not installed here.
set -euo pipefail

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v ninja >/dev/null 2>&1 || need+=(ninja-build)
command -v g++ >/dev/null 2>&1 || need+=(g++)
[ -f /usr/include/gtest/gtest.h ] || [ -f /usr/src/googletest/CMakeLists.txt ] || need+=(libgtest-dev)

if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# CMake 3.24 or newer is required; Debian 12 ships 3.25.
cmake_version=$(cmake --version | head -n1 | awk '{print $3}')
if [ "$(printf '%s\n' 3.24 "$cmake_version" | sort -V | head -n1)" != 3.24 ]; then
  echo "setup: cmake $cmake_version is too old; installing a newer one from PyPI" >&2
  python3 -m pip install -q 'cmake>=3.24'
fi
