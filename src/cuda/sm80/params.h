// What the sm80 kernels receive: the normalised problem reduced to plain values a kernel can take
// by value (no host-only members).
#pragma once

#include <cstdint>

#include "problem.h"

namespace flashattn::sm80 {

struct KernelParams {
  Operand q, k, v, out;
  Operand dout, dq, dk, dv;  // backward only
  float* lse = nullptr;      // may be null in forward
  int64_t lse_batch_stride = 0, lse_head_stride = 0, lse_row_stride = 0;
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqused_q = nullptr;  // null when not given
  const int32_t* seqused_k = nullptr;
  int batch = 0, seqlen_q = 0, seqlen_k = 0;
  int nheads_q = 0, nheads_kv = 0, heads_per_kv = 1;
  int headdim = 0;        // the problem's; the kernel's tile width may be larger (zero padded)
  int headdim_chunks = 0; // headdim / 8: 16-byte chunks per row that hold data
  int64_t total_q = 0;
  int64_t cu_rows_k = 0;  // AttentionProblem::cu_rows_k: what cu_seqlens_k's entries are clamped to
  ScoreTransform score;
  MaskPolicy mask;
  float scale_log2 = 0.0f;  // softmax scale * log2(e)
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;
  // Softcap, ALiBi or a non-positive scale: scores go through the element-wise path every tile.
  bool score_mod = false;
  // Paged k / v (forward only, problem.h): k's and v's batch_stride is then the page stride, and a
  // key tile (inside one page: page_size is a multiple of the tile's width) starts at row
  // n % page_size of page block_table[b * block_table_batch_stride + n / page_size].
  const int32_t* block_table = nullptr;
  int64_t block_table_batch_stride = 0;
  int page_size = 0;
  int num_pages = 0;  // table entries are clamped to [0, num_pages) (variants/sequence.h says why)

  // Key splits (split_combine.cuh): the key blocks of each query tile cut into num_splits
  // pieces, each run by a thread block of its own that writes its normalised O and its lse in
  // float32 to o_pieces (num_splits, nheads_q, workspace rows, headdim) and lse_pieces
  // (num_splits, nheads_q, workspace rows); the combine kernel merges them into out and lse.
  // num_splits 1: no pieces, the block writes out and lse itself.
  int num_splits = 1;
  float* o_pieces = nullptr;
  float* lse_pieces = nullptr;
  int64_t workspace_rows = 0;  // batch * seqlen_q, or total_q (varlen)

  // Backward workspace (fp32): dq_accum (nheads_q, total_q, headdim), dsum (nheads_q, total_q),
  // and for deterministic runs one counter per (batch, head, query tile).
  float* dq_accum = nullptr;
  float* dsum = nullptr;
  int* dq_semaphore = nullptr;
  int num_m_blocks = 0;
  bool deterministic = false;
  // Backward grid order, set by the launch: (key tiles, KV heads, batch) with the key tile
  // fastest, or with key_tile_major (KV heads, batch, key tiles) with the key tile slowest.
  bool key_tile_major = false;
  // dQ workspace layout, set by the launch from the main kernel's BackwardConfig::kBlockedDq:
  // 8-row bands inside the sequence in 8 x 8 blocks of 64 consecutive floats, else row-major.
  bool dq_blocked = false;
  // Row-major dQ workspace with each row's 8-float chunks rotated: chunk c of workspace row r
  // (in the (nheads, total_q) numbering) stored at chunk c ^ (r % 4); set by sm80_backward_around
  // for a main kernel that writes it so (the sm90 backward's bank-conflict-free staging).
  bool dq_chunks_rotated = false;
};

KernelParams make_params(const AttentionProblem& p);

// Index of row i of sequence b in the (nheads, total_q) workspaces.
inline __host__ __device__ int64_t workspace_row(const KernelParams& p, int64_t q_row0, int b, int64_t i) {
  return p.cu_seqlens_q != nullptr ? q_row0 + i : static_cast<int64_t>(b) * p.seqlen_q + i;
}

}  // namespace flashattn::sm80
