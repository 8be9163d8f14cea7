// One warp's 16 rows of S = Q K^T for one key block, computed again with mma.sync from the Q
// tile and the block's K stage in shared memory: the checked max's fallback (MainloopMma), for
// the rare block where the kept max did not hold and S has already become P. A warp alone: the
// decision is a warp's, and wgmma would need its whole warpgroup.
//
// The fragment of m16n8k16's accumulators (rows g and g + 8 of the warp's 16, columns 2 (lane % 4)
// + {0, 1} of an 8-key group) is the warp's share of wgmma m64nN's (fragment.h), so n8 group i
// lands in S's registers 4i .. 4i + 3 as wgmma's did. The sums run in another order than
// wgmma's: the scores may differ from the first S in their last bits.
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/sm90/config.h"

namespace flashattn {
namespace sm90 {

// s (kBlockN / 2 registers, wgmma's order) = Q rows row0 .. row0 + 15 of the tile at q (column 0;
// columns of 64 elements q_column_bytes apart) times the kBlockN keys of the stage at k.
template <class Element, int kHeadDim, int kBlockN>
__device__ __forceinline__ void warp_scores(float (&s)[kBlockN / 2], uint32_t q, int q_column_bytes, uint32_t k,
                                            int kv_column_bytes, int row0, int lane) {
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) s[i] = 0.0f;
  // ldmatrix x4: lane l gives a line of matrix l / 8. A's four are (rows 0-7 | 8-15) x (k 0-7 |
  // 8-15), rows first; two n8 groups of B at a time, (keys 0-7 | 8-15) x (k 0-7 | 8-15), k first.
  const int a_line = row0 + (lane / 8 % 2) * 8 + lane % 8, a_half = lane / 16;
  const int b_key = (lane / 16) * 8 + lane % 8, b_half = lane / 8 % 2;
#pragma unroll 1
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const int column = kk / 4, chunk = (kk % 4) * 2;
    uint32_t a[4];
    cuda::ldmatrix_x4(a, swizzled_chunk(q + column * q_column_bytes, a_line, chunk + a_half));
#pragma unroll
    for (int j = 0; j < kBlockN / 16; ++j) {
      uint32_t b[4];
      cuda::ldmatrix_x4(b, swizzled_chunk(k + column * kv_column_bytes, 16 * j + b_key, chunk + b_half));
      cuda::mma_16816<Element>(*reinterpret_cast<float(*)[4]>(&s[8 * j]), a, b[0], b[1]);
      cuda::mma_16816<Element>(*reinterpret_cast<float(*)[4]>(&s[8 * j + 4]), a, b[2], b[3]);
    }
  }
}

}  // namespace sm90
}  // namespace flashattn
