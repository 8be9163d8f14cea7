// What the sm90 backward main kernel (bwd_kernel.h) receives: tensor maps of the operands it
// loads with TMA, and plain pointers for the rest. Fixed length, or variable length where every
// row of q and k belongs to a sequence (sm90_backward.cu sends the others to the sm80 backward).
#pragma once

#include <cstdint>

#include <cuda.h>

#include "problem.h"

namespace flashattn {
namespace sm90 {

struct BackwardParams {
  // Boxes of 64 columns: kBlockN rows for K and V, kBlockM rows for Q and dO.
  CUtensorMap tma_q, tma_k, tma_v, tma_do;
  // Row logsumexp of the forward (natural log; -inf for rows that saw no key) and
  // D = rowsum(dO * O) of the sm80 preparation kernel, (nheads_q, batch * seqlen_q).
  const float* lse;
  int64_t lse_batch_stride, lse_head_stride, lse_row_stride;
  const float* dsum;
  // The sm80 backward's fp32 dQ workspace, row-major (nheads_q, batch * seqlen_q, headdim).
  float* dq_accum;
  Operand dk, dv;  // written with ordinary stores (problem.h's element offsets)
  // Variable length: prefix sums (device memory), else null. The maps then have a batch extent of
  // 1 and rows are absolute.
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  int64_t total_q;  // rows of the (nheads_q, total_q) workspaces
  int heads_per_kv;
  int seqlen_q, seqlen_k;  // fixed: the lengths; variable: the longest
  float scale;       // softmax scale: dS to dK and dQ
  // Scores to exp2, as the forward's (params.h): without softcap dot * score_log2 (scale * log2 e);
  // with it tanh(dot * score_pre) * score_log2 (score_pre = scale / cap, score_log2 = cap * log2 e).
  float score_pre;   // 0: no softcap
  float score_log2;
  int window_left, window_right;  // -1: unbounded (MaskPolicy); causal is window_right = 0
};

}  // namespace sm90
}  // namespace flashattn
