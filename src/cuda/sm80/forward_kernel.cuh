// FlashAttention-2 forward for sm80 and newer: one thread block per (query tile, head, batch);
// the warps split the query tile by rows and share K and V tiles in shared memory.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "cuda/common/ptx.cuh"
#include "cuda/common/sequence.cuh"
#include "cuda/sm80/batch_sequence.cuh"
#include "cuda/common/smem_tile.cuh"
#include "cuda/sm80/kernel_registry.h"
#include "cuda/sm80/params.h"

namespace flashattn::sm80 {

using namespace flashattn::cuda;

// kKeySplits: the configuration of the key-split kernel (forward_kernel below).
template <int kHeadDim, bool kKeySplits = false>
struct ForwardConfig {
  // Large head dims keep 16 rows per warp (so each warp's output accumulator fits) in 64-row
  // tiles of 4 warps: 96 KB of shared memory, two blocks per SM with independent barriers and
  // twice the blocks of 128-row tiles for short sequences. The key-split kernel, which serves
  // decode's few query rows, takes 64 at every head dim: half the accumulator of a 128-row
  // tile, so its pieces' arithmetic has registers (at 128 rows ptxas spilled 8-56 bytes).
  static constexpr int kBlockM = forward_block_m(kHeadDim, kKeySplits);
  // Wider key tiles where the output accumulator is small enough to leave registers for them.
  // FlashAttention-2's narrower widths (64 at head dim 64, 32 at 128) spill nothing but lost
  // 6-11% at head dim 128 (0.89-0.94x FA2, docs/perf.md session 9).
  static constexpr int kBlockN = forward_block_n(kHeadDim);
  // The K / V copies inside the loop and the output store read the thread index afresh
  // (fresh_thread_index), so their per-thread offsets are not kept live across the loop: at head
  // dim 64 that takes the spill from 68 bytes to none on sm_80 and sm_90. Elsewhere it moved
  // ptxas's allocation the other way (head dim 128: 4 / 8 bytes -> 84 / 108), so only there.
  static constexpr bool kFreshCopyLanes = kHeadDim == 64;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kWarpRows = kBlockM / kWarps;
  static constexpr int kMFrags = kWarpRows / 16;
  static constexpr int kNFrags = kBlockN / 8;
  static constexpr int kDFrags = kHeadDim / 8;
  using QTile = SwizzledTile<kBlockM, kHeadDim>;
  using KVTile = SwizzledTile<kBlockN, kHeadDim>;
  // At head dim 128 the kernel sits at 255 registers and ptxas spilled one 64-bit copy offset
  // across the key loop (8 bytes on sm_90). Each thread's K / V copy sources live in a 16-byte
  // shared-memory slot of its own instead, read back (one LDS.128) at each copy: 0 spills on
  // sm_80 and sm_90 (docs/perf.md session 11).
  static constexpr bool kCopySourcesInSmem = kHeadDim == 128;
  static constexpr int kSourceSlotBytes = kCopySourcesInSmem ? 16 * kThreads : 0;
  static constexpr int kSmemBytes = QTile::kBytes + 2 * KVTile::kBytes + kSourceSlotBytes;
};

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <class Cfg>
struct ForwardWarp {
  int warp, lane, g, tig;  // g: row in the 8-row group of an mma fragment; tig: its column pair
  FA_DEV int row(int mf, int half) const { return warp * Cfg::kWarpRows + mf * 16 + g + half * 8; }
};

// Invisible scores to -inf; with kScoreMod, the visible ones also go through the softcap and
// ALiBi bias and into log2 units. Row bounds come from the mask policy once per row, relative to
// the tile, so the per-score mask is two 32-bit compares.
template <class Cfg, bool kScoreMod>
FA_DEV void transform_scores(float (&s)[Cfg::kMFrags][Cfg::kNFrags][4], const KernelParams& p,
                             const ForwardWarp<Cfg>& w, int64_t m0, int64_t n0, int64_t diag, int len_k,
                             float slope) {
#pragma unroll
  for (int mf = 0; mf < Cfg::kMFrags; ++mf)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t i = m0 + w.row(mf, half);
      const int64_t lo = p.mask.key_begin(i, diag) - n0;
      const int64_t hi = min(p.mask.key_end(i, diag, len_k), static_cast<int64_t>(len_k)) - n0;
      const int col_lo = static_cast<int>(max(lo, int64_t(-1)));
      const int col_hi = static_cast<int>(min(hi, int64_t(Cfg::kBlockN)));
      const int diag_col = static_cast<int>(i + diag - n0);  // the diagonal's column inside the tile
#pragma unroll
      for (int nf = 0; nf < Cfg::kNFrags; ++nf)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = nf * 8 + w.tig * 2 + e;
          float x = s[mf][nf][2 * half + e];
          if (kScoreMod) {
            x = p.score.apply(x);
            if (p.alibi_slopes != nullptr) x += alibi_bias(slope, diag_col, j, 0);
            x *= kLog2e;
          }
          s[mf][nf][2 * half + e] = (j >= col_lo && j < col_hi) ? x : -INFINITY;
        }
    }
}

