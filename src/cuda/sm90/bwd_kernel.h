// The sm90 backward main kernel (FlashAttention-3's backward, first version): wgmma for all five
// products, TMA for the operands, K and V resident, dK and dV in registers.
//
// CTA (key block n of kBlockN = 128 keys, KV head, batch); consumer warpgroup c owns keys
// 64c..64c+63 of the block (head dim 256: kBlockN = 64 keys that both warpgroups take, each
// accumulating half of dK's and dV's columns; bwd_config.h kSplitKeyGradColumns). Per query
// block of kBlockM = 64 rows (of every query head of the KV head's group, GQA), with S^T the
// scores with keys as rows:
//   S^T  = K_c Q^T          (SS; rows = keys, so P^T and dS^T land in registers as the A
//   dP^T = V_c dO^T          operands of the next two products)
//   P^T  = exp2(S^T * scale log2 e - lse log2 e),  dS^T = P^T * (dP^T - D)
//          (softcap: the capped score c = cap tanh(S^T scale / cap) in the exponent, and dS^T
//          times dc / d(S^T scale) = 1 - (c / cap)^2)
//   dV_c += P^T dO,  dK_c += dS^T Q      (RS: A from registers, B = dO / Q read transposed)
//   dQ  += dS K              (SS, both transposed: dS^T goes to shared memory, 64 key lines per
//                             warpgroup, or warpgroup 0's at 256, and is read as A; K's rows as B)
// dQ of a step is staged in shared memory as fp32 rows and added into the fp32 workspace with
// one bulk reduction (8-float chunks rotated by row against bank conflicts; each warpgroup
// computes half the columns over all kBlockN keys, bwd_config.h kDqColumns). Query and key rows
// past the sequence are masked (TMA's zero fill, or with variable length the next sequence's
// rows; exp2(0 - lse) could overflow).
#pragma once

#include <cmath>

#include "cuda/sm90/bwd_config.h"
#include "cuda/sm90/bwd_params.h"
#include "cuda/sm90/fragment.h"
#include "cuda/sm90/ptx.h"
#include "cuda/sm90/smem_descriptor.h"
#include "cuda/sm90/wgmma_ops.h"
#include "variants/variant.h"

