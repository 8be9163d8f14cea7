// FlashAttention-2 backward for sm80 and newer, main kernel: one thread block per (key tile,
// KV head, batch). K and V of the tile stay in shared memory and dK, dV in registers while the
// block walks the query tiles of every query head that shares the KV head (GQA sums in place);
// dQ is added in fp32 to a workspace.
//
// Per query tile the warps run three products with different splits of the 8 warps:
//   1. S^T = K Q^T and dP^T = V dO^T over (key rows x query cols); P^T and dS^T go to shared memory
//   2. dV += P^T dO and dK += dS^T Q over (key rows x head dim), accumulators in registers
//   3. dQ  = dS K over (query rows x head dim), added to the fp32 workspace with atomics
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "cuda/common/ptx.cuh"
#include "cuda/common/sequence.cuh"
#include "cuda/sm80/batch_sequence.cuh"
#include "cuda/common/smem_tile.cuh"
#include "cuda/sm80/params.h"

namespace flashattn::sm80 {

using namespace flashattn::cuda;

// kVariant selects experimental layouts timed by benchmarks/cpp/sm80_bwd_variants.cu (0: the
// production kernel): 1 = FlashAttention-2's product order (dV, then dQ and its reductions, then
// dK, so the reductions drain under the dK products); 2 = 64-row query tiles for head dims <= 64
// (v3's tile); 3 = the dQ product in twice the column chunks; 4 = the key-tile-major grid order
// (see backward_launch.cuh) at every shape; 5 = the thread index read afresh in the prefetch and
// the epilogue; 6 = v5's production kernel (the A/B reference of v6); 7 = v6 without the folded
// warp offsets of the fragment addresses; 8 = v7 without kStaticScoreMod (v6 with the dQ workspace
// in 8 x 8 blocks, kBlockedDq); 9 = 8 with variant 1's product order; 11 = v6's production kernel
// (the A/B reference of v7); 12 = the current kernel with the epilogue's coordinates kept from the
// prologue (kFreshEpilogueCoords off). Variants 1-5 and 12 are the current kernel with their one
// change.
template <int kHeadDim, int kVariant = 0>
struct BackwardConfig {
  // Small head dims take 128 query rows per tile (the products have K = head dim, so a larger
  // tile amortises the per-tile barriers and fixed costs over twice the work: +10% at d64 8k).
  static constexpr int kBlockM = kHeadDim <= 64 && kVariant != 2 ? 128 : 64;
  static constexpr bool kSplitDkDv = kVariant == 1 || kVariant == 9;
  // The dQ workspace in 8 x 8 blocks: every 8-row band that lies inside the sequence stores its
  // (8 rows x 8 columns) blocks as 64 consecutive floats (row-major inside the block), so one
  // paired reduction of a warp (8 rows x 8 columns of an m16n8 accumulator) covers 256 contiguous
  // bytes, two cache lines, instead of one 32-byte sector in each of 8 rows (8 lines). FA2 lays
  // its dQ accumulator out so that each of its reductions covers one line. Bands with rows past
  // the end of the sequence stay row-major; the dQ conversion reads both (KernelParams::dq_blocked).
  // v6's kernel (the A/B reference of v7) is variant 11; 6 and 7 are older references.
  static constexpr bool kV6OrOlder = kVariant == 6 || kVariant == 7 || kVariant == 11;
  static constexpr bool kBlockedDq = !kV6OrOlder;
  // The masked path compiled once without and once with the score modifier (softcap, ALiBi)
  // instead of testing p.score_mod per element (variants 8 and 9 test it per element as v6 did).
  static constexpr bool kStaticScoreMod = !kV6OrOlder && kVariant != 8 && kVariant != 9;
  static constexpr bool kForceKeyTileMajor = kVariant == 4;
  static constexpr bool kFreshThreadIndex = kVariant == 5;
  // Head dim 128 in the sm_90 build: the epilogue reads the block's coordinates and sequence
  // afresh (kept from the prologue, one was that build's only spill: 4 bytes). The sm_80 build
  // has no spill there, and elsewhere reading them afresh spills (d64 on sm_90: 8 bytes).
  static constexpr bool kFreshEpilogueCoords = kHeadDim == 128 && kVariant != 12;
  // Variant 6 is v5's kernel (the A/B reference): every prefetch recomputes its addresses from
  // (batch, head, row) with per-row bounds, and the warp positions come from a signed index.
  static constexpr bool kTilePointers = kVariant != 6;
  static constexpr bool kUnsignedLanes = kVariant != 6;
  // Each product's fragment addresses with the warp's row / column offset folded into the lane
  // register (WarpFragmentAddress) where the tile layout allows; variants 6 and 7 add it per
  // fragment as v5 did (7: v5's addresses with the tile pointers above).
  static constexpr bool kFoldWarpOffsets = kVariant != 6 && kVariant != 7;
  // Large head dims halve the key tile so dK and dV of a warp still fit in registers.
  static constexpr int kBlockN = kHeadDim <= 128 ? 128 : 64;
  static constexpr int kWarps = 8;
  static constexpr int kThreads = kWarps * 32;
  // Product 1: warps as 4 (key rows) x 2 (query cols).
  static constexpr int kWarpsN1 = 4, kWarpsM1 = 2;
  static constexpr int kMF1 = kBlockN / kWarpsN1 / 16, kNF1 = kBlockM / kWarpsM1 / 8;
  // Product 2: 4 (key rows) x 2 (head dim halves).
  static constexpr int kWarpsN2 = 4, kWarpsD2 = 2;
  static constexpr int kMF2 = kBlockN / kWarpsN2 / 16, kNF2 = kHeadDim / kWarpsD2 / 8;
  // Product 3: 2 (query rows) x 4 (head dim quarters) where the quarters hold whole n8 pairs,
  // else 4 x 2; columns in chunks so the dQ accumulator stays within 48 registers.
  static constexpr bool kQuarters = kHeadDim % 64 == 0;
  static constexpr int kWarpsM3 = kQuarters ? 2 : 4, kWarpsD3 = kQuarters ? 4 : 2;
  static constexpr int kMF3 = kBlockM / kWarpsM3 / 16;
  static constexpr int kNF3Total = kHeadDim / kWarpsD3 / 8;
  // Variant 3: twice the chunks, so one chunk's dQ reductions drain under the next chunk's products.
  static constexpr int kNF3Fit = kMF3 * kNF3Total * 4 <= 48 ? kNF3Total : kNF3Total / 2;
  static constexpr int kNF3 = kVariant == 3 && kNF3Fit >= 4 ? kNF3Fit / 2 : kNF3Fit;
  static_assert(kNF1 % 2 == 0 && kNF2 % 2 == 0 && kNF3 % 2 == 0 && kNF3Total % kNF3 == 0, "n8 tiles go in pairs");
  static_assert(kBlockM == kWarpsM3 * kMF3 * 16, "product 3 covers the query tile");
  static_assert(kNF1 == 4 || kNF1 == 8, "PairStoreOffset needs the n8 count of a warp to be a power of two <= 8");