// A key piece's result (KernelParams::num_splits > 1): O normalised by the piece's own sum and
// the piece's lse, in float32, for the combine kernel (split_combine.cuh). Rows past the
// sequence's and columns past the problem's head dim are not written. The block's coordinates
// are read afresh (fresh_block_index): derived once before the key loop and kept, they held
// registers across it that the kernel (255 at head dim 128) does not have.
template <class Cfg>
FA_DEV void write_piece(const KernelParams& p, const ForwardWarp<Cfg>& w, const float (&acc_o)[Cfg::kMFrags][Cfg::kDFrags][4],
                        const float (&row_max)[Cfg::kMFrags][2], const float (&row_sum)[Cfg::kMFrags][2]) {
  const uint3 block = fresh_block_index();
  const int b = static_cast<int>(block.z) / p.num_splits, split = static_cast<int>(block.z) % p.num_splits;
  const int m0 = static_cast<int>(gridDim.x - 1 - block.x) * Cfg::kBlockM;
  const DeviceSequence seq = batch_sequence(p, b);
  const int rows_valid = min(Cfg::kBlockM, seq.len_q - m0);
  const int64_t slab = (static_cast<int64_t>(split) * p.nheads_q + block.y) * p.workspace_rows +
                       workspace_row(p, seq.q_row0, b, m0);
#pragma unroll
  for (int mf = 0; mf < Cfg::kMFrags; ++mf)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float l = quad_sum(row_sum[mf][half]);
      const int r = w.row(mf, half);
      if (r >= rows_valid) continue;
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      float* o = p.o_pieces + (slab + r) * p.headdim;
#pragma unroll
      for (int df = 0; df < Cfg::kDFrags; ++df) {
        const int col = df * 8 + w.tig * 2;  // even, and the head dim a multiple of 8: col + 1 too
        if (col < p.headdim) {
          *reinterpret_cast<float2*>(o + col) = make_float2(acc_o[mf][df][2 * half] * inv, acc_o[mf][df][2 * half + 1] * inv);
        }
      }
      if (w.tig == 0) p.lse_pieces[slab + r] = l > 0.0f ? row_max[mf][half] * kLn2 + logf(l) : -INFINITY;
    }
}

