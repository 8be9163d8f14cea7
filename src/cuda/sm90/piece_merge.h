// Pieces of one tile (the same query rows over disjoint key ranges) meeting in global memory:
// the split tail's (split_tail.h) and the key splits' (split_keys.h). Each piece ends as a short
// tile, with its normalised O and its logsumexp L per row; they combine as
//   L = log(sum_i exp(L_i)),  O = sum_i exp(L_i - L) O_i.
// A warpgroup keeps its piece's O (fp32, in the wgmma fragment layout) and L in a slot of
// kSlotVectors float4s, each thread's at a stride of the warpgroup so that a warp's writes are
// whole 512-byte lines, then counts itself in the tile's counter; the last to arrive merges.
#pragma once

#include <cstddef>

#include "cuda/sm90/config.h"
#include "cuda/sm90/ptx.h"

namespace flashattn {
namespace sm90 {

// An L2 load where `live`, else zeros.
__device__ __forceinline__ float4 load_if(const float4* address, bool live) {
  return live ? __ldcg(address) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

template <int HeadDim>
struct PieceSlot {
  static constexpr int kOAccum = HeadDim / 2;
  // O as float4s, then L (two rows a thread) in one more.
  static constexpr int kSlotVectors = kWarpgroupThreads * (kOAccum / 4 + 1);
  static constexpr size_t kBytes = size_t(kSlotVectors) * sizeof(float4);  // of the workspace (launch.h)
  // O merged kLoadsInFlight float4s at a time: all of them at once took registers the kernels do
  // not have; 8 (session 32, 4 before) halves the L2 round trips without a spill. 4 where 8 does
  // not divide a thread's float4s (head dim 96: 12).
  static constexpr int kLoadsInFlight = kOAccum / 4 % 8 == 0 ? 8 : 4;
  static_assert(kOAccum / 4 % kLoadsInFlight == 0, "");

  // This thread's O and L into its slot (`slot` already at the thread's first float4).
  __device__ __forceinline__ static void write(float4* slot, const float (&o)[kOAccum], const float (&lse)[2]) {
#pragma unroll
    for (int i = 0; i < kOAccum / 4; ++i) {
      __stcg(slot + i * kWarpgroupThreads, make_float4(o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]));
    }
    __stcg(slot + kOAccum / 4 * kWarpgroupThreads, make_float4(lse[0], lse[1], 0.0f, 0.0f));
  }
  __device__ __forceinline__ static void read_lse(const float4* slot, float (&l)[2], bool live = true) {
    const float4 v = load_if(slot + kOAccum / 4 * kWarpgroupThreads, live);
    l[0] = live ? v.x : -INFINITY, l[1] = live ? v.y : -INFINITY;
  }
};

// After PieceSlot::write: the warpgroup counts itself in `counter` (named barrier `barrier`) and
// learns whether it arrived last, i.e. whether `others` arrivals came before it.
__device__ __forceinline__ bool count_piece_in(int* counter, int others, int barrier, int thread) {
  // Every thread's writes are visible device-wide before the warpgroup counts itself.
  __threadfence();
  named_barrier_sync(barrier, kWarpgroupThreads);
  bool last = false;
  if (thread == 0) {
    last = atomicAdd(counter, 1) == others;
    __threadfence();
  }
  // Through a vote the compiler knows the answer is the warp's: O's registers (wgmma
  // accumulators) rewritten under a branch it cannot prove uniform serialise every wgmma.
  return __any_sync(0xffffffffu, named_barrier_any(barrier, kWarpgroupThreads, last));
}

// A weight of the second pass: piece L against the rows' largest (0 for a piece that saw no key).
__device__ __forceinline__ float piece_weight(float l, float largest) {
  return l == -INFINITY ? 0.0f : __expf(l - largest);
}

// One piece's float4s added into `sum` with the piece's weights, exp(L - top) / sum of them, of
// the rows the float4s' halves belong to (x, y: the thread's first row; z, w: its second).
template <int N>
__device__ __forceinline__ void add_weighted(float4 (&sum)[N], const float4 (&v)[N], const float (&l)[2],
                                             const float (&top)[2], const float (&scale)[2]) {
  const float w0 = piece_weight(l[0], top[0]) * scale[0], w1 = piece_weight(l[1], top[1]) * scale[1];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    sum[i].x += v[i].x * w0, sum[i].y += v[i].y * w0;
    sum[i].z += v[i].z * w1, sum[i].w += v[i].w * w1;
  }
}

// The first pass of a merge of pieces first .. last: the rows' largest L (top), the reciprocal of
// sum_i exp(L_i - top) (scale) and the merged L, reading kLsePiecesInFlight pieces' L at once
// through piece_lse(c, l) (-inf past `last`), the sum kept against the largest as it grows.
constexpr int kLsePiecesInFlight = 8;
template <class PieceLse>
__device__ __forceinline__ void merged_lse(int first, int last, PieceLse piece_lse, float (&top)[2], float (&scale)[2],
                                           float (&lse)[2]) {
  float sum[2] = {0.0f, 0.0f};
  top[0] = top[1] = -INFINITY;
  for (int c0 = first; c0 <= last; c0 += kLsePiecesInFlight) {
    float l[kLsePiecesInFlight][2];
#pragma unroll
    for (int j = 0; j < kLsePiecesInFlight; ++j) piece_lse(c0 + j, l[j]);
#pragma unroll
    for (int j = 0; j < kLsePiecesInFlight; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (l[j][h] == -INFINITY) continue;
        const float grown = fmaxf(top[h], l[j][h]);
        sum[h] = sum[h] * __expf(top[h] - grown) + __expf(l[j][h] - grown);  // exp(-inf) = 0 at first
        top[h] = grown;
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    scale[h] = sum[h] > 0.0f ? __frcp_rn(sum[h]) : 0.0f;  // no division's slow-path call
    lse[h] = sum[h] > 0.0f ? top[h] + __logf(sum[h]) : -INFINITY;
  }
}

// The merge of pieces first .. last, `own` among them still in o and lse (its L in own_lse too),
// the others' read through slot_of(c) (this thread's first float4 of piece c's slot). Merged in
// piece order, the own piece at its place among them, so that the bits do not depend on which
// piece arrived last. Two passes: the rows' largest L with the sum of exp(L_i - largest) kept
// against it as it grows, then O as a sum in order, weight exp(L_i - largest) / sum; each other
// piece's L is read again where it is needed (with its O's loads) rather than kept, as a tile
// may have many pieces. A row whose pieces all saw no key (L = -inf, O 0) gets weight 0
// throughout and L = -inf. A thread that is not `live` (none of its rows is stored, nor was
// written to the slots) reads nothing and merges zeros; O's registers (wgmma accumulators) are
// still written on the one path for all threads.
// One warpgroup merges while the tile's output waits, and what it waits on is L2 round trips, not
// bytes (session 66: at S = 128 pieces one MQA tile's merge took ~200 us): the first pass reads
// kLsePiecesInFlight pieces' L at once, the second kPiecesInFlight pieces' O, both loads issued
// before any of them is used, in the same order of operations as one piece at a time.
template <int HeadDim, class SlotOf>
__device__ __forceinline__ void merge_pieces(float (&o)[HeadDim / 2], float (&lse)[2], int first, int last, int own,
                                             SlotOf slot_of, bool live = true) {
  using Slot = PieceSlot<HeadDim>;
  constexpr int kOAccum = Slot::kOAccum, kLoadsInFlight = Slot::kLoadsInFlight;
  // Two pieces' O loads at once take kLoadsInFlight float4s more; at head dim 256 (128 O
  // registers) one.
  constexpr int kPiecesInFlight = HeadDim <= 128 ? 2 : 1;
  const float own_lse[2] = {lse[0], lse[1]};  // lse is the merged tile's by the second pass
  auto piece_lse = [&](int c, float (&l)[2]) {
    if (c == own) {
      l[0] = own_lse[0], l[1] = own_lse[1];
    } else {
      Slot::read_lse(slot_of(min(c, last)), l, live && c <= last);  // no address past the pieces
    }
  };
  float top[2], scale[2];
  merged_lse(first, last, piece_lse, top, scale, lse);
#pragma unroll
  for (int i0 = 0; i0 < kOAccum / 4; i0 += kLoadsInFlight) {
    float4 merged[kLoadsInFlight];
#pragma unroll
    for (int i = 0; i < kLoadsInFlight; ++i) merged[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int c0 = first; c0 <= last; c0 += kPiecesInFlight) {
      float4 v[kPiecesInFlight][kLoadsInFlight];
      float l[kPiecesInFlight][2];
#pragma unroll
      for (int j = 0; j < kPiecesInFlight; ++j) {
        const int c = c0 + j;
        piece_lse(c, l[j]);
        if (c == own) {
#pragma unroll
          for (int i = 0; i < kLoadsInFlight; ++i) {
            const int e = 4 * (i0 + i);
            v[j][i] = make_float4(o[e], o[e + 1], o[e + 2], o[e + 3]);
          }
        } else {
          const float4* other = slot_of(min(c, last));
#pragma unroll
          for (int i = 0; i < kLoadsInFlight; ++i) v[j][i] = load_if(other + (i0 + i) * kWarpgroupThreads, live && c <= last);
        }
      }
#pragma unroll
      for (int j = 0; j < kPiecesInFlight; ++j) {
        if (c0 + j > last) break;  // the same for the whole warpgroup
        add_weighted(merged, v[j], l[j], top, scale);
      }
    }
#pragma unroll
    for (int i = 0; i < kLoadsInFlight; ++i) {
      const int e = 4 * (i0 + i);
      o[e] = merged[i].x, o[e + 1] = merged[i].y, o[e + 2] = merged[i].z, o[e + 3] = merged[i].w;
    }
    asm volatile("" ::: "memory");
  }
}

// The merge of pieces first .. last by a whole warpgroup whose rows are all warp 0's: a decode
// tile of up to 16 query rows (G heads of one token), where merge_pieces would leave 3 of the 4
// warps idle and warp 0 waiting on 2 x S / 2 dependent loads at head dim 128. Here the warpgroup
// shares warp 0's float4s out: warp w takes float4s w, w + 4, ... of lane `lane`'s slots (the
// lane is the owner: owner_slot_of(c), that lane's first float4 of piece c's slot), reads all
// pieces' L as merge_pieces does and Warp0Share::kPiecesInFlight pieces' O at once, about 1 + S / 4
// round trips. Every piece is read from its slot, the own one too. Out: the owner's merged L in
// lse (each warp of a lane computes the same), its merged float4 w + 4 k in share[k], in the
// same order of additions for every piece count and arrival.
template <int HeadDim>
struct Warp0Share {
  static constexpr int kVectors = HeadDim / 32;  // of the owner's HeadDim / 8 float4s
  static constexpr int kWarps = kWarpgroupThreads / 32;
  static constexpr int kPiecesInFlight = 16 / kVectors;  // 16 float4s of loads in flight
  // Where float4 k of this warp's share is in a slot (from the owner's first float4).
  __device__ __forceinline__ static int offset(int warp, int k) { return (warp + kWarps * k) * kWarpgroupThreads; }
};

template <int HeadDim, class OwnerSlotOf>
__device__ __forceinline__ void merge_pieces_for_warp0(float4 (&share)[Warp0Share<HeadDim>::kVectors], float (&lse)[2],
                                                       int first, int last, OwnerSlotOf owner_slot_of, bool owner_live,
                                                       int warp) {
  using Slot = PieceSlot<HeadDim>;
  using Share = Warp0Share<HeadDim>;
  constexpr int kVectors = Share::kVectors, kInFlight = Share::kPiecesInFlight;
  auto piece_lse = [&](int c, float (&l)[2]) {
    Slot::read_lse(owner_slot_of(min(c, last)), l, owner_live && c <= last);  // no address past the pieces
  };
  float top[2], scale[2];
  merged_lse(first, last, piece_lse, top, scale, lse);
#pragma unroll
  for (int k = 0; k < kVectors; ++k) share[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int c0 = first; c0 <= last; c0 += kInFlight) {
    float4 v[kInFlight][kVectors];
    float l[kInFlight][2];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const int c = c0 + j;
      piece_lse(c, l[j]);
      const float4* slot = owner_slot_of(min(c, last));
#pragma unroll
      for (int k = 0; k < kVectors; ++k) v[j][k] = load_if(slot + Share::offset(warp, k), owner_live && c <= last);
    }
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      if (c0 + j > last) break;  // the same for the whole warpgroup
      add_weighted(share, v[j], l[j], top, scale);
    }
  }
}

}  // namespace sm90
}  // namespace flashattn
