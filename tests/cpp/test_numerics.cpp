// The oracle checked against hand computations, fully masked rows, huge logits, and the fp16/bf16
// accuracy rule (no worse than twice a naive same-dtype implementation).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/attn_case.h"
#include "common/checks.h"

namespace fa_test {
namespace {

using flashattn::Backend;
using Role = AttnCase::Role;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
const Backend kBoth[] = {Backend::kCPUReference, Backend::kCPU};

double dot(const AttnCase& c, int b, int64_t i, int h, int64_t j, int hk) {
  double acc = 0.0;
  for (int d = 0; d < c.spec.headdim; ++d) {
    acc += static_cast<double>(c.q.get(c.q_index(b, i, h, d))) * c.k.get(c.k_index(b, j, hk, d));
  }
  return acc;
}

// ---- the reference against closed forms -----------------------------------------------------------

// One key: softmax is 1, so O = v and lse is the (capped, biased) score itself.
TEST(ReferenceOracle, SingleKeyClosedForm) {
  CaseSpec s;
  s.seed = 3;
  s.seqlen_q = 3;
  s.seqlen_k = 1;
  s.nheads_q = 2;
  s.nheads_kv = 1;
  s.headdim = 16;
  s.softmax_scale = 0.3f;
  s.softcap = 2.0f;
  s.alibi = Alibi::kPerHead;
  const AttnCase c = make_case(s);
  for (Backend backend : kBoth) {
    SCOPED_TRACE(flashattn::backend_name(backend));
    const ForwardResult f = run_forward(c, backend);
    ASSERT_TRUE(forward_written(c, f));
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 3; ++i) {
        const double capped = 2.0 * std::tanh(0.3 * dot(c, 0, i, h, 0, 0) / 2.0);
        const double expected_lse = capped - c.alibi_slopes.get(h) * std::abs(i + 1 - 3);
        EXPECT_NEAR(f.lse.get(c.lse_index(0, h, i)), expected_lse, 1e-5) << "h=" << h << " i=" << i;
        for (int d = 0; d < 16; ++d) {
          EXPECT_NEAR(f.out.get(c.q_index(0, i, h, d)), c.v.get(c.k_index(0, 0, 0, d)), 1e-6);
        }
      }
    }
    // P = 1 whatever the scores, so dQ = dK = 0 and dV sums dO over every query of the group.
    const BackwardResult g = run_backward(c, backend, f);
    ASSERT_TRUE(backward_written(c, g));
    for (int d = 0; d < 16; ++d) {
      double dv = 0.0;
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 3; ++i) dv += c.dout.get(c.q_index(0, i, h, d));
      EXPECT_NEAR(g.dv.get(c.k_index(0, 0, 0, d)), dv, 1e-5);
      EXPECT_NEAR(g.dk.get(c.k_index(0, 0, 0, d)), 0.0, 1e-5);
    }
    for (int64_t e = 0; e < g.dq.numel(); ++e) EXPECT_NEAR(g.dq.get(e), 0.0, 1e-5);
  }
}

