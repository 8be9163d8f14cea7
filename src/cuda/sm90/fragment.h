// Where the elements of a wgmma m64nN accumulator live. Warp w of the consumer warpgroup owns
// rows 16w..16w+15; lane l holds rows 16w + l/4 and 16w + l/4 + 8, and in every 8-column group i
// the columns 8i + 2(l%4) and +1. Register 4i + 2h + e is (row l/4 + 8h, column 8i + 2(l%4) + e).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace flashattn {
namespace sm90 {

struct FragmentPosition {
  int row0;  // first of the thread's two rows, relative to the warpgroup's 64 rows
  int col0;  // first column of the thread in each 8-column group
  __device__ __forceinline__ static FragmentPosition of_thread(int thread_in_warpgroup) {
    const int warp = thread_in_warpgroup / 32, lane = thread_in_warpgroup % 32;
    return {warp * 16 + lane / 4, 2 * (lane % 4)};
  }
};

// The first kN registers of a fragment array, as an array of its own (a narrowed key block uses
// only the leading columns of S and the leading pairs of P).
template <int kN, typename T, int kM>
__device__ __forceinline__ T (&leading(T (&a)[kM]))[kN] {
  static_assert(kN <= kM, "a leading part is no longer than the whole");
  return *reinterpret_cast<T(*)[kN]>(&a[0]);
}

// The last kN registers (the ones column's accumulators after O's, Cfg::kRowSumByTensor).
template <int kN, typename T, int kM>
__device__ __forceinline__ T (&trailing(T (&a)[kM]))[kN] {
  static_assert(kN <= kM, "a trailing part is no longer than the whole");
  return *reinterpret_cast<T(*)[kN]>(&a[kM - kN]);
}

template <typename Element>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack_pair<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack_pair<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// The accumulator of S = Q K^T reinterpreted as the A operand of O += P V: for 16-bit types the
// register fragment of A (k-step j uses P[4j..4j+3]) is exactly the pairs of the accumulator.
template <typename Element, int kAccum>
__device__ __forceinline__ void accumulator_to_operand(const float (&s)[kAccum], uint32_t (&p)[kAccum / 2]) {
#pragma unroll
  for (int i = 0; i < kAccum / 2; ++i) p[i] = pack_pair<Element>(s[2 * i], s[2 * i + 1]);
}

}  // namespace sm90
}  // namespace flashattn
