// The oracle: attention with the whole score row materialised and every sum in float64.
// Slow on purpose and written to be read: each step is the textbook formula.
#include <cmath>
#include <limits>
#include <vector>

#include "backends.h"
#include "cpu/convert.h"
#include "cpu/threads.h"

namespace flashattn {
namespace {

// Scores of query row i of (b, h) against every key of the sequence; masked keys get -inf.
void score_row(const AttentionProblem& p, int b, int h, const SequenceSpan& seq, int64_t i,
               std::vector<double>& s, std::vector<double>& capped) {
  const int hk = h / p.heads_per_kv();
  const float slope = alibi_slope(p, b, h);
  const int64_t q_off = element_offset(p.q, b, seq.q_row0, i, h);
  for (int64_t j = 0; j < seq.len_k; ++j) {
    if (!p.mask.visible(i, j, seq.diag_offset(), seq.len_k)) {
      s[j] = -std::numeric_limits<double>::infinity();
      continue;
    }
    const int64_t k_off = element_offset(p.k, b, seq.k_row0, j, hk);
    double dot = 0.0;
    for (int d = 0; d < p.headdim; ++d) {
      dot += static_cast<double>(load_as_float(p.q.data, q_off + d, p.dtype)) *
             static_cast<double>(load_as_float(p.k.data, k_off + d, p.dtype));
    }
    capped[j] = p.score.apply(dot);
    s[j] = capped[j] + static_cast<double>(alibi_bias(slope, i, j, seq.diag_offset()));
  }
}

// Softmax of a score row in place; returns the logsumexp (-inf when every key is masked).
double softmax_row(std::vector<double>& s, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
  if (m == -std::numeric_limits<double>::infinity()) {
    for (int64_t j = 0; j < n; ++j) s[j] = 0.0;
    return m;
  }
  double l = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    l += s[j];
  }
  for (int64_t j = 0; j < n; ++j) s[j] /= l;
  return m + std::log(l);
}

}  // namespace

Status cpu_reference_forward(const AttentionProblem& p) {
  const int64_t tasks = static_cast<int64_t>(p.batch) * p.nheads_q;
  parallel_for(tasks, p.num_threads, [&](int64_t task) {
    const int b = static_cast<int>(task / p.nheads_q);
    const int h = static_cast<int>(task % p.nheads_q);
    const int hk = h / p.heads_per_kv();
    const SequenceSpan seq = host_sequence(p, b);
    std::vector<double> s(seq.len_k), capped(seq.len_k), o(p.headdim);
    for (int64_t i = 0; i < seq.len_q; ++i) {
      score_row(p, b, h, seq, i, s, capped);
      const double lse = softmax_row(s, seq.len_k);
      std::fill(o.begin(), o.end(), 0.0);
      for (int64_t j = 0; j < seq.len_k; ++j) {
        if (s[j] == 0.0) continue;
        const int64_t v_off = element_offset(p.v, b, seq.k_row0, j, hk);
        for (int d = 0; d < p.headdim; ++d) o[d] += s[j] * load_as_float(p.v.data, v_off + d, p.dtype);
      }
      const int64_t o_off = element_offset(p.out, b, seq.q_row0, i, h);
      for (int d = 0; d < p.headdim; ++d) store_from_float(p.out.data, o_off + d, p.dtype, static_cast<float>(o[d]));
      if (p.lse) p.lse[lse_offset(p, b, seq.q_row0, i, h)] = static_cast<float>(lse);
    }
  });
  return Status::Ok();
}

// The exact gradient of the forward function: D is recomputed from P and dP rather than read
// from the given output, so the oracle does not inherit the forward's rounding.
Status cpu_reference_backward(const AttentionProblem& p) {
  const int64_t tasks = static_cast<int64_t>(p.batch) * p.nheads_kv;
  const int group = p.heads_per_kv();
  parallel_for(tasks, p.num_threads, [&](int64_t task) {
    const int b = static_cast<int>(task / p.nheads_kv);
    const int hk = static_cast<int>(task % p.nheads_kv);
    const SequenceSpan seq = host_sequence(p, b);
    const int D = p.headdim;
    std::vector<double> dk(seq.len_k * D, 0.0), dv(seq.len_k * D, 0.0);
    std::vector<double> s(seq.len_k), capped(seq.len_k), dp(seq.len_k), dq(D), dout(D);
    for (int h = hk * group; h < (hk + 1) * group; ++h) {
      for (int64_t i = 0; i < seq.len_q; ++i) {
        score_row(p, b, h, seq, i, s, capped);
        softmax_row(s, seq.len_k);
        const int64_t q_off = element_offset(p.q, b, seq.q_row0, i, h);
        const int64_t do_off = element_offset(p.dout, b, seq.q_row0, i, h);
        for (int d = 0; d < D; ++d) dout[d] = load_as_float(p.dout.data, do_off + d, p.dtype);
        double delta = 0.0;
        for (int64_t j = 0; j < seq.len_k; ++j) {
          dp[j] = 0.0;
          if (s[j] == 0.0) continue;
          const int64_t v_off = element_offset(p.v, b, seq.k_row0, j, hk);
          for (int d = 0; d < D; ++d) dp[j] += dout[d] * load_as_float(p.v.data, v_off + d, p.dtype);
          delta += s[j] * dp[j];
        }
        std::fill(dq.begin(), dq.end(), 0.0);
        for (int64_t j = 0; j < seq.len_k; ++j) {
          if (s[j] == 0.0) continue;
          const double ds = s[j] * (dp[j] - delta) * p.score.derivative_from_score(capped[j]);
          const int64_t k_off = element_offset(p.k, b, seq.k_row0, j, hk);
          for (int d = 0; d < D; ++d) {
            const double qd = load_as_float(p.q.data, q_off + d, p.dtype);
            dq[d] += ds * load_as_float(p.k.data, k_off + d, p.dtype);
            dk[j * D + d] += ds * qd;
            dv[j * D + d] += s[j] * dout[d];
          }
        }
        const int64_t dq_off = element_offset(p.dq, b, seq.q_row0, i, h);
        for (int d = 0; d < D; ++d) store_from_float(p.dq.data, dq_off + d, p.dtype, static_cast<float>(dq[d]));
      }
    }
    for (int64_t j = 0; j < seq.len_k; ++j) {
      const int64_t dk_off = element_offset(p.dk, b, seq.k_row0, j, hk);
      const int64_t dv_off = element_offset(p.dv, b, seq.k_row0, j, hk);
      for (int d = 0; d < D; ++d) {
        store_from_float(p.dk.data, dk_off + d, p.dtype, static_cast<float>(dk[j * D + d]));
        store_from_float(p.dv.data, dv_off + d, p.dtype, static_cast<float>(dv[j * D + d]));
      }
    }
  });
  return Status::Ok();
}

}  // namespace flashattn
