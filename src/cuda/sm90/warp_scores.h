// One warp's 16 rows of S = Q K^T for one key block, computed again with mma.sync from Q and the
// block's K: the checked max's fallback (MainloopMma), for the rare block where the kept max did
// not hold and S has already become P. With the bound tested once a tile
// (KernelConfig::kHeldCheckPerTile) also the warp's O += P V from V in global memory
// (warp_values), for the tile computed again. A warp alone: the decision is a warp's, and wgmma would
// need its whole warpgroup. Q comes from its tile in shared memory or, with
// KernelConfig::kQReleasedAtLoad, from global memory (the tile released once its fragments are in
// registers); K from its stage in shared memory (held there until the check) or, with
// KernelConfig::kFallbackKeysFromGlobal, from global memory (the stage released as soon as S has
// retired).
//
// The fragment of m16n8k16's accumulators (rows g and g + 8 of the warp's 16, columns 2 (lane % 4)
// + {0, 1} of an 8-key group) is the warp's share of wgmma m64nN's (fragment.h), so n8 group i
// lands in S's registers 4i .. 4i + 3 as wgmma's did. The sums run in another order than
// wgmma's: the scores may differ from the first S in their last bits.
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/sm90/config.h"
#include "cuda/sm90/fragment.h"

namespace flashattn {
namespace sm90 {

// s (kBlockN / 2 registers, wgmma's order) = the warp's 16 query rows, whose A fragments
// query_fragments(kk, a) gives for the 16 dims 16kk .. 16kk + 15 (mma.sync's order: a[0] rows
// 0-7 dims 0-7, a[1] rows 8-15 dims 0-7, a[2] rows 0-7 dims 8-15, a[3] rows 8-15 dims 8-15),
// times the block's kBlockN keys, whose B fragments key_fragments(kk, j, b) gives for the 16 keys
// 16j .. 16j + 15 and the same 16 dims: b[0], b[1] those of keys 16j .. 16j + 7 (dims 0-7, 8-15 of
// the step), b[2], b[3] of the next 8.
template <int kHeadDim, int kBlockN, class Element, class QueryFragments, class KeyFragments>
__device__ __forceinline__ void warp_scores(float (&s)[kBlockN / 2], QueryFragments query_fragments,
                                            KeyFragments key_fragments) {
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) s[i] = 0.0f;
  // Key groups outside, head-dim steps inside (Q's fragments loaded again for each group): the
  // other order kept every group's key addresses live across the steps, and the kernels spilled
  // (session 28).
#pragma unroll
  for (int j = 0; j < kBlockN / 16; ++j) {
#pragma unroll 1
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t a[4], b[4];
      query_fragments(kk, a);
      key_fragments(kk, j, b);
      cuda::mma_16816<Element>(*reinterpret_cast<float(*)[4]>(&s[8 * j]), a, b[0], b[1]);
      cuda::mma_16816<Element>(*reinterpret_cast<float(*)[4]>(&s[8 * j + 4]), a, b[2], b[3]);
    }
  }
}

// The warp's query rows row0 .. row0 + 15 of the Q tile at q (column 0; columns of 64 elements
// q_column_bytes apart), by ldmatrix x4: lane l gives a line of matrix l / 8, rows first.
struct QueriesInTile {
  uint32_t q;
  int q_column_bytes, line, half;
  __device__ __forceinline__ QueriesInTile(uint32_t q_, int q_column_bytes_, int row0, int lane)
      : q(q_), q_column_bytes(q_column_bytes_), line(row0 + (lane / 8 % 2) * 8 + lane % 8), half(lane / 16) {}
  __device__ __forceinline__ void operator()(int kk, uint32_t (&a)[4]) const {
    cuda::ldmatrix_x4(a, swizzled_chunk(q + kk / 4 * q_column_bytes, line, (kk % 4) * 2 + half));
  }
};

