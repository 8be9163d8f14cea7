// A case's k and v (fixed or variable length) cut into pages (AttentionParams::block_table):
// the pages in a shuffled order among spare ones, so that a kernel that reads a page other than
// the table's, or rows past a sequence's used length, sees NaN.
#pragma once

#include <cstdint>

#include "common/attn_case.h"

namespace fa_test {

struct PagedKV {
  HostTensor k, v;         // (num_pages, page_size, nheads_kv, headdim), the case's dtype
  HostTensor block_table;  // int32 (batch, seqlen_k / page_size; varlen: the longest + 1)
  // Variable length: the case's cu_seqlens_k plus kCuSeqlensKOffset, which over pages give lengths
  // only, so the call must give what the case's unpaged call gives.
  HostTensor cu_seqlens_k;
  int page_size = 0;
  static constexpr int kCuSeqlensKOffset = 1000;
};

// Three sequences of 5 * page_size keys, GQA 8 / 2 heads, causal where seqlen_q > 1, NaN in the
// unused keys; with used_k, seqused_k {2.5 pages, 0, all but the last key}.
CaseSpec paged_spec(uint64_t seed, DType dtype, int headdim, int page_size, int seqlen_q, bool used_k);
// Variable length (cu_seqlens) over paged keys: 4 sequences, one empty, of up to 4 pages of keys
// and up to 5 query rows (a prefill chunk beside decode steps), GQA 8 / 2.
CaseSpec paged_varlen_spec(uint64_t seed, DType dtype, int headdim, int page_size, bool causal, bool used_k);

// c (fixed length, seqlen_k a multiple of page_size) as pages: the pages each sequence's used
// keys reach hold its rows (NaN past its used length), in a shuffled order among `spare_pages`
// pages of NaN; table entries past a sequence's last reached page are -1. table_pad > 0 spaces
// the table's rows that many entries further apart (a table sliced from a wider one), the gaps
// poisoned.
PagedKV paginate(const AttnCase& c, int page_size, int spare_pages, uint64_t seed, int64_t table_pad = 0);

// c's forward arguments and params with k and v read from `pages` (outputs as run_forward
// allocates them: poisoned), run on `backend`.
ForwardResult run_paged_forward(const AttnCase& c, const PagedKV& pages, Backend backend);

}  // namespace fa_test