// Two keys: p0 = 1 / (1 + exp(s1 - s0)), with softcap and per-(batch, head) ALiBi slopes.
TEST(ReferenceOracle, TwoKeysClosedForm) {
  CaseSpec s;
  s.seed = 4;
  s.batch = 2;
  s.seqlen_q = 1;
  s.seqlen_k = 2;
  s.nheads_q = 2;
  s.nheads_kv = 2;
  s.headdim = 8;
  s.softcap = 3.0f;
  s.alibi = Alibi::kPerBatchHead;
  s.alibi_max_slope = 2.0f;
  const AttnCase c = make_case(s);
  const double scale = 1.0 / std::sqrt(8.0);
  for (Backend backend : kBoth) {
    SCOPED_TRACE(flashattn::backend_name(backend));
    const ForwardResult f = run_forward(c, backend);
    ASSERT_TRUE(forward_written(c, f));
    for (int b = 0; b < 2; ++b) {
      for (int h = 0; h < 2; ++h) {
        const double slope = c.alibi_slopes.get(b * 2 + h);
        // Query 0 sits on the diagonal at key 1 (bottom-right alignment), one step from key 0.
        const double s0 = 3.0 * std::tanh(scale * dot(c, b, 0, h, 0, h) / 3.0) - slope;
        const double s1 = 3.0 * std::tanh(scale * dot(c, b, 0, h, 1, h) / 3.0);
        const double p0 = 1.0 / (1.0 + std::exp(s1 - s0)), p1 = 1.0 - p0;
        const double m = std::max(s0, s1);
        EXPECT_NEAR(f.lse.get(c.lse_index(b, h, 0)), m + std::log(std::exp(s0 - m) + std::exp(s1 - m)), 1e-5);
        for (int d = 0; d < 8; ++d) {
          const double o = p0 * c.v.get(c.k_index(b, 0, h, d)) + p1 * c.v.get(c.k_index(b, 1, h, d));
          EXPECT_NEAR(f.out.get(c.q_index(b, 0, h, d)), o, 1e-5) << "b=" << b << " h=" << h << " d=" << d;
        }
      }
    }
  }
}

// With q = 0 every visible score is equal, and with v_j = e_j the output row is the visibility
// row divided by its count: the mask can be read off O directly.
struct MaskTable {
  const char* name;
  int sq, sk;
  bool causal;
  int left, right;
  std::vector<std::string> rows;
};

const MaskTable kMaskTables[] = {
    {"causal_sq<sk", 3, 5, true, -1, -1, {"11100", "11110", "11111"}},
    {"causal_sq>sk", 5, 3, true, -1, -1, {"000", "000", "100", "110", "111"}},
    {"left1_right0", 4, 4, false, 1, 0, {"1000", "1100", "0110", "0011"}},
    {"left1_only", 4, 4, false, 1, -1, {"1111", "1111", "0111", "0011"}},
    {"right1_only", 4, 4, false, -1, 1, {"1100", "1110", "1111", "1111"}},
    {"diagonal_only", 3, 6, false, 0, 0, {"000100", "000010", "000001"}},
    {"band_sq>sk", 6, 3, false, 1, 1, {"000", "000", "100", "110", "111", "011"}},
    {"causal_overrides_right", 4, 4, true, 1, 2, {"1000", "1100", "0110", "0011"}},
};

void expect_mask(const AttnCase& c, const ForwardResult& f, int b, const MaskTable& t) {
  for (int i = 0; i < t.sq; ++i) {
    int count = 0;
    for (char ch : t.rows[i]) count += ch == '1';
    const float lse = f.lse.get(c.lse_index(b, 0, i));
    if (count == 0) {
      EXPECT_EQ(lse, kNegInf) << "row " << i;
    } else {
      EXPECT_NEAR(lse, std::log(static_cast<double>(count)), 1e-6) << "row " << i;
    }
    for (int j = 0; j < 8; ++j) {
      const double want = j < t.sk && t.rows[i][j] == '1' ? 1.0 / count : 0.0;
      EXPECT_NEAR(f.out.get(c.q_index(b, i, 0, j)), want, 1e-6) << "row " << i << " key " << j;
    }
  }
}

AttnCase mask_probe_case(CaseSpec s) {
  s.headdim = 8;
  AttnCase c = make_case(s);
  for (int64_t e = 0; e < c.q.numel(); ++e) c.q.set(e, 0.0f);
  // Key row j of every sequence carries e_(j mod 8).
  for (int b = 0; b < s.batch_size(); ++b)
    for (int j = 0; j < s.len_k(b); ++j)
      for (int d = 0; d < 8; ++d) c.v.set(c.k_index(b, j, 0, d), d == j ? 1.0f : 0.0f);
  return c;
}

