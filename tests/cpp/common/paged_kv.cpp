#include "common/paged_kv.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace fa_test {

CaseSpec paged_varlen_spec(uint64_t seed, DType dtype, int headdim, int page_size, bool causal, bool used_k) {
  CaseSpec s;
  s.seed = seed;
  s.dtype = dtype;
  s.seqlens_q = {3, 0, 5, 1};
  s.seqlens_k = {2 * page_size + page_size / 2, 0, 4 * page_size - 1, 1};
  s.nheads_q = 8;
  s.nheads_kv = 2;
  s.headdim = headdim;
  s.causal = causal;
  s.nan_in_unused_kv = true;
  if (used_k) s.seqused_k = {page_size + page_size / 2, 0, 3 * page_size, 1};
  return s;
}

CaseSpec paged_spec(uint64_t seed, DType dtype, int headdim, int page_size, int seqlen_q, bool used_k) {
  CaseSpec s;
  s.seed = seed;
  s.dtype = dtype;
  s.batch = 3;
  s.seqlen_q = seqlen_q;
  s.seqlen_k = 5 * page_size;
  s.nheads_q = 8;
  s.nheads_kv = 2;
  s.headdim = headdim;
  s.causal = seqlen_q > 1;
  s.nan_in_unused_kv = true;
  if (used_k) s.seqused_k = {2 * page_size + page_size / 2, 0, 5 * page_size - 1};
  return s;
}

PagedKV paginate(const AttnCase& c, int page_size, int spare_pages, uint64_t seed, int64_t table_pad) {
  const CaseSpec& s = c.spec;
  const int batch = s.batch_size();
  // Fixed length: the table reaches seqlen_k. Variable length: the longest sequence, and one
  // entry more (-1: past every sequence's keys).
  int pages_per_sequence = s.seqlen_k / page_size;
  if (s.varlen()) {
    int longest = 0;
    for (int b = 0; b < batch; ++b) longest = std::max(longest, s.span_k(b));
    pages_per_sequence = (longest + page_size - 1) / page_size + 1;
  }
  std::vector<int> reached(static_cast<size_t>(batch));
  int used_pages = 0;
  for (int b = 0; b < batch; ++b) {
    reached[static_cast<size_t>(b)] = (s.len_k(b) + page_size - 1) / page_size;
    used_pages += reached[static_cast<size_t>(b)];
  }
  const int num_pages = used_pages + spare_pages;
  std::vector<int> order(static_cast<size_t>(num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);

  PagedKV p;
  p.page_size = page_size;
  // With the case's pad the pages' rows and heads lie apart (not one block a page).
  p.k = HostTensor(s.dtype, {num_pages, page_size, s.nheads_kv, s.headdim}, s.pad);
  p.v = HostTensor(s.dtype, {num_pages, page_size, s.nheads_kv, s.headdim}, s.pad);
  p.k.poison();
  p.v.poison();
  p.block_table = HostTensor(DType::kInt32, {batch, pages_per_sequence}, table_pad);
  p.block_table.poison();
  const int64_t row = static_cast<int64_t>(s.nheads_kv) * s.headdim;
  int next = 0;
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j < pages_per_sequence; ++j) {
      const bool used = j < reached[static_cast<size_t>(b)];
      const int page = used ? order[static_cast<size_t>(next++)] : -1;
      p.block_table.set(static_cast<int64_t>(b) * pages_per_sequence + j, static_cast<float>(page));
      if (!used) continue;
      for (int r = 0; r < page_size && j * page_size + r < s.len_k(b); ++r) {
        for (int h = 0; h < s.nheads_kv; ++h) {
          for (int d = 0; d < s.headdim; ++d) {
            const int64_t to = (static_cast<int64_t>(page) * page_size + r) * row + h * s.headdim + d;
            p.k.set(to, c.k.get(c.k_index(b, j * page_size + r, h, d)));
            p.v.set(to, c.v.get(c.k_index(b, j * page_size + r, h, d)));
          }
        }
      }
    }
  }
  if (s.varlen()) {
    p.cu_seqlens_k = HostTensor(DType::kInt32, {batch + 1});
    for (int b = 0; b <= batch; ++b) p.cu_seqlens_k.set(b, c.cu_seqlens_k.get(b) + PagedKV::kCuSeqlensKOffset);
  }
  return p;
}

ForwardResult run_paged_forward(const AttnCase& c, const PagedKV& pages, Backend backend) {
  ForwardResult r;
  r.out = HostTensor(c.spec.dtype, c.out_shape());
  r.lse = HostTensor(DType::kFloat32, c.lse_shape());
  r.out.poison();
  r.lse.poison();
  flashattn::ForwardArgs args;
  args.q = c.q.view();
  args.k = pages.k.view();
  args.v = pages.v.view();
  args.out = r.out.view();
  args.lse = r.lse.view();
  AttentionParams params = c.params(backend);
  params.block_table = pages.block_table.view();
  if (pages.cu_seqlens_k.defined()) params.cu_seqlens_k = pages.cu_seqlens_k.view();
  r.status = flashattn::forward(args, params);
  return r;
}

}  // namespace fa_test
