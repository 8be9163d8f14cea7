// FlashAttention-2 backward on the CPU (seed 000, section 3.1.2). P is recomputed from the stored
// logsumexp, D = rowsum(dO * O), dS = P * (dP - D). Work is split by K/V column tiles, so dK and dV
// are private to a task; dQ partial sums go to per-chunk float32 buffers that are added in a fixed
// order afterwards, which keeps the gradients bitwise reproducible from run to run (and, with
// `deterministic`, at any thread count).
//
// The tile products are computed transposed (rows are keys, columns are queries) so that the
// per-query L and D broadcast along vector lanes and P^T, dS^T feed dV and dK without a transpose.
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

// bf16 on its dot-product instructions, AMX or AVX512-BF16 (cpu/bf16_products.h): the five
// products take Q, K, V and dO in their bf16 storage and P and dS rounded to bf16 (as the GPU
// kernels round them); the softmax recompute, dS and the accumulators stay float32.

constexpr int kBlockQ = 64;
// Keys a tile: each key tile packs the query tiles that see it again (Q, dO, both ways), so a
// longer key tile packs them less often. On bf16's dot-product instructions the products are
// cheap and the packing a large share: 256 keys (64 x 64 read 0.6-0.7x of this on an AMX Xeon).
// The float32 products weigh more: 128 (64 keys read 0.9x of it, 256 0.97-1.0x; 128 queries a
// tile no better than 64 for either, and worse at head dim 256, whose buffers then pass the L2).
int key_block(const AttentionProblem& p) { return cpu::bf16_products_take(p.dtype) ? 256 : 128; }

// Floats in a row of the dQ, dK and dV accumulators (the head dim padded).
int grad_row(const AttentionProblem& p) {
  return round_up(p.headdim, cpu::bf16_products_take(p.dtype) ? cpu::kBf16Depth : cpu::kernels().nr);
}


// Row of the dQ accumulators and of D: queries of every sequence laid end to end.
int64_t global_q_row(const AttentionProblem& p, int b, const SequenceSpan& seq, int64_t i) {
  return p.varlen() ? seq.q_row0 + i : static_cast<int64_t>(b) * p.seqlen_q + i;
}

// D = rowsum(dO * O), one float per (head, query row).
std::vector<float> compute_delta(const AttentionProblem& p) {
  std::vector<float> delta(static_cast<size_t>(p.nheads_q) * p.total_q, 0.0f);
  parallel_for(static_cast<int64_t>(p.batch) * p.nheads_q, p.num_threads, [&](int64_t t) {
    const cpu::Kernels& K = cpu::kernels();
    const int b = static_cast<int>(t / p.nheads_q), h = static_cast<int>(t % p.nheads_q);
    const SequenceSpan seq = host_sequence(p, b);
    thread_local AlignedBuffer o_row, do_row;
    float* o = o_row.get(p.headdim);
    float* d = do_row.get(p.headdim);
    for (int64_t i = 0; i < seq.len_q; ++i) {
      K.load_rows(row_address(p.out, p.dtype, b, seq.q_row0, i, h), p.dtype, 1, p.headdim, 0, 1.0f, o, p.headdim);
      K.load_rows(row_address(p.dout, p.dtype, b, seq.q_row0, i, h), p.dtype, 1, p.headdim, 0, 1.0f, d, p.headdim);
      delta[static_cast<size_t>(h) * p.total_q + global_q_row(p, b, seq, i)] = K.dot_row(o, d, p.headdim);
    }
  });
  return delta;
}

struct Workspace {
  AlignedBuffer kf, vf, kp, dk, dv, qt, dot, qp, dop, st, dpt, capped, lse, delta, p16, ds16, dq_tile;
};

const uint16_t* bf16_rows(const void* p) { return static_cast<const uint16_t*>(p); }

struct KeyChunk {
  int b, hk;
  int chunk;
  int64_t k_begin, k_end;
};

