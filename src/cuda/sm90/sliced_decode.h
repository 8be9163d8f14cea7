// The sliced decode kernel: GQA-packed decode tiles of 16 rows, whose four warps split each key
// block among them (docs/design.md, "Sliced decode tiles"; docs/perf.md, session 94).
//
// A decode step packs G query heads (seqlen_q x G <= 16 rows) of one KV head into
// a tile. The wgmma kernels pad such a tile to 64 rows a warpgroup: every 128-key block still
// costs the full m64 products, and the scores of all real rows sit in warp 0, so one warp's
// softmax paces the block (session 93: ours held DRAM at 63-65% where cuDNN's decode kernel,
// an mma.sync kernel of this shape, held 83%). Here a tile is 16 rows (mma.sync m16n8k16) and
// warp w takes keys 32 w .. 32 w + 31 of every 128-key block of its piece:
//  - each warp streams its own slice of K and V through its own ring of cp.async stages, so the
//    warps never wait for each other until the end;
//  - each keeps its own running max, sum and O over its keys (the online softmax of seed 001,
//    in base 2 with the scale folded in); at the end the four meet once in shared memory:
//      M = max_w m_w,  L = sum_w l_w 2^(m_w - M),  O = sum_w O_w 2^(m_w - M) / L;
//  - a tile's key range is cut into pieces as the packed kernel's is (keep_key_piece), one CTA a
//    piece; a tile of one piece stores itself, the pieces of a split tile write the packed
//    kernel's slots (PieceSlot: O's mma.sync fragment is warp 0's part of the wgmma one) and its
//    combine kernel (split_combine.h) merges them.
// Head dims 64 (two CTAs an SM: 3 stages x 4 warps x 8 KB of K and V) and 128 (one: 16 KB).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/sm90/block_range.h"
#include "cuda/sm90/fragment.h"
#include "cuda/sm90/pack_gqa.h"
#include "cuda/sm90/paged_blocks.h"
#include "cuda/sm90/params.h"
#include "cuda/sm90/piece_merge.h"
#include "cuda/sm90/split_keys.h"