TEST(ReferenceOracle, MaskTruthTables) {
  for (const MaskTable& t : kMaskTables) {
    SCOPED_TRACE(t.name);
    CaseSpec s;
    s.seqlen_q = t.sq;
    s.seqlen_k = t.sk;
    s.causal = t.causal;
    s.window_left = t.left;
    s.window_right = t.right;
    for (int i = 0; i < t.sq; ++i)
      for (int j = 0; j < t.sk; ++j) EXPECT_EQ(key_visible(s, i, j, t.sq, t.sk), t.rows[i][j] == '1');
    const AttnCase c = mask_probe_case(s);
    for (Backend backend : kBoth) {
      SCOPED_TRACE(flashattn::backend_name(backend));
      const ForwardResult f = run_forward(c, backend);
      ASSERT_TRUE(forward_written(c, f));
      expect_mask(c, f, 0, t);
    }
  }
}

// Two sequences of different shapes in one varlen batch: each aligns its own bottom-right corner.
TEST(ReferenceOracle, MaskTruthTablesVarlen) {
  const MaskTable& a = kMaskTables[0];
  const MaskTable& b = kMaskTables[1];
  CaseSpec s;
  s.seqlens_q = {a.sq, b.sq};
  s.seqlens_k = {a.sk, b.sk};
  s.causal = true;
  const AttnCase c = mask_probe_case(s);
  for (Backend backend : kBoth) {
    SCOPED_TRACE(flashattn::backend_name(backend));
    const ForwardResult f = run_forward(c, backend);
    ASSERT_TRUE(forward_written(c, f));
    expect_mask(c, f, 0, a);
    expect_mask(c, f, 1, b);
  }
}

// q = 0 leaves only the ALiBi bias: weights proportional to exp(-slope * |i + sk - sq - j|).
TEST(ReferenceOracle, AlibiClosedForm) {
  for (Alibi kind : {Alibi::kPerHead, Alibi::kPerBatchHead}) {
    CaseSpec s;
    s.batch = 2;
    s.seqlen_q = 2;
    s.seqlen_k = 3;
    s.nheads_q = s.nheads_kv = 1;
    s.alibi = kind;
    s.alibi_max_slope = 1.5f;
    const AttnCase c = mask_probe_case(s);
    for (Backend backend : kBoth) {
      SCOPED_TRACE(flashattn::backend_name(backend));
      const ForwardResult f = run_forward(c, backend);
      ASSERT_TRUE(forward_written(c, f));
      for (int b = 0; b < 2; ++b) {
        const double slope = c.alibi_slopes.get(kind == Alibi::kPerHead ? 0 : b);
        for (int i = 0; i < 2; ++i) {
          double w[3], sum = 0.0;
          for (int j = 0; j < 3; ++j) sum += (w[j] = std::exp(-slope * std::abs(i + 1 - j)));
          EXPECT_NEAR(f.lse.get(c.lse_index(b, 0, i)), std::log(sum), 1e-6);
          for (int j = 0; j < 3; ++j) EXPECT_NEAR(f.out.get(c.q_index(b, i, 0, j)), w[j] / sum, 1e-6);
        }
      }
    }
  }
}

