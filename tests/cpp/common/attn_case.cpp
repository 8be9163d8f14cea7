#include "common/attn_case.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <sstream>

namespace fa_test {
namespace {

using flashattn::BackwardArgs;
using flashattn::ForwardArgs;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void fill_normal(HostTensor& t, std::mt19937_64& rng, float stddev) {
  std::normal_distribution<float> normal(0.0f, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, normal(rng));
}

std::vector<int32_t> prefix_sums(const std::vector<int>& lens) {
  std::vector<int32_t> cu(lens.size() + 1, 0);
  for (size_t b = 0; b < lens.size(); ++b) cu[b + 1] = cu[b] + lens[b];
  return cu;
}

std::string list_str(const std::vector<int>& v) {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "}";
  return os.str();
}

}  // namespace

std::string CaseSpec::describe() const {
  std::ostringstream os;
  os << "seed=" << seed << " dtype=" << dtype_str(dtype);
  if (varlen()) {
    os << " varlen seqlens_q=" << list_str(seqlens_q) << " seqlens_k=" << list_str(seqlens_k)
       << " extra_rows=" << extra_rows << " extra_rows_q=" << extra_rows_q;
  } else {
    os << " batch=" << batch << " seqlen_q=" << seqlen_q << " seqlen_k=" << seqlen_k;
  }
  if (!seqused_q.empty()) os << " seqused_q=" << list_str(seqused_q);
  if (!seqused_k.empty()) os << " seqused_k=" << list_str(seqused_k);
  if (nan_in_unused_kv) os << " nan_in_unused_kv";
  os << " nheads_q=" << nheads_q << " nheads_kv=" << nheads_kv << " headdim=" << headdim
     << " scale=" << softmax_scale << " causal=" << causal << " window=(" << window_left << "," << window_right
     << ") softcap=" << softcap << " alibi=" << static_cast<int>(alibi) << " pad=" << pad
     << " std(q,k,v,do)=(" << q_std << "," << k_std << "," << v_std << "," << dout_std << ")";
  if (num_splits != 0) os << " num_splits=" << num_splits;
  return os.str();
}

CaseSpec sized_spec(uint64_t seed, DType dtype, int batch, int seqlen_q, int seqlen_k, int nheads_q, int nheads_kv,
                    int headdim) {
  CaseSpec s;
  s.seed = seed;
  s.dtype = dtype;
  s.batch = batch;
  s.seqlen_q = seqlen_q, s.seqlen_k = seqlen_k;
  s.nheads_q = nheads_q, s.nheads_kv = nheads_kv, s.headdim = headdim;
  return s;
}

float AttnCase::scale() const {
  return spec.softmax_scale != 0.0f ? spec.softmax_scale : 1.0f / std::sqrt(static_cast<float>(spec.headdim));
}

AttentionParams AttnCase::params(Backend backend) const {
  AttentionParams p;
  p.softmax_scale = spec.softmax_scale;
  p.causal = spec.causal;
  p.window_left = spec.window_left;
  p.window_right = spec.window_right;
  p.softcap = spec.softcap;
  if (alibi_slopes.defined()) p.alibi_slopes = alibi_slopes.view();
  if (spec.varlen()) {
    p.cu_seqlens_q = cu_seqlens_q.view();
    p.cu_seqlens_k = cu_seqlens_k.view();
    p.max_seqlen_q = *std::max_element(spec.seqlens_q.begin(), spec.seqlens_q.end());
    p.max_seqlen_k = *std::max_element(spec.seqlens_k.begin(), spec.seqlens_k.end());
  }
  if (seqused_q.defined()) p.seqused_q = seqused_q.view();
  if (seqused_k.defined()) p.seqused_k = seqused_k.view();
  p.deterministic = spec.deterministic;
  p.backend = backend;
  p.num_threads = spec.num_threads;
  p.num_splits = spec.num_splits;
  return p;
}

std::vector<int64_t> AttnCase::lse_shape() const {
  if (spec.varlen()) return {spec.nheads_q, q.size(0)};
  return {spec.batch, spec.nheads_q, spec.seqlen_q};
}

int64_t AttnCase::lse_index(int b, int h, int64_t i) const {
  if (spec.varlen()) return h * q.size(0) + cu_q[static_cast<size_t>(b)] + i;
  return (static_cast<int64_t>(b) * spec.nheads_q + h) * spec.seqlen_q + i;
}

int64_t AttnCase::q_index(int b, int64_t i, int h, int d) const {
  return ((cu_q[static_cast<size_t>(b)] + i) * spec.nheads_q + h) * spec.headdim + d;
}

int64_t AttnCase::k_index(int b, int64_t j, int hk, int d) const {
  return ((cu_k[static_cast<size_t>(b)] + j) * spec.nheads_kv + hk) * spec.headdim + d;
}

HostTensor AttnCase::used_part(const HostTensor& t, Role role) const {
  HostTensor part = t;
  if (spec.varlen()) {
    std::vector<int64_t> shape = t.shape(), strides;
    for (int d = 0; d < t.ndim(); ++d) strides.push_back(t.stride(d));
    if (role == Role::kLse) {
      shape[1] = cu_q.back();
    } else {
      shape[0] = role == Role::kQ ? cu_q.back() : cu_k.back();
    }
    part = HostTensor::alias(t, 0, shape, strides);
  }
  if (!spec.has_seqused()) return part;
  HostTensor copy = part.converted(part.dtype());
  for_each_unused(role, true, [&](int64_t linear) { copy.set(linear, 0.0f); });
  return copy;
}

int64_t AttnCase::written_unused(const HostTensor& t, Role role) const {
  int64_t written = 0;
  for_each_unused(role, false, [&](int64_t linear) { written += std::isnan(t.get(linear)) ? 0 : 1; });
  return written;
}

void AttnCase::for_each_unused(Role role, bool in_used_part, const std::function<void(int64_t)>& f) const {
  // Only the varlen lse changes its linear indices in used_part (its row extent shrinks).
  const int64_t varlen_lse_rows = in_used_part ? cu_q.back() : q.size(0);
  const bool keys = role == Role::kK;
  const int heads = keys ? spec.nheads_kv : spec.nheads_q, D = spec.headdim;
  for (int b = 0; b < spec.batch_size(); ++b) {
    const int used = keys ? spec.len_k(b) : spec.len_q(b), span = keys ? spec.span_k(b) : spec.span_q(b);
    for (int64_t i = used; i < span; ++i) {
      for (int h = 0; h < heads; ++h) {
        if (role == Role::kLse) {
          f(spec.varlen() ? h * varlen_lse_rows + cu_q[static_cast<size_t>(b)] + i : lse_index(b, h, i));
          continue;
        }
        for (int d = 0; d < D; ++d) f(keys ? k_index(b, i, h, d) : q_index(b, i, h, d));
      }
    }
  }
}

AttnCase make_case(const CaseSpec& spec) {
  AttnCase c;
  c.spec = spec;
  std::mt19937_64 rng(spec.seed);
  const int B = spec.batch_size();
  if (spec.varlen()) {
    c.cu_q = prefix_sums(spec.seqlens_q);
    c.cu_k = prefix_sums(spec.seqlens_k);
    c.cu_seqlens_q = int32_tensor(c.cu_q);
    c.cu_seqlens_k = int32_tensor(c.cu_k);
    const int64_t tq = c.cu_q.back() + spec.extra_rows + spec.extra_rows_q, tk = c.cu_k.back() + spec.extra_rows;
    c.q = HostTensor(spec.dtype, {tq, spec.nheads_q, spec.headdim}, spec.pad);
    c.k = HostTensor(spec.dtype, {tk, spec.nheads_kv, spec.headdim}, spec.pad);
    c.v = HostTensor(spec.dtype, {tk, spec.nheads_kv, spec.headdim}, spec.pad);
    c.dout = HostTensor(spec.dtype, {tq, spec.nheads_q, spec.headdim}, spec.pad);
  } else {
    for (int b = 0; b <= B; ++b) {
      c.cu_q.push_back(b * spec.seqlen_q);
      c.cu_k.push_back(b * spec.seqlen_k);
    }
    c.q = HostTensor(spec.dtype, {B, spec.seqlen_q, spec.nheads_q, spec.headdim}, spec.pad);
    c.k = HostTensor(spec.dtype, {B, spec.seqlen_k, spec.nheads_kv, spec.headdim}, spec.pad);
    c.v = HostTensor(spec.dtype, {B, spec.seqlen_k, spec.nheads_kv, spec.headdim}, spec.pad);
    c.dout = HostTensor(spec.dtype, {B, spec.seqlen_q, spec.nheads_q, spec.headdim}, spec.pad);
  }
  if (!spec.seqused_q.empty()) c.seqused_q = int32_tensor(std::vector<int32_t>(spec.seqused_q.begin(), spec.seqused_q.end()));
  if (!spec.seqused_k.empty()) c.seqused_k = int32_tensor(std::vector<int32_t>(spec.seqused_k.begin(), spec.seqused_k.end()));
  fill_normal(c.q, rng, spec.q_std);
  fill_normal(c.k, rng, spec.k_std);
  fill_normal(c.v, rng, spec.v_std);
  fill_normal(c.dout, rng, spec.dout_std);
  if (spec.nan_in_unused_kv) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    c.for_each_unused(AttnCase::Role::kK, false, [&](int64_t linear) {
      c.k.set(linear, nan);
      c.v.set(linear, nan);
    });
    // Varlen rows past the last sequence: row j of "sequence" batch_size(), whose start is cu_k.back().
    for (int64_t j = 0; spec.varlen() && c.cu_k.back() + j < c.k.size(0); ++j) {
      for (int h = 0; h < spec.nheads_kv; ++h) {
        for (int d = 0; d < spec.headdim; ++d) {
          c.k.set(c.k_index(B, j, h, d), nan);
          c.v.set(c.k_index(B, j, h, d), nan);
        }
      }
    }
  }
  if (spec.alibi != Alibi::kNone) {
    std::uniform_real_distribution<float> slope(0.0f, spec.alibi_max_slope);
    c.alibi_slopes = spec.alibi == Alibi::kPerHead ? HostTensor(DType::kFloat32, {spec.nheads_q})
                                                   : HostTensor(DType::kFloat32, {B, spec.nheads_q});
    for (int64_t i = 0; i < c.alibi_slopes.numel(); ++i) c.alibi_slopes.set(i, slope(rng));
  }
  return c;
}