namespace flashattn {
namespace sm90 {

// The members the shared helpers read (pack_gqa.h, split_combine.h) are the packed kernel's names.
template <int HeadDim, typename Element_>
struct SlicedDecodeConfig {
  using Element = Element_;
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = 16;   // packed rows a tile (seqlen_q x G)
  static constexpr int kBlockN = 128;  // keys a block: the packed kernel's at head dim 64 (pages, pieces)
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpKeys = kBlockN / kWarps;  // a warp's slice of a block
  static constexpr int kStages = 3;
  // 96 KB of rings at head dim 64 (two CTAs an SM), 192 KB at 128 (one).
  static constexpr int kCtasPerSm = kHeadDim == 64 ? 2 : 1;
  static constexpr int kRowBytes = kHeadDim * 2;
  static constexpr int kRowChunks = kRowBytes / 16;  // 16-byte chunks a K / V row
  static constexpr int kSliceBytes = kWarpKeys * kRowBytes;            // K or V of one warp's slice
  static constexpr int kWarpRingBytes = kStages * 2 * kSliceBytes;     // a warp's ring of K and V
  static constexpr int kSmemBytes = kWarps * kWarpRingBytes;
  static constexpr int kDFrags = kHeadDim / 8;    // n8 tiles of O
  static constexpr int kKSteps = kHeadDim / 16;   // k16 steps of Q K^T
  static constexpr int kNFrags = kWarpKeys / 8;   // n8 tiles of a warp's scores
  // split_combine.h's view: one warpgroup whose warp 0 holds the rows, the plain tile numbering.
  static constexpr bool kPackGqa = true;
  static constexpr bool kSplitKeys = true;
  static constexpr bool kFastTileDecode = false;
  static constexpr bool kNarrowHeadDim = false;
  static constexpr int kConsumerWarpgroups = 1;
  static_assert(kHeadDim == 64 || kHeadDim == 128, "the sliced decode kernel is built for head dims 64 and 128");
  static_assert(kWarpKeys % 16 == 0, "P V consumes keys 16 at a time");
  // The warps' end-of-tile exchange (m, l and O of each lane) fits in the rings.
  static_assert(kWarps * 32 * (2 * kDFrags * 2 + 4) * 4 <= kSmemBytes, "");
};

namespace sliced {

// Byte offset of 16-byte chunk `chunk` of row `row` in a slice of kRowBytes-byte rows (a multiple
// of 128), XOR-swizzled in the chunk's low three bits so that ldmatrix's eight rows of one chunk
// column fall in eight different bank groups.
template <class Cfg>
__device__ __forceinline__ uint32_t slice_offset(int row, int chunk) {
  return uint32_t(row * Cfg::kRowBytes + ((chunk ^ (row & 7)) << 4));
}

}  // namespace sliced

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kCtasPerSm)
    sliced_decode_kernel(const __grid_constant__ KernelParams p) {
  using Element = typename Cfg::Element;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, tig = lane % 4;  // fragment row (and row + 8), column pair

  // A programmatic dependent of the stream's previous kernel (launch.h, FLASHATTN_SM90_PDL): the
  // CTA is placed while that kernel ends, and reads nothing of the problem before it has.
#if defined(FLASHATTN_SM90_PDL)
  wait_for_prerequisite_grids();
#endif
  int piece = 0;
  const int tile = split_tile_of<Cfg>(p, int(blockIdx.x), piece);
  const TileCoord t = tile_coord_of<Cfg>(p, tile);
  const SequenceInfo seq = sequence_info(p, t.batch);
  if (t.m_block * p.pack_rows >= seq.len_q) return;
  BlockRange<Cfg::kBlockN> range = tile_key_block_range<Cfg>(p, seq, t.m_block);
  const int pieces = keep_key_piece(range, piece, p.key_splits);
  if (pieces == 0) return;
  // The combine kernel (split tiles) may take the SMs as this grid's CTAs leave them.
  if (pieces > 1) launch_dependent_grids();

  // This thread's two rows: their query row and head, whether they hold one, their visible keys.
  bool live[2];
  int q_row[2], head[2], key_lo[2], key_hi[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    live[h] = !tile_row_outside_sequence<Cfg>(p, t, seq, r);
    q_row[h] = live[h] ? tile_row_query<Cfg>(p, t, r) : 0;
    head[h] = tile_row_head<Cfg>(p, t, r);
    visible_key_span(p, seq, q_row[h], q_row[h], key_lo[h], key_hi[h]);
  }

  // Q's A fragments straight from global memory (16 rows, read once): k-step kk holds columns
  // 16 kk + 2 tig (+1) and 16 kk + 8 + 2 tig (+1) of rows g and g + 8; rows without a query are 0.
  // 4-byte loads: fill_params has encoded Q's tensor map, whose strides are multiples of 16 bytes.
  uint32_t q_frag[Cfg::kKSteps][4];
  {
    const Element* q = static_cast<const Element*>(p.q);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t base = int64_t(t.batch) * p.q_batch_stride + int64_t(seq.q_row0 + q_row[h]) * p.q_row_stride +
                           int64_t(head[h]) * p.q_head_stride;
#pragma unroll
      for (int kk = 0; kk < Cfg::kKSteps; ++kk)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int col = 16 * kk + 8 * half + 2 * tig;
          q_frag[kk][2 * half + h] = live[h] ? __ldg(reinterpret_cast<const uint32_t*>(q + base + col)) : 0u;
        }
    }
  }

  // This warp's ring: stage s holds K then V of one 32-key slice.
  const uint32_t ring = smem_address(smem) + uint32_t(warp * Cfg::kWarpRingBytes);
  auto k_slice = [&](int stage) { return ring + uint32_t(stage * 2 * Cfg::kSliceBytes); };
  auto v_slice = [&](int stage) { return k_slice(stage) + uint32_t(Cfg::kSliceBytes); };
  const int slices = range.n_end - range.n_begin;  // one slice of each block is this warp's
  const int head_kv = t.head;
  // Variable length: one batch of packed rows (as the packed kernel's producer, mainloop_load.h).
  const int kv_batch_of_sequence = p.cu_seqlens_q != nullptr ? 0 : t.batch;
  const Element* k_base = static_cast<const Element*>(p.k) + int64_t(head_kv) * p.k_head_stride;
  const Element* v_base = static_cast<const Element*>(p.v) + int64_t(head_kv) * p.v_head_stride;

  // The copies of slice `i` (block range.n_begin + i): lane l copies chunk l % C of rows
  // l / C + (32 / C) j (C: a row's chunks); keys past the sequence are zero-filled (their scores
  // are masked, and a zero V row keeps 0 x garbage out of O). The rows' sources are one pointer a
  // tensor stepped row by row: offsets of every row kept across the loop cost d128 its registers.
  auto load_slice = [&](int i, int stage) {
    const int n = range.n_begin + i;
    int k_row = seq.k_row0 + n * Cfg::kBlockN, kv_batch = kv_batch_of_sequence;
    if (p.block_table != nullptr) place_paged_block<Cfg::kBlockN>(p, t.batch, n, k_row, kv_batch);
    constexpr int kRowsAPass = 32 / Cfg::kRowChunks;  // rows the warp's lanes copy at once
    const int chunk = lane % Cfg::kRowChunks, row0 = lane / Cfg::kRowChunks;
    const int first_key = n * Cfg::kBlockN + warp * Cfg::kWarpKeys + row0;  // within the sequence
    k_row += warp * Cfg::kWarpKeys + row0;
    const Element* k_src = k_base + int64_t(kv_batch) * p.k_batch_stride + int64_t(k_row) * p.k_row_stride + 8 * chunk;
    const Element* v_src = v_base + int64_t(kv_batch) * p.v_batch_stride + int64_t(k_row) * p.v_row_stride + 8 * chunk;
    const int64_t k_step = kRowsAPass * p.k_row_stride, v_step = kRowsAPass * p.v_row_stride;
    const uint32_t k_dst = k_slice(stage), v_dst = v_slice(stage);
#pragma unroll
    for (int j = 0; j < Cfg::kWarpKeys / kRowsAPass; ++j) {
      const int row = row0 + kRowsAPass * j;
      const bool in_sequence = first_key + kRowsAPass * j < seq.len_k;
      cuda::cp_async_16(k_dst + sliced::slice_offset<Cfg>(row, chunk), in_sequence ? k_src : k_base, in_sequence);
      cuda::cp_async_16(v_dst + sliced::slice_offset<Cfg>(row, chunk), in_sequence ? v_src : v_base, in_sequence);
      k_src += k_step, v_src += v_step;
    }
  };

  float o[Cfg::kDFrags][4];
