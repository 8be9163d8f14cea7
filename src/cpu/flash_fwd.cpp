// FlashAttention-2 forward on the CPU (seed 000, section 3.1.1): Q tiles against K/V tiles with an
// online softmax. The accumulator stays unscaled (rescaled only when the row max moves) and is
// divided by the row sum once at the end; only the logsumexp L = m + log(l) is stored.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends.h"
#include "cpu/bf16_products.h"
#include "cpu/simd/kernels.h"
#include "cpu/threads.h"
#include "cpu/tile_rows.h"
#include "cpu/workspace.h"

namespace flashattn {
namespace {

// A task owns kBlockQ query rows of one (batch, head). Each K/V tile is converted and packed once
// per task and then serves kSubQ-row slices, so reading K/V from memory and packing them cost
// 1/kBlockQ of the arithmetic while the score slice (kSubQ x kBlockK floats) stays in L1/L2.
// At 256 rows the K/V reads (rows a head-stride apart, mostly from DRAM) took ~10% of a
// 2048 x 128 fp32 forward; 512 halves that and still leaves 64 tasks for 16 heads of 2048.
constexpr int kBlockQ = 512;
constexpr int kSubQ = 64;
constexpr int kBlockK = 128;

struct QueryBlock {
  int b, h;
  int64_t q0;
};

std::vector<QueryBlock> query_blocks(const AttentionProblem& p) {
  std::vector<QueryBlock> blocks;
  for (int b = 0; b < p.batch; ++b) {
    const SequenceSpan seq = host_sequence(p, b);
    for (int h = 0; h < p.nheads_q; ++h) {
      for (int64_t q0 = 0; q0 < seq.len_q; q0 += kBlockQ) blocks.push_back({b, h, q0});
    }
  }
  return blocks;
}

// Asks for the next K/V tile while the current one is computed: its rows sit a head-stride apart,
// so the hardware prefetcher does not see them coming.
void prefetch_rows(const void* first_row, int rows, int64_t row_bytes, int64_t stride_bytes) {
  const char* row = static_cast<const char*>(first_row);
  for (int r = 0; r < rows; ++r, row += stride_bytes) {
    for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row + b);
  }
}

// bf16 on its dot-product instructions, AMX or AVX512-BF16 (cpu/bf16_products.h): the products
// take the operands in their bf16 storage, P is rounded to bf16 for P V (as the GPU kernels do),
// and everything else stays float32. Rows, keys and the head dim are padded to the engines' steps
// (kBf16Rows, kBf16Depth).
struct Workspace {
  AlignedBuffer q, kt, v, s, o, row_max, row_sum, p16;
};

void forward_block(const AttentionProblem& p, const QueryBlock& blk, Workspace& ws) {
  const cpu::Kernels& K = cpu::kernels();
  const bool bf16_dots = cpu::bf16_products_take(p.dtype);
  const int NR = K.nr;
  const int D = p.headdim;
  const int Dp = round_up(D, bf16_dots ? cpu::kBf16Depth : NR);  // o's row; with bf16 dots also q's and P V's N
  const SequenceSpan seq = host_sequence(p, blk.b);
  const int64_t off = seq.diag_offset();
  const int rows = static_cast<int>(std::min<int64_t>(kBlockQ, seq.len_q - blk.q0));
  const int rows_pad = bf16_dots ? round_up(rows, cpu::kBf16Rows) : rows;
  const int hk = blk.h / p.heads_per_kv();
  const float slope = alibi_slope(p, blk.b, blk.h);
  const bool plain_scores = p.score.softcap == 0.0f && slope == 0.0f && p.score.scale > 0.0f;
  const float neg_inf = -std::numeric_limits<float>::infinity();

  float* o = ws.o.zeros(static_cast<size_t>(rows_pad) * Dp);
  float* m = ws.row_max.get(rows);
  float* l = ws.row_sum.get(rows);
  std::fill(m, m + rows, neg_inf);
  std::fill(l, l + rows, 0.0f);
  const void* q_rows = row_address(p.q, p.dtype, blk.b, seq.q_row0, blk.q0, blk.h);
  float* q = nullptr;
  uint16_t* q16 = nullptr;  // bf16 dots: q's bf16 rows, zero-padded to rows_pad x Dp
  if (bf16_dots) {
    cpu::bf16_products_begin();
    q16 = cpu::as_bf16(ws.q.get(static_cast<size_t>(rows_pad) * Dp / 2));
    cpu::bf16_copy_rows(q_rows, rows, D, p.q.row_stride, rows_pad, Dp, q16);
  } else {
    q = ws.q.get(static_cast<size_t>(rows) * D);
    K.load_rows(q_rows, p.dtype, rows, D, p.q.row_stride, 1.0f, q, D);
  }

  const int64_t key_lo = std::max<int64_t>(0, p.mask.key_begin(blk.q0, off));
  const int64_t key_hi = std::min<int64_t>(seq.len_k, p.mask.key_end(blk.q0 + rows - 1, off, seq.len_k));
  float* kt = ws.kt.get(static_cast<size_t>(Dp) * kBlockK);
  float* v = ws.v.get(static_cast<size_t>(kBlockK) * Dp);
  float* s = ws.s.get(static_cast<size_t>(kSubQ) * kBlockK);
  uint16_t* p16 = cpu::as_bf16(ws.p16.get(static_cast<size_t>(kSubQ) * kBlockK / 2));

  for (int64_t k0 = key_lo; k0 < key_hi; k0 += kBlockK) {
    const int nk = static_cast<int>(std::min<int64_t>(kBlockK, key_hi - k0));
    const int nk_pad = round_up(nk, bf16_dots ? cpu::kBf16Depth : NR);
    const void* k_rows = row_address(p.k, p.dtype, blk.b, seq.k_row0, k0, hk);
    const void* v_rows = row_address(p.v, p.dtype, blk.b, seq.k_row0, k0, hk);
    if (bf16_dots) {
      cpu::bf16_pack_transposed(static_cast<const uint16_t*>(k_rows), nk, D, p.k.row_stride, Dp, nk_pad,
                               cpu::as_pairs(kt));
      cpu::bf16_pack(static_cast<const uint16_t*>(v_rows), nk, D, p.v.row_stride, nk_pad, Dp,
                    cpu::as_pairs(v));
    } else {
      K.pack_bt(k_rows, p.dtype, nk, D, p.k.row_stride, kt);
      K.pack_b(v_rows, p.dtype, nk, D, p.v.row_stride, v);
    }
    if (k0 + kBlockK < key_hi) {
      const int next = static_cast<int>(std::min<int64_t>(kBlockK, key_hi - k0 - kBlockK));
      const int64_t esize = dtype_size(p.dtype);
      prefetch_rows(row_address(p.k, p.dtype, blk.b, seq.k_row0, k0 + kBlockK, hk), next, D * esize, p.k.row_stride * esize);
      prefetch_rows(row_address(p.v, p.dtype, blk.b, seq.k_row0, k0 + kBlockK, hk), next, D * esize, p.v.row_stride * esize);
    }

    for (int r0 = 0; r0 < rows; r0 += kSubQ) {
      const int sr = std::min(kSubQ, rows - r0);
      const int64_t i0 = blk.q0 + r0;
      // Slices that the mask hides from this whole tile cost nothing (causal's upper triangle).
      if (p.mask.key_begin(i0, off) >= k0 + nk || p.mask.key_end(i0 + sr - 1, off, seq.len_k) <= k0) continue;
      float* o_slice = o + static_cast<int64_t>(r0) * Dp;
      const int sr_pad = bf16_dots ? round_up(sr, cpu::kBf16Rows) : sr;
      if (bf16_dots) {
        cpu::bf16_gemm(sr_pad, nk_pad, Dp, q16 + static_cast<int64_t>(r0) * Dp, Dp, cpu::as_pairs(kt),
                      s, nk_pad, false);
      } else {
        K.gemm(sr, nk_pad, D, q + static_cast<int64_t>(r0) * D, D, kt, s, nk_pad, false);
      }
      // Every row of the slice sees every key of a full tile and the score is just scale * q.k:
      // the score pass folds into exp (one pass over the slice instead of two).
      const bool unmasked = plain_scores && nk == nk_pad && p.mask.key_begin(i0 + sr - 1, off) <= k0 &&
                            p.mask.key_end(i0, off, seq.len_k) >= k0 + nk;
      const cpu::ScoreRow geom = score_geometry(p, slope, nk, i0 + off - k0, -1.0f);
      K.softmax_step(s, nk_pad, sr, nk_pad, unmasked ? nullptr : &geom, p.score.scale, m + r0, l + r0, o_slice, Dp, Dp);
      if (bf16_dots) {
        // Rows sr..sr_pad hold the scores of q's zero rows (0): they add nothing to rows never stored.
        cpu::bf16_round_rows(s, nk_pad, sr_pad, nk_pad, p16, nk_pad);
        cpu::bf16_gemm(sr_pad, Dp, nk_pad, p16, nk_pad, cpu::as_pairs(v), o_slice, Dp, true);
      } else {
        K.gemm(sr, Dp, nk, s, nk_pad, v, o_slice, Dp, true);
      }
    }
  }
  if (bf16_dots) cpu::bf16_products_end();

  // The single final normalisation; rows that saw no key keep o = 0 and get lse = -inf.
  for (int r = 0; r < rows; ++r) {
    const bool empty = l[r] == 0.0f;
    if (p.lse) {
      p.lse[lse_offset(p, blk.b, seq.q_row0, blk.q0 + r, blk.h)] = empty ? neg_inf : m[r] + std::log(l[r]);
    }
    l[r] = empty ? 0.0f : 1.0f / l[r];
  }
  void* out = row_address(p.out, p.dtype, blk.b, seq.q_row0, blk.q0, blk.h);
  K.store_rows(o, Dp, rows, D, l, out, p.dtype, p.out.row_stride);
}

}  // namespace

Status cpu_flash_forward(const AttentionProblem& p) {
  const std::vector<QueryBlock> blocks = query_blocks(p);
  parallel_for(static_cast<int64_t>(blocks.size()), p.num_threads, [&](int64_t t) {
    thread_local Workspace ws;
    forward_block(p, blocks[static_cast<size_t>(t)], ws);
  });
  return Status::Ok();
}

}  // namespace flashattn