AttnCase convert_case(const AttnCase& c, DType dtype) {
  AttnCase out = c;
  out.spec.dtype = dtype;
  out.q = c.q.converted(dtype);
  out.k = c.k.converted(dtype);
  out.v = c.v.converted(dtype);
  out.dout = c.dout.converted(dtype);
  out.spec.pad = 0;
  return out;
}

ForwardResult run_forward(const AttnCase& c, Backend backend, bool with_lse) {
  ForwardResult r;
  r.out = HostTensor(c.spec.dtype, c.out_shape(), c.spec.pad);
  r.out.poison();
  ForwardArgs args;
  args.q = c.q.view();
  args.k = c.k.view();
  args.v = c.v.view();
  args.out = r.out.view();
  if (with_lse) {
    r.lse = HostTensor(DType::kFloat32, c.lse_shape(), c.spec.pad);
    r.lse.poison();
    args.lse = r.lse.view();
  }
  r.status = flashattn::forward(args, c.params(backend));
  return r;
}

BackwardResult run_backward(const AttnCase& c, Backend backend, const ForwardResult& fwd) {
  BackwardResult r;
  r.dq = HostTensor(c.spec.dtype, c.q.shape(), c.spec.pad);
  r.dk = HostTensor(c.spec.dtype, c.k.shape(), c.spec.pad);
  r.dv = HostTensor(c.spec.dtype, c.v.shape(), c.spec.pad);
  r.dq.poison();
  r.dk.poison();
  r.dv.poison();
  BackwardArgs args;
  args.q = c.q.view();
  args.k = c.k.view();
  args.v = c.v.view();
  args.out = fwd.out.view();
  args.dout = c.dout.view();
  args.lse = fwd.lse.view();
  args.dq = r.dq.view();
  args.dk = r.dk.view();
  args.dv = r.dv.view();
  r.status = flashattn::backward(args, c.params(backend));
  return r;
}