#pragma unroll
  for (int df = 0; df < Cfg::kDFrags; ++df) o[df][0] = o[df][1] = o[df][2] = o[df][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (s < slices) load_slice(s, s);
    cuda::cp_async_commit();
  }
  for (int i = 0; i < slices; ++i) {
    const int stage = i % Cfg::kStages;
    // The slice's copies have landed (one group a slice, committed in order), for every lane.
    cuda::cp_async_wait<Cfg::kStages - 2>();
    __syncwarp();
    // The next slice into the stage freed by slice i - 1 (read before the __syncwarp above).
    if (i + Cfg::kStages - 1 < slices) load_slice(i + Cfg::kStages - 1, (i + Cfg::kStages - 1) % Cfg::kStages);
    cuda::cp_async_commit();

    // S = Q K^T over this warp's 32 keys: ldmatrix (no transpose) of K's rows gives the B
    // fragments, key g of each n8 tile and columns 2 tig (+1) of each 8-column chunk.
    float s[Cfg::kNFrags][4];
#pragma unroll
    for (int nf = 0; nf < Cfg::kNFrags; ++nf) s[nf][0] = s[nf][1] = s[nf][2] = s[nf][3] = 0.0f;
#pragma unroll
    for (int nf = 0; nf < Cfg::kNFrags; ++nf)
#pragma unroll
      for (int kp = 0; kp < Cfg::kKSteps / 2; ++kp) {
        // Matrices: rows 8 nf .. 8 nf + 7, chunks 4 kp .. 4 kp + 3 (k-steps 2 kp and 2 kp + 1).
        uint32_t b[4];
        cuda::ldmatrix_x4(b, k_slice(stage) + sliced::slice_offset<Cfg>(8 * nf + lane % 8, 4 * kp + lane / 8));
        cuda::mma_16816<Element>(s[nf], q_frag[2 * kp], b[0], b[1]);
        cuda::mma_16816<Element>(s[nf], q_frag[2 * kp + 1], b[2], b[3]);
      }

    // Scores to base-2 logits, the mask, the running max and the rescale.
    const int first_key = (range.n_begin + i) * Cfg::kBlockN + warp * Cfg::kWarpKeys;
    float scale[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int lo = key_lo[h] - first_key, hi = key_hi[h] - first_key;
      float top = row_max[h];
#pragma unroll
      for (int nf = 0; nf < Cfg::kNFrags; ++nf)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = 8 * nf + 2 * tig + e;
          float x = s[nf][2 * h + e];
          x = p.score_pre != 0.0f ? tanhf(x * p.score_pre) * p.score_log2 : x * p.score_log2;
          x = (col >= lo && col < hi) ? x : -INFINITY;
          s[nf][2 * h + e] = x;
          top = fmaxf(top, x);
        }
      top = cuda::quad_max(top);
      // A row that has seen no visible key yet keeps -inf; its exponentials are taken against 0.
      const float base = top == -INFINITY ? 0.0f : top;
      scale[h] = cuda::exp2_approx(row_max[h] - base);
      row_max[h] = top;
      float sum = 0.0f;
#pragma unroll
      for (int nf = 0; nf < Cfg::kNFrags; ++nf)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pv = cuda::exp2_approx(s[nf][2 * h + e] - base);
          s[nf][2 * h + e] = pv;
          sum += pv;
        }
      row_sum[h] = row_sum[h] * scale[h] + sum;
    }
