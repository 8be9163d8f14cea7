// The butterfly stages of an in-register transpose, for a GCC vector type V of W lanes: the float
// kernels (simd/kernels_impl.h, one flavour a SIMD width) and the bf16 packing (bf16_packing.cpp,
// 32-bit words) use the same four stages. Static, so that each translation unit, compiled for its
// own instruction set, keeps its own copy.
//
// Stage H pairs rows i and i + H (bit H of i clear). Lane c of low(a, b) is a's lane c where bit H
// of c is clear, else b's lane c - H; lane c of high(a, b) is a's lane c + H where clear, else b's
// lane c. Writing them back as rows i and i + H swaps the off-diagonal H x H blocks of every
// 2H x 2H block; after H = W/2 .. 1, row k holds the old column k.
#pragma once

#include <utility>

namespace flashattn {
namespace cpu {
namespace butterfly {

template <typename V, int W, int H, int... I>
static inline V low(V a, V b, std::integer_sequence<int, I...>) {
  return __builtin_shufflevector(a, b, ((I & H) ? W + I - H : I)...);
}

template <typename V, int W, int H, int... I>
static inline V high(V a, V b, std::integer_sequence<int, I...>) {
  return __builtin_shufflevector(a, b, ((I & H) ? W + I : I + H)...);
}

// m[0..W) transposed in place.
template <typename V, int W, int H = W / 2>
static inline void transpose(V* m) {
  if constexpr (H > 0) {
#pragma GCC unroll 16
    for (int i = 0; i < W; ++i) {
      if (i & H) continue;
      const V a = m[i], b = m[i + H];
      m[i] = low<V, W, H>(a, b, std::make_integer_sequence<int, W>{});
      m[i + H] = high<V, W, H>(a, b, std::make_integer_sequence<int, W>{});
    }
    transpose<V, W, H / 2>(m);
  }
}

// Lane r of the result is the sum of m[r]'s lanes (m[0..W) are consumed): each stage adds the two
// halves of a pair instead of keeping both, so the pair's sums share one vector, lanes with bit H
// clear holding the first row's and lanes with it set the second's; after the last stage lane r
// holds row r's whole sum.
template <typename V, int W, int H = W / 2>
static inline V sum_rows(V* m) {
  if constexpr (H == 0) {
    return m[0];
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < H; ++i) {
      m[i] = low<V, W, H>(m[i], m[i + H], std::make_integer_sequence<int, W>{}) +
             high<V, W, H>(m[i], m[i + H], std::make_integer_sequence<int, W>{});
    }
    return sum_rows<V, W, H / 2>(m);
  }
}

}  // namespace butterfly
}  // namespace cpu
}  // namespace flashattn