  using QTile = SwizzledTile<kBlockM, kHeadDim>;   // Q and dO, two stages each
  using KVTile = SwizzledTile<kBlockN, kHeadDim>;  // K and V
  using PTile = SwizzledTile<kBlockN, kBlockM>;    // P^T and dS^T
  static constexpr int kOffK = 0;
  static constexpr int kOffV = kOffK + KVTile::kBytes;
  static constexpr int kOffQ = kOffV + KVTile::kBytes;              // stage s at + s * QTile::kBytes
  static constexpr int kOffDO = kOffQ + 2 * QTile::kBytes;
  static constexpr int kOffP = kOffDO + 2 * QTile::kBytes;
  static constexpr int kOffDS = kOffP + PTile::kBytes;
  static constexpr int kOffLse = kOffDS + PTile::kBytes;            // float [2][kBlockM]
  static constexpr int kOffDsum = kOffLse + 2 * kBlockM * 4;        // float [2][kBlockM]
  static constexpr int kSmemBytes = kOffDsum + 2 * kBlockM * 4;
};

// Fragment addresses of one warp in one product; kWarpCols = 0 never folds the warp offset.
template <class Cfg, class Tile, int kWarpCols>
using WarpFrag = WarpFragmentAddress<Tile, Cfg::kFoldWarpOffsets ? kWarpCols : 0>;

template <typename Element, int kHeadDim, int kVariant = 0>
__global__ void __launch_bounds__(BackwardConfig<kHeadDim, kVariant>::kThreads)
    backward_kernel(const KernelParams p) {
  using Cfg = BackwardConfig<kHeadDim, kVariant>;
  using QTile = typename Cfg::QTile;
  using KVTile = typename Cfg::KVTile;
  using PTile = typename Cfg::PTile;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN;
  constexpr int kMF1 = Cfg::kMF1, kNF1 = Cfg::kNF1, kMF2 = Cfg::kMF2, kNF2 = Cfg::kNF2;
  constexpr int kMF3 = Cfg::kMF3, kNF3 = Cfg::kNF3;
  constexpr float kLog2e = 1.4426950408889634f;

  extern __shared__ __align__(128) char smem[];
  const uint32_t smem_base = smem_address(smem);
  const float* smem_lse = reinterpret_cast<const float*>(smem + Cfg::kOffLse);
  const float* smem_dsum = reinterpret_cast<const float*>(smem + Cfg::kOffDsum);

  const int n_block = p.key_tile_major ? blockIdx.z : blockIdx.x;
  const int hk = p.key_tile_major ? blockIdx.x : blockIdx.y;
  const int b = p.key_tile_major ? blockIdx.y : blockIdx.z;
  const DeviceSequence seq = batch_sequence(p, b);
  const int n0 = n_block * kBlockN;
  if (n0 >= seq.len_k) return;
  const int tid = threadIdx.x;
  const int64_t diag = seq.diag_offset();
  const int cols_valid = min(kBlockN, seq.len_k - n0);
  const TileRange m_tiles = query_tiles(p.mask, n0, n0 + cols_valid - 1, diag, seq.len_q, kBlockM);
  const int num_m = m_tiles.empty() ? 0 : m_tiles.end - m_tiles.begin;
  const int group = p.heads_per_kv;
  const int num_items = num_m * group;

  const int64_t k_off = b * p.k.batch_stride + (seq.k_row0 + n0) * p.k.row_stride + hk * p.k.head_stride;
  const int64_t v_off = b * p.v.batch_stride + (seq.k_row0 + n0) * p.v.row_stride + hk * p.v.head_stride;
  copy_tile_async<KVTile, Cfg::kThreads>(smem_base + Cfg::kOffK, static_cast<const Element*>(p.k.data) + k_off,
                                         p.k.row_stride, cols_valid, p.headdim_chunks, tid);
  copy_tile_async<KVTile, Cfg::kThreads>(smem_base + Cfg::kOffV, static_cast<const Element*>(p.v.data) + v_off,
                                         p.v.row_stride, cols_valid, p.headdim_chunks, tid);
  cp_async_commit();

  // Work item i is (query head, query tile). Without the deterministic order each key tile starts
  // at a different query tile, so the blocks running side by side add into different dQ rows
  // instead of queueing on the same L2 lines.
  // The loop keeps (step, head) counters instead of dividing the item index: step runs over the
  // query tiles of one head, starting at the rotation.
  const int m_rotation = p.deterministic || num_m == 0 ? 0 : n_block % num_m;
  auto step_m_block = [&](int step) {
    const int m = step + m_rotation;
    return m_tiles.begin + (m >= num_m ? m - num_m : m);
  };

  // Loads Q, dO, lse and D of the work item (step, query head h) into stage `stage`.
  auto prefetch_generic = [&](int step, int h, int stage) {
    // Variant 5: the thread's copy slots derived afresh per call (fresh_thread_index) instead of
    // hoisted; it moved d128's spill reloads out of the loop but timed ~1% slower (device call 9).
    const int tid = Cfg::kFreshThreadIndex ? fresh_thread_index() : static_cast<int>(threadIdx.x);
    const int m0 = step_m_block(step) * kBlockM;
    const int rows = min(kBlockM, seq.len_q - m0);
    const Element* q = static_cast<const Element*>(p.q.data) + b * p.q.batch_stride +
                       (seq.q_row0 + m0) * p.q.row_stride + h * p.q.head_stride;
    const Element* dout = static_cast<const Element*>(p.dout.data) + b * p.dout.batch_stride +
                          (seq.q_row0 + m0) * p.dout.row_stride + h * p.dout.head_stride;
    copy_tile_async<QTile, Cfg::kThreads>(smem_base + Cfg::kOffQ + stage * QTile::kBytes, q, p.q.row_stride, rows,
                                          p.headdim_chunks, tid);
    copy_tile_async<QTile, Cfg::kThreads>(smem_base + Cfg::kOffDO + stage * QTile::kBytes, dout,
                                          p.dout.row_stride, rows, p.headdim_chunks, tid);
    if (tid < kBlockM) {
      const bool valid = tid < rows;
      const float* lse = p.lse + b * p.lse_batch_stride + h * p.lse_head_stride +
                         (seq.q_row0 + m0 + (valid ? tid : 0)) * p.lse_row_stride;
      const float* dsum = p.dsum + h * p.total_q + workspace_row(p, seq.q_row0, b, m0 + (valid ? tid : 0));
      cp_async_4(smem_base + Cfg::kOffLse + (stage * kBlockM + tid) * 4, lse, valid);
      cp_async_4(smem_base + Cfg::kOffDsum + (stage * kBlockM + tid) * 4, dsum, valid);
    }
  };

  // kTilePointers: the first row of Q, dO, lse and D of the item to prefetch, the same for the
  // whole block. The next item is usually the next query tile of the same head, so the pointers
  // advance by one tile instead of being recomputed from (batch, head, row); whole tiles (every
  // row inside the sequence, the head dim of the kernel) are copied without bounds or selects.
  struct TilePointers {
    const Element* q;
    const Element* dout;
    const float* lse;
    const float* dsum;
  };
  auto tile_pointers = [&](int m0, int h) {
    TilePointers t;
    t.q = static_cast<const Element*>(p.q.data) + b * p.q.batch_stride + (seq.q_row0 + m0) * p.q.row_stride +
          h * p.q.head_stride;
    t.dout = static_cast<const Element*>(p.dout.data) + b * p.dout.batch_stride +
             (seq.q_row0 + m0) * p.dout.row_stride + h * p.dout.head_stride;
    t.lse = p.lse + b * p.lse_batch_stride + h * p.lse_head_stride + (seq.q_row0 + m0) * p.lse_row_stride;
    t.dsum = p.dsum + h * p.total_q + workspace_row(p, seq.q_row0, b, m0);
    return t;
  };
  const bool whole_width = p.headdim_chunks == QTile::kChunks;
  auto prefetch_tile = [&](int step, int h, int stage, const TilePointers& t) {
    const int m0 = step_m_block(step) * kBlockM;
    if (!whole_width || seq.len_q - m0 < kBlockM) {
      prefetch_generic(step, h, stage);
      return;
    }
    const unsigned ut = static_cast<unsigned>(fresh_thread_index());
    copy_whole_tile_async<QTile, Cfg::kThreads>(smem_base + Cfg::kOffQ + stage * QTile::kBytes, t.q, p.q.row_stride, ut);
    copy_whole_tile_async<QTile, Cfg::kThreads>(smem_base + Cfg::kOffDO + stage * QTile::kBytes, t.dout,
                                                p.dout.row_stride, ut);
    if (ut < static_cast<unsigned>(kBlockM)) {
      cp_async_4(smem_base + Cfg::kOffLse + (stage * kBlockM + ut) * 4, t.lse + ut * p.lse_row_stride, true);
      cp_async_4(smem_base + Cfg::kOffDsum + (stage * kBlockM + ut) * 4, t.dsum + ut, true);
    }
  };
  TilePointers tiles{};
  if (num_items > 0) {
    if constexpr (Cfg::kTilePointers) {
      tiles = tile_pointers(step_m_block(0) * kBlockM, hk * group);
      prefetch_tile(0, hk * group, 0, tiles);
    } else {
      prefetch_generic(0, hk * group, 0);
    }
  }
  cp_async_commit();

  float acc_dk[kMF2][kNF2][4], acc_dv[kMF2][kNF2][4];
#pragma unroll
  for (int mf = 0; mf < kMF2; ++mf)
#pragma unroll
    for (int nf = 0; nf < kNF2; ++nf)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_dk[mf][nf][e] = acc_dv[mf][nf][e] = 0.0f;

  int step = 0, h = hk * group;
  for (int item = 0; item < num_items; ++item) {
    const int stage = item & 1;
    const int m_block = step_m_block(step);
    const int m0 = m_block * kBlockM;
    const int rows_valid = min(kBlockM, seq.len_q - m0);
    const int next_step = step + 1 == num_m ? 0 : step + 1;
    const int next_h = next_step == 0 ? h + 1 : h;
    cp_async_wait<0>();
    __syncthreads();  // this item's tiles landed; every warp is done with the previous item
    if (item + 1 < num_items) {
      if constexpr (Cfg::kTilePointers) {
        const int next_m0 = step_m_block(next_step) * kBlockM;
        if (next_h == h && next_m0 == m0 + kBlockM) {
          tiles.q += kBlockM * p.q.row_stride;
          tiles.dout += kBlockM * p.dout.row_stride;
          tiles.lse += kBlockM * p.lse_row_stride;
          tiles.dsum += kBlockM;
        } else {
          tiles = tile_pointers(next_m0, next_h);
        }
        prefetch_tile(next_step, next_h, stage ^ 1, tiles);
      } else {
        prefetch_generic(next_step, next_h, stage ^ 1);
      }
    }
    cp_async_commit();

    // Warp positions in the three products, derived afresh each item (see fresh_thread_index).
    // kUnsignedLanes: divisions and remainders of an unsigned index (shifts and masks; the
    // signed ones need sign corrections).
    using Index = std::conditional_t<Cfg::kUnsignedLanes, unsigned, int>;
    const Index t = static_cast<Index>(fresh_thread_index());
    const Index uwarp = t / 32, ulane = t % 32;
    const int warp = static_cast<int>(uwarp), lane = static_cast<int>(ulane);
    const int g = static_cast<int>(ulane >> 2), tig = static_cast<int>(ulane & 3);
    const int wn1 = static_cast<int>(uwarp / Cfg::kWarpsM1), wm1 = static_cast<int>(uwarp % Cfg::kWarpsM1);
    const int wn2 = static_cast<int>(uwarp / Cfg::kWarpsD2), wd2 = static_cast<int>(uwarp % Cfg::kWarpsD2);
    const int wm3 = static_cast<int>(uwarp / Cfg::kWarpsD3), wd3 = static_cast<int>(uwarp % Cfg::kWarpsD3);
    (void)warp;
    const int row1 = wn1 * kMF1 * 16, col1 = wm1 * kNF1 * 8;
    const int row2 = wn2 * kMF2 * 16, col2 = wd2 * kNF2 * 8;
    const int row3 = wm3 * Cfg::kMF3 * 16, col3 = wd3 * Cfg::kNF3Total * 8;
    // P^T and dS^T stores: one lane offset (P tile; the dS tile sits kOffDS - kOffP above it).
    const auto pds_st = PairStoreOffset<PTile>::make(Cfg::kOffP, row1, col1, g, tig);
    auto store_p = [&](int row0, int nf, uint32_t packed) {
      *reinterpret_cast<uint32_t*>(smem + pds_st.at(row0, nf)) = packed;
    };
    auto store_ds = [&](int row0, int nf, uint32_t packed) {
      *reinterpret_cast<uint32_t*>(smem + (Cfg::kOffDS - Cfg::kOffP) + pds_st.at(row0, nf)) = packed;
    };
    const uint32_t q_base = smem_base + Cfg::kOffQ + stage * QTile::kBytes;
    const uint32_t do_base = smem_base + Cfg::kOffDO + stage * QTile::kBytes;
    using Rc = std::integral_constant<LanePattern, LanePattern::kRowsThenCols>;
    using Cr = std::integral_constant<LanePattern, LanePattern::kColsThenRows>;

    // 1. S^T = K Q^T, then P^T (to shared memory); dP^T = V dO^T, then dS^T (to shared memory).
    // The two products run one after the other so only one set of operand fragments is live.
    {
      const auto k1 = WarpFrag<Cfg, KVTile, kHeadDim>::make(smem_base + Cfg::kOffK, lane, Rc::value, row1, 0);
      const auto q1 = WarpFrag<Cfg, QTile, kHeadDim>::make(q_base, lane, Cr::value, col1, 0);
      float st[kMF1][kNF1][4], dpt[kMF1][kNF1][4];
#pragma unroll
      for (int mf = 0; mf < kMF1; ++mf)
#pragma unroll
        for (int nf = 0; nf < kNF1; ++nf)
#pragma unroll
          for (int e = 0; e < 4; ++e) st[mf][nf][e] = dpt[mf][nf][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        uint32_t ak[kMF1][4];
#pragma unroll
        for (int mf = 0; mf < kMF1; ++mf) load_a(ak[mf], k1, mf * 16, kk * 16);
#pragma unroll
        for (int np = 0; np < kNF1 / 2; ++np) {
          uint32_t bq[4];
          load_b(bq, q1, np * 16, kk * 16);
#pragma unroll
          for (int mf = 0; mf < kMF1; ++mf) {
            mma_16816<Element>(st[mf][2 * np], ak[mf], bq[0], bq[1]);
            mma_16816<Element>(st[mf][2 * np + 1], ak[mf], bq[2], bq[3]);
          }
        }
      }

      const bool plain = !p.score_mod && tile_fully_visible(p.mask, m0, m0 + rows_valid - 1, n0,
                                                              n0 + kBlockN - 1, diag, seq.len_k);
      if (plain) {
        // P = 2^(raw * scale * log2 e - lse * log2 e); st keeps P * dscore/draw = P * scale.
#pragma unroll
        for (int nf = 0; nf < kNF1; ++nf) {
          const int c = col1 + nf * 8 + tig * 2;
          float lse_log2[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float lse = smem_lse[stage * kBlockM + c + e];
            // A row that saw no key has lse -inf; +inf turns all its probabilities into 0.
            lse_log2[e] = lse == -INFINITY ? INFINITY : lse * kLog2e;
          }
#pragma unroll
          for (int mf = 0; mf < kMF1; ++mf)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              float prob[2];
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                prob[e] = exp2_approx(fmaf(st[mf][nf][2 * half + e], p.scale_log2, -lse_log2[e]));
                st[mf][nf][2 * half + e] = prob[e] * p.score.scale;
              }
              store_p(mf * 16 + half * 8, nf, pack_pair<Element>(prob[0], prob[1]));
            }
        }
      } else {
        // Masked or score-modified tiles, element by element. kMod 2 tests p.score_mod per element
        // (v6: every element's exp then sits in its own basic block behind a uniform branch, so the
        // compiler cannot interleave them); kStaticScoreMod takes that test out of the loop.
        auto masked_tile = [&](auto mod_tag) {
          constexpr int kMod = decltype(mod_tag)::value;  // 0: no score mod, 1: score mod, 2: test per element
          const float slope = p.alibi_slopes ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.0f;
#pragma unroll
          for (int mf = 0; mf < kMF1; ++mf)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const int r = row1 + mf * 16 + g + half * 8;
              const int64_t j = n0 + r;
              // Query columns (inside the tile) that see key j: the mask policy's inequalities
              // solved for i.
              const int64_t lo = p.mask.window_right < 0 ? INT64_MIN / 2 : j - diag - p.mask.window_right;
              const int64_t hi = p.mask.window_left < 0 ? INT64_MAX / 2 : j - diag + p.mask.window_left + 1;
              const int col_lo = static_cast<int>(max(min(lo - m0, int64_t(kBlockM)), int64_t(0)));
              const int col_hi = j < seq.len_k ? static_cast<int>(max(min(hi - m0, int64_t(kBlockM)), int64_t(0))) : 0;
              const int diag_col = static_cast<int>(j - diag - m0);  // the query column on this key's diagonal
#pragma unroll
              for (int nf = 0; nf < kNF1; ++nf) {
                const int c = col1 + nf * 8 + tig * 2;
                float prob[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                  const float lse = smem_lse[stage * kBlockM + c + e];
                  const float lse_log2 = lse == -INFINITY ? INFINITY : lse * kLog2e;
                  const float raw = st[mf][nf][2 * half + e];
                  float x_log2, dscore_draw;
                  if (kMod == 2 ? p.score_mod : kMod == 1) {
                    const float capped = p.score.apply(raw);
                    float x = capped;
                    if (p.alibi_slopes != nullptr) x += alibi_bias(slope, c + e, diag_col, 0);
                    x_log2 = x * kLog2e;
                    dscore_draw = p.score.derivative_from_score(capped);
                  } else {
                    x_log2 = raw * p.scale_log2;
                    dscore_draw = p.score.scale;
                  }
                  const bool visible = c + e >= col_lo && c + e < col_hi;
                  prob[e] = visible ? exp2_approx(x_log2 - lse_log2) : 0.0f;
                  st[mf][nf][2 * half + e] = prob[e] * dscore_draw;
                }
                store_p(mf * 16 + half * 8, nf, pack_pair<Element>(prob[0], prob[1]));
              }
            }
        };
        if constexpr (Cfg::kStaticScoreMod) {
          if (p.score_mod) {
            masked_tile(std::integral_constant<int, 1>{});
          } else {
            masked_tile(std::integral_constant<int, 0>{});
          }
        } else {
          masked_tile(std::integral_constant<int, 2>{});
        }
      }