void backward_chunk(const AttentionProblem& p, const KeyChunk& c, const std::vector<float>& delta_all,
                    float* dq_acc, int64_t dq_chunk_stride, Workspace& ws) {
  const cpu::Kernels& K = cpu::kernels();
  const bool bf16_dots = cpu::bf16_products_take(p.dtype);
  const int NR = K.nr;
  const int D = p.headdim, Dp = grad_row(p);
  const int pad = bf16_dots ? cpu::kBf16Depth : NR;  // query and key padding of the score tiles' columns
  const int block_k = key_block(p);
  const SequenceSpan seq = host_sequence(p, c.b);
  const int64_t off = seq.diag_offset();
  const int group = p.heads_per_kv();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const bool softcap = p.score.softcap > 0.0f;

  float* kf = ws.kf.get(static_cast<size_t>(block_k) * Dp);  // Dp >= D: room for the padded bf16 rows too
  float* vf = ws.vf.get(static_cast<size_t>(block_k) * Dp);
  float* kp = ws.kp.get(static_cast<size_t>(block_k) * Dp);
  float* qt = ws.qt.get(static_cast<size_t>(Dp) * kBlockQ);
  float* dot = ws.dot.get(static_cast<size_t>(Dp) * kBlockQ);
  float* qp = ws.qp.get(static_cast<size_t>(kBlockQ) * Dp);
  float* dop = ws.dop.get(static_cast<size_t>(kBlockQ) * Dp);
  float* st = ws.st.get(static_cast<size_t>(block_k) * kBlockQ);
  float* dpt = ws.dpt.get(static_cast<size_t>(block_k) * kBlockQ);
  // bf16 dots: P^T and dS^T rounded (keys x queries), dS rounded (queries x keys), one tile of dQ.
  uint16_t* p16 = cpu::as_bf16(ws.p16.get(static_cast<size_t>(block_k) * kBlockQ / 2));
  uint16_t* ds16 = cpu::as_bf16(ws.ds16.get(static_cast<size_t>(block_k) * kBlockQ));  // dS^T, then dS
  float* dq_tile = ws.dq_tile.get(static_cast<size_t>(kBlockQ) * Dp);
  float* capped = ws.capped.get(static_cast<size_t>(block_k) * kBlockQ);
  float* lse = ws.lse.get(kBlockQ);
  float* delta = ws.delta.get(kBlockQ);
  if (bf16_dots) cpu::bf16_products_begin();

  for (int64_t k0 = c.k_begin; k0 < c.k_end; k0 += block_k) {
    const int nk = static_cast<int>(std::min<int64_t>(block_k, c.k_end - k0));
    const int nk_pad = round_up(nk, pad);
    const int nk_rows = bf16_dots ? round_up(nk, cpu::kBf16Rows) : nk;  // rows of the key-major tiles
    float* dk = ws.dk.zeros(static_cast<size_t>(nk_rows) * Dp);
    float* dv = ws.dv.zeros(static_cast<size_t>(nk_rows) * Dp);
    const void* k_src = row_address(p.k, p.dtype, c.b, seq.k_row0, k0, c.hk);
    const void* v_src = row_address(p.v, p.dtype, c.b, seq.k_row0, k0, c.hk);
    if (bf16_dots) {
      // K and V as the A operands of S^T and dP^T (zero rows up to nk_rows), K pair-packed for dQ.
      cpu::bf16_copy_rows(k_src, nk, D, p.k.row_stride, nk_rows, Dp, cpu::as_bf16(kf));
      cpu::bf16_copy_rows(v_src, nk, D, p.v.row_stride, nk_rows, Dp, cpu::as_bf16(vf));
      cpu::bf16_pack(bf16_rows(k_src), nk, D, p.k.row_stride, nk_pad, Dp, cpu::as_pairs(kp));
    } else {
      K.load_rows(k_src, p.dtype, nk, D, p.k.row_stride, 1.0f, kf, D);
      K.load_rows(v_src, p.dtype, nk, D, p.v.row_stride, 1.0f, vf, D);
      K.pack_b(k_src, p.dtype, nk, D, p.k.row_stride, kp);
    }

    // Queries that see at least one key of [k0, k0 + nk).
    const int64_t q_lo = p.mask.window_right < 0 ? 0 : std::max<int64_t>(0, k0 - off - p.mask.window_right);
    const int64_t q_hi = p.mask.window_left < 0
                             ? seq.len_q
                             : std::min<int64_t>(seq.len_q, k0 + nk - 1 - off + p.mask.window_left + 1);

    for (int h = c.hk * group; h < (c.hk + 1) * group; ++h) {
      const float slope = alibi_slope(p, c.b, h);
      const float* delta_h = delta_all.data() + static_cast<size_t>(h) * p.total_q;
      float* dq_h = dq_acc + c.chunk * dq_chunk_stride + static_cast<int64_t>(h) * p.total_q * Dp;
      for (int64_t i0 = q_lo; i0 < q_hi; i0 += kBlockQ) {
        const int nq = static_cast<int>(std::min<int64_t>(kBlockQ, q_hi - i0));
        const int nq_pad = round_up(nq, pad);
        const void* q_src = row_address(p.q, p.dtype, c.b, seq.q_row0, i0, h);
        const void* do_src = row_address(p.dout, p.dtype, c.b, seq.q_row0, i0, h);
        if (bf16_dots) {
          cpu::bf16_pack_transposed(bf16_rows(q_src), nq, D, p.q.row_stride, Dp, nq_pad, cpu::as_pairs(qt));
          cpu::bf16_pack_transposed(bf16_rows(do_src), nq, D, p.dout.row_stride, Dp, nq_pad, cpu::as_pairs(dot));
          cpu::bf16_pack(bf16_rows(q_src), nq, D, p.q.row_stride, nq_pad, Dp, cpu::as_pairs(qp));
          cpu::bf16_pack(bf16_rows(do_src), nq, D, p.dout.row_stride, nq_pad, Dp, cpu::as_pairs(dop));
        } else {
          K.pack_bt(q_src, p.dtype, nq, D, p.q.row_stride, qt);
          K.pack_bt(do_src, p.dtype, nq, D, p.dout.row_stride, dot);
          K.pack_b(q_src, p.dtype, nq, D, p.q.row_stride, qp);
          K.pack_b(do_src, p.dtype, nq, D, p.dout.row_stride, dop);
        }
        const int64_t g0 = global_q_row(p, c.b, seq, i0);
        for (int r = 0; r < nq_pad; ++r) {
          lse[r] = r < nq ? p.lse[lse_offset(p, c.b, seq.q_row0, i0 + r, h)] : neg_inf;
          delta[r] = r < nq ? delta_h[g0 + r] : 0.0f;
        }

        // Keys past the tile's last query's reach (causal, window_right) see no query of it: the
        // products skip those rows of K (their P and dS are 0), `vis` rows of the key tile,
        // `vis_rows` rounded up as the key-major tiles' rows (ending at nk_rows at the most).
        const int vis = p.mask.window_right < 0
                            ? nk
                            : static_cast<int>(std::min<int64_t>(nk, i0 + nq - 1 + off + p.mask.window_right - k0 + 1));
        const int vis_rows = bf16_dots ? std::min(nk_rows, round_up(vis, cpu::kBf16Rows)) : vis;
        const int vis_keys = std::min(nk, vis_rows);  // real keys among them

        // P^T = exp(S^T - L), dP^T = V dO^T, dS^T = P^T * (dP^T - D) * dscore.
        if (bf16_dots) {
          cpu::bf16_gemm(vis_rows, nq_pad, Dp, cpu::as_bf16(kf), Dp, cpu::as_pairs(qt), st, nq_pad, false);
          cpu::bf16_gemm(vis_rows, nq_pad, Dp, cpu::as_bf16(vf), Dp, cpu::as_pairs(dot), dpt, nq_pad, false);
        } else {
          K.gemm(vis, nq_pad, D, kf, D, qt, st, nq_pad, false);
          K.gemm(vis, nq_pad, D, vf, D, dot, dpt, nq_pad, false);
        }
        for (int r = 0; r < vis_keys; ++r) {
          float* srow = st + static_cast<int64_t>(r) * nq_pad;
          float* crow = capped + static_cast<int64_t>(r) * nq_pad;
          const cpu::ScoreRow geom = score_geometry(p, slope, nq, i0 + off - (k0 + r), 1.0f);
          K.score_row(srow, nq_pad, geom, softcap ? crow : nullptr);
          K.exp_row_lse(srow, nq_pad, lse);
          K.ds_row(dpt + static_cast<int64_t>(r) * nq_pad, srow, nq_pad, delta, softcap ? crow : nullptr,
                   p.score.scale, p.score.softcap);
        }
        if (bf16_dots) {
          // Rows nk..nk_rows of S^T and dP^T are the zero K / V rows' (0): they add nothing.
          cpu::bf16_round_rows(st, nq_pad, vis_rows, nq_pad, p16, nq_pad);
          cpu::bf16_round_rows(dpt, nq_pad, vis_rows, nq_pad, ds16, nq_pad);
          cpu::bf16_gemm(vis_rows, Dp, nq_pad, p16, nq_pad, cpu::as_pairs(dop), dv, Dp, true);
          cpu::bf16_gemm(vis_rows, Dp, nq_pad, ds16, nq_pad, cpu::as_pairs(qp), dk, Dp, true);
          // dQ's tile through a buffer of its own: its padded rows must not touch the next
          // sequence's rows of dq_acc, which another task may be adding to.
          const int nq_rows = round_up(nq, cpu::kBf16Rows);
          uint16_t* ds_rows = ds16 + static_cast<int64_t>(block_k) * nq_pad;  // dS, query-major
          cpu::bf16_round_transposed(dpt, nq_pad, vis_keys, nq, ds_rows, nk_pad, nq_rows, nk_pad);
          cpu::bf16_gemm(nq_rows, Dp, nk_pad, ds_rows, nk_pad, cpu::as_pairs(kp), dq_tile, Dp, false);
          float* dq_rows = dq_h + g0 * Dp;
          for (int64_t e = 0; e < static_cast<int64_t>(nq) * Dp; ++e) dq_rows[e] += dq_tile[e];
        } else {
          K.gemm(vis, Dp, nq, st, nq_pad, dop, dv, Dp, true);
          K.gemm(vis, Dp, nq, dpt, nq_pad, qp, dk, Dp, true);
          // dQ += dS K, dS read from dS^T where it lies (gemm_at), its rows past vis zeroed:
          // K's packing spans all nk keys.
          std::fill(dpt + static_cast<int64_t>(vis) * nq_pad, dpt + static_cast<int64_t>(nk) * nq_pad, 0.0f);
          K.gemm_at(nq, Dp, nk, dpt, nq_pad, kp, dq_h + g0 * Dp, Dp, true);
        }
      }
    }
    K.store_rows(dk, Dp, nk, D, nullptr, row_address(p.dk, p.dtype, c.b, seq.k_row0, k0, c.hk), p.dtype, p.dk.row_stride);
    K.store_rows(dv, Dp, nk, D, nullptr, row_address(p.dv, p.dtype, c.b, seq.k_row0, k0, c.hk), p.dtype, p.dv.row_stride);
  }
  if (bf16_dots) cpu::bf16_products_end();
}

}  // namespace