namespace flashattn {
namespace sm90 {

// The CTA's sequence: its rows in the tensors and the workspaces, and its lengths.
struct BackwardSequence {
  int64_t q_row0, k_row0;  // first row in q / k (variable length: absolute; fixed: 0)
  int64_t ws_row0;         // first row in the (nheads_q, total_q) workspaces
  int len_q, len_k;
  int tma_batch;  // the maps' batch coordinate (variable length: 0)
  __device__ __forceinline__ int offset() const { return len_k - len_q; }  // bottom-right diagonal
};

__device__ __forceinline__ BackwardSequence backward_sequence(const BackwardParams& p, int batch) {
  if (p.cu_seqlens_q != nullptr) {
    const int q0 = p.cu_seqlens_q[batch], k0 = p.cu_seqlens_k[batch];
    return {q0, k0, q0, p.cu_seqlens_q[batch + 1] - q0, p.cu_seqlens_k[batch + 1] - k0, 0};
  }
  return {0, 0, int64_t(batch) * p.seqlen_q, p.seqlen_q, p.seqlen_k, batch};
}

// Query blocks [begin, end) of kBlockM rows whose rows see at least one key of key block n.
struct QueryBlockRange {
  int begin, end;
  __device__ __forceinline__ bool empty() const { return begin >= end; }
};

__device__ __forceinline__ int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

template <class Cfg>
__device__ __forceinline__ QueryBlockRange query_blocks_of(const BackwardParams& p, const BackwardSequence& seq,
                                                           int n_block) {
  const int offset = seq.offset();
  const int key_first = n_block * Cfg::kBlockN;
  const int key_last = min(key_first + Cfg::kBlockN, seq.len_k) - 1;
  int begin = 0, end = (seq.len_q + Cfg::kBlockM - 1) / Cfg::kBlockM;
  // Query i sees key j iff i + offset - window_left <= j <= i + offset + window_right.
  if (p.window_right >= 0) begin = max(begin, floor_div(key_first - offset - p.window_right, Cfg::kBlockM));
  if (p.window_left >= 0) end = min(end, floor_div(key_last - offset + p.window_left, Cfg::kBlockM) + 1);
  return {begin, end};
}

template <class Cfg>
struct BackwardSmem {
  uint32_t base;
  __device__ __forceinline__ uint32_t k_column(int c) const { return base + Cfg::kKOffset + c * Cfg::kKVColumnBytes; }
  __device__ __forceinline__ uint32_t v_column(int c) const { return base + Cfg::kVOffset + c * Cfg::kKVColumnBytes; }
  __device__ __forceinline__ uint32_t q_column(int stage, int c) const {
    return base + Cfg::kQOffset + stage * Cfg::kQBytes + c * Cfg::kQColumnBytes;
  }
  __device__ __forceinline__ uint32_t do_column(int stage, int c) const {
    return base + Cfg::kDoOffset + stage * Cfg::kQBytes + c * Cfg::kQColumnBytes;
  }
  // Query column `column` (64 queries) of dS^T; its lines are the block's keys.
  __device__ __forceinline__ uint32_t ds_column(int column) const {
    return base + Cfg::kDsOffset + column * Cfg::kDsColumnBytes;
  }
  // Warpgroup wg's lse * log2(e) and D of the step's query rows: query pair j at 16 j
  // (bwd_config.h kRowStatsBytes).
  __device__ __forceinline__ uint32_t row_stats(int wg) const {
    return base + Cfg::kRowStatsOffset + wg * 2 * Cfg::kBlockM * 4;
  }
  // dQ staging buffer: kBlockM rows of fp32, chunks rotated as in the workspace.
  __device__ __forceinline__ uint32_t dq_stage() const { return base + Cfg::kDqOffset; }
  __device__ __forceinline__ uint32_t kv_full() const { return base + Cfg::kBarrierOffset; }
  __device__ __forceinline__ uint32_t full(int stage) const { return base + Cfg::kBarrierOffset + 8 + 16 * stage; }
  __device__ __forceinline__ uint32_t empty(int stage) const { return base + Cfg::kBarrierOffset + 16 + 16 * stage; }
};

// One thread issues every load: K and V of the block once, then Q and dO per (head, query block).
template <class Cfg>
__device__ void backward_producer(const BackwardParams& p, const BackwardSmem<Cfg>& sm, const QueryBlockRange& range,
                                  const BackwardSequence& seq, int n_block, int head_kv) {
  const int batch = seq.tma_batch;
  if (range.empty()) return;
  mbarrier_arrive_expect_tx(sm.kv_full(), 2 * Cfg::kKVBytes);
#pragma unroll
  for (int c = 0; c < Cfg::kColumns; ++c) {
    const int row = int(seq.k_row0) + n_block * Cfg::kBlockN;
    tma_load_4d(sm.k_column(c), &p.tma_k, sm.kv_full(), c * kColumnElems, row, head_kv, batch);
    tma_load_4d(sm.v_column(c), &p.tma_v, sm.kv_full(), c * kColumnElems, row, head_kv, batch);
  }
  int stage = 0;
  uint32_t phase = 0;
  for (int g = 0; g < p.heads_per_kv; ++g) {
    const int head = head_kv * p.heads_per_kv + g;
    for (int m = range.begin; m < range.end; ++m) {
      mbarrier_wait(sm.empty(stage), phase ^ 1);
      mbarrier_arrive_expect_tx(sm.full(stage), 2 * Cfg::kQBytes);
#pragma unroll
      for (int c = 0; c < Cfg::kColumns; ++c) {
        const int row = int(seq.q_row0) + m * Cfg::kBlockM;
        tma_load_4d(sm.q_column(stage, c), &p.tma_q, sm.full(stage), c * kColumnElems, row, head, batch);
        tma_load_4d(sm.do_column(stage, c), &p.tma_do, sm.full(stage), c * kColumnElems, row, head, batch);
      }
      if (++stage == Cfg::kStages) stage = 0, phase ^= 1;
    }
  }
}

template <class Cfg>
struct BackwardConsumer {
  using Element = typename Cfg::Element;
  static constexpr int kScoreAccum = Cfg::kBlockM / 2;  // S^T: 64 keys x kBlockM queries
  static constexpr int kGradAccum = Cfg::kKeyGradColumns / 2;  // dK, dV: 64 keys x kKeyGradColumns