      const auto v1 = WarpFrag<Cfg, KVTile, kHeadDim>::make(smem_base + Cfg::kOffV, lane, Rc::value, row1, 0);
      const auto do1 = WarpFrag<Cfg, QTile, kHeadDim>::make(do_base, lane, Cr::value, col1, 0);
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        uint32_t av[kMF1][4];
#pragma unroll
        for (int mf = 0; mf < kMF1; ++mf) load_a(av[mf], v1, mf * 16, kk * 16);
#pragma unroll
        for (int np = 0; np < kNF1 / 2; ++np) {
          uint32_t bdo[4];
          load_b(bdo, do1, np * 16, kk * 16);
#pragma unroll
          for (int mf = 0; mf < kMF1; ++mf) {
            mma_16816<Element>(dpt[mf][2 * np], av[mf], bdo[0], bdo[1]);
            mma_16816<Element>(dpt[mf][2 * np + 1], av[mf], bdo[2], bdo[3]);
          }
        }
      }
      // dS = P * (dP - D) * dscore/draw.
#pragma unroll
      for (int nf = 0; nf < kNF1; ++nf) {
        const int c = col1 + nf * 8 + tig * 2;
        const float dsum0 = smem_dsum[stage * kBlockM + c], dsum1 = smem_dsum[stage * kBlockM + c + 1];
#pragma unroll
        for (int mf = 0; mf < kMF1; ++mf)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const float ds0 = st[mf][nf][2 * half] * (dpt[mf][nf][2 * half] - dsum0);
            const float ds1 = st[mf][nf][2 * half + 1] * (dpt[mf][nf][2 * half + 1] - dsum1);
            store_ds(mf * 16 + half * 8, nf, pack_pair<Element>(ds0, ds1));
          }
      }
    }
    __syncthreads();  // P^T and dS^T complete

    // 2. dV += P^T dO, dK += dS^T Q (both in one pass, or one of them per call).
    auto product_dkdv = [&](auto with_dv, auto with_dk) {
      constexpr bool kDV = decltype(with_dv)::value, kDK = decltype(with_dk)::value;
      const auto p2 = WarpFrag<Cfg, PTile, kBlockM>::make(smem_base + Cfg::kOffP, lane, Rc::value, row2, 0);
      const auto ds2 = WarpFrag<Cfg, PTile, kBlockM>::make(smem_base + Cfg::kOffDS, lane, Rc::value, row2, 0);
      const auto q2 = WarpFrag<Cfg, QTile, kNF2 * 8>::make(q_base, lane, Rc::value, 0, col2);
      const auto do2 = WarpFrag<Cfg, QTile, kNF2 * 8>::make(do_base, lane, Rc::value, 0, col2);
#pragma unroll
      for (int kk = 0; kk < kBlockM / 16; ++kk) {
        uint32_t ap[kMF2][4], ads[kMF2][4];
#pragma unroll
        for (int mf = 0; mf < kMF2; ++mf) {
          if constexpr (kDV) load_a(ap[mf], p2, mf * 16, kk * 16);
          if constexpr (kDK) load_a(ads[mf], ds2, mf * 16, kk * 16);
        }
#pragma unroll
        for (int dp = 0; dp < kNF2 / 2; ++dp) {
          uint32_t bdo[4], bq[4];
          if constexpr (kDV) load_b_trans(bdo, do2, kk * 16, dp * 16);
          if constexpr (kDK) load_b_trans(bq, q2, kk * 16, dp * 16);
#pragma unroll
          for (int mf = 0; mf < kMF2; ++mf) {
            if constexpr (kDV) {
              mma_16816<Element>(acc_dv[mf][2 * dp], ap[mf], bdo[0], bdo[1]);
              mma_16816<Element>(acc_dv[mf][2 * dp + 1], ap[mf], bdo[2], bdo[3]);
            }
            if constexpr (kDK) {
              mma_16816<Element>(acc_dk[mf][2 * dp], ads[mf], bq[0], bq[1]);
              mma_16816<Element>(acc_dk[mf][2 * dp + 1], ads[mf], bq[2], bq[3]);
            }
          }
        }
      }
    };
    using Yes = std::true_type;
    using No = std::false_type;
    if constexpr (Cfg::kSplitDkDv) {
      product_dkdv(Yes{}, No{});
    } else {
      product_dkdv(Yes{}, Yes{});
    }

    // 3. dQ += dS K into the fp32 workspace. Deterministic runs add the key tiles of one query
    // tile in increasing order: each block waits for its predecessor's count on a semaphore.
    int* semaphore = nullptr;
    if (p.deterministic) {
      semaphore = p.dq_semaphore + (static_cast<int64_t>(b) * p.nheads_q + h) * p.num_m_blocks + m_block;
      if (tid == 0) {
        const int row_last = m0 + rows_valid - 1;
        const int first = key_tiles(p.mask, m0, row_last, diag, seq.len_k, kBlockN).begin;
        const int turn = n_block - first;
        while (atomicAdd(semaphore, 0) != turn) {
        }
        __threadfence();
      }
      __syncthreads();
    }
    const bool full_tile = rows_valid == kBlockM && p.headdim == kHeadDim;
    float* dq_accum = p.dq_accum + (static_cast<int64_t>(h) * p.total_q + workspace_row(p, seq.q_row0, b, m0)) *
                                       p.headdim;
    const auto ds3 = WarpFrag<Cfg, PTile, kMF3 * 16>::make(smem_base + Cfg::kOffDS, lane, Cr::value, 0, row3);
    const auto k3 = WarpFrag<Cfg, KVTile, Cfg::kNF3Total * 8>::make(smem_base + Cfg::kOffK, lane, Rc::value, 0, col3);