Status cpu_flash_backward(const AttentionProblem& p) {
  const int Dp = grad_row(p);
  // The chunks split each (batch, kv head)'s key tiles, and dQ sums them in chunk order, so the
  // split fixes dQ's bits. With `deterministic` it is the one 16 threads would get whatever runs
  // it, so that dQ is the same bits at any thread count; otherwise it follows the threads.
  constexpr int kDeterministicSplitThreads = 16;
  const int split_threads = p.deterministic ? kDeterministicSplitThreads : resolve_threads(p.num_threads);
  const std::vector<float> delta = compute_delta(p);

  // Enough chunks per (batch, kv head) to feed every thread; each chunk has its own dQ buffer.
  const int64_t jobs = static_cast<int64_t>(p.batch) * p.nheads_kv;
  const int block_k = key_block(p);
  const int64_t max_tiles = std::max<int64_t>(1, (p.seqlen_k + block_k - 1) / block_k);
  const int chunks = static_cast<int>(std::min<int64_t>(max_tiles, std::max<int64_t>(1, (2 * split_threads + jobs - 1) / jobs)));
  std::vector<KeyChunk> work;
  for (int b = 0; b < p.batch; ++b) {
    const SequenceSpan seq = host_sequence(p, b);
    const int64_t tiles = (seq.len_k + block_k - 1) / block_k;
    for (int hk = 0; hk < p.nheads_kv; ++hk) {
      for (int ch = 0; ch < chunks; ++ch) {
        const int64_t t0 = tiles * ch / chunks, t1 = tiles * (ch + 1) / chunks;
        if (t0 == t1) continue;
        work.push_back({b, hk, ch, t0 * block_k, std::min<int64_t>(seq.len_k, t1 * block_k)});
      }
    }
  }
  const int64_t chunk_stride = static_cast<int64_t>(p.nheads_q) * p.total_q * Dp;
  std::vector<float> dq_acc(static_cast<size_t>(chunks * chunk_stride), 0.0f);
  parallel_for(static_cast<int64_t>(work.size()), p.num_threads, [&](int64_t t) {
    thread_local Workspace ws;
    backward_chunk(p, work[static_cast<size_t>(t)], delta, dq_acc.data(), chunk_stride, ws);
  });

  // dQ = the chunk partial sums in chunk order.
  parallel_for(static_cast<int64_t>(p.batch) * p.nheads_q, p.num_threads, [&](int64_t t) {
    const cpu::Kernels& K = cpu::kernels();
    const int b = static_cast<int>(t / p.nheads_q), h = static_cast<int>(t % p.nheads_q);
    const SequenceSpan seq = host_sequence(p, b);
    if (seq.len_q == 0) return;
    float* base = dq_acc.data() + (static_cast<int64_t>(h) * p.total_q + global_q_row(p, b, seq, 0)) * Dp;
    for (int ch = 1; ch < chunks; ++ch) {
      const float* part = base + ch * chunk_stride;
      for (int64_t e = 0; e < seq.len_q * Dp; ++e) base[e] += part[e];
    }
    K.store_rows(base, Dp, static_cast<int>(seq.len_q), p.headdim, nullptr,
                 row_address(p.dq, p.dtype, b, seq.q_row0, 0, h), p.dtype, p.dq.row_stride);
  });
  return Status::Ok();
}

}  // namespace flashattn
