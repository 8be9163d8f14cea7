// FlashAttention-2 forward on the CPU (seed 000, section 3.1.1): Q tiles against K/V tiles with an
// online softmax. The accumulator stays unscaled (rescaled only when the row max moves) and is
// divided by the row sum once at the end; only the logsumexp L = m + log(l) is stored.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends.h"
#include "cpu/bf16_products.h"
#include "cpu/simd/kernels.h"
#include "cpu/threads.h"
#include "cpu/tile_rows.h"
#include "cpu/workspace.h"
#include "paged_rows.h"

namespace flashattn {
namespace {

// A task owns kBlockQ query rows of one (batch, head). Each K/V tile is converted and packed once
// per task and then serves slices of `sub_q` rows, so reading K/V from memory and packing them
// cost 1/kBlockQ of the arithmetic while the score slice (sub_q x block_k floats) stays in L1/L2.
// At 256 rows the K/V reads (rows a head-stride apart, mostly from DRAM) took ~10% of a
// 2048 x 128 fp32 forward; 512 halves that and still leaves 64 tasks for 16 heads of 2048.
constexpr int kBlockQ = 512;
// Keys a tile and rows a slice: float32 128 x 64; on bf16's dot-product engines 256 x 32, whose
// products are cheap enough that the per-slice work around them weighs (unmasked bf16 rows
// +5-13% on an AMX Xeon, session 78; float32 the same unmasked and 4-8% slower causal).
struct ForwardTiles {
  int block_k, sub_q;
};
ForwardTiles forward_tiles(bool bf16_dots) { return bf16_dots ? ForwardTiles{256, 32} : ForwardTiles{128, 64}; }
// On the float path, where a sequence's queries times the q heads of a kv head are at most this
// many rows, K and V rows are read where they lie (Kernels::dot_rows / axpy_rows) instead of
// packing each tile for so few rows: at one row (MHA decode) that was 1.3x faster, at four
// stacked rows (GQA decode) 1.2x slower, each row reading the tile again. Decided by the problem,
// not by the task's rows, so stacking heads does not change a result's bits.
constexpr int kDirectRows = 2;

// With GQA and short query rows (decode), a task stacks the rows of `heads` q heads that share a
// kv head, head after head, so that their K/V tiles are packed once and fill the products' rows
// together (FlashAttention-3's PackGQA on the GPU). Only where every sequence of every stacked
// head fits one task, and only as far as two tasks a thread remain; 1 otherwise. A row's products
// and softmax do not depend on the task's other rows, so the results are the same bits.
//
// On the direct path (every sequence's queries times a kv head's q heads at most kDirectRows) a
// task may also stack several kv heads (whole groups of q heads, each row reading its own head's
// K / V rows), walked kHeadChunk keys at a time across the stacked heads: with flash_attn's
// (batch, seq, heads, dim) layout one head's rows lie a head count apart (16 KB at 32 heads of
// d128 fp32), and a task walking one head at a time read MHA decode at half the bandwidth a
// head-contiguous layout gets (session 77); across heads the same keys' rows lie side by side.
constexpr int kHeadChunk = 16;  // a multiple of every SIMD width: dot_rows' and axpy_rows' bits do not change
bool few_rows(const AttentionProblem& p) { return static_cast<int64_t>(p.seqlen_q) * p.heads_per_kv() <= kDirectRows; }

// bf16 on its dot-product engines, except where the direct path takes every sequence: there bf16
// K / V rows are read where they lie and widened to float, as on a processor without the engines
// (MHA decode at 8192 keys: 11.3 ms packing each head's tiles for one row's products, 6.8 ms
// direct across stacked heads, session 77).
bool takes_bf16_dots(const AttentionProblem& p) { return cpu::bf16_products_take(p.dtype) && !few_rows(p); }

int heads_per_task(const AttentionProblem& p) {
  const int group = p.heads_per_kv();
  const int64_t wanted_tasks = 2 * static_cast<int64_t>(resolve_threads(p.num_threads));
  if (few_rows(p)) {  // the direct path everywhere (takes_bf16_dots is false)
    for (int heads = p.nheads_q; heads > group; heads -= group) {
      if (p.nheads_q % heads != 0 || heads % group != 0 || static_cast<int64_t>(p.seqlen_q) * heads > kBlockQ) continue;
      if (static_cast<int64_t>(p.batch) * (p.nheads_q / heads) >= wanted_tasks) return heads;
    }
  }
  for (int heads = group; heads > 1; --heads) {
    if (group % heads != 0 || static_cast<int64_t>(p.seqlen_q) * heads > kBlockQ) continue;
    if (static_cast<int64_t>(p.batch) * (p.nheads_q / heads) >= wanted_tasks) return heads;
  }
  return 1;
}

struct QueryBlock {
  int b, h0;  // the first of the task's q heads
  int64_t q0;
};

std::vector<QueryBlock> query_blocks(const AttentionProblem& p, int heads) {
  std::vector<QueryBlock> blocks;
  const int rows_per_head = kBlockQ / heads;
  for (int b = 0; b < p.batch; ++b) {
    const SequenceSpan seq = host_sequence(p, b);
    for (int h0 = 0; h0 < p.nheads_q; h0 += heads) {
      for (int64_t q0 = 0; q0 < seq.len_q; q0 += rows_per_head) blocks.push_back({b, h0, q0});
    }
  }
  return blocks;
}

// Paged k / v read where they lie (AttentionParams::block_table). The packed paths keep the tiles
// contiguous keys get, so the same bits: a tile inside one page is packed from it, one across
// pages is first copied row by row into a small staging buffer (Workspace::stage_k / stage_v).
// The direct path reads rows where they lie, so its tiles end at page ends (other rounding where
// pages do not hold a multiple of block_k rows). At 8192 keys (bf16 and fp32 decode, 2 threads,
// session 77) copying the whole reach first cost 8-12x the attention (page faults of the fresh
// copy, mostly); tiles cut at 16-row pages 0.8-2.7x, at 4-row pages 2-3.7x, at 1-row pages ~11x:
// pages under kMinPageInPlace rows are copied whole.
constexpr int kMinPageInPlace = 4;
bool reads_pages_in_place(const AttentionProblem& p) { return p.page_size >= kMinPageInPlace; }

// Rows [k0, ...) of sequence b's keys of kv head hk: where they lie in k / v, or in a paged cache
// in the page holding key k0 (a paged sequence's keys start at row 0 of its pages).
const void* key_rows(const AttentionProblem& p, const Operand& kv, const SequenceSpan& seq, int b, int64_t k0, int hk) {
  if (!p.paged()) return row_address(kv, p.dtype, b, seq.k_row0, k0, hk);
  return row_address(kv, p.dtype, static_cast<int>(p.page_of(b, k0)), 0, k0 % p.page_size, hk);
}

// The end of the K/V tile that starts at key k0: block_k keys on, the keys' end, or (cut_at_pages)
// its page's end.
int64_t key_tile_end(const AttentionProblem& p, int64_t k0, int64_t key_hi, int block_k, bool cut_at_pages) {
  const int64_t end = std::min<int64_t>(k0 + block_k, key_hi);
  return cut_at_pages ? std::min<int64_t>(end, (k0 / p.page_size + 1) * p.page_size) : end;
}

// Keys [k0, k0 + n) of sequence b's kv head hk, across pages, into rows of D elements at dst.
void stage_key_rows(const AttentionProblem& p, const Operand& kv, const SequenceSpan& seq, int b, int64_t k0, int n,
                    int hk, void* dst) {
  const int64_t esize = dtype_size(p.dtype), row_bytes = p.headdim * esize;
  char* to = static_cast<char*>(dst);
  for (int64_t j = k0; j < k0 + n;) {
    const int64_t end = std::min<int64_t>(k0 + n, (j / p.page_size + 1) * p.page_size);
    const char* from = static_cast<const char*>(key_rows(p, kv, seq, b, j, hk));
    for (; j < end; ++j, to += row_bytes, from += kv.row_stride * esize) std::memcpy(to, from, row_bytes);
  }
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
// (bf16_row_step(), kBf16Depth).
struct Workspace {
  AlignedBuffer q, kt, v, s, o, row_max, row_sum, p16, stage_k, stage_v;
};

// Rows [a, b) of a task's stack that belong to its q head `head` and to the slice [r0, r0 + n),
// cut where the head's queries cross a multiple of sub_q: the softmax then sees the same groups
// of rows (and takes the same unmasked shortcut) whether heads are stacked or not, so the results
// are the same bits either way. (A task's first query q0 is 0 or a multiple of kBlockQ.)
struct HeadRows {
  int head, a, b;
};

template <typename Fn>
void for_each_head_rows(int r0, int n, int rows_per_head, int sub_q, Fn&& fn) {
  for (int a = r0; a < r0 + n;) {
    const int head = a / rows_per_head, in_head = a - head * rows_per_head;
    const int b = std::min({r0 + n, (head + 1) * rows_per_head, a + sub_q - in_head % sub_q});
    fn(HeadRows{head, a, b});
    a = b;
  }
}

void forward_block(const AttentionProblem& p, const QueryBlock& blk, int heads, Workspace& ws) {
  const cpu::Kernels& K = cpu::kernels();
  const bool bf16_dots = takes_bf16_dots(p);
  const int NR = K.nr;
  const int D = p.headdim;
  const int Dp = round_up(D, bf16_dots ? cpu::kBf16Depth : NR);  // o's row; with bf16 dots also q's and P V's N
  const auto [block_k, sub_q] = forward_tiles(bf16_dots);
  const SequenceSpan seq = host_sequence(p, blk.b);
  const int64_t off = seq.diag_offset();
  // Row r of the task is query q0 + r % rows_per_head of q head h0 + r / rows_per_head.
  const int rows_per_head = static_cast<int>(std::min<int64_t>(kBlockQ / heads, seq.len_q - blk.q0));
  const int rows = rows_per_head * heads;
  const int row_step = bf16_dots ? cpu::bf16_row_step() : 1;
  const int rows_pad = round_up(rows, row_step);
  // The kv head of the task's q head j: one for all of them but on the direct path.
  const auto kv_head = [&](int j) { return (blk.h0 + j) / p.heads_per_kv(); };
  const int hk = kv_head(0);
  const bool kv_heads_stacked = kv_head(heads - 1) != hk;
  const int64_t esize = dtype_size(p.dtype);
  const bool direct = !bf16_dots && seq.len_q * p.heads_per_kv() <= kDirectRows;
  const bool cut_at_pages = p.paged() && direct;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  auto query_of = [&](int r) { return blk.q0 + r % rows_per_head; };

  float* o = ws.o.zeros(static_cast<size_t>(rows_pad) * Dp);
  float* m = ws.row_max.get(rows);
  float* l = ws.row_sum.get(rows);
  std::fill(m, m + rows, neg_inf);
  std::fill(l, l + rows, 0.0f);
  float* q = nullptr;
  uint16_t* q16 = nullptr;  // bf16 dots: q's bf16 rows, zero-padded to rows_pad x Dp
  if (bf16_dots) {
    cpu::bf16_products_begin();
    q16 = cpu::as_bf16(ws.q.get(static_cast<size_t>(rows_pad) * Dp / 2));
  } else {
    q = ws.q.get(static_cast<size_t>(rows) * D);
  }
  for (int j = 0; j < heads; ++j) {
    const void* q_rows = row_address(p.q, p.dtype, blk.b, seq.q_row0, blk.q0, blk.h0 + j);
    const int r0 = j * rows_per_head;
    const bool last = j == heads - 1;  // pads the stack's rows up to rows_pad
    if (bf16_dots) {
      cpu::bf16_copy_rows(q_rows, rows_per_head, D, p.q.row_stride, last ? rows_pad - r0 : rows_per_head, Dp,
                          q16 + static_cast<int64_t>(r0) * Dp);
    } else {
      K.load_rows(q_rows, p.dtype, rows_per_head, D, p.q.row_stride, 1.0f, q + static_cast<int64_t>(r0) * D, D);
    }
  }

  // The mask depends on the query alone, so every stacked head sees the same keys.
  const int64_t q_last = blk.q0 + rows_per_head - 1;
  const int64_t key_lo = std::max<int64_t>(0, p.mask.key_begin(blk.q0, off));
  const int64_t key_hi = std::min<int64_t>(seq.len_k, p.mask.key_end(q_last, off, seq.len_k));
  float* kt = ws.kt.get(static_cast<size_t>(Dp) * block_k);
  float* v = ws.v.get(static_cast<size_t>(block_k) * Dp);
  float* s = ws.s.get(static_cast<size_t>(sub_q) * block_k);
  uint16_t* p16 = cpu::as_bf16(ws.p16.get(static_cast<size_t>(sub_q) * block_k / 2));

  for (int64_t k0 = key_lo, k_end; k0 < key_hi; k0 = k_end) {
    k_end = key_tile_end(p, k0, key_hi, block_k, cut_at_pages);
    const int nk = static_cast<int>(k_end - k0);
    const int nk_pad = round_up(nk, bf16_dots ? cpu::kBf16Depth : NR);
    const void* k_rows = key_rows(p, p.k, seq, blk.b, k0, hk);
    const void* v_rows = key_rows(p, p.v, seq, blk.b, k0, hk);
    int64_t k_ld = p.k.row_stride, v_ld = p.v.row_stride;
    if (p.paged() && !direct && k0 / p.page_size != (k_end - 1) / p.page_size) {  // a tile across pages
      const size_t floats = (static_cast<size_t>(nk) * D * esize + 3) / 4;
      k_rows = ws.stage_k.get(floats);
      v_rows = ws.stage_v.get(floats);
      stage_key_rows(p, p.k, seq, blk.b, k0, nk, hk, const_cast<void*>(k_rows));
      stage_key_rows(p, p.v, seq, blk.b, k0, nk, hk, const_cast<void*>(v_rows));
      k_ld = v_ld = D;
    }
    // Direct: keys [c0, c0 + n) of this tile of row r's own head.
    const auto rows_of = [&](const Operand& kv, int r, int c0) {
      return static_cast<const char*>(key_rows(p, kv, seq, blk.b, k0, kv_head(r / rows_per_head))) +
             c0 * kv.row_stride * esize;
    };
    const int chunk = kv_heads_stacked ? kHeadChunk : nk;
    if (bf16_dots) {
      cpu::bf16_pack_transposed(static_cast<const uint16_t*>(k_rows), nk, D, k_ld, Dp, nk_pad, cpu::as_pairs(kt));
      cpu::bf16_pack(static_cast<const uint16_t*>(v_rows), nk, D, v_ld, nk_pad, Dp, cpu::as_pairs(v));
    } else if (!direct) {
      K.pack_bt(k_rows, p.dtype, nk, D, k_ld, kt);
      K.pack_b(v_rows, p.dtype, nk, D, v_ld, v);
    }
    // Stacked kv heads are read across heads, which the hardware prefetcher follows (asked for
    // as well, each head's next tile, the MHA decode step took 11.8 ms, not 10.1).
    if (k_end < key_hi && !kv_heads_stacked) {
      // (Paged: the next tile's rows in its first page.)
      const int next = static_cast<int>(key_tile_end(p, k_end, key_hi, block_k, p.paged()) - k_end);
      prefetch_rows(key_rows(p, p.k, seq, blk.b, k_end, hk), next, D * esize, p.k.row_stride * esize);
      prefetch_rows(key_rows(p, p.v, seq, blk.b, k_end, hk), next, D * esize, p.v.row_stride * esize);
    }
    // Whether the mask hides all of this tile from the queries of rows [a, b) of one head.
    auto hidden = [&](const HeadRows& h) {
      return p.mask.key_begin(query_of(h.a), off) >= k0 + nk || p.mask.key_end(query_of(h.b - 1), off, seq.len_k) <= k0;
    };

    for (int r0 = 0; r0 < rows; r0 += sub_q) {
      const int sr = std::min(sub_q, rows - r0);
      // Slices that the mask hides from this whole tile cost nothing (causal's upper triangle).
      bool seen = false;
      for_each_head_rows(r0, sr, rows_per_head, sub_q, [&](const HeadRows& h) { seen = seen || !hidden(h); });
      if (!seen) continue;
      float* o_slice = o + static_cast<int64_t>(r0) * Dp;
      const int sr_pad = round_up(sr, row_step);
      if (bf16_dots) {
        cpu::bf16_gemm(sr_pad, nk_pad, Dp, q16 + static_cast<int64_t>(r0) * Dp, Dp, cpu::as_pairs(kt), s, nk_pad,
                       false);
      } else if (direct) {
        for (int c0 = 0; c0 < nk; c0 += chunk) {
          const int cn = std::min(chunk, nk - c0);
          for (int r = 0; r < sr; ++r) {
            K.dot_rows(q + static_cast<int64_t>(r0 + r) * D, rows_of(p.k, r0 + r, c0), p.dtype, p.k.row_stride, cn, D,
                       s + static_cast<int64_t>(r) * nk_pad + c0);
          }
        }
        for (int r = 0; r < sr; ++r) {
          float* srow = s + static_cast<int64_t>(r) * nk_pad;
          std::fill(srow + nk, srow + nk_pad, 0.0f);  // as the packed K^T's zero columns give
        }
      } else {
        K.gemm(sr, nk_pad, D, q + static_cast<int64_t>(r0) * D, D, kt, s, nk_pad, false);
      }
      // The softmax per head's rows (its ALiBi slope, and queries that restart at each head).
      // Rows the mask hides from the tile come out as P = 0. Where every row sees every key of
      // a full tile and the score is just scale * q.k, the score pass folds into exp (one pass
      // over the rows instead of two).
      for_each_head_rows(r0, sr, rows_per_head, sub_q, [&](const HeadRows& h) {
        const float slope = alibi_slope(p, blk.b, blk.h0 + h.head);
        const int64_t i0 = query_of(h.a);
        // The shortcut is decided for the whole sub_q group of queries that the rows belong to,
        // as an unstacked task decides it, even where a slice holds only part of the group.
        const int64_t group_first = blk.q0 + (i0 - blk.q0) / sub_q * sub_q;
        const int64_t group_last = std::min<int64_t>(group_first + sub_q, blk.q0 + rows_per_head) - 1;
        const bool unmasked = p.score.softcap == 0.0f && slope == 0.0f && p.score.scale > 0.0f && nk == nk_pad &&
                              p.mask.key_begin(group_last, off) <= k0 &&
                              p.mask.key_end(group_first, off, seq.len_k) >= k0 + nk;
        const cpu::ScoreRow geom = score_geometry(p, slope, nk, i0 + off - k0, -1.0f);
        K.softmax_step(s + static_cast<int64_t>(h.a - r0) * nk_pad, nk_pad, h.b - h.a, nk_pad,
                       unmasked ? nullptr : &geom, p.score.scale, m + h.a, l + h.a, o + static_cast<int64_t>(h.a) * Dp,
                       Dp, Dp);
      });
      if (bf16_dots) {
        // Rows sr..sr_pad hold the scores of q's zero rows (0): they add nothing to rows never stored.
        cpu::bf16_round_rows(s, nk_pad, sr_pad, nk_pad, p16, nk_pad);
        cpu::bf16_gemm(sr_pad, Dp, nk_pad, p16, nk_pad, cpu::as_pairs(v), o_slice, Dp, true);
      } else if (direct) {
        for (int c0 = 0; c0 < nk; c0 += chunk) {
          const int cn = std::min(chunk, nk - c0);
          for (int r = 0; r < sr; ++r) {
            K.axpy_rows(s + static_cast<int64_t>(r) * nk_pad + c0, rows_of(p.v, r0 + r, c0), p.dtype, p.v.row_stride, cn,
                        D, o_slice + static_cast<int64_t>(r) * Dp);
          }
        }
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
      const int h = blk.h0 + r / rows_per_head;
      p.lse[lse_offset(p, blk.b, seq.q_row0, query_of(r), h)] = empty ? neg_inf : m[r] + std::log(l[r]);
    }
    l[r] = empty ? 0.0f : 1.0f / l[r];
  }
  for (int j = 0; j < heads; ++j) {
    void* out = row_address(p.out, p.dtype, blk.b, seq.q_row0, blk.q0, blk.h0 + j);
    const int64_t r0 = static_cast<int64_t>(j) * rows_per_head;
    K.store_rows(o + r0 * Dp, Dp, rows_per_head, D, l + r0, out, p.dtype, p.out.row_stride);
  }
}

}  // namespace

Status cpu_flash_forward(const AttentionProblem& problem) {
  // Pages the tiles cannot lie inside are copied into contiguous rows first.
  AttentionProblem p = problem;
  PagedRows gathered;
  if (p.paged() && !reads_pages_in_place(p)) gather_pages(&p, &gathered);
  const int heads = heads_per_task(p);
  const std::vector<QueryBlock> blocks = query_blocks(p, heads);
  parallel_for(static_cast<int64_t>(blocks.size()), p.num_threads, [&](int64_t t) {
    thread_local Workspace ws;
    forward_block(p, blocks[static_cast<size_t>(t)], heads, ws);
  });
  return Status::Ok();
}

}  // namespace flashattn
