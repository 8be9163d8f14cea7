// Where sequence b of a batch lives and how long it is: the one definition every backend uses
// (CPU host_sequence, the sm80 kernels' device_sequence, the sm90 kernel's sequence_info), so that
// cu_seqlens and seqused mean the same everywhere. Each caller picks its own span type (64-bit
// rows on the CPU and in sm80, 32-bit in sm90's registers); the type needs q_row0, k_row0,
// len_q and len_k.
#pragma once

#include <cstdint>

#include "variants/variant.h"

namespace flashattn {

// x within [lo, hi] (lo <= hi).
FA_HD int64_t clamp_entry(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

// cu_seqlens (null for fixed length) and seqused (null when not given) are pointers the caller
// can read: host memory for the CPU, device memory in a kernel. seqused replaces the length the
// span gives; the first row stays where cu_seqlens puts it. rows_q / rows_k: the rows of varlen
// q / k (a paged k's cu_seqlens_k gives lengths only, not rows: pass INT64_MAX there).
//
// Entries are clamped, not trusted: a span's rows to [0, rows], its length to the longest
// (seqlen_q / seqlen_k, which size the grid and the key pieces), seqused to [0, the span]. The
// host checks every entry it can read and refuses a bad one by name, so there the clamps change
// nothing; under CUDA graph capture and with AttentionParams::indices_checked it reads none, and
// an entry out of range then acts as its nearest bound instead of moving a kernel's reads and
// writes outside the tensors.
template <class Span>
FA_HD Span sequence_of(const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k, const int32_t* seqused_q,
                       const int32_t* seqused_k, int seqlen_q, int seqlen_k, int64_t rows_q, int64_t rows_k,
                       int b) {
  Span s;
  if (cu_seqlens_q != nullptr) {
    const int64_t q0 = clamp_entry(cu_seqlens_q[b], 0, rows_q), k0 = clamp_entry(cu_seqlens_k[b], 0, rows_k);
    s.q_row0 = static_cast<decltype(s.q_row0)>(q0);
    s.k_row0 = static_cast<decltype(s.k_row0)>(k0);
    s.len_q = static_cast<decltype(s.len_q)>(clamp_entry(clamp_entry(cu_seqlens_q[b + 1], q0, rows_q) - q0, 0, seqlen_q));
    s.len_k = static_cast<decltype(s.len_k)>(clamp_entry(clamp_entry(cu_seqlens_k[b + 1], k0, rows_k) - k0, 0, seqlen_k));
  } else {
    s.len_q = seqlen_q;
    s.len_k = seqlen_k;
  }
  if (seqused_q != nullptr) s.len_q = static_cast<decltype(s.len_q)>(clamp_entry(seqused_q[b], 0, s.len_q));
  if (seqused_k != nullptr) s.len_k = static_cast<decltype(s.len_k)>(clamp_entry(seqused_k[b], 0, s.len_k));
  return s;
}

}  // namespace flashattn