// A second implementation, written from the documented semantics in float32, agrees with the oracle
// on every option: the oracle is not the only statement of what attention means here.
TEST(ReferenceOracle, AgreesWithIndependentNaiveFloat32) {
  RandomLimits lim;
  lim.max_work = 3e6;
  for (int seed = 0; seed < 12; ++seed) {
    const CaseSpec s = random_spec(test_seed_base() + 4000 + seed, lim);
    SCOPED_TRACE(s.describe());
    const AttnCase c = make_case(s);
    const ForwardResult f = run_forward(c, Backend::kCPUReference);
    const BackwardResult g = run_backward(c, Backend::kCPUReference, f);
    ASSERT_TRUE(backward_written(c, g));
    const NaiveResult n = naive_attention(c, DType::kFloat32, true, true);
    EXPECT_LE(rel_l2(c.used_part(f.out, Role::kQ), c.used_part(n.out, Role::kQ)), 1e-5);
    EXPECT_LE(lse_error(c.used_part(f.lse, Role::kLse), c.used_part(n.lse, Role::kLse)), 1e-5);
    EXPECT_LE(rel_l2_or_magnitude(c.used_part(g.dq, Role::kQ), c.used_part(n.dq, Role::kQ), c.used_part(n.dq_mag, Role::kQ)), 1e-4);
    EXPECT_LE(rel_l2_or_magnitude(c.used_part(g.dk, Role::kK), c.used_part(n.dk, Role::kK), c.used_part(n.dk_mag, Role::kK)), 1e-4);
    EXPECT_LE(rel_l2_or_magnitude(c.used_part(g.dv, Role::kK), c.used_part(n.dv, Role::kK), c.used_part(n.dv_mag, Role::kK)), 1e-4);
  }
}

// ---- fully masked rows -------------------------------------------------------------------------

// Rows of (b, h) whose visible set is empty must hold exactly 0 and lse -inf; their dQ is exactly 0;
// keys no query sees get dK = dV = 0 exactly.
void expect_masked_rows_exact(const CaseSpec& spec) {
  SCOPED_TRACE(spec.describe());
  const AttnCase c = make_case(spec);
  const ForwardResult ref = run_forward(c, Backend::kCPUReference);
  const BackwardResult ref_g = run_backward(c, Backend::kCPUReference, ref);
  int masked_rows = 0, unseen_keys = 0;
  for (Backend backend : kBoth) {
    SCOPED_TRACE(flashattn::backend_name(backend));
    const ForwardResult f = run_forward(c, backend);
    ASSERT_TRUE(forward_close(c, f, ref));
    const BackwardResult g = run_backward(c, backend, f);
    ASSERT_TRUE(backward_close(c, g, ref_g));
    masked_rows = unseen_keys = 0;
    for (int b = 0; b < spec.batch_size(); ++b) {
      const int Lq = spec.len_q(b), Lk = spec.len_k(b);
      for (int h = 0; h < spec.nheads_q; ++h) {
        for (int i = 0; i < Lq; ++i) {
          bool any = false;
          for (int j = 0; j < Lk && !any; ++j) any = key_visible(spec, i, j, Lq, Lk);
          if (any) continue;
          ++masked_rows;
          EXPECT_EQ(f.lse.get(c.lse_index(b, h, i)), kNegInf) << "b=" << b << " h=" << h << " i=" << i;
          for (int d = 0; d < spec.headdim; ++d) {
            ASSERT_EQ(f.out.get(c.q_index(b, i, h, d)), 0.0f) << "b=" << b << " h=" << h << " i=" << i;
            ASSERT_EQ(g.dq.get(c.q_index(b, i, h, d)), 0.0f) << "b=" << b << " h=" << h << " i=" << i;
          }
        }
      }
      for (int j = 0; j < Lk; ++j) {
        bool seen = false;
        for (int i = 0; i < Lq && !seen; ++i) seen = key_visible(spec, i, j, Lq, Lk);
        if (seen) continue;
        ++unseen_keys;
        for (int hk = 0; hk < spec.nheads_kv; ++hk)
          for (int d = 0; d < spec.headdim; ++d) {
            ASSERT_EQ(g.dk.get(c.k_index(b, j, hk, d)), 0.0f) << "b=" << b << " key " << j;
            ASSERT_EQ(g.dv.get(c.k_index(b, j, hk, d)), 0.0f) << "b=" << b << " key " << j;
          }
      }
    }
  }
  EXPECT_GT(masked_rows + unseen_keys, 0) << "the case masks nothing; the test would prove nothing";
}