  const BackwardParams& p;
  BackwardSmem<Cfg> sm;
  BackwardSequence seq;
  int wg, thread, n_block, head_kv, batch;

  // This warpgroup's first key row in the CTA's block, and its first column of dK and dV.
  __device__ __forceinline__ int key_row0() const { return Cfg::kSplitKeyGradColumns ? 0 : wg * 64; }
  __device__ __forceinline__ int key_grad_col0() const {
    return Cfg::kSplitKeyGradColumns ? wg * Cfg::kKeyGradColumns : 0;
  }

  // S^T = K_c Q^T or dP^T = V_c dO^T: A is the warpgroup's 64 key rows, B the step's kBlockM query rows.
  __device__ __forceinline__ void issue_transposed_scores(float (&acc)[kScoreAccum], uint32_t keys,
                                                          uint32_t queries) const {
    const uint64_t a = k_major_descriptor(keys + key_row0() * kLineBytes);
    const uint64_t b = k_major_descriptor(queries);
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / 16; ++kk) {
      const int column = kk / 4, step_bytes = (kk % 4) * 32;
      WgmmaSS<Element, Cfg::kBlockM>::run(acc, advance_descriptor(a, column * Cfg::kKVColumnBytes + step_bytes),
                                          advance_descriptor(b, column * Cfg::kQColumnBytes + step_bytes), kk > 0);
    }
  }

