// 2^x on the FMA pipe instead of the MUFU pipe. At head dim 128 a 128-key block's softmax issues
// 64 MUFU.EX2 a thread, 512 cycles of an SM sub-partition's MUFU pipe a warp, and that pass is
// bound by the pipe, not by issue (session 43). Computing some of the exp2s by a polynomial on
// the FMA pipe shortens it where issue has room (FlashAttention-4 does this on Blackwell, whose
// tensor cores outgrew the MUFU; written here from the identity below).
#pragma once

namespace flashattn {
namespace sm90 {

// 2^x = 2^j 2^f with j = round(x) and f = x - j in [-1/2, 1/2]: 2^f by a degree-3 polynomial
// (coefficients fitted for relative error, at most 7.5e-5 in fp32 Horner form: below the 2^-11
// of fp16's rounding of P and the 2^-9 of bf16's), 2^j as the float whose exponent field holds
// j + 127. x is clamped to [-127, 127] first: -inf (a masked score) gives j = -127, whose 2^j has
// all bits 0, so 2^x is 0 as the MUFU's is; above, 2^127 keeps a huge exp2 huge (the checked max
// tests the sums against a bound, MainloopMma::kKeptSumBound). NaN stays NaN (max.NaN / min.NaN).
// Ten instructions on the FMA and ALU pipes for one MUFU.EX2.
__device__ __forceinline__ float exp2_by_polynomial(float x) {
  // 1.5 * 2^23: in x + kRound, round(x) sits in the mantissa's low bits (round to nearest even).
  constexpr float kRound = 12582912.0f;
  asm("max.NaN.f32 %0, %0, 0fC2FE0000;\n\tmin.NaN.f32 %0, %0, 0f42FE0000;" : "+f"(x));  // [-127, 127]
  const float t = __fadd_rn(x, kRound);
  const float j = __fsub_rn(t, kRound);
  const float f = __fsub_rn(x, j);
  float p = fmaf(f, 0.05516534f, 0.24261059f);
  p = fmaf(f, p, 0.69326216f);
  p = fmaf(f, p, 0.99992812f);
  // t's bits are kRound's plus j; shifted left by 23 only j's low 9 bits stay, in the exponent field.
  const float two_j = __int_as_float(int((unsigned(__float_as_int(t)) << 23) + (127u << 23)));
  return p * two_j;
}

}  // namespace sm90
}  // namespace flashattn