std::string seqused_case_name(bool varlen, int which, bool causal) {
  return std::string(varlen ? "varlen" : "fixed") + (which & 1 ? "_q" : "") + (which & 2 ? "_k" : "") +
         (causal ? "_causal" : "");
}

CaseSpec three_sequences_spec(uint64_t seed, DType dtype, int headdim, bool varlen, bool causal) {
  CaseSpec s;
  s.seed = seed;
  s.dtype = dtype;
  s.nheads_q = 4;
  s.nheads_kv = 2;
  s.headdim = headdim;
  s.causal = causal;
  s.nan_in_unused_kv = true;  // also the varlen rows past the last sequence
  if (varlen) {
    s.seqlens_q = {130, 1, 257};
    s.seqlens_k = {200, 64, 300};
    s.extra_rows = 3;
  } else {
    s.batch = 3;
    s.seqlen_q = 190;
    s.seqlen_k = 260;
  }
  return s;
}

bool key_visible(const CaseSpec& s, int64_t i, int64_t j, int64_t len_q, int64_t len_k) {
  if (j < 0 || j >= len_k) return false;
  const int64_t diag = i + len_k - len_q;
  const int64_t right = s.causal ? 0 : s.window_right;
  const int64_t left = s.window_left;
  if (right >= 0 && j > diag + right) return false;
  if (left >= 0 && j < diag - left) return false;
  return true;
}