// kKeySplits: this block runs one key piece of its query tile (KernelParams::num_splits > 1).
// A kernel of its own, so the kernel without pieces keeps its machine code: at 255 registers
// (head dim 128) even the piece's range arithmetic made ptxas spill 16-56 bytes there.
template <typename Element, int kHeadDim, bool kKeySplits>
__global__ void __launch_bounds__(ForwardConfig<kHeadDim, kKeySplits>::kThreads)
    forward_kernel(const KernelParams p) {
  using Cfg = ForwardConfig<kHeadDim, kKeySplits>;
  using QTile = typename Cfg::QTile;
  using KVTile = typename Cfg::KVTile;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN;
  constexpr int kMF = Cfg::kMFrags, kNF = Cfg::kNFrags, kDF = Cfg::kDFrags;

  extern __shared__ __align__(128) char smem[];
  char* smem_q = smem;
  const uint32_t q_base = smem_address(smem_q);
  const uint32_t k_base = q_base + QTile::kBytes;
  const uint32_t v_base = k_base + KVTile::kBytes;

  // Heavy (late, causal) query tiles first so the tail of the grid is short. With key splits
  // the grid's z holds (batch, piece), the piece fastest.
  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, b = kKeySplits ? static_cast<int>(blockIdx.z) / p.num_splits : static_cast<int>(blockIdx.z);
  const DeviceSequence seq = batch_sequence(p, b);
  const int m0 = m_block * kBlockM;
  if (m0 >= seq.len_q) return;
  const int hk = h / p.heads_per_kv;
  const int tid = threadIdx.x;
  // The thread index for a copy's or store's lane offsets, read afresh where `fresh` (see
  // ForwardConfig::kFreshCopyLanes).
  const auto lane_tid = [tid](bool fresh) { return fresh ? fresh_thread_index() : tid; };
  ForwardWarp<Cfg> w;
  w.warp = tid / 32;
  w.lane = tid % 32;
  w.g = w.lane >> 2;
  w.tig = w.lane & 3;
  const auto q_frag = FragmentAddress<QTile>::make(q_base, w.lane, LanePattern::kRowsThenCols);
  const auto k_frag = FragmentAddress<KVTile>::make(k_base, w.lane, LanePattern::kColsThenRows);
  const auto v_frag = FragmentAddress<KVTile>::make(v_base, w.lane, LanePattern::kRowsThenCols);

  const int64_t diag = seq.diag_offset();
  const int rows_valid = min(kBlockM, seq.len_q - m0);
  const int64_t row_last = m0 + rows_valid - 1;
  TileRange tiles = key_tiles(p.mask, m0, row_last, diag, seq.len_k, kBlockN);
  if constexpr (kKeySplits) {
    // This piece's share of the key tiles the rows see, shared out evenly over the pieces
    // (possibly none: it then writes O = 0 and lse = -inf, which the combine leaves out). Shares
    // of the visible tiles, not of seqlen_k's: a sequence shorter than seqlen_k (seqused_k, a
    // cache filled to cache_seqlens) or a window would otherwise leave most pieces idle while a
    // few walk every visible tile. The masks stay those of the whole row.
    const int64_t piece = static_cast<int>(blockIdx.z) % p.num_splits;
    const int64_t first = tiles.begin, visible = tiles.empty() ? 0 : tiles.end - tiles.begin;
    tiles.begin = static_cast<int>(first + visible * piece / p.num_splits);
    tiles.end = static_cast<int>(first + visible * (piece + 1) / p.num_splits);
  }
  const float slope = p.alibi_slopes ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.0f;

  const Element* q = static_cast<const Element*>(p.q.data) + b * p.q.batch_stride +
                     (seq.q_row0 + m0) * p.q.row_stride + h * p.q.head_stride;
  // Paged k / v (the key-split twin only, which every paged problem runs: the plain kernel's
  // registers are full, and the page arithmetic spilled there at head dims 96 and 128): the
  // sequence's rows start in the page of each key tile (key_rows_offset), so the base holds the
  // head only (with variable length too: cu_seqlens_k gives a paged sequence's length, not where
  // its rows lie).
  const bool paged = kKeySplits && p.block_table != nullptr;
  const int64_t kv_batch = paged ? 0 : b;
  const int64_t kv_row0 = paged ? 0 : seq.k_row0;
  const Element* k = static_cast<const Element*>(p.k.data) + kv_batch * p.k.batch_stride +
                     kv_row0 * p.k.row_stride + hk * p.k.head_stride;
  const Element* v = static_cast<const Element*>(p.v.data) + kv_batch * p.v.batch_stride +
                     kv_row0 * p.v.row_stride + hk * p.v.head_stride;
  // Elements from the base to key row n_first (a tile's first): n_first rows, or in a paged cache
  // the tile's page and its row there (the tile lies inside the page: supports() in dispatch.cu).
  const auto key_rows_offset = [&](bool is_v, int n_first) -> int64_t {
    const int64_t stride = is_v ? p.v.row_stride : p.k.row_stride;
    if (!paged) return n_first * stride;
    const int64_t page = clamp_entry(p.block_table[b * p.block_table_batch_stride + n_first / p.page_size], 0,
                                     p.num_pages - 1);
    return page * (is_v ? p.v.batch_stride : p.k.batch_stride) + (n_first % p.page_size) * stride;
  };

  // This thread's K / V copy sources (row 0 of the sequence's keys + its row and chunk), kept in
  // its shared-memory slot (ForwardConfig::kCopySourcesInSmem).
  using KVPlan = TileCopyPlan<KVTile, Cfg::kThreads>;
  const uint32_t sources_addr = v_base + KVTile::kBytes + tid * 16;
  if (Cfg::kCopySourcesInSmem) {
    const int row = KVPlan::row(tid), chunk = KVPlan::chunk(tid);
    store_shared_pair(sources_addr, reinterpret_cast<uint64_t>(k + row * p.k.row_stride + chunk * 8),
                      reinterpret_cast<uint64_t>(v + row * p.v.row_stride + chunk * 8));
  }
  // With the sources in shared memory, sm_80 also needs the copy's thread index read afresh
  // (76 bytes of spill -> 0) and sm_90 must not have it (0 -> 80): ptxas at 255 registers.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  constexpr bool kFreshSourceLane = true;
#else
  constexpr bool kFreshSourceLane = false;
#endif
  const auto copy_kv = [&](bool is_v, int n_first) {
    const uint32_t dst = is_v ? v_base : k_base;
    const int64_t stride = is_v ? p.v.row_stride : p.k.row_stride;
    if (Cfg::kCopySourcesInSmem) {
      uint64_t ks, vs;
      load_shared_pair(sources_addr, ks, vs);
      const Element* src = reinterpret_cast<const Element*>(is_v ? vs : ks) + key_rows_offset(is_v, n_first);
      copy_tile_async_from<KVTile, Cfg::kThreads>(dst, src, stride, seq.len_k - n_first, p.headdim_chunks,
                                                  lane_tid(kFreshSourceLane));
    } else {
      copy_tile_async<KVTile, Cfg::kThreads>(dst, (is_v ? v : k) + key_rows_offset(is_v, n_first), stride, seq.len_k - n_first,
                                             p.headdim_chunks, lane_tid(Cfg::kFreshCopyLanes));
    }
  };

  copy_tile_async<QTile, Cfg::kThreads>(q_base, q, p.q.row_stride, rows_valid, p.headdim_chunks, tid);
  cp_async_commit();
  if (!tiles.empty()) {
    const int n0 = (tiles.end - 1) * kBlockN;
    copy_tile_async<KVTile, Cfg::kThreads>(k_base, k + key_rows_offset(false, n0), p.k.row_stride, seq.len_k - n0,
                                           p.headdim_chunks, tid);
    cp_async_commit();
  }

  float acc_o[kMF][kDF][4];
  float row_max[kMF][2], row_sum[kMF][2];  // row_max in log2 units; row_sum per thread, reduced at the end
#pragma unroll
  for (int mf = 0; mf < kMF; ++mf) {
#pragma unroll
    for (int df = 0; df < kDF; ++df)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[mf][df][e] = 0.0f;
    row_max[mf][0] = row_max[mf][1] = -INFINITY;
    row_sum[mf][0] = row_sum[mf][1] = 0.0f;
  }

  // Key tiles from last to first: the partial and diagonal tiles that need the element-wise mask
  // come first, the rest run the plain path.
  for (int n_block = tiles.end - 1; n_block >= tiles.begin; --n_block) {
    const int n0 = n_block * kBlockN;
    float s[kMF][kNF][4];
#pragma unroll
    for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
      for (int nf = 0; nf < kNF; ++nf)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mf][nf][e] = 0.0f;

    cp_async_wait<0>();
    __syncthreads();  // K tile landed; every warp is done with the previous V tile
    copy_kv(true, n0);
    cp_async_commit();

#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t a[kMF][4];
#pragma unroll
      for (int mf = 0; mf < kMF; ++mf) load_a(a[mf], q_frag, w.warp * Cfg::kWarpRows + mf * 16, kk * 16);
#pragma unroll
      for (int np = 0; np < kNF / 2; ++np) {
        uint32_t bk[4];
        load_b(bk, k_frag, np * 16, kk * 16);
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf) {
          mma_16816<Element>(s[mf][2 * np], a[mf], bk[0], bk[1]);
          mma_16816<Element>(s[mf][2 * np + 1], a[mf], bk[2], bk[3]);
        }
      }
    }

    // Without softcap or ALiBi the softmax scale folds into the exp2 argument (one FFMA per
    // score); partial and diagonal tiles then only need their invisible scores set to -inf.
    float mult = p.scale_log2;
    if (p.score_mod) {
      transform_scores<Cfg, true>(s, p, w, m0, n0, diag, seq.len_k, slope);
      mult = 1.0f;
    } else if (!tile_fully_visible(p.mask, m0, row_last, n0, n0 + kBlockN - 1, diag, seq.len_k)) {
      transform_scores<Cfg, false>(s, p, w, m0, n0, diag, seq.len_k, slope);
    }

    cp_async_wait<0>();
    __syncthreads();  // V tile landed; every warp is done with this K tile
    if (n_block > tiles.begin) {
      const int n_prev = n0 - kBlockN;
      copy_kv(false, n_prev);
      cp_async_commit();
    }

    // Online softmax on the unscaled accumulator: rescale by 2^(old max - new max), no 1/l yet.