#pragma unroll
    for (int chunk = 0; chunk < Cfg::kNF3Total / kNF3; ++chunk) {
      const int dcol0 = col3 + chunk * kNF3 * 8;
      float acc_dq[kMF3][kNF3][4];
#pragma unroll
      for (int mf = 0; mf < kMF3; ++mf)
#pragma unroll
        for (int nf = 0; nf < kNF3; ++nf)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc_dq[mf][nf][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        uint32_t ads[kMF3][4];
#pragma unroll
        for (int mf = 0; mf < kMF3; ++mf) load_a_trans(ads[mf], ds3, kk * 16, mf * 16);
#pragma unroll
        for (int dp = 0; dp < kNF3 / 2; ++dp) {
          uint32_t bk[4];
          load_b_trans(bk, k3, kk * 16, chunk * kNF3 * 8 + dp * 16);
#pragma unroll
          for (int mf = 0; mf < kMF3; ++mf) {
            mma_16816<Element>(acc_dq[mf][2 * dp], ads[mf], bk[0], bk[1]);
            mma_16816<Element>(acc_dq[mf][2 * dp + 1], ads[mf], bk[2], bk[3]);
          }
        }
      }
      // One base address per thread; every accumulator is base + a small offset (a constant one
      // for whole tiles of the kernel's own head dim, which need no bounds either).
      const int r = row3 + g;
      const int c = dcol0 + tig * 2;
      if constexpr (Cfg::kBlockedDq) {
        // Block (band, column block) at band * headdim + column block * 64; the pair of lane
        // (g, tig) at g * 8 + tig * 2 = 2 * lane inside it.
        if (full_tile) {
          float* dst = dq_accum + row3 * kHeadDim + (dcol0 / 8) * 64 + 2 * (fresh_thread_index() & 31);
#pragma unroll
          for (int mf = 0; mf < kMF3; ++mf)
#pragma unroll
            for (int nf = 0; nf < kNF3; ++nf)
#pragma unroll
              for (int half = 0; half < 2; ++half)
                atomic_add_pair(dst + (2 * mf + half) * 8 * kHeadDim + nf * 64, acc_dq[mf][nf][2 * half],
                                acc_dq[mf][nf][2 * half + 1]);
        } else {
#pragma unroll
          for (int mf = 0; mf < kMF3; ++mf)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const int band = row3 + mf * 16 + half * 8;  // first row of this accumulator's band
              const bool blocked = band + 8 <= rows_valid;
              float* dst = blocked ? dq_accum + band * p.headdim + (dcol0 / 8) * 64 + 2 * lane
                                   : dq_accum + (band + g) * p.headdim + c;
              const int nf_step = blocked ? 64 : 8;
#pragma unroll
              for (int nf = 0; nf < kNF3; ++nf) {
                if (band + g < rows_valid && dcol0 + nf * 8 < p.headdim) {
                  atomic_add_pair(dst + nf * nf_step, acc_dq[mf][nf][2 * half], acc_dq[mf][nf][2 * half + 1]);
                }
              }
            }
        }
        continue;
      }
      float* dst = dq_accum + r * p.headdim + c;
      if (full_tile) {
#pragma unroll
        for (int mf = 0; mf < kMF3; ++mf)
#pragma unroll
          for (int nf = 0; nf < kNF3; ++nf)
#pragma unroll
            for (int half = 0; half < 2; ++half)
              atomic_add_pair(dst + (2 * mf + half) * 8 * kHeadDim + nf * 8, acc_dq[mf][nf][2 * half],
                              acc_dq[mf][nf][2 * half + 1]);
      } else {
        const int64_t eight_rows = 8 * p.headdim;
#pragma unroll
        for (int mf = 0; mf < kMF3; ++mf)
#pragma unroll
          for (int nf = 0; nf < kNF3; ++nf)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              if (r + mf * 16 + half * 8 < rows_valid && c + nf * 8 < p.headdim) {
                atomic_add_pair(dst + (2 * mf + half) * eight_rows + nf * 8, acc_dq[mf][nf][2 * half],
                                acc_dq[mf][nf][2 * half + 1]);
              }
            }
      }
    }
    if (p.deterministic) {
      __threadfence();
      __syncthreads();
      if (tid == 0) atomicAdd(semaphore, 1);
    }
    if constexpr (Cfg::kSplitDkDv) product_dkdv(No{}, Yes{});
    step = next_step;
    h = next_h;
  }

  // Epilogue: dK and dV through the (now free) K and V tiles for 16-byte stores.
  cp_async_wait<0>();
  __syncthreads();
  // The epilogue's copy slots from the thread index read afresh (with kTilePointers): else the
  // compiler keeps the prologue's K/V copy rows live through the loop for these stores (spilled
  // at d256).
  const int et = Cfg::kFreshThreadIndex || Cfg::kTilePointers ? fresh_thread_index() : tid;
  const int warp = et / 32, lane = et % 32, g = lane >> 2, tig = lane & 3;
  const int row2 = warp / Cfg::kWarpsD2 * kMF2 * 16, col2 = warp % Cfg::kWarpsD2 * kNF2 * 8;