NaiveResult naive_attention(const AttnCase& c, DType rounding, bool with_backward, bool with_magnitudes) {
  const CaseSpec& s = c.spec;
  auto R = [rounding](float x) { return round_to_dtype(rounding, x); };
  const std::vector<float> q = c.q.to_float(), k = c.k.to_float(), v = c.v.to_float(), dout = c.dout.to_float();
  const int D = s.headdim, group = s.nheads_q / s.nheads_kv;
  const float scale = R(c.scale());

  NaiveResult r;
  r.out = HostTensor(DType::kFloat32, c.q.shape());
  r.lse = HostTensor(DType::kFloat32, c.lse_shape());
  std::vector<float> out(static_cast<size_t>(r.out.numel()), 0.0f);
  std::vector<float> lse(static_cast<size_t>(r.lse.numel()), 0.0f);
  std::vector<float> dq, dk, dv, dq_mag, dk_mag, dv_mag;
  with_backward = with_backward || with_magnitudes;
  if (with_backward) {
    dq.assign(q.size(), 0.0f);
    dk.assign(k.size(), 0.0f);
    dv.assign(v.size(), 0.0f);
  }
  if (with_magnitudes) {
    dq_mag.assign(q.size(), 0.0f);
    dk_mag.assign(k.size(), 0.0f);
    dv_mag.assign(v.size(), 0.0f);
  }
  // Rows past the last sequence belong to no sequence: the library leaves them alone, and so
  // the comparisons only read rows inside sequences. Zero here keeps the tensors finite.
  for (int b = 0; b < s.batch_size(); ++b) {
    const int64_t Lq = s.len_q(b), Lk = s.len_k(b);
    std::vector<float> capped(static_cast<size_t>(Lk)), p(static_cast<size_t>(Lk)), dp(static_cast<size_t>(Lk));
    std::vector<char> vis(static_cast<size_t>(Lk));
    std::vector<float> o(static_cast<size_t>(D)), dq_row(static_cast<size_t>(D));
    for (int h = 0; h < s.nheads_q; ++h) {
      const int hk = h / group;
      const float slope = c.alibi_slopes.defined()
                              ? c.alibi_slopes.get(s.alibi == Alibi::kPerHead ? h : b * s.nheads_q + h)
                              : 0.0f;
      for (int64_t i = 0; i < Lq; ++i) {
        const float* qi = &q[static_cast<size_t>(c.q_index(b, i, h, 0))];
        float m = kNegInf;
        for (int64_t j = 0; j < Lk; ++j) {
          vis[j] = key_visible(s, i, j, Lq, Lk);
          if (!vis[j]) continue;
          const float* kj = &k[static_cast<size_t>(c.k_index(b, j, hk, 0))];
          float dot = 0.0f;
          for (int d = 0; d < D; ++d) dot += qi[d] * kj[d];
          float t = R(R(dot) * scale);
          if (s.softcap > 0.0f) t = R(s.softcap * std::tanh(t / s.softcap));
          capped[j] = t;
          const double dist = std::fabs(static_cast<double>(i + Lk - Lq - j));
          p[j] = slope != 0.0f ? R(t - slope * static_cast<float>(dist)) : t;
          m = std::max(m, p[j]);
        }
        const int64_t li = c.lse_index(b, h, i);
        std::fill(o.begin(), o.end(), 0.0f);
        if (m == kNegInf) {
          lse[static_cast<size_t>(li)] = kNegInf;
          for (int d = 0; d < D; ++d) out[static_cast<size_t>(c.q_index(b, i, h, d))] = 0.0f;
          continue;
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < Lk; ++j) {
          if (!vis[j]) continue;
          p[j] = std::exp(p[j] - m);
          sum += p[j];
        }
        lse[static_cast<size_t>(li)] = m + std::log(sum);
        for (int64_t j = 0; j < Lk; ++j) {
          if (!vis[j]) continue;
          p[j] = R(p[j] / sum);
          const float* vj = &v[static_cast<size_t>(c.k_index(b, j, hk, 0))];
          for (int d = 0; d < D; ++d) o[d] += p[j] * vj[d];
        }
        for (int d = 0; d < D; ++d) out[static_cast<size_t>(c.q_index(b, i, h, d))] = R(o[d]);
        if (!with_backward) continue;

        const float* doi = &dout[static_cast<size_t>(c.q_index(b, i, h, 0))];
        float delta = 0.0f;
        for (int64_t j = 0; j < Lk; ++j) {
          if (!vis[j]) continue;
          const float* vj = &v[static_cast<size_t>(c.k_index(b, j, hk, 0))];
          float acc = 0.0f;
          for (int d = 0; d < D; ++d) acc += doi[d] * vj[d];
          dp[j] = R(acc);
          delta += p[j] * dp[j];
        }
        std::fill(dq_row.begin(), dq_row.end(), 0.0f);
        for (int64_t j = 0; j < Lk; ++j) {
          if (!vis[j]) continue;
          float ds = R(p[j] * (dp[j] - delta));
          if (s.softcap > 0.0f) {
            const float t = capped[j] / s.softcap;
            ds = R(ds * (1.0f - t * t));
          }
          ds = R(ds * scale);
          const float* kj = &k[static_cast<size_t>(c.k_index(b, j, hk, 0))];
          for (int d = 0; d < D; ++d) {
            dq_row[d] += ds * kj[d];
            dk[static_cast<size_t>(c.k_index(b, j, hk, d))] += ds * qi[d];
            dv[static_cast<size_t>(c.k_index(b, j, hk, d))] += p[j] * doi[d];
          }
          if (with_magnitudes) {
            const float ds_mag = p[j] * (std::fabs(dp[j]) + std::fabs(delta)) * std::fabs(scale);
            for (int d = 0; d < D; ++d) {
              dq_mag[static_cast<size_t>(c.q_index(b, i, h, d))] += ds_mag * std::fabs(kj[d]);
              dk_mag[static_cast<size_t>(c.k_index(b, j, hk, d))] += ds_mag * std::fabs(qi[d]);
              dv_mag[static_cast<size_t>(c.k_index(b, j, hk, d))] += p[j] * std::fabs(doi[d]);
            }
          }
        }
        for (int d = 0; d < D; ++d) dq[static_cast<size_t>(c.q_index(b, i, h, d))] = R(dq_row[d]);
      }
    }
  }
  r.out.from_float(out);
  r.lse.from_float(lse);
  if (with_backward) {
    for (float& x : dk) x = R(x);
    for (float& x : dv) x = R(x);
    r.dq = HostTensor(DType::kFloat32, c.q.shape());
    r.dk = HostTensor(DType::kFloat32, c.k.shape());
    r.dv = HostTensor(DType::kFloat32, c.v.shape());
    r.dq.from_float(dq);
    r.dk.from_float(dk);
    r.dv.from_float(dv);
  }
  if (with_magnitudes) {
    r.dq_mag = HostTensor(DType::kFloat32, c.q.shape());
    r.dk_mag = HostTensor(DType::kFloat32, c.k.shape());
    r.dv_mag = HostTensor(DType::kFloat32, c.v.shape());
    r.dq_mag.from_float(dq_mag);
    r.dk_mag.from_float(dk_mag);
    r.dv_mag.from_float(dv_mag);
  }
  return r;
}