#pragma unroll
    for (int df = 0; df < Cfg::kDFrags; ++df) {
      o[df][0] *= scale[0], o[df][1] *= scale[0];
      o[df][2] *= scale[1], o[df][3] *= scale[1];
    }

    // O += P V: P's C fragments of two neighbouring n8 tiles are the A fragment of one k16 step;
    // ldmatrix.trans of V's rows gives the B fragments (keys 2 tig (+1), column g).
#pragma unroll
    for (int kk = 0; kk < Cfg::kWarpKeys / 16; ++kk) {
      uint32_t a[4];
      a[0] = pack_pair<Element>(s[2 * kk][0], s[2 * kk][1]);
      a[1] = pack_pair<Element>(s[2 * kk][2], s[2 * kk][3]);
      a[2] = pack_pair<Element>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = pack_pair<Element>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < Cfg::kDFrags / 2; ++dp) {
        // Matrices: keys 16 kk + 8 (lane / 8 % 2) .., chunk 2 dp + lane / 16.
        uint32_t b[4];
        cuda::ldmatrix_x4_trans(b, v_slice(stage) + sliced::slice_offset<Cfg>(16 * kk + lane % 16, 2 * dp + lane / 16));
        cuda::mma_16816<Element>(o[2 * dp], a, b[0], b[1]);
        cuda::mma_16816<Element>(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
  }
  cuda::cp_async_wait<0>();

  // The four warps meet: each leaves its lanes' m, l (quad-summed) and O in shared memory, then
  // warp w merges O's n8 tiles 2 w and 2 w + 1 (and warp 0 the rows' L) for every lane.
  const float l_mine[2] = {cuda::quad_sum(row_sum[0]), cuda::quad_sum(row_sum[1])};
  __syncthreads();
  constexpr int kLaneFloats = 4 + 4 * Cfg::kDFrags;  // m[2], l[2], O
  float* exchange = reinterpret_cast<float*>(smem);
  auto at = [&](int w, int ln) { return exchange + (w * 32 + ln) * kLaneFloats; };
  {
    float* mine = at(warp, lane);
    mine[0] = row_max[0], mine[1] = row_max[1], mine[2] = l_mine[0], mine[3] = l_mine[1];
#pragma unroll
    for (int df = 0; df < Cfg::kDFrags; ++df)
#pragma unroll
      for (int c = 0; c < 4; ++c) mine[4 + 4 * df + c] = o[df][c];
  }
  __syncthreads();
  float top[2] = {-INFINITY, -INFINITY}, total[2] = {0.0f, 0.0f}, weight[Cfg::kWarps][2];
#pragma unroll
  for (int w = 0; w < Cfg::kWarps; ++w)
#pragma unroll
    for (int h = 0; h < 2; ++h) top[h] = fmaxf(top[h], at(w, lane)[h]);
#pragma unroll
  for (int w = 0; w < Cfg::kWarps; ++w)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m = at(w, lane)[h];
      weight[w][h] = m == -INFINITY ? 0.0f : exp2f(m - top[h]);
      total[h] += at(w, lane)[2 + h] * weight[w][h];
    }
  float inv[2], lse[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    inv[h] = total[h] > 0.0f ? 1.0f / total[h] : 0.0f;
    lse[h] = total[h] > 0.0f ? (top[h] + log2f(total[h])) * 0.6931471805599453f : -INFINITY;
  }
  constexpr int kTilesAWarp = Cfg::kDFrags / Cfg::kWarps;
  float merged[kTilesAWarp][4];
