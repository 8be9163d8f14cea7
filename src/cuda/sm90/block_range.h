// Where a query tile lives and which key blocks it must visit, from the mask policy of
// include/flashattn/flashattn.h (bottom-right aligned diagonal, window sides -1 = unbounded).
#pragma once

#include "cuda/sm90/config.h"
#include "cuda/sm90/params.h"
#include "variants/sequence.h"

namespace flashattn {
namespace sm90 {

struct SequenceInfo {
  int q_row0 = 0, k_row0 = 0;  // first row in the packed tensors (varlen), else 0
  int len_q = 0, len_k = 0;
  __device__ __forceinline__ int diag() const { return len_k - len_q; }
};

__device__ __forceinline__ SequenceInfo sequence_info(const KernelParams& p, int batch) {
  return sequence_of<SequenceInfo>(p.cu_seqlens_q, p.cu_seqlens_k, p.seqused_q, p.seqused_k, p.seqlen_q, p.seqlen_k,
                                   p.cu_rows_q, p.cu_rows_k, batch);
}

// Key blocks [n_begin, n_end) that hold at least one key visible from some row of the tile.
template <int kBlockN>
struct BlockRange {
  int n_begin = 0, n_end = 0;
  __device__ __forceinline__ bool empty() const { return n_end <= n_begin; }
  // Only key blocks [lo, hi) too (a piece of the split tail, split_tail.h).
  __device__ __forceinline__ void keep_within(int lo, int hi) {
    n_begin = max(n_begin, lo);
    n_end = min(n_end, hi);
  }
};

// Keys [lo, hi) that some query row in [m_first, m_last] sees (one row: m_first = m_last).
__device__ __forceinline__ void visible_key_span(const KernelParams& p, const SequenceInfo& s, int m_first, int m_last,
                                                 int& lo, int& hi) {
  hi = s.len_k;
  if (p.window_right >= 0) hi = min(hi, m_last + s.diag() + p.window_right + 1);
  lo = 0;
  if (p.window_left >= 0) lo = max(0, m_first + s.diag() - p.window_left);
}

// Key blocks that some query row of the tile sees, and whether block n needs the per-element
// mask; the tile holds query rows [m_first, m_first + rows): kBlockM rows of tile m_block, or
// kBlockM / G rows with GQA packing (pack_gqa.h).
template <int kBlockN>
__device__ __forceinline__ BlockRange<kBlockN> key_block_range_rows(const KernelParams& p, const SequenceInfo& s,
                                                                    int m_first, int rows) {
  int lo, hi;
  visible_key_span(p, s, m_first, min(m_first + rows, s.len_q) - 1, lo, hi);
  BlockRange<kBlockN> r;
  r.n_begin = lo / kBlockN;
  r.n_end = hi <= lo ? r.n_begin : (hi + kBlockN - 1) / kBlockN;
  return r;
}

template <int kBlockN>
__device__ __forceinline__ bool block_needs_mask_rows(const KernelParams& p, const SequenceInfo& s, int m_first,
                                                      int rows, int n_block) {
  const int n_first = n_block * kBlockN, n_last = n_first + kBlockN - 1;
  const int m_last = m_first + rows - 1;
  if (n_last >= s.len_k) return true;
  if (p.window_right >= 0 && n_last > m_first + s.diag() + p.window_right) return true;
  if (p.window_left >= 0 && n_first < m_last + s.diag() - p.window_left) return true;
  return false;
}

template <int kBlockN, int kBlockM>
__device__ __forceinline__ BlockRange<kBlockN> key_block_range(const KernelParams& p, const SequenceInfo& s,
                                                               int m_block) {
  return key_block_range_rows<kBlockN>(p, s, m_block * kBlockM, kBlockM);
}

// True when some key of block n is invisible from some row of the tile: only those blocks pay
// for the per-element mask.
template <int kBlockN, int kBlockM>
__device__ __forceinline__ bool block_needs_mask(const KernelParams& p, const SequenceInfo& s, int m_block,
                                                 int n_block) {
  return block_needs_mask_rows<kBlockN>(p, s, m_block * kBlockM, kBlockM, n_block);
}

}  // namespace sm90
}  // namespace flashattn