#pragma unroll
  for (int mf = 0; mf < kMF2; ++mf)
#pragma unroll
    for (int nf = 0; nf < kNF2; ++nf)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = row2 + mf * 16 + g + half * 8;
        const int c = col2 + nf * 8 + tig * 2;
        store_pair<KVTile>(smem + Cfg::kOffK, r, c,
                           pack_pair<Element>(acc_dk[mf][nf][2 * half], acc_dk[mf][nf][2 * half + 1]));
        store_pair<KVTile>(smem + Cfg::kOffV, r, c,
                           pack_pair<Element>(acc_dv[mf][nf][2 * half], acc_dv[mf][nf][2 * half + 1]));
      }
  __syncthreads();
  // The block's coordinates and sequence, read afresh where Cfg::kFreshEpilogueCoords says so.
  int e_n0 = n0, e_hk = hk, e_b = b, e_cols = cols_valid;
  int64_t e_key_row0 = seq.k_row0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (Cfg::kFreshEpilogueCoords) {
    // The prologue's mapping (kept spelled out there: through a helper taking the block index as a
    // uint3, ptxas reorders the prologue of the other head dims' kernels).
    const uint3 blk = fresh_block_index();
    e_n0 = static_cast<int>(p.key_tile_major ? blk.z : blk.x) * kBlockN;
    e_hk = static_cast<int>(p.key_tile_major ? blk.x : blk.y);
    e_b = static_cast<int>(p.key_tile_major ? blk.y : blk.z);
    const DeviceSequence e_seq = batch_sequence(p, e_b);
    e_cols = min(kBlockN, e_seq.len_k - e_n0);
    e_key_row0 = e_seq.k_row0;
  }
#endif
  Element* dk = static_cast<Element*>(p.dk.data) + e_b * p.dk.batch_stride +
                (e_key_row0 + e_n0) * p.dk.row_stride + e_hk * p.dk.head_stride;
  Element* dv = static_cast<Element*>(p.dv.data) + e_b * p.dv.batch_stride +
                (e_key_row0 + e_n0) * p.dv.row_stride + e_hk * p.dv.head_stride;
  store_tile<KVTile, Cfg::kThreads>(smem + Cfg::kOffK, dk, p.dk.row_stride, e_cols, p.headdim_chunks, et);
  store_tile<KVTile, Cfg::kThreads>(smem + Cfg::kOffV, dv, p.dv.row_stride, e_cols, p.headdim_chunks, et);
}

}  // namespace flashattn::sm80