#pragma unroll
  for (int k = 0; k < kTilesAWarp; ++k) {
    const int df = warp * kTilesAWarp + k;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float acc = 0.0f;
#pragma unroll
      for (int w = 0; w < Cfg::kWarps; ++w) acc += at(w, lane)[4 + 4 * df + c] * weight[w][c / 2];
      merged[k][c] = acc * inv[c / 2];
    }
  }

  if (pieces > 1) {
    // The packed kernel's slot of this work index: fragment thread `lane` of warp 0, float4 df
    // = n8 tile df of O, then (L of row g, L of row g + 8).
    using Slot = PieceSlot<Cfg::kHeadDim>;
    float4* slot = reinterpret_cast<float4*>(p.split_partials) + int64_t(tile * p.key_splits + piece) * Slot::kSlotVectors + lane;
    if (!live[0] && !live[1]) return;
#pragma unroll
    for (int k = 0; k < kTilesAWarp; ++k) {
      __stcg(slot + (warp * kTilesAWarp + k) * kWarpgroupThreads, make_float4(merged[k][0], merged[k][1], merged[k][2], merged[k][3]));
    }
    if (warp == 0) __stcg(slot + Slot::kOAccum / 4 * kWarpgroupThreads, make_float4(lse[0], lse[1], 0.0f, 0.0f));
    return;
  }
  char* out = static_cast<char*>(p.out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (!live[h]) continue;
    const int64_t offset = out_offset_of(p, seq, t, q_row[h], head[h]);
#pragma unroll
    for (int k = 0; k < kTilesAWarp; ++k) {
      const int col = 8 * (warp * kTilesAWarp + k) + 2 * tig;
      *reinterpret_cast<uint32_t*>(out + (offset + col) * sizeof(Element)) = pack_pair<Element>(merged[k][2 * h], merged[k][2 * h + 1]);
    }
    if (p.lse != nullptr && warp == 0 && tig == 0) p.lse[lse_offset_of(p, seq, t, q_row[h], head[h])] = lse[h];
  }
}

}  // namespace sm90
}  // namespace flashattn