#pragma unroll
    for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float mx = -INFINITY;
#pragma unroll
        for (int nf = 0; nf < kNF; ++nf) mx = fmaxf(mx, fmaxf(s[mf][nf][2 * half], s[mf][nf][2 * half + 1]));
        mx = quad_max(mx) * mult;
        const float new_max = fmaxf(row_max[mf][half], mx);
        // A row that has seen only masked scores keeps max -inf; subtracting 0 keeps 2^-inf = 0.
        const float base = new_max == -INFINITY ? 0.0f : new_max;
        const float correction = exp2_approx(row_max[mf][half] - base);
        row_max[mf][half] = new_max;
        float sum = 0.0f;
#pragma unroll
        for (int nf = 0; nf < kNF; ++nf)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float pv = exp2_approx(fmaf(s[mf][nf][2 * half + e], mult, -base));
            s[mf][nf][2 * half + e] = pv;
            sum += pv;
          }
        row_sum[mf][half] = row_sum[mf][half] * correction + sum;
#pragma unroll
        for (int df = 0; df < kDF; ++df) {
          acc_o[mf][df][2 * half] *= correction;
          acc_o[mf][df][2 * half + 1] *= correction;
        }
      }

    // O += P V: the accumulator layout of two adjacent n8 tiles of P is the A layout of one k16 step.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t a[kMF][4];