// The same rows from global memory: the lane's rows lane / 4 and lane / 4 + 8 of the warp's 16
// and its two dims 2 (lane % 4) + {0, 1}, and the same 8 dims on, as ldmatrix would have given
// them. rows: the sequence's row 0 (of the tile's head); first: the warp's row 0 in the sequence.
// Rows past `len` (the sequence's end; their output is never stored) read the last one instead.
// kNarrow (KernelConfig::kNarrowHeadDim): dims past head_dim give 0, as TMA's zero fill gives
// them in shared memory.
template <class Element, bool kNarrow = false>
struct QueriesInGlobal {
  const Element* upper;  // row lane / 4
  const Element* lower;  // row lane / 4 + 8
  int dims_after;        // kNarrow: head dims from the lane's first, head_dim - 2 (lane % 4)
  __device__ __forceinline__ QueriesInGlobal(const Element* rows, int64_t row_stride, int first, int len, int head_dim,
                                             int lane)
      : dims_after(kNarrow ? head_dim - 2 * (lane % 4) : 0) {
    const Element* dims = rows + 2 * (lane % 4);
    upper = dims + int64_t(min(first + lane / 4, len - 1)) * row_stride;
    lower = dims + int64_t(min(first + lane / 4 + 8, len - 1)) * row_stride;
  }
  // The lane's two rows given (GQA packing: each tile row its own head, pack_gqa.h).
  __device__ __forceinline__ QueriesInGlobal(const Element* upper_row, const Element* lower_row, int head_dim, int lane)
      : upper(upper_row + 2 * (lane % 4)),
        lower(lower_row + 2 * (lane % 4)),
        dims_after(kNarrow ? head_dim - 2 * (lane % 4) : 0) {}
  __device__ __forceinline__ uint32_t pair(const Element* row, int dim) const {
    if constexpr (kNarrow) {
      if (dim >= dims_after) return 0u;
    }
    return __ldg(reinterpret_cast<const unsigned int*>(row + dim));
  }
  // The full head dim's loads as they were before kNarrow: the same loads through pair() moved
  // the d64 / d128 kernels' schedules (session 55), and their machine code stays as it was.
  __device__ __forceinline__ void operator()(int kk, uint32_t (&a)[4]) const {
    if constexpr (kNarrow) {
      a[0] = pair(upper, 16 * kk);
      a[1] = pair(lower, 16 * kk);
      a[2] = pair(upper, 16 * kk + 8);
      a[3] = pair(lower, 16 * kk + 8);
    } else {
      a[0] = __ldg(reinterpret_cast<const unsigned int*>(upper + 16 * kk));
      a[1] = __ldg(reinterpret_cast<const unsigned int*>(lower + 16 * kk));
      a[2] = __ldg(reinterpret_cast<const unsigned int*>(upper + 16 * kk + 8));
      a[3] = __ldg(reinterpret_cast<const unsigned int*>(lower + 16 * kk + 8));
    }
  }
};

// The key block's B fragments from its K stage at k (128B-swizzled columns of 64 elements,
// kv_column_bytes apart), by ldmatrix x4: (keys 0-7 | 8-15) x (k 0-7 | 8-15), k first.
struct KeysInStage {
  uint32_t k;
  int kv_column_bytes, key, half;
  __device__ __forceinline__ KeysInStage(uint32_t k_, int kv_column_bytes_, int lane)
      : k(k_), kv_column_bytes(kv_column_bytes_), key((lane / 16) * 8 + lane % 8), half(lane / 8 % 2) {}
  __device__ __forceinline__ void operator()(int kk, int j, uint32_t (&b)[4]) const {
    cuda::ldmatrix_x4(b, swizzled_chunk(k + kk / 4 * kv_column_bytes, 16 * j + key, (kk % 4) * 2 + half));
  }
};

// The key block's B fragments from global memory: the lane's key (lane / 4 of each 8) and its
// two dims 2 (lane % 4) + {0, 1}, and the same 8 dims on, as ldmatrix would have given them.
// Keys past `keys` (the sequence's end) read the last one instead: the mask drops their scores.
// kNarrow: dims past head_dim give 0 (QueriesInGlobal).
template <class Element, bool kNarrow = false>
struct KeysInGlobal {
  const Element* rows;  // the block's key 0, at this lane's two dims
  int64_t row_stride;
  int key, last_key;
  int dims_after;  // kNarrow: head_dim - 2 (lane % 4)
  __device__ __forceinline__ KeysInGlobal(const Element* block, int64_t row_stride_, int keys, int head_dim, int lane)
      : rows(block + 2 * (lane % 4)),
        row_stride(row_stride_),
        key(lane / 4),
        last_key(keys - 1),
        dims_after(kNarrow ? head_dim - 2 * (lane % 4) : 0) {}
  __device__ __forceinline__ uint32_t pair(int k_index, int dim) const {
    if constexpr (kNarrow) {
      if (dim >= dims_after) return 0u;
    }
    return __ldg(reinterpret_cast<const unsigned int*>(rows + int64_t(min(k_index, last_key)) * row_stride + dim));
  }
  __device__ __forceinline__ void operator()(int kk, int j, uint32_t (&b)[4]) const {
    b[0] = pair(16 * j + key, 16 * kk), b[1] = pair(16 * j + key, 16 * kk + 8);
    b[2] = pair(16 * j + 8 + key, 16 * kk), b[3] = pair(16 * j + 8 + key, 16 * kk + 8);
  }
};

