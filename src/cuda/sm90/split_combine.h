// The key splits' pieces combined by a kernel of their own (KernelParams::split_combine; the
// launch's rule or FLASHATTN_SM90_SPLIT_COMBINE, launch.h), instead of by the last piece to
// arrive (split_keys.h, KeySplitMerge). In the packed kernel that merge is one warpgroup's walk
// over all S pieces' slots at the end of the launch, a chain of L2 round trips on the critical
// path (session 68: at MQA decode, S = 64, ~10 us of a 23 us call). Here every piece only
// writes its slot, and a second kernel, launched dependent on the first (programmatic dependent
// launch: its CTAs take the SMs the packed grid leaves idle and wait there for it to end), reads
// the pieces with many threads at once:
//   a group of W lanes (W = S rounded up to a power of two, 4..32) takes one float4 of one
//   fragment thread's O (two columns of its two rows) and lane j reads pieces j, j + W, ...; the
//   lanes keep the usual running (largest L, sum of exp(L - largest), O weighted by it), merge
//   them across the group with shuffles, and lane 0 stores the two columns of both rows (and the
//   rows' L where the float4 is the row's first).
// So a tile's merge costs one or two L2 round trips whatever S is. The order of additions is the
// shuffle tree's, fixed for a given S: the bits do not depend on the order of arrival (they differ
// from the in-kernel merge's, which adds in piece order).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/sm90/block_range.h"
#include "cuda/sm90/fragment.h"
#include "cuda/sm90/pack_gqa.h"
#include "cuda/sm90/params.h"
#include "cuda/sm90/piece_merge.h"
#include "cuda/sm90/ptx.h"
#include "cuda/sm90/split_keys.h"

namespace flashattn {
namespace sm90 {

constexpr int kCombineThreads = 256;

// A running merge of pieces for one float4 (x, y: the first row's two columns; z, w: the second
// row's): the rows' largest L so far, the sum of exp(L - largest) and O weighted by the same.
struct PieceRun {
  float top[2] = {-INFINITY, -INFINITY};
  float sum[2] = {0.0f, 0.0f};
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  // One more piece, or another run (sum and acc already weighted against its `top`).
  __device__ __forceinline__ void add(const float (&l)[2], const float (&s)[2], const float4& o) {
    float w_old[2], w_new[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float grown = fmaxf(top[h], l[h]);
      // exp(-inf - -inf) would be NaN: a side that holds nothing weighs 0.
      w_old[h] = top[h] == -INFINITY ? 0.0f : __expf(top[h] - grown);
      w_new[h] = l[h] == -INFINITY ? 0.0f : __expf(l[h] - grown);
      sum[h] = sum[h] * w_old[h] + s[h] * w_new[h];
      top[h] = grown;
    }
    acc.x = acc.x * w_old[0] + o.x * w_new[0], acc.y = acc.y * w_old[0] + o.y * w_new[0];
    acc.z = acc.z * w_old[1] + o.z * w_new[1], acc.w = acc.w * w_old[1] + o.w * w_new[1];
  }
};

template <class Cfg>
__global__ void __launch_bounds__(kCombineThreads) combine_pieces_kernel(const __grid_constant__ KernelParams p,
                                                                         const CombineShape shape) {
  using Slot = PieceSlot<Cfg::kHeadDim>;
  constexpr int kVectors = Slot::kOAccum / 4;  // float4s of O a fragment thread
  const int lanes = shape.group_lanes;
  const int64_t group = (int64_t(blockIdx.x) * kCombineThreads + threadIdx.x) / lanes;
  const int j = int(threadIdx.x) % lanes;
  // The group's lanes alone: a warp's other groups may have left (a tile of one piece, rows
  // without a query), and a group leaves or stays as one.
  const unsigned group_mask = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u) << (int(threadIdx.x) % 32 / lanes * lanes);
  // The packed kernel's pieces are all written once it has ended (its memory then visible).
  wait_for_prerequisite_grids();
  if (group >= shape.groups) return;
  // group = ((tile x fragment_warps + fw) x 32 + lane) x kVectors + i: a warp's groups read
  // neighbouring float4s of one piece.
  const int i = int(group % kVectors);
  int64_t rest = group / kVectors;
  const int lane = int(rest % 32);
  rest /= 32;
  const int fw = int(rest % shape.fragment_warps);
  const int tile = int(rest / shape.fragment_warps);

