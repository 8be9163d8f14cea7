#include "paged_rows.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace flashattn {
namespace {

// Keys sequence b reaches: seqused_k[b], else its cu_seqlens_k length, else every row of its pages.
int64_t used_keys(const AttentionProblem& p, int b) {
  if (p.seqused_k != nullptr) return p.seqused_k[b];
  return p.varlen() ? int64_t{p.cu_seqlens_k[b + 1]} - p.cu_seqlens_k[b] : p.seqlen_k;
}

// Rows a sequence is given in the copy (fixed length): the longest reach, not the table's width
// (a serving pool's table may reach far past every sequence). Variable length: none of its own;
// sequence b's rows start at cu_seqlens_k[b], as unpaged varlen k's do.
int64_t copied_rows(const AttentionProblem& p) {
  int64_t rows = 0;
  for (int b = 0; b < p.batch; ++b) rows = std::max(rows, used_keys(p, b));
  return rows;
}

// The copy's first row of sequence b, and its rows in all (variable length: from the first
// sequence's, whatever cu_seqlens_k[0] is).
int64_t first_row(const AttentionProblem& p, int b, int64_t sequence_rows) {
  return p.varlen() ? int64_t{p.cu_seqlens_k[b]} - p.cu_seqlens_k[0] : b * sequence_rows;
}
int64_t total_rows(const AttentionProblem& p, int64_t sequence_rows) {
  return p.varlen() ? int64_t{p.cu_seqlens_k[p.batch]} - p.cu_seqlens_k[0] : p.batch * sequence_rows;
}

void gather_operand(const AttentionProblem& p, const Operand& pages, std::vector<unsigned char>* rows, Operand* out) {
  const size_t element = static_cast<size_t>(dtype_size(p.dtype));
  const int64_t row_elements = static_cast<int64_t>(p.nheads_kv) * p.headdim;
  const int64_t sequence_rows = copied_rows(p);
  rows->assign(static_cast<size_t>(total_rows(p, sequence_rows) * row_elements) * element, 0);
  const auto* source = static_cast<const unsigned char*>(pages.data);
  // A page whose rows lie back to back (every head's head dim, rows one after another: the usual
  // cache layout) is one copy; others go head row by head row (one copy a key and head was ~10x
  // the attention's own time at 8192 keys, session 77).
  const bool dense_rows = pages.head_stride == p.headdim && pages.row_stride == row_elements;
  for (int b = 0; b < p.batch; ++b) {
    const int64_t keys = used_keys(p, b);
    for (int64_t j0 = 0; j0 < keys; j0 += p.page_size) {
      const int64_t page = p.page_of(b, j0);
      const int64_t page_rows = std::min<int64_t>(p.page_size, keys - j0);
      unsigned char* to = rows->data() + (first_row(p, b, sequence_rows) + j0) * row_elements * element;
      const unsigned char* from = source + page * pages.batch_stride * element;
      if (dense_rows) {
        std::memcpy(to, from, static_cast<size_t>(page_rows * row_elements) * element);
        continue;
      }
      for (int64_t r = 0; r < page_rows; ++r) {
        for (int h = 0; h < p.nheads_kv; ++h) {
          std::memcpy(to + (r * row_elements + h * p.headdim) * element,
                      from + (r * pages.row_stride + h * pages.head_stride) * element, p.headdim * element);
        }
      }
    }
  }
  out->data = rows->data();
  out->batch_stride = p.varlen() ? 0 : sequence_rows * row_elements;
  out->row_stride = row_elements;
  out->head_stride = p.headdim;
}

}  // namespace

void gather_pages(AttentionProblem* p, PagedRows* rows) {
  gather_operand(*p, p->k, &rows->k, &p->k);
  gather_operand(*p, p->v, &rows->v, &p->v);
  p->total_k = total_rows(*p, copied_rows(*p));
  if (p->varlen()) {
    rows->cu_seqlens_k.resize(static_cast<size_t>(p->batch) + 1);
    for (int b = 0; b <= p->batch; ++b) rows->cu_seqlens_k[static_cast<size_t>(b)] = p->cu_seqlens_k[b] - p->cu_seqlens_k[0];
    p->cu_seqlens_k = rows->cu_seqlens_k.data();
  }
  p->block_table = nullptr;
  p->block_table_batch_stride = 0;
  p->page_size = 0;
  p->num_pages = 0;
  p->pages_per_sequence = 0;
}

}  // namespace flashattn