// o (the warp's share of O, kHeadDim / 2 registers in wgmma's order: 8-dim group i in 4i .. 4i + 3)
// += P V for one key block. P is S's registers after the exp2s, packed a 16-key step at a time
// into the A fragment (the P V wgmma's, which is mma.sync's: accumulator_to_operand's pairs), and
// V's B fragments come from value_fragments(kk, i, b) for keys 16kk .. 16kk + 15 and dims
// 8i .. 8i + 7. The steps are a loop, not unrolled, each taking P's first 8 registers and moving
// the rest down (P is used up): unrolled, ptxas hoisted the later steps' loads and spilled the
// loop state of the kernels with 160 registers a thread.
template <int kHeadDim, int kBlockN, class Element, class ValueFragments>
__device__ __forceinline__ void warp_values(float (&o)[kHeadDim / 2], float (&p)[kBlockN / 2],
                                            ValueFragments value_fragments) {
#pragma unroll 1
  for (int kk = 0; kk < kBlockN / 16; ++kk) {
    uint32_t a[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) a[r] = pack_pair<Element>(p[2 * r], p[2 * r + 1]);
#pragma unroll
    for (int i = 0; i < kHeadDim / 8; ++i) {
      uint32_t b[2];
      value_fragments(kk, i, b);
      cuda::mma_16816<Element>(*reinterpret_cast<float(*)[4]>(&o[4 * i]), a, b[0], b[1]);
    }
#pragma unroll
    for (int r = 0; r + 8 < kBlockN / 2; ++r) p[r] = p[r + 8];
  }
}

// The key block's V as m16n8k16's B fragments (keys x dims) from global memory: each 8 keys x 8
// dims loaded as rows (the lane's key lane / 4, its dims 2 (lane % 4) + {0, 1}: one 32-bit load)
// and transposed in registers (movmatrix), which leaves the lane dim lane / 4 and keys
// 2 (lane % 4) + {0, 1}: b[0] of keys 16kk .. 16kk + 7, b[1] of the next 8. Two elements a load,
// and no packing: half the registers in flight of loading each element, with which ptxas spilled
// the kernels' loop state. Keys past `keys` (the sequence's end) give 0: their P is 0, and the
// rows there may hold anything (NaN times 0 is NaN). kNarrow: dims past head_dim give 0 as well
// (their O is never stored, but the loads would leave the tensor).
template <class Element, bool kNarrow = false>
struct ValuesInGlobal {
  const Element* rows;  // the block's key lane / 4, at this lane's two dims of each 8
  int row_stride;       // elements (a key row's stride fits 32 bits; the products are widened)
  int keys_after;       // keys past the lane's first: keys - lane / 4
  int dims_after;       // kNarrow: head_dim - 2 (lane % 4)
  __device__ __forceinline__ ValuesInGlobal(const Element* block, int64_t row_stride_, int keys, int head_dim, int lane)
      : rows(block + int64_t(lane / 4) * row_stride_ + 2 * (lane % 4)),
        row_stride(int(row_stride_)),
        keys_after(keys - lane / 4),
        dims_after(kNarrow ? head_dim - 2 * (lane % 4) : 0) {}
  __device__ __forceinline__ uint32_t transposed(int k_step, int dim) const {
    const uint32_t pair =
        k_step < keys_after && (!kNarrow || dim < dims_after)
            ? __ldg(reinterpret_cast<const unsigned int*>(rows + int64_t(k_step) * row_stride + dim))
            : 0u;
    return cuda::movmatrix_trans(pair);
  }
  __device__ __forceinline__ void operator()(int kk, int i, uint32_t (&b)[2]) const {
    b[0] = transposed(16 * kk, 8 * i);
    b[1] = transposed(16 * kk + 8, 8 * i);
  }
};

}  // namespace sm90
}  // namespace flashattn
