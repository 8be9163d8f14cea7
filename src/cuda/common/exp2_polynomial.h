// 2^x on the FMA pipe instead of the MUFU pipe. At head dim 128 a 128-key block's softmax issues
// 64 MUFU.EX2 a thread, 512 cycles of an SM sub-partition's MUFU pipe a warp, and that pass is
// bound by the pipe, not by issue (session 43). Computing some of the exp2s by a polynomial on
// the FMA pipe shortens it where issue has room (FlashAttention-4 does this on Blackwell, whose
// tensor cores outgrew the MUFU; written here from the identity below). Host and device alike,
// so that the CPU tests check it (tests/cpp/test_exp2_polynomial.cpp).
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda/common/host_device.h"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace flashattn {

// The polynomial's coefficients, low order first: 2^f on [-1/2, 1/2] within a relative 7.5e-5
// in fp32 Horner form (fitted for relative error; below the 2^-11 of fp16's rounding of P and
// the 2^-9 of bf16's).
constexpr float kExp2Poly0 = 0.99992812f, kExp2Poly1 = 0.69326216f, kExp2Poly2 = 0.24261059f,
                kExp2Poly3 = 0.05516534f;
// The largest error of exp2_by_polynomial relative to 2^x where 2^x is a normal float.
constexpr double kExp2PolyMaxRelError = 7.6e-5;

// 2^x = 2^j 2^f with j = round(x) and f = x - j in [-1/2, 1/2]: 2^f by the polynomial, 2^j as the
// float whose exponent field holds j + 127. x is clamped to [-127, 127] first: -inf (a masked
// score) gives j = -127, whose 2^j has all bits 0, so 2^x is 0 as the MUFU's is; above, 2^127
// keeps a huge exp2 huge (the checked max tests the sums against a bound,
// MainloopMma::kKeptSumBound). NaN stays NaN. Ten instructions on the FMA and ALU pipes for one
// MUFU.EX2.
FLASHATTN_HOST_DEVICE float exp2_by_polynomial(float x) {
  // 1.5 * 2^23: in x + kRound, round(x) sits in the mantissa's low bits (round to nearest even).
  constexpr float kRound = 12582912.0f;
#if defined(__CUDA_ARCH__)
  asm("max.NaN.f32 %0, %0, 0fC2FE0000;\n\tmin.NaN.f32 %0, %0, 0f42FE0000;" : "+f"(x));  // [-127, 127]
  const float t = __fadd_rn(x, kRound);
  const float j = __fsub_rn(t, kRound);
  const float f = __fsub_rn(x, j);
  float p = fmaf(f, kExp2Poly3, kExp2Poly2);
  p = fmaf(f, p, kExp2Poly1);
  p = fmaf(f, p, kExp2Poly0);
  const uint32_t t_bits = __float_as_uint(t);
#else
  if (!std::isnan(x)) x = x < -127.0f ? -127.0f : (x > 127.0f ? 127.0f : x);
  const float t = x + kRound;
  const float j = t - kRound;
  const float f = x - j;
  float p = std::fma(f, kExp2Poly3, kExp2Poly2);
  p = std::fma(f, p, kExp2Poly1);
  p = std::fma(f, p, kExp2Poly0);
  uint32_t t_bits;
  std::memcpy(&t_bits, &t, 4);
#endif
  // t's bits are kRound's plus j; shifted left by 23 only j's low 9 bits stay, in the exponent field.
  const uint32_t two_j_bits = (t_bits << 23) + (127u << 23);
  float two_j;
#if defined(__CUDA_ARCH__)
  two_j = __uint_as_float(two_j_bits);
#else
  std::memcpy(&two_j, &two_j_bits, 4);
#endif
  return p * two_j;
}

}  // namespace flashattn
