// The validated, normalised description of one attention call that every backend receives.
// Built in one place (api.cpp); backends assume it is valid.
#pragma once

#include <cstdint>

#include "flashattn/flashattn.h"
#include "variants/sequence.h"
#include "variants/variant.h"

namespace flashattn {


// Element offset of (batch b, row i of that sequence, head h) is
//   b * batch_stride + (row_begin(b) + i) * row_stride + h * head_stride
// where row_begin(b) is cu_seqlens[b] for variable length and 0 otherwise.
struct Operand {
  void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t row_stride = 0;
  int64_t head_stride = 0;
};

struct AttentionProblem {
  DType dtype = DType::kFloat32;
  Device device = Device::kCPU;
  int device_index = 0;
  int batch = 0;
  int nheads_q = 0;
  int nheads_kv = 0;
  int headdim = 0;
  int seqlen_q = 0;  // fixed: the length; varlen: max_seqlen_q
  int seqlen_k = 0;
  int64_t total_q = 0;  // rows of q (varlen) or batch * seqlen_q
  int64_t total_k = 0;
  // Variable length: prefix sums in the memory of `device` (null for fixed length).
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  // Used lengths (seqused), in the memory of `device`; null when not given. Each sequence's
  // length is then seqused[b] instead of its span; rows past it are neither read nor written.
  const int32_t* seqused_q = nullptr;
  const int32_t* seqused_k = nullptr;
  // Variable length: k/v hold rows past cu_seqlens_k[batch] (caller's memory, any values). A
  // kernel whose last key block may read rows past a sequence must not run then: P = 0 times a
  // NaN there is NaN. True when cu_seqlens could not be read (CUDA graph capture).
  bool kv_rows_past_last_sequence = false;
  // The same for q (and out, dout): rows past cu_seqlens_q[batch], or unknown (graph capture).
  bool q_rows_past_last_sequence = false;

  Operand q, k, v, out;
  Operand dout, dq, dk, dv;  // backward only
  float* lse = nullptr;      // may be null in forward
  int64_t lse_batch_stride = 0, lse_head_stride = 0, lse_row_stride = 0;

  ScoreTransform score;
  MaskPolicy mask;
  const float* alibi_slopes = nullptr;  // slope of (b, h) at b * alibi_batch_stride + h
  int64_t alibi_batch_stride = 0;

  bool deterministic = false;
  int num_threads = 0;
  int num_splits = 0;  // AttentionParams::num_splits: 0 the library's choice, 1 none, else that many
  void* stream = nullptr;

  // Paged k / v (AttentionParams::block_table): k and v are pages, their Operand's batch_stride
  // the page stride; key row j of sequence b is row j % page_size of page
  // block_table[b * block_table_batch_stride + j / page_size]. Null when not paged.
  const int32_t* block_table = nullptr;
  int64_t block_table_batch_stride = 0;
  int page_size = 0;
  int num_pages = 0;
  int pages_per_sequence = 0;  // the table's width

  // Keys a sequence's table row reaches (fixed length: its seqlen_k).
  int table_keys() const { return pages_per_sequence * page_size; }

  bool varlen() const { return cu_seqlens_q != nullptr; }
  bool paged() const { return block_table != nullptr; }
  // The page holding key row j of sequence b (paged only).
  int64_t page_of(int b, int64_t j) const { return block_table[b * block_table_batch_stride + j / page_size]; }
  // The rows cu_seqlens_k's entries are clamped to (variants/sequence.h): k's, or none where k is
  // pages (its cu_seqlens_k gives lengths only; sequences may share pages).
  int64_t cu_rows_k() const { return paged() ? INT64_MAX : total_k; }
  // Rows along the sequence dimension of q (out, dout) and of k (v, dk, dv): every sequence's with
  // variable length, one sequence's otherwise.
  int64_t tensor_rows_q() const { return varlen() ? total_q : seqlen_q; }
  int64_t tensor_rows_k() const { return varlen() ? total_k : seqlen_k; }
  // k's (and v's) row and batch extents as a kernel addresses the tensor: a page's rows and the
  // pages where paged, else tensor_rows_k() and batch.
  int64_t kv_tensor_rows() const { return paged() ? page_size : tensor_rows_k(); }
  int kv_tensor_batches() const { return paged() ? num_pages : batch; }
  int heads_per_kv() const { return nheads_q / nheads_kv; }
};

}  // namespace flashattn

namespace flashattn {

// Rows of one sequence of the batch, for code that can read cu_seqlens and seqused directly (CPU memory).
struct SequenceSpan {
  int64_t q_row0 = 0, k_row0 = 0;  // first row in the tensors (varlen) or 0 (fixed)
  int64_t len_q = 0, len_k = 0;
  int64_t diag_offset() const { return len_k - len_q; }
};

inline SequenceSpan host_sequence(const AttentionProblem& p, int b) {
  return sequence_of<SequenceSpan>(p.cu_seqlens_q, p.cu_seqlens_k, p.seqused_q, p.seqused_k, p.seqlen_q, p.seqlen_k,
                                   p.total_q, p.cu_rows_k(), b);
}

// Element offset of row i (counted inside the sequence) of head h of batch b.
FA_HD int64_t element_offset(const Operand& op, int b, int64_t row0, int64_t i, int h) {
  return b * op.batch_stride + (row0 + i) * op.row_stride + h * op.head_stride;
}

inline int64_t lse_offset(const AttentionProblem& p, int b, int64_t row0, int64_t i, int h) {
  return b * p.lse_batch_stride + h * p.lse_head_stride + (row0 + i) * p.lse_row_stride;
}

inline float alibi_slope(const AttentionProblem& p, int b, int h) {
  return p.alibi_slopes ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.0f;
}

}  // namespace flashattn
