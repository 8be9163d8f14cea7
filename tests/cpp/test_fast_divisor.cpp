// FastDivisor (the tile decode of the persistent GPU kernels) against the `/` and `%` it replaces:
// every dividend below 2^16 for divisors 1-300, and edge and random dividends up to 2^31 - 1 for
// divisors up to 2^31 - 1 (powers of two and their neighbours included).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/common/fast_divisor.h"

namespace flashattn {
namespace {

void expect_divides(const FastDivisor& f, uint32_t n) {
  int r = -1;
  const int q = f.divide(int(n), r);
  ASSERT_EQ(q, int(n / f.divisor)) << n << " / " << f.divisor;
  ASSERT_EQ(r, int(n % f.divisor)) << n << " % " << f.divisor;
}

TEST(FastDivisor, SmallDivisorsEveryDividendBelow65536) {
  for (uint32_t d = 1; d <= 300; ++d) {
    const FastDivisor f = FastDivisor::make(d);
    for (uint32_t n = 0; n < 65536; ++n) expect_divides(f, n);
  }
}

TEST(FastDivisor, LargeDivisorsAndDividends) {
  std::vector<uint32_t> divisors;
  for (int k = 1; k < 31; ++k) {
    const uint32_t p = uint32_t(1) << k;
    divisors.insert(divisors.end(), {p - 1, p, p + 1});
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % 0x7fffffffu);
  const uint32_t kMax = 0x7fffffffu;
  for (uint32_t d : divisors) {
    const FastDivisor f = FastDivisor::make(d);
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, 2 * d - 1, kMax, kMax - 1, kMax - d, kMax / d * d, kMax / d * d - 1}) {
      if (n <= kMax) expect_divides(f, n);
    }
    for (int i = 0; i < 2000; ++i) expect_divides(f, rng() & kMax);
  }
}

}  // namespace
}  // namespace flashattn