  // grad += A B with A (keys x queries) in registers, B the step's kBlockM query rows of dO or Q
  // (stage column 0 at `rows`) in this warpgroup's kKeyGradColumns columns.
  __device__ __forceinline__ void issue_key_gradient(float (&grad)[kGradAccum], const uint32_t (&a)[kScoreAccum / 2],
                                                     uint32_t rows) const {
    const uint64_t b = mn_major_descriptor(rows + key_grad_col0() / kColumnElems * Cfg::kQColumnBytes,
                                           Cfg::kQColumnBytes);
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockM / 16; ++kk) {
      const uint32_t frag[4] = {a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3]};
      WgmmaRS<Element, Cfg::kKeyGradColumns>::run(grad, frag, advance_descriptor(b, kk * 16 * kLineBytes), 1);
    }
  }

  // Columns kDqColumns wg .. + kDqColumns - 1 of the step's dQ over all kBlockN keys, for each 64
  // query rows (half) of the block: A = dS^T's query column `half` read transposed (all its key
  // lines), B = K's rows in those columns (at head dim 64 half a 128-byte line:
  // the descriptor starts 64 bytes in, as K-major ones step 32 bytes along K).
  __device__ __forceinline__ void issue_query_gradient(float (&dq)[Cfg::kQueryColumns][Cfg::kDqPartColumns / 2],
                                                       int part) const {
    const int first = wg * Cfg::kDqColumns + part * Cfg::kDqPartColumns;
    const uint64_t b = mn_major_descriptor(sm.k_column(first / kColumnElems) + (first % kColumnElems) * 2,
                                           Cfg::kKVColumnBytes);
#pragma unroll
    for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) {
#pragma unroll
      for (int half = 0; half < Cfg::kQueryColumns; ++half) {
        const uint64_t a = mn_major_descriptor(sm.ds_column(half), Cfg::kDsColumnBytes);
        WgmmaSSTransposed<Element, Cfg::kDqPartColumns>::run(dq[half], advance_descriptor(a, kk * 16 * kLineBytes),
                                                         advance_descriptor(b, kk * 16 * kLineBytes), kk > 0);
      }
    }
  }

  __device__ __forceinline__ void dq_barrier() const { named_barrier_sync(Cfg::kDqBarrier, Cfg::kDqThreads); }
  // The thread that issues (and waits for) the bulk reductions of the staging buffer.
  __device__ __forceinline__ bool dq_issuer() const { return thread == 0 && wg == 0; }

  // Step's lse (log2 units, +inf for rows without keys or past the sequence) and D into shared memory.
  __device__ __forceinline__ void load_row_stats(int head, int m) const {
#pragma unroll
    for (int index = thread; index < 2 * Cfg::kBlockM; index += kWarpgroupThreads) {
      const int r = index % Cfg::kBlockM, which = index / Cfg::kBlockM;
      const int q = m * Cfg::kBlockM + r;
      float value;
      if (which == 0) {
        const float lse = q < seq.len_q ? p.lse[batch * p.lse_batch_stride + head * p.lse_head_stride +
                                                (seq.q_row0 + q) * p.lse_row_stride]
                                          : -INFINITY;
        value = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
      } else {
        value = q < seq.len_q ? p.dsum[int64_t(head) * p.total_q + seq.ws_row0 + q] : 0.0f;
      }
      asm volatile("st.shared.f32 [%0], %1;" ::"r"(sm.row_stats(wg) + (r / 2) * 16 + which * 8 + (r % 2) * 4),
                   "f"(value)
                   : "memory");
    }
  }

  // lse * log2(e) and D of queries col, col + 1 (col even).
  __device__ __forceinline__ void row_stat_pair(int col, float (&lse_log2)[2], float (&d)[2]) const {
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(lse_log2[0]), "=f"(lse_log2[1]), "=f"(d[0]), "=f"(d[1])
                 : "r"(sm.row_stats(wg) + (col / 2) * 16));
  }

  // Whether any (query, key) of the step's kBlockM x 64 block of this warpgroup is masked or outside the sequence.
  __device__ __forceinline__ bool block_needs_mask(int m) const {
    const int key0 = n_block * Cfg::kBlockN + key_row0(), q0 = m * Cfg::kBlockM;
    const int offset = seq.offset();
    // Query rows past the sequence: with variable length the next sequence's rows (finite), whose
    // scores must not count although their lse reads -inf.
    if (key0 + 63 >= seq.len_k || q0 + Cfg::kBlockM > seq.len_q) return true;
    if (p.window_right >= 0 && key0 + 63 > q0 + offset + p.window_right) return true;
    if (p.window_left >= 0 && key0 < q0 + Cfg::kBlockM - 1 + offset - p.window_left) return true;
    return false;
  }

  // The queries [lo, hi) that see key row h of this thread (int32, so the masked path compares
  // two ints per element; empty for keys past the sequence). Query i sees key j iff
  // i + offset - window_left <= j <= i + offset + window_right, and i < len_q.
  struct VisibleQueries {
    int lo[2], hi[2];
  };
  __device__ __forceinline__ VisibleQueries visible_queries(const FragmentPosition& pos) const {
    VisibleQueries v;
    const int offset = seq.offset();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = n_block * Cfg::kBlockN + key_row0() + pos.row0 + 8 * h;
      v.lo[h] = p.window_right >= 0 ? key - offset - p.window_right : 0;
      v.hi[h] = p.window_left >= 0 ? min(seq.len_q, key - offset + p.window_left + 1) : seq.len_q;
      if (key >= seq.len_k) v.hi[h] = v.lo[h];
    }
    return v;
  }

  // P^T and dS^T of S^T (s) and dP^T (dp), straight into packed pairs, the A fragments of the
  // next products (fragment.h: pair 2i + h is columns 8i + col0, +1 of row h): each accumulator
  // register is dead once its pair is packed, so the two accumulators and the two fragments are
  // never all live (at head dim 64 with 128-query blocks they would not fit beside dK and dV).
  // One straight-line copy per (softcap, masked): a runtime test inside the loop made ptxas
  // branch per element (session 7: the d128 backward 14% slower than without it).
  template <bool kSoftcap, bool kMasked>
  __device__ __forceinline__ void elementwise(const float (&s)[kScoreAccum], const float (&dp)[kScoreAccum], int m,
                                              uint32_t (&prob)[kScoreAccum / 2], uint32_t (&ds)[kScoreAccum / 2]) const {
    const FragmentPosition pos = FragmentPosition::of_thread(thread);
    VisibleQueries visible;
    if constexpr (kMasked) visible = visible_queries(pos);
#pragma unroll
    for (int i = 0; i < kScoreAccum / 4; ++i) {
      float lse_log2[2], d[2];
      row_stat_pair(8 * i + pos.col0, lse_log2, d);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float pr[2], g[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = 4 * i + 2 * h + e;
          if constexpr (kSoftcap) {
            const float t = tanhf(s[r] * p.score_pre);
            pr[e] = fast_exp2(t * p.score_log2 - lse_log2[e]);
            g[e] = pr[e] * (dp[r] - d[e]) * (1.0f - t * t);
          } else {
            pr[e] = fast_exp2(s[r] * p.score_log2 - lse_log2[e]);
            g[e] = pr[e] * (dp[r] - d[e]);
          }
          if constexpr (kMasked) {
            // Assigned rather than multiplied by 0, so that non-finite scores of rows outside the
            // problem stay out. Rows outside it must still be finite (their zero P / dS multiply
            // them in the products): TMA's zero fill or another sequence's rows, which
            // sm90_supports_backward's refusal of rows no sequence owns guarantees.
            const int query = m * Cfg::kBlockM + 8 * i + pos.col0 + e;
            const bool seen = query >= visible.lo[h] && query < visible.hi[h];
            pr[e] = seen ? pr[e] : 0.0f;
            g[e] = seen ? g[e] : 0.0f;
          }
        }
        prob[2 * i + h] = pack_pair<Element>(pr[0], pr[1]);
        ds[2 * i + h] = pack_pair<Element>(g[0], g[1]);
      }
    }
  }

  __device__ __forceinline__ void probabilities_and_score_grads(const float (&s)[kScoreAccum],
                                                                const float (&dp)[kScoreAccum], int m,
                                                                uint32_t (&prob)[kScoreAccum / 2],
                                                                uint32_t (&ds)[kScoreAccum / 2]) const {
    const bool masked = block_needs_mask(m);
    if (p.score_pre != 0.0f) {
      if (masked) elementwise<true, true>(s, dp, m, prob, ds);
      else elementwise<true, false>(s, dp, m, prob, ds);
    } else {
      if (masked) elementwise<false, true>(s, dp, m, prob, ds);
      else elementwise<false, false>(s, dp, m, prob, ds);
    }
  }

  // dS^T (packed pairs, as the A fragment holds them) into this warpgroup's key lines, 128B-swizzled
  // (head dim 256: both warpgroups hold the same dS^T; warpgroup 0 stores it).
  __device__ __forceinline__ void store_score_grads(const uint32_t (&ds)[kScoreAccum / 2]) const {
    if (Cfg::kSplitKeyGradColumns && wg != 0) return;
    const FragmentPosition pos = FragmentPosition::of_thread(thread);
#pragma unroll
    for (int i = 0; i < kScoreAccum / 4; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int line = key_row0() + pos.row0 + 8 * h, chunk = i % 8;
        const uint32_t addr = sm.ds_column(i / 8) + line * kLineBytes + ((chunk ^ (line % 8)) * 16) + pos.col0 * 2;
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(ds[2 * i + h]) : "memory");
      }
    }
  }

  // The step's first row in the (nheads_q, total_q) workspace numbering (the chunk rotation keys
  // on it).
  __device__ __forceinline__ int64_t dq_row0(int head, int m) const {
    return int64_t(head) * p.total_q + seq.ws_row0 + int64_t(m) * Cfg::kBlockM;
  }

  // This thread's part of dQ part `part` (times the softmax scale) into the staging buffer, fp32
  // rows of kHeadDim floats, 8-float chunks rotated by the workspace row (bwd_config.h
  // kDqStageBytes).
  __device__ __forceinline__ void stage_query_gradient(const float (&dq)[Cfg::kQueryColumns][Cfg::kDqPartColumns / 2],
                                                       int head, int m, int part) const {
    const FragmentPosition pos = FragmentPosition::of_thread(thread);
    const uint32_t buffer = sm.dq_stage();
    const int chunk0 = (wg * Cfg::kDqColumns + part * Cfg::kDqPartColumns) / 8;
    const int64_t row0 = dq_row0(head, m);
#pragma unroll
    for (int half = 0; half < Cfg::kQueryColumns; ++half) {
#pragma unroll
      for (int i = 0; i < Cfg::kDqPartColumns / 8; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = half * 64 + pos.row0 + 8 * h;
          const int chunk = (chunk0 + i) ^ int((row0 + row) & 3);
          const uint32_t addr = buffer + (row * Cfg::kHeadDim + chunk * 8 + pos.col0) * 4;
          asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(p.scale * dq[half][4 * i + 2 * h]),
                       "f"(p.scale * dq[half][4 * i + 2 * h + 1])
                       : "memory");
        }
      }
    }
  }

  // Once every part is staged: the issuer adds the step's valid rows into the workspace in one
  // bulk reduction (rows past the sequence would land in the next sequence's or past the
  // workspace).
  __device__ __forceinline__ void add_query_gradient(int head, int m) const {
    fence_proxy_async_smem();
    dq_barrier();
    if (dq_issuer()) {
      const int rows = min(Cfg::kBlockM, seq.len_q - m * Cfg::kBlockM);
      float* dst = p.dq_accum + dq_row0(head, m) * Cfg::kHeadDim;
      asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst),
                   "r"(sm.dq_stage()), "r"(uint32_t(rows * Cfg::kHeadDim * 4))
                   : "memory");
      bulk_commit_group();
    }
  }

  __device__ __forceinline__ void store_key_gradient(const float (&grad)[kGradAccum], const Operand& out,
                                                     float factor) const {
    const FragmentPosition pos = FragmentPosition::of_thread(thread);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = n_block * Cfg::kBlockN + key_row0() + pos.row0 + 8 * h;
      if (key >= seq.len_k) continue;
      Element* row = static_cast<Element*>(out.data) + element_offset(out, batch, seq.k_row0, key, head_kv) +
                     key_grad_col0();
#pragma unroll
      for (int i = 0; i < kGradAccum / 4; ++i) {
        *reinterpret_cast<uint32_t*>(row + 8 * i + pos.col0) =
            pack_pair<Element>(factor * grad[4 * i + 2 * h], factor * grad[4 * i + 2 * h + 1]);
      }
    }
  }

  // One query block: S^T and dP^T, wait, the elementwise pass, dV and dK (dS^T stored between
  // them), wait, dQ, wait, dQ staging (FlashAttention-3's order within a step, dQ under dK's
  // product, was slower on v3 and on v5: docs/perf.md v4, work-next). Releases the stage's Q and
  // dO and moves (stage, phase) on.
  __device__ __forceinline__ void step(float (&dk)[kGradAccum], float (&dv)[kGradAccum], int head, int m,
                                       int& stage, uint32_t& phase) const {
    float s[kScoreAccum], dp[kScoreAccum];
    pin_registers(dk);
    pin_registers(dv);
    wgmma_fence();
    issue_transposed_scores(s, sm.k_column(0), sm.q_column(stage, 0));
    issue_transposed_scores(dp, sm.v_column(0), sm.do_column(stage, 0));
    wgmma_commit_group();
    // The row statistics load under the products; the barrier also orders this step's
    // writes after the previous step's reads (which came before its dS^T barrier).
    load_row_stats(head, m);
    named_barrier_sync(Cfg::kWarpgroupBarrier0 + wg, kWarpgroupThreads);
    wgmma_wait_group<0>();
    pin_registers(s);
    pin_registers(dp);
    uint32_t prob[kScoreAccum / 2], ds[kScoreAccum / 2];
    probabilities_and_score_grads(s, dp, m, prob, ds);
    wgmma_fence();
    issue_key_gradient(dv, prob, sm.do_column(stage, 0));
    // Under dV's product, and before the one that takes ds as its A fragment: its registers
    // may not be read while that runs (PTX ISA, wgmma.mma_async).
    store_score_grads(ds);
    fence_proxy_async_smem();
    // (At head dim 256 warpgroup 1 skips the stores; ptxas then injects this fence itself.)
    if constexpr (Cfg::kSplitKeyGradColumns) wgmma_fence();
    issue_key_gradient(dk, ds, sm.q_column(stage, 0));
    wgmma_commit_group();
    // The previous step's bulk reduction has read the staging buffer before anyone passes.
    if (dq_issuer()) bulk_wait_read_all();
    dq_barrier();
    wgmma_wait_group<0>();
    pin_registers(dk);
    pin_registers(dv);
    // Q and dO of the stage were last read by the products just retired.
    if (thread % 32 == 0) mbarrier_arrive(sm.empty(stage));
    if (++stage == Cfg::kStages) stage = 0, phase ^= 1;
#pragma unroll
    for (int part = 0; part < Cfg::kDqParts; ++part) {
      float dq[Cfg::kQueryColumns][Cfg::kDqPartColumns / 2];
      wgmma_fence();
      issue_query_gradient(dq, part);
      wgmma_commit_group();
      wgmma_wait_group<0>();
#pragma unroll
      for (int half = 0; half < Cfg::kQueryColumns; ++half) pin_registers(dq[half]);
      stage_query_gradient(dq, head, m, part);
    }
    add_query_gradient(head, m);
  }

  __device__ void run(const QueryBlockRange& range) const {
    float dk[kGradAccum], dv[kGradAccum];
#pragma unroll
    for (int i = 0; i < kGradAccum; ++i) dk[i] = dv[i] = 0.0f;
    if (!range.empty()) {
      mbarrier_wait(sm.kv_full(), 0);
      int stage = 0;
      uint32_t phase = 0;
      for (int g = 0; g < p.heads_per_kv; ++g) {
        const int head = head_kv * p.heads_per_kv + g;
        for (int m = range.begin; m < range.end; ++m) {
          mbarrier_wait(sm.full(stage), phase);
          step(dk, dv, head, m, stage, phase);
        }
      }
    }
    store_key_gradient(dk, p.dk, p.scale);
    store_key_gradient(dv, p.dv, 1.0f);
    // The staging buffer must outlive the last reduction's read of it.
    if (dq_issuer()) bulk_wait_all();
  }
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1) backward_kernel(const __grid_constant__ BackwardParams p) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const BackwardSmem<Cfg> sm{(smem_address(smem_raw) + kSwizzleAtomBytes - 1) & ~uint32_t(kSwizzleAtomBytes - 1)};
  const int n_block = blockIdx.x, head_kv = blockIdx.y, batch = blockIdx.z;
  if (threadIdx.x == 0) {
    mbarrier_init(sm.kv_full(), 1);
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(sm.full(s), 1);
      mbarrier_init(sm.empty(s), Cfg::kConsumerWarpgroups * kWarpgroupThreads / 32);
    }
    fence_barrier_init();
  }
  __syncthreads();
  const BackwardSequence seq = backward_sequence(p, batch);
  // Variable length: the grid covers the longest sequence's key blocks.
  if (n_block * Cfg::kBlockN >= seq.len_k) return;
  const QueryBlockRange range = query_blocks_of<Cfg>(p, seq, n_block);
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x / kWarpgroupThreads), 0);
  if (warpgroup == 0) {
    setmaxnreg_decrease<kProducerRegisters>();
    if (threadIdx.x == 0) backward_producer<Cfg>(p, sm, range, seq, n_block, head_kv);
  } else {
    setmaxnreg_increase<Cfg::kConsumerRegisters>();
    const BackwardConsumer<Cfg> consumer{p, sm, seq, warpgroup - 1, int(threadIdx.x % kWarpgroupThreads), n_block,
                                         head_kv, batch};
    consumer.run(range);
  }
}

}  // namespace sm90
}  // namespace flashattn
