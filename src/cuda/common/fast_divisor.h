// Division by a divisor fixed at launch, as a multiply-high, an add and a shift (Granlund and
// Montgomery's round-up method): the host derives the multiplier once, the kernel divides in
// three integer instructions instead of the ~35 of a division by a run-time value (a float
// reciprocal through MUFU.RCP, conversions and two correction steps, ~120 cycles of latency).
// The persistent kernels decode a tile index into (key range, head, batch) with a few such
// divisions at every tile start, on the path between one tile's last product and the next one's
// first (docs/perf.md, session 11). No CUDA headers: the CPU tests check it against `/`.
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"

namespace flashattn {

struct FastDivisor {
  uint32_t divisor = 1;
  uint32_t multiplier = 1;  // ceil(2^(32 + shift) / divisor) - 2^32
  uint32_t shift = 0;       // ceil(log2(divisor))

  // divisor >= 1. Exact for every dividend in [0, 2^31).
  static FastDivisor make(uint32_t d) {
    FastDivisor f;
    f.divisor = d;
    f.shift = 0;
    while ((uint64_t(1) << f.shift) < d) ++f.shift;
    f.multiplier = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << f.shift) - d)) / d + 1);
    return f;
  }

  FLASHATTN_HOST_DEVICE uint32_t quotient(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, multiplier);
#else
    const uint32_t high = uint32_t((uint64_t(n) * multiplier) >> 32);
#endif
    // high <= n, so the sum stays below 2^32 for n < 2^31.
    return (high + n) >> shift;
  }
  // Quotient and remainder of a non-negative int.
  FLASHATTN_HOST_DEVICE int divide(int n, int& remainder) const {
    const int q = int(quotient(uint32_t(n)));
    remainder = n - q * int(divisor);
    return q;
  }
};

}  // namespace flashattn
