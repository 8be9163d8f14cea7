// Where sequence b of a batch lives and how long it is: the one definition every backend uses
// (CPU host_sequence, the sm80 kernels' device_sequence, the sm90 kernel's sequence_info), so that
// cu_seqlens and seqused mean the same everywhere. Each caller picks its own span type (64-bit
// rows on the CPU and in sm80, 32-bit in sm90's registers); the type needs q_row0, k_row0,
// len_q and len_k.
#pragma once

#include <cstdint>

#include "variants/variant.h"

namespace flashattn {

// cu_seqlens (null for fixed length) and seqused (null when not given) are pointers the caller
// can read: host memory for the CPU, device memory in a kernel. seqused replaces the length the
// span gives; the first row stays where cu_seqlens puts it.
template <class Span>
FA_HD Span sequence_of(const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k, const int32_t* seqused_q,
                       const int32_t* seqused_k, int seqlen_q, int seqlen_k, int b) {
  Span s;
  if (cu_seqlens_q != nullptr) {
    s.q_row0 = cu_seqlens_q[b];
    s.k_row0 = cu_seqlens_k[b];
    s.len_q = cu_seqlens_q[b + 1] - s.q_row0;
    s.len_k = cu_seqlens_k[b + 1] - s.k_row0;
  } else {
    s.len_q = seqlen_q;
    s.len_k = seqlen_k;
  }
  if (seqused_q != nullptr) s.len_q = seqused_q[b];
  if (seqused_k != nullptr) s.len_k = seqused_k[b];
  return s;
}

}  // namespace flashattn