#pragma unroll
      for (int mf = 0; mf < kMF; ++mf) {
        a[mf][0] = pack_pair<Element>(s[mf][2 * kk][0], s[mf][2 * kk][1]);
        a[mf][1] = pack_pair<Element>(s[mf][2 * kk][2], s[mf][2 * kk][3]);
        a[mf][2] = pack_pair<Element>(s[mf][2 * kk + 1][0], s[mf][2 * kk + 1][1]);
        a[mf][3] = pack_pair<Element>(s[mf][2 * kk + 1][2], s[mf][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kDF / 2; ++dp) {
        uint32_t bv[4];
        load_b_trans(bv, v_frag, kk * 16, dp * 16);
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf) {
          mma_16816<Element>(acc_o[mf][2 * dp], a[mf], bv[0], bv[1]);
          mma_16816<Element>(acc_o[mf][2 * dp + 1], a[mf], bv[2], bv[3]);
        }
      }
    }
  }

  // Epilogue: the single 1/l, then the output through this warp's own rows of the Q tile so the
  // global stores are 16 bytes wide.
  cp_async_wait<0>();
  __syncthreads();
  if constexpr (kKeySplits) {
    write_piece<Cfg>(p, w, acc_o, row_max, row_sum);
  } else {
#pragma unroll
    for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float l = quad_sum(row_sum[mf][half]);
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        const int r = w.row(mf, half);
#pragma unroll
        for (int df = 0; df < kDF; ++df) {
          store_pair<QTile>(smem_q, r, df * 8 + w.tig * 2,
                            pack_pair<Element>(acc_o[mf][df][2 * half] * inv, acc_o[mf][df][2 * half + 1] * inv));
        }
        if (p.lse != nullptr && w.tig == 0 && r < rows_valid) {
          const float lse = l > 0.0f ? row_max[mf][half] * kLn2 + logf(l) : -INFINITY;
          p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + (seq.q_row0 + m0 + r) * p.lse_row_stride] = lse;
        }
      }
    __syncthreads();
    Element* out = static_cast<Element*>(p.out.data) + b * p.out.batch_stride +
                   (seq.q_row0 + m0) * p.out.row_stride + h * p.out.head_stride;
    store_tile<QTile, Cfg::kThreads>(smem_q, out, p.out.row_stride, rows_valid, p.headdim_chunks,
                                     lane_tid(Cfg::kFreshCopyLanes));
  }
}

// One of the two kernels (with or without key pieces) on its grid.
template <typename Element, int kHeadDim, bool kKeySplits>
cudaError_t launch_forward_kernel(const KernelParams& p, cudaStream_t stream) {
  using Cfg = ForwardConfig<kHeadDim, kKeySplits>;
  auto kernel = forward_kernel<Element, kHeadDim, kKeySplits>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM, p.nheads_q, p.batch * p.num_splits);
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

// The twin for pieces, and for paged k / v (one piece or more: only the twin reads pages).
template <typename Element, int kHeadDim>
cudaError_t launch_forward(const KernelParams& p, cudaStream_t stream) {
  return p.num_splits > 1 || p.block_table != nullptr ? launch_forward_kernel<Element, kHeadDim, true>(p, stream)
                                                      : launch_forward_kernel<Element, kHeadDim, false>(p, stream);
}

}  // namespace flashattn::sm80
