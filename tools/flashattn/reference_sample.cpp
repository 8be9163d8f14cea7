#include "reference_sample.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "error_metrics.h"

namespace flashattn {
namespace cli {
namespace {

// rows x heads x d (row-major, as one batch of the (b, s, h, d) layout) -> rows x picked x d.
std::vector<float> pick_heads(const std::vector<float>& src, int64_t rows, int heads, int d,
                              const std::vector<int>& picked) {
  std::vector<float> out(static_cast<size_t>(rows) * picked.size() * d);
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < picked.size(); ++i) {
      std::copy_n(&src[(r * heads + picked[i]) * d], d, &out[(r * picked.size() + i) * d]);
    }
  }
  return out;
}

// Rows [r0, r0 + rows) of batch 0 of a (b, s, h, d) tensor, restricted to `picked` heads.
std::vector<float> sample_rows(const Tensor& t, int64_t r0, int64_t rows, const std::vector<int>& picked) {
  const int heads = static_cast<int>(t.shape()[2]);
  const int d = static_cast<int>(t.shape()[3]);
  return pick_heads(t.get_range(r0 * heads * d, rows * heads * d), rows, heads, d, picked);
}

TensorView host_view(std::vector<float>& data, int64_t rows, int64_t heads, int64_t d) {
  return make_tensor(data.data(), DType::kFloat32, {1, rows, heads, d});
}

void require(const Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(std::string("reference ") + what + " on the sample failed: " + s.message);
}

}  // namespace

SampleError reference_sample_error(const Workload& w, bool backward, int rows_per_block) {
  const BenchShape& s = w.shape();
  const int64_t n = s.seqlen, d = s.headdim;
  const int64_t rows = std::min<int64_t>(rows_per_block, n);
  std::vector<int> q_heads = {0};
  if (s.heads_q > 1) q_heads.push_back(s.heads_q - 1);
  std::vector<int> kv_heads;
  for (int h : q_heads) kv_heads.push_back(h / (s.heads_q / s.heads_kv));
  const auto nh = static_cast<int64_t>(q_heads.size());

  std::vector<int64_t> starts = {0};
  if (n - rows > 0) starts.push_back(n - rows);

  AttentionParams params;
  params.causal = s.causal;
  params.backend = Backend::kCPUReference;
  RelativeL2 out_error, dq_error;
  for (int64_t r0 : starts) {
    const int64_t keys = s.causal ? r0 + rows : n;
    std::vector<float> q = sample_rows(w.q, r0, rows, q_heads);
    std::vector<float> k = sample_rows(w.k, 0, keys, kv_heads);
    std::vector<float> v = sample_rows(w.v, 0, keys, kv_heads);
    std::vector<float> ref_out(q.size()), ref_lse(static_cast<size_t>(nh * rows));
    ForwardArgs fa;
    fa.q = host_view(q, rows, nh, d);
    fa.k = host_view(k, keys, nh, d);
    fa.v = host_view(v, keys, nh, d);
    fa.out = host_view(ref_out, rows, nh, d);
    fa.lse = make_tensor(ref_lse.data(), DType::kFloat32, {1, nh, rows});
    require(forward(fa, params), "forward");
    out_error.add(sample_rows(w.out, r0, rows, q_heads), ref_out);
    if (!backward) continue;

    std::vector<float> dout = sample_rows(w.dout, r0, rows, q_heads);
    std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
    BackwardArgs ba;
    ba.q = fa.q;
    ba.k = fa.k;
    ba.v = fa.v;
    ba.out = fa.out;
    ba.lse = fa.lse;
    ba.dout = host_view(dout, rows, nh, d);
    ba.dq = host_view(dq, rows, nh, d);
    ba.dk = host_view(dk, keys, nh, d);
    ba.dv = host_view(dv, keys, nh, d);
    require(flashattn::backward(ba, params), "backward");
    dq_error.add(sample_rows(w.dq, r0, rows, q_heads), dq);
  }
  return {out_error.value(), backward ? dq_error.value() : 0.0};
}

}  // namespace cli
}  // namespace flashattn
