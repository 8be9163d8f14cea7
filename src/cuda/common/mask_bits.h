// The mask of one row of an S fragment as bits (the sm90 softmax, KernelConfig::kMaskByBits): a
// thread holds the row's columns 8 i + e (i < kBlockN / 8, e in {0, 1}) relative to its first one,
// as fragment index k = 2 i + e. The columns grow with k, so those below a bound are the first t
// indices, t = 2 (bound / 8) + min(bound % 8, 2), and one 32-bit word holds 32 of them. The kernel
// tests a constant bit of the word for each score, which ptxas turns into R2P (seven predicates
// from one register) where a compare a score took one ISETP each. No CUDA headers: the CPU tests
// check it against the compares.
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"

namespace flashattn {

// Word w of the thread's columns below `bound` (relative to its first column): bit b is fragment
// index k = 32 w + b, set when column 8 (k / 2) + k % 2 < bound.
FLASHATTN_HOST_DEVICE uint32_t columns_below(int bound, int w) {
  const int b = bound > 0 ? bound : 0;
  const int r = b & 7;
  const int t = 2 * (b >> 3) + (r < 2 ? r : 2) - 32 * w;
  return t >= 32 ? 0xffffffffu : t <= 0 ? 0u : (1u << t) - 1u;
}

}  // namespace flashattn
