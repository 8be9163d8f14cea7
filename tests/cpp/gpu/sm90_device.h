// Whether device 0 is a Hopper GPU (sm90), for the tests of the sm90 kernels.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "cuda/sm90/kernel_choice.h"

namespace fa_test {

inline bool sm90_device_present(std::string* why) {
  // The library's switch that keeps every problem on the sm80 kernels (cuda_backend.cu).
  const char* kernels = std::getenv("FLASHATTN_CUDA_KERNELS");
  if (kernels != nullptr && std::string(kernels) == "sm80") {
    *why = "FLASHATTN_CUDA_KERNELS=sm80 keeps the API off the sm90 kernels";
    return false;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    *why = "no CUDA device";
    return false;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  if (prop.major != 9) {
    *why = std::string("device 0 (") + prop.name + ") is not sm90";
    return false;
  }
  return true;
}

// Forward launches of every sm90 kernel through the API so far (the narrow twins count as the
// default's, the split tail's as its parent's).
inline int64_t sm90_any_launches() {
  using namespace flashattn;
  return sm90_default_launches() + sm90_static_schedule_launches() + sm90_short_rows_launches() +
         sm90_cluster_pairs_launches() + sm90_tall_tiles_launches() + sm90_pack_gqa_launches();
}

// One of the library's environment overrides (FLASHATTN_*, read at every call) set to `value`
// for a scope, or unset there where `value` is null (the library's own rule); as it was before
// the scope when the scope ends, so a setting for the whole run (scripts/device_session.sh runs
// suites with one) survives the tests that scope the same variable.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace fa_test

// Skips the calling test unless device 0 is sm90, saying why.
#define SKIP_UNLESS_SM90()                                         \
  do {                                                             \
    std::string why_;                                              \
    if (!::fa_test::sm90_device_present(&why_)) GTEST_SKIP() << why_; \
  } while (0)