  const TileCoord t = tile_coord_of<Cfg>(p, tile);
  const SequenceInfo seq = sequence_info(p, t.batch);
  if (t.m_block * tile_query_rows<Cfg>(p) >= seq.len_q) return;
  BlockRange<Cfg::kBlockN> range = tile_key_block_range<Cfg>(p, seq, t.m_block);
  // The packed kernel stored a tile of one piece itself (split_keys.h: a tile's pieces).
  const int pieces = keep_key_piece(range, 0, p.key_splits);
  if (pieces <= 1) return;
  const int r0 = fw * 16 + lane / 4;  // tile rows r0 and r0 + 8
  bool row_live[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = r0 + 8 * h;
    row_live[h] = tile_row_holds_query<Cfg>(p, r) && tile_row_query<Cfg>(p, t, r) < seq.len_q;
  }
  // Neither row stored: the piece's thread wrote no slot (KeySplitMerge::holds_query_row).
  if (!row_live[0] && !row_live[1]) return;
  const int wg = fw / 4, thread = (fw % 4) * 32 + lane;
  const float4* first_slot = reinterpret_cast<const float4*>(p.split_partials) +
                             (int64_t(tile) * p.key_splits * Cfg::kConsumerWarpgroups + wg) * Slot::kSlotVectors + thread;
  const int64_t piece_stride = int64_t(Cfg::kConsumerWarpgroups) * Slot::kSlotVectors;

  // This lane's pieces, four loads of each kind in flight at a time.
  PieceRun run;
  constexpr int kInFlight = 4;
  for (int c0 = j; c0 < pieces; c0 += kInFlight * lanes) {
    float4 lv[kInFlight], ov[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      const int c = c0 + k * lanes;
      const float4* slot = first_slot + int64_t(min(c, pieces - 1)) * piece_stride;
      lv[k] = load_if(slot + kVectors * kWarpgroupThreads, c < pieces);
      ov[k] = load_if(slot + i * kWarpgroupThreads, c < pieces);
    }
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      if (c0 + k * lanes >= pieces) break;
      const float l[2] = {lv[k].x, lv[k].y}, one[2] = {1.0f, 1.0f};
      run.add(l, one, ov[k]);
    }
  }
  // Across the group's lanes (a power of two, within a warp: groups never straddle one).
#pragma unroll
  for (int step = 16; step >= 1; step /= 2) {
    if (step >= lanes) continue;
    float l[2], s[2];
    float4 o;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] = __shfl_xor_sync(group_mask, run.top[h], step, lanes);
      s[h] = __shfl_xor_sync(group_mask, run.sum[h], step, lanes);
    }
    o.x = __shfl_xor_sync(group_mask, run.acc.x, step, lanes);
    o.y = __shfl_xor_sync(group_mask, run.acc.y, step, lanes);
    o.z = __shfl_xor_sync(group_mask, run.acc.z, step, lanes);
    o.w = __shfl_xor_sync(group_mask, run.acc.w, step, lanes);
    run.add(l, s, o);
  }
  if (j != 0) return;
  using Element = typename Cfg::Element;
  char* out = static_cast<char*>(p.out);
  const int col = 8 * i + 2 * (lane % 4);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (!row_live[h]) continue;
    const int r = r0 + 8 * h;
    const int row = tile_row_query<Cfg>(p, t, r), head = tile_row_head<Cfg>(p, t, r);
    const float scale = run.sum[h] > 0.0f ? __frcp_rn(run.sum[h]) : 0.0f;
    const float lo = (h == 0 ? run.acc.x : run.acc.z) * scale, hi = (h == 0 ? run.acc.y : run.acc.w) * scale;
    if (!Cfg::kNarrowHeadDim || 8 * i < p.head_dim) {
      const int64_t offset = out_offset_of(p, seq, t, row, head);
      *reinterpret_cast<uint32_t*>(out + (offset + col) * sizeof(Element)) = pack_pair<Element>(lo, hi);
    }
    if (p.lse != nullptr && i == 0 && lane % 4 == 0) {
      p.lse[lse_offset_of(p, seq, t, row, head)] = run.sum[h] > 0.0f ? run.top[h] + __logf(run.sum[h]) : -INFINITY;
    }
  }
}

}  // namespace sm90
}  // namespace flashattn