TEST(FullyMasked, CausalWithMoreQueriesThanKeys) {
  CaseSpec s;
  s.seed = 61;
  s.batch = 2;
  s.seqlen_q = 300;  // bottom-right causal: the first 200 rows see no key
  s.seqlen_k = 100;
  s.nheads_q = 2;
  s.nheads_kv = 1;
  s.headdim = 32;
  s.causal = true;
  expect_masked_rows_exact(s);
}

TEST(FullyMasked, WindowExcludesAllKeysOfSomeRows) {
  CaseSpec s;
  s.seed = 62;
  s.seqlen_q = 270;
  s.seqlen_k = 70;
  s.nheads_q = 2;
  s.nheads_kv = 2;
  s.headdim = 16;
  s.window_left = 3;
  s.window_right = 2;
  s.alibi = Alibi::kPerHead;
  expect_masked_rows_exact(s);
}

TEST(FullyMasked, KeysNoQuerySees) {
  CaseSpec s;
  s.seed = 63;
  s.seqlen_q = 40;
  s.seqlen_k = 200;  // query i sees key i + 160 only
  s.headdim = 24;
  s.window_left = 0;
  s.window_right = 0;
  s.softcap = 5.0f;
  expect_masked_rows_exact(s);
}

TEST(FullyMasked, VarlenSequencesWithoutKeys) {
  CaseSpec s;
  s.seed = 64;
  s.seqlens_q = {5, 70, 0, 130, 9};
  s.seqlens_k = {0, 90, 40, 0, 3};
  s.nheads_q = 4;
  s.nheads_kv = 2;
  s.headdim = 40;
  s.causal = true;
  expect_masked_rows_exact(s);
}

TEST(FullyMasked, FixedLengthWithoutKeys) {
  CaseSpec s;
  s.seed = 65;
  s.batch = 2;
  s.seqlen_q = 33;
  s.seqlen_k = 0;
  s.nheads_q = 2;
  s.headdim = 8;
  s.nheads_kv = 2;
  expect_masked_rows_exact(s);
}

// ---- huge logits ---------------------------------------------------------------------------------

double max_abs_score(const AttnCase& c) {
  double m = 0.0;
  const CaseSpec& s = c.spec;
  for (int b = 0; b < s.batch_size(); ++b)
    for (int h = 0; h < s.nheads_q; ++h)
      for (int i = 0; i < s.len_q(b); ++i)
        for (int j = 0; j < s.len_k(b); ++j)
          m = std::max(m, std::fabs(c.scale() * dot(c, b, i, h, j, h / (s.nheads_q / s.nheads_kv))));
  return m;
}

void set_integers(HostTensor& t, std::mt19937_64& rng, int bound) {
  std::uniform_int_distribution<int> u(-bound, bound);
  for (int64_t e = 0; e < t.numel(); ++e) t.set(e, static_cast<float>(u(rng)));
}

// Integer q and k with a power-of-two scale (and dyadic ALiBi slopes) make every score exact in
// float32, so the forward differs from the fp64 oracle only in the softmax and keeps the fp32
// tolerance. The backward recomputes P = exp(s - L) from the float32 L, which holds |L| only to
// 2^-24 relative: that absolute error becomes the relative error of every P, so the gradient
// bound grows with the largest |L| (about 6e-4 at 1e4), whatever the kernel does.
void expect_exact_large_logits(CaseSpec s, int bound, double min_logit) {
  SCOPED_TRACE(s.describe());
  AttnCase c = make_case(s);
  std::mt19937_64 rng(s.seed);
  set_integers(c.q, rng, bound);
  set_integers(c.k, rng, bound);
  for (int64_t h = 0; h < c.alibi_slopes.numel(); ++h) c.alibi_slopes.set(h, std::ldexp(1.0f, -1 - static_cast<int>(h)));
  const double m = max_abs_score(c);
  ASSERT_GE(m, min_logit) << "logits too small for this test";
  ASSERT_LE(m, 1 << 22) << "scores would not be exact in float32";
  const ForwardResult ref = run_forward(c, Backend::kCPUReference);
  const ForwardResult f = run_forward(c, Backend::kCPU);
  EXPECT_TRUE(forward_close(c, f, ref)) << "max |logit| " << m;
  double max_lse = 0.0;
  for (int64_t e = 0; e < ref.lse.numel(); ++e) {
    if (std::isfinite(ref.lse.get(e))) max_lse = std::max(max_lse, std::fabs(static_cast<double>(ref.lse.get(e))));
  }
  const double tol = std::max(1e-5, std::ldexp(max_lse, -23));
  EXPECT_TRUE(backward_close(c, run_backward(c, Backend::kCPU, f), run_backward(c, Backend::kCPUReference, ref), tol))
      << "max |logit| " << m << " max |lse| " << max_lse;
}