double rel_l2(const HostTensor& a, const HostTensor& ref) {
  if (a.numel() != ref.numel()) return std::numeric_limits<double>::infinity();
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = ref.get(i);
    if (!std::isfinite(x) || !std::isfinite(y)) return std::numeric_limits<double>::infinity();
    num += (x - y) * (x - y);
    den += y * y;
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

double lse_error(const HostTensor& a, const HostTensor& ref) {
  if (a.numel() != ref.numel()) return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), y = ref.get(i);
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<double>::infinity();
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::fabs(x - y) / (1.0 + std::fabs(y)));
  }
  return worst;
}

double max_abs_diff(const HostTensor& a, const HostTensor& ref) {
  if (a.numel() != ref.numel()) return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(static_cast<double>(a.get(i)) - ref.get(i));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}

CaseSpec random_spec(uint64_t seed, const RandomLimits& lim) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 12345);
  auto uniform_int = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p; };
  // Lengths near the tile edges (forward 256 x 128, backward 64 x 64) catch off-by-one tails.
  auto draw_len = [&](int max_len) {
    static const int edges[] = {1, 2, 63, 64, 65, 127, 128, 129, 255, 256, 257, 320, 511, 513, 1000};
    if (chance(0.3)) {
      int e = edges[uniform_int(0, static_cast<int>(sizeof(edges) / sizeof(edges[0])) - 1)];
      if (e <= max_len) return e;
    }
    const double u = std::uniform_real_distribution<double>(0.0, std::log(static_cast<double>(max_len)))(rng);
    return std::max(1, std::min(max_len, static_cast<int>(std::lround(std::exp(u)))));
  };

  CaseSpec s;
  s.seed = seed;
  s.headdim = 8 * uniform_int(1, lim.max_headdim / 8);
  s.nheads_kv = uniform_int(1, std::max(1, lim.max_heads / 2));
  s.nheads_q = s.nheads_kv * uniform_int(1, std::max(1, lim.max_heads / s.nheads_kv));
  const int batch = uniform_int(1, lim.max_batch);
  if (lim.allow_varlen && chance(0.35)) {
    for (int b = 0; b < batch; ++b) {
      s.seqlens_q.push_back(chance(0.15) ? 0 : draw_len(lim.max_seqlen));
      s.seqlens_k.push_back(chance(0.15) ? 0 : draw_len(lim.max_seqlen));
    }
    s.extra_rows = chance(0.3) ? uniform_int(1, 5) : 0;
  } else {
    s.batch = batch;
    s.seqlen_q = draw_len(lim.max_seqlen);
    s.seqlen_k = chance(0.3) ? s.seqlen_q : draw_len(lim.max_seqlen);
  }
  if (lim.allow_options) {
    s.causal = chance(0.4);
    const int longest = std::max(s.varlen() ? *std::max_element(s.seqlens_k.begin(), s.seqlens_k.end()) : s.seqlen_k, 1);
    switch (uniform_int(0, 3)) {
      case 1: s.window_left = uniform_int(0, longest); break;
      case 2: s.window_right = uniform_int(0, longest); break;
      case 3:
        s.window_left = uniform_int(0, longest);
        s.window_right = uniform_int(0, longest);
        break;
      default: break;
    }
    if (chance(0.3)) s.softcap = std::uniform_real_distribution<float>(1.0f, 30.0f)(rng);
    s.alibi = static_cast<Alibi>(uniform_int(0, 2));
    if (chance(0.2)) s.softmax_scale = std::uniform_real_distribution<float>(0.02f, 0.6f)(rng);
  }
  static const int64_t pads[] = {0, 0, 0, 8, 5};
  s.pad = pads[uniform_int(0, 4)];

  // Shrink until the fp64 oracle's work fits the budget, keeping the tile-edge lengths where we can.
  auto work = [&]() {
    double w = 0.0;
    for (int b = 0; b < s.batch_size(); ++b) w += static_cast<double>(s.len_q(b)) * s.len_k(b);
    return w * s.nheads_q * s.headdim;
  };
  while (work() > lim.max_work) {
    if (s.headdim > 64 && chance(0.5)) {
      s.headdim = std::max(8, s.headdim / 2 / 8 * 8);
    } else if (s.nheads_q > 1 && chance(0.3)) {
      s.nheads_q = s.nheads_kv = 1;
    } else if (s.varlen()) {
      for (int& l : s.seqlens_q) l = l * 3 / 4;
      for (int& l : s.seqlens_k) l = l * 3 / 4;
    } else {
      s.seqlen_q = std::max(1, s.seqlen_q * 3 / 4);
      s.seqlen_k = std::max(1, s.seqlen_k * 3 / 4);
    }
  }
  return s;
}

uint64_t test_seed_base() {
  const char* env = std::getenv("FLASHATTN_TEST_SEED");
  return env ? std::strtoull(env, nullptr, 10) : 0;
}

}  // namespace fa_test
