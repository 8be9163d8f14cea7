// Paged k / v (AttentionParams::block_table) as contiguous rows, for the backends that do not
// read pages themselves (the CPU ones): each sequence's keys copied page by page, in order.
#pragma once

#include <cstdint>
#include <vector>

#include "problem.h"

namespace flashattn {

// Host memory holding the copied keys and values; kept alive while the problem points into it.
struct PagedRows {
  std::vector<unsigned char> k, v;
  // Variable length: cu_seqlens_k less its first entry. Over pages the prefix sums give lengths
  // only, so an offset (a slice of a longer vector) must not size the copy.
  std::vector<int32_t> cu_seqlens_k;
};

// Copies the keys each sequence of p reaches (seqused_k[b], its cu_seqlens_k length, or every
// page) into rows (batch, longest reach, nheads_kv, headdim), or with variable length into the
// rows (cu_seqlens_k[batch] - cu_seqlens_k[0], nheads_kv, headdim) that unpaged varlen k would
// have (p's cu_seqlens_k then rows->cu_seqlens_k), points p's k and v at them and makes p
// unpaged (seqlen_k, which the masks align to without seqused_k, stays). p's memory must be the
// host's; rows past a sequence's length stay zero and are never read (the backends read
// seqused_k[b] rows).
void gather_pages(AttentionProblem* p, PagedRows* rows);

}  // namespace flashattn