TEST(LargeLogits, LargeInputsUnitScale) {
  CaseSpec s;
  s.seed = 71;
  s.batch = 2;
  s.seqlen_q = 200;
  s.seqlen_k = 300;
  s.nheads_q = 2;
  s.nheads_kv = 1;
  s.headdim = 64;
  s.softmax_scale = 1.0f;
  s.causal = true;
  expect_exact_large_logits(s, 25, 1e4);
}

TEST(LargeLogits, LargeSoftmaxScale) {
  CaseSpec s;
  s.seed = 72;
  s.seqlen_q = 150;
  s.seqlen_k = 260;
  s.nheads_q = 2;
  s.nheads_kv = 2;
  s.headdim = 64;
  s.softmax_scale = 256.0f;
  s.alibi = Alibi::kPerHead;
  expect_exact_large_logits(s, 3, 1e4);
}

// Scores that float32 cannot hold exactly: the softmax is then only as accurate as its inputs,
// whose rounding is about 2^-24 of the logits' size, so the bound scales with the largest logit.
TEST(LargeLogits, InexactScoresStayFiniteAndConditioned) {
  for (float softcap : {0.0f, 50.0f}) {
    CaseSpec s;
    s.seed = 73;
    s.batch = 2;
    s.seqlen_q = 129;
    s.seqlen_k = 257;
    s.nheads_q = 2;
    s.nheads_kv = 2;
    s.headdim = 128;
    s.q_std = s.k_std = 30.0f;
    s.softcap = softcap;
    SCOPED_TRACE(s.describe());
    const AttnCase c = make_case(s);
    const double m = max_abs_score(c);
    ASSERT_GE(m, 3e3);
    const ForwardResult ref = run_forward(c, Backend::kCPUReference);
    const ForwardResult f = run_forward(c, Backend::kCPU);
    Tolerance tol;
    tol.out = tol.lse = std::max(1e-5, 4 * m * std::ldexp(1.0, -24) * std::sqrt(128.0));
    EXPECT_TRUE(forward_close(c, f, ref, tol)) << "max |logit| " << m;
    const BackwardResult g = run_backward(c, Backend::kCPU, f);
    EXPECT_TRUE(backward_written(c, g));
  }
}

// ---- fp16 / bf16: no worse than twice a naive same-dtype implementation -------------------------

class LowPrecision : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(LowPrecision, FlashWithinTwiceNaiveError) {
  const DType dtype = std::get<0>(GetParam());
  RandomLimits lim;
  lim.max_work = 4e6;
  CaseSpec s = random_spec(test_seed_base() + 5000 + std::get<1>(GetParam()), lim);
  s.dtype = dtype;  // make_case rounds the drawn inputs to dtype
  SCOPED_TRACE(s.describe());
  EXPECT_TRUE(within_twice_naive(make_case(s), true));
}

std::string low_precision_name(const ::testing::TestParamInfo<std::tuple<DType, int>>& info) {
  return std::string(dtype_str(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Seeds, LowPrecision,
                         ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16), ::testing::Range(0, 12)),
                         low_precision_name);

}  // namespace
}  // namespace fa_test
