// Scalar conversions between float and the 16-bit storage types, rounding to nearest even.
#pragma once

#include <cstdint>
#include <cstring>

#include "flashattn/types.h"

namespace flashattn {

static inline float bf16_to_float(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

static inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static inline uint16_t float_to_fp16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;         // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;        // overflow to inf (65520 and up)
  if (abs < 0x38800000u) {                              // subnormal or zero in fp16
    if (abs < 0x33000000u) return sign;                 // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;                   // 14 + (112 - exp) + 1 - 1
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}


static inline float load_as_float(const void* base, int64_t idx, DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return fp16_to_float(static_cast<const uint16_t*>(base)[idx]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(base)[idx]);
    default: return static_cast<const float*>(base)[idx];
  }
}

static inline void store_from_float(void* base, int64_t idx, DType dtype, float value) {
  switch (dtype) {
    case DType::kFloat16: static_cast<uint16_t*>(base)[idx] = float_to_fp16(value); break;
    case DType::kBFloat16: static_cast<uint16_t*>(base)[idx] = float_to_bf16(value); break;
    default: static_cast<float*>(base)[idx] = value; break;
  }
}

// Rounds a float to the precision of `dtype` (identity for float32).
static inline float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::kFloat16: return fp16_to_float(float_to_fp16(value));
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(value));
    default: return value;
  }
}

}  // namespace flashattn
