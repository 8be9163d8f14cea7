// A GQA / MQA decode step's query heads of one KV head seen as that head's query rows.
//
// With one query row a sequence, the G = nheads_q / nheads_kv query heads that share KV head hk
// all attend to the same keys with the same (absent) mask. Written as G query rows of one head,
// a kernel that gives each head its own thread blocks (the sm80 kernel) reads that KV head's K
// and V once instead of G times. Only strides change: query head hk * G + g becomes row g of head
// hk, so no data moves and out and lse land where they would have.
//
// It holds where every row sees the same keys: one query row (seqused_q absent), fixed length,
// no left window (a right bound, causal included, leaves one row all its keys), no ALiBi (its
// slopes are per query head, and its bias would follow the new rows' positions).
#pragma once

#include "problem.h"

namespace flashattn {

inline bool decode_heads_as_rows_apply(const AttentionProblem& p) {
  return p.seqlen_q == 1 && !p.varlen() && p.seqused_q == nullptr && p.nheads_kv > 0 &&
         p.nheads_q > p.nheads_kv && p.nheads_q % p.nheads_kv == 0 && p.mask.window_left < 0 &&
         p.alibi_slopes == nullptr;
}

// The forward problem with the heads as rows; p itself where decode_heads_as_rows_apply is false.
inline AttentionProblem decode_heads_as_rows(const AttentionProblem& p) {
  if (!decode_heads_as_rows_apply(p)) return p;
  const int group = p.heads_per_kv();
  AttentionProblem r = p;
  r.nheads_q = p.nheads_kv;
  r.seqlen_q = group;
  r.total_q = static_cast<int64_t>(p.batch) * group;
  // One row saw every key up to its sequence's length under any right bound; as G rows a bound
  // would shift with the row, so none.
  r.mask = MaskPolicy{};
  for (Operand* op : {&r.q, &r.out}) {
    op->row_stride = op->head_stride;
    op->head_stride *= group;
  }
  r.lse_row_stride = p.lse_head_stride;
  r.lse_head_stride = p.lse_head_stride * group;
  return r;
}

}  // namespace flashattn
