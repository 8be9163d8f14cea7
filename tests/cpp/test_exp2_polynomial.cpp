// exp2_by_polynomial (cuda/common/exp2_polynomial.h), the sm90 softmax's exp2 on the FMA pipe,
// against the fp64 exp2: its error bound where 2^x is a normal float, and the edges the kernels
// rely on (a masked score's -inf gives 0, NaN stays NaN, a huge exponent stays huge). The device
// form is the same arithmetic (IEEE fp32 adds and fmas, round to nearest); the sm90 GPU tests
// check the kernels that use it against the fp64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "cuda/common/exp2_polynomial.h"

namespace flashattn {
namespace {

double relative_error(float x) {
  const double exact = std::exp2(double(x));
  return std::fabs(double(exp2_by_polynomial(x)) / exact - 1.0);
}

TEST(Exp2Polynomial, WithinItsBoundWhereTheResultIsNormal) {
  double worst = 0.0;
  float worst_x = 0.0f;
  // Every 1/4096 from -125 to 127: the rounding to j, the ties at f = +-1/2 and each binade.
  for (int i = -125 * 4096; i <= 127 * 4096; ++i) {
    const float x = float(i) / 4096.0f;
    const double e = relative_error(x);
    if (e > worst) worst = e, worst_x = x;
  }
  std::mt19937 gen(43);
  std::uniform_real_distribution<float> any(-125.0f, 127.0f), softmax_range(-30.0f, 8.0f);
  for (int i = 0; i < 2000000; ++i) {
    const float x = (i % 2) ? any(gen) : softmax_range(gen);
    const double e = relative_error(x);
    if (e > worst) worst = e, worst_x = x;
  }
  EXPECT_LE(worst, kExp2PolyMaxRelError) << "at x = " << worst_x;
  // The bound is tight to the fit: a looser polynomial or a wrong exponent would pass 1e-4 later.
  EXPECT_GT(worst, 0.5 * kExp2PolyMaxRelError);
}

TEST(Exp2Polynomial, ExactAtIntegersWithinThePolynomialsError) {
  for (int j = -125; j <= 127; ++j) {
    EXPECT_NEAR(double(exp2_by_polynomial(float(j))) / std::exp2(double(j)), double(kExp2Poly0), 1e-7) << j;
  }
}

TEST(Exp2Polynomial, MaskedScoresGiveZero) {
  EXPECT_EQ(exp2_by_polynomial(-std::numeric_limits<float>::infinity()), 0.0f);
  for (float x : {-127.0f, -126.6f, -200.0f, -1e30f, -std::numeric_limits<float>::max()}) {
    EXPECT_EQ(exp2_by_polynomial(x), 0.0f) << x;
  }
}

TEST(Exp2Polynomial, NanStaysNan) {
  EXPECT_TRUE(std::isnan(exp2_by_polynomial(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Exp2Polynomial, HugeExponentsStayHugeAndFinite) {
  // The checked max's bound (2^24 in bf16) must see an exp2 far past it as past it.
  for (float x : {127.0f, 128.0f, 200.0f, 1e30f, std::numeric_limits<float>::infinity()}) {
    const float y = exp2_by_polynomial(x);
    EXPECT_TRUE(std::isfinite(y)) << x;
    EXPECT_GE(y, 1e38f) << x;
  }
  EXPECT_GT(exp2_by_polynomial(30.0f), 1e9f);
}

}  // namespace
}  // namespace flashattn
