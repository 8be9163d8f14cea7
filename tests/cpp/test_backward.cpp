// CPU flash backward against the fp64 reference backward, and both against central finite
// differences of the reference forward. The flash backward gets the flash forward's O and lse, as
// a training step would; the reference gets its own.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "common/attn_case.h"
#include "common/checks.h"

namespace fa_test {
namespace {

using flashattn::Backend;
using Role = AttnCase::Role;

void expect_backward_matches_reference(const CaseSpec& spec) {
  SCOPED_TRACE(spec.describe());
  const AttnCase c = make_case(spec);
  const ForwardResult ref_f = run_forward(c, Backend::kCPUReference);
  const BackwardResult ref_b = run_backward(c, Backend::kCPUReference, ref_f);
  ASSERT_TRUE(backward_written(c, ref_b)) << "reference";
  const ForwardResult got_f = run_forward(c, Backend::kCPU);
  ASSERT_TRUE(forward_close(c, got_f, ref_f));
  EXPECT_TRUE(backward_close(c, run_backward(c, Backend::kCPU, got_f), ref_b));
}

// ---- random shapes ------------------------------------------------------------------------

class BackwardRandom : public ::testing::TestWithParam<int> {};

TEST_P(BackwardRandom, FlashMatchesReference) {
  RandomLimits lim;
  lim.max_work = 1.2e7;  // the reference backward costs about three forwards
  expect_backward_matches_reference(random_spec(test_seed_base() + 2000 + GetParam(), lim));
}

INSTANTIATE_TEST_SUITE_P(Seeds, BackwardRandom, ::testing::Range(0, 30));

// Lengths around the backward's tiles (64 queries; 128 keys in float32, 256 on bf16's products),
// seqlen_q != seqlen_k both ways, every head dim once.
TEST(Backward, TileEdgesAndHeadDims) {
  const int lengths[][2] = {{1, 1},   {1, 200}, {200, 1},  {63, 65},  {64, 64},  {65, 63},
                            {127, 129}, {129, 127}, {300, 70}, {70, 300}, {257, 256}, {1000, 40}};
  int n = 0;
  for (const auto& len : lengths) {
    for (int causal = 0; causal < 2; ++causal) {
      CaseSpec s;
      s.seed = 900 + n;
      s.batch = 1 + n % 2;
      s.seqlen_q = len[0];
      s.seqlen_k = len[1];
      s.nheads_q = 2;
      s.nheads_kv = 1 + n % 2;
      s.headdim = 8 * (1 + (n * 7) % 32);
      s.causal = causal;
      ++n;
      expect_backward_matches_reference(s);
    }
  }
}

// Masks across several key tiles of both dtypes' sizes: a query tile's products stop at the last
// key any of its queries sees (causal, window_right), so each key tile is cut differently per
// query tile, with seqlen_q above, at and below seqlen_k and sequences of several lengths.
TEST(Backward, MasksAcrossKeyTiles) {
  struct Mask {
    bool causal;
    int left, right;
  };
  const Mask masks[] = {{true, -1, -1}, {false, -1, 37}, {false, 90, 200}, {true, 300, -1}, {false, -1, 0}};
  const int lengths[][2] = {{300, 700}, {700, 300}, {530, 530}};
  int n = 0;
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (const Mask& m : masks) {
      for (const auto& len : lengths) {
        CaseSpec s;
        s.seed = 1300 + n;
        s.dtype = dtype;
        s.nheads_q = 2;
        s.nheads_kv = 1 + n % 2;
        s.headdim = n % 3 == 0 ? 64 : 40;
        if (n % 4 == 3) {  // varlen: one sequence as given, one shorter, one empty
          s.seqlens_q = {len[0], len[0] / 3, 0};
          s.seqlens_k = {len[1], len[1] / 2 + 1, 5};
        } else {
          s.seqlen_q = len[0];
          s.seqlen_k = len[1];
        }
        s.causal = m.causal;
        s.window_left = m.left;
        s.window_right = m.right;
        ++n;
        if (dtype == DType::kFloat32) {
          expect_backward_matches_reference(s);
        } else {  // bf16's bar: the low-precision tests' (test_numerics.cpp)
          SCOPED_TRACE(s.describe());
          EXPECT_TRUE(within_twice_naive(make_case(s), true));
        }
      }
    }
  }
}

// ---- every combination of options at small sizes ---------------------------------------------

class BackwardOptions : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(BackwardOptions, FlashMatchesReference) {
  const bool causal = std::get<0>(GetParam());
  const int window_kind = std::get<1>(GetParam());
  uint64_t seed = test_seed_base() + 7000 + (causal ? 100 : 0) + 1000 * window_kind;
  std::mt19937_64 rng(seed);
  auto uniform_int = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  static const int heads[3][2] = {{2, 2}, {4, 2}, {3, 1}};  // MHA, GQA, MQA
  for (int heads_kind = 0; heads_kind < 3; ++heads_kind)
    for (int varlen = 0; varlen < 2; ++varlen)
      for (int softcap = 0; softcap < 2; ++softcap)
        for (int alibi = 0; alibi < 3; ++alibi) {
          CaseSpec s;
          s.seed = seed++;
          s.nheads_q = heads[heads_kind][0];
          s.nheads_kv = heads[heads_kind][1];
          s.headdim = 8 * uniform_int(1, 10);
          if (varlen) {
            for (int b = uniform_int(2, 4); b > 0; --b) {
              s.seqlens_q.push_back(uniform_int(0, 4) == 0 ? 0 : uniform_int(1, 200));
              s.seqlens_k.push_back(uniform_int(0, 4) == 0 ? 0 : uniform_int(1, 200));
            }
            s.extra_rows = uniform_int(0, 2);
          } else {
            s.batch = uniform_int(1, 2);
            s.seqlen_q = uniform_int(1, 200);
            s.seqlen_k = uniform_int(1, 200);
          }
          s.causal = causal;
          if (window_kind & 1) s.window_left = uniform_int(0, 100);
          if (window_kind & 2) s.window_right = uniform_int(0, 100);
          if (softcap) s.softcap = std::uniform_real_distribution<float>(2.0f, 20.0f)(rng);
          s.alibi = static_cast<Alibi>(alibi);
          s.pad = uniform_int(0, 2) == 0 ? 8 : 0;
          expect_backward_matches_reference(s);
        }
}

std::string options_name(const ::testing::TestParamInfo<std::tuple<bool, int>>& info) {
  static const char* windows[] = {"NoWindow", "Left", "Right", "LeftRight"};
  return std::string(std::get<0>(info.param) ? "Causal" : "Full") + windows[std::get<1>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(All, BackwardOptions, ::testing::Combine(::testing::Bool(), ::testing::Range(0, 4)),
                         options_name);

// ---- finite differences ---------------------------------------------------------------------------

// loss = sum(O * dO) over rows that belong to a sequence, summed in double.
double reference_loss(const AttnCase& c) {
  const ForwardResult f = run_forward(c, Backend::kCPUReference, false);
  EXPECT_TRUE(f.status.ok()) << f.status.message;
  const HostTensor o = c.used_part(f.out, Role::kQ), d = c.used_part(c.dout, Role::kQ);
  double loss = 0.0;
  for (int64_t i = 0; i < o.numel(); ++i) loss += static_cast<double>(o.get(i)) * d.get(i);
  return loss;
}

// d loss / d t by central differences, t one of c's inputs (modified in place and restored).
// The step is divided by the difference of the float values actually stored, not by 2 * eps,
// because x +- eps rounds in float32.
HostTensor finite_difference(AttnCase& c, HostTensor& t, Role role) {
  const float eps = 1e-2f;
  HostTensor grad(DType::kFloat32, t.shape());
  const HostTensor used = c.used_part(t, role);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i >= used.numel()) {
      grad.set(i, 0.0f);
      continue;
    }
    const float x = t.get(i);
    t.set(i, x + eps);
    const float hi = t.get(i);
    const double f_hi = reference_loss(c);
    t.set(i, x - eps);
    const float lo = t.get(i);
    const double f_lo = reference_loss(c);
    t.set(i, x);
    grad.set(i, static_cast<float>((f_hi - f_lo) / (static_cast<double>(hi) - lo)));
  }
  return grad;
}

void expect_gradients_match_finite_differences(const CaseSpec& spec) {
  SCOPED_TRACE(spec.describe());
  AttnCase c = make_case(spec);
  const HostTensor gq = finite_difference(c, c.q, Role::kQ);
  const HostTensor gk = finite_difference(c, c.k, Role::kK);
  const HostTensor gv = finite_difference(c, c.v, Role::kK);
  // Truncation (eps^2 times a third derivative of order 1) and the float32 rounding of O divided
  // by the step both stay near 1e-4; a wrong term in a gradient is off by order 1.
  const double tol = 2e-3;
  for (Backend backend : {Backend::kCPUReference, Backend::kCPU}) {
    SCOPED_TRACE(flashattn::backend_name(backend));
    const ForwardResult f = run_forward(c, backend);
    const BackwardResult g = run_backward(c, backend, f);
    ASSERT_TRUE(backward_written(c, g));
    EXPECT_LE(rel_l2(c.used_part(g.dq, Role::kQ), c.used_part(gq, Role::kQ)), tol) << "dq";
    EXPECT_LE(rel_l2(c.used_part(g.dk, Role::kK), c.used_part(gk, Role::kK)), tol) << "dk";
    EXPECT_LE(rel_l2(c.used_part(g.dv, Role::kK), c.used_part(gv, Role::kK)), tol) << "dv";
  }
}

TEST(BackwardFiniteDifferences, Plain) {
  CaseSpec s;
  s.seed = 11;
  s.seqlen_q = 3;
  s.seqlen_k = 4;
  s.headdim = 8;
  expect_gradients_match_finite_differences(s);
}

TEST(BackwardFiniteDifferences, CausalGqaWithMaskedRow) {
  CaseSpec s;
  s.seed = 12;
  s.batch = 2;
  s.seqlen_q = 4;
  s.seqlen_k = 3;  // bottom-right causal: query row 0 sees no key
  s.nheads_q = 2;
  s.nheads_kv = 1;
  s.headdim = 8;
  s.causal = true;
  expect_gradients_match_finite_differences(s);
}

TEST(BackwardFiniteDifferences, WindowSoftcapAlibiScale) {
  CaseSpec s;
  s.seed = 13;
  s.seqlen_q = 5;
  s.seqlen_k = 5;
  s.nheads_q = 2;
  s.nheads_kv = 2;
  s.headdim = 16;
  s.window_left = 1;
  s.window_right = 1;
  s.softcap = 1.5f;  // small enough that tanh bends the scores noticeably
  s.softmax_scale = 0.7f;
  s.alibi = Alibi::kPerHead;
  expect_gradients_match_finite_differences(s);
}

TEST(BackwardFiniteDifferences, VarlenMqaAlibi2dWithEmptySequences) {
  CaseSpec s;
  s.seed = 14;
  s.seqlens_q = {2, 0, 3, 2};
  s.seqlens_k = {3, 2, 0, 4};
  s.extra_rows = 1;
  s.nheads_q = 3;
  s.nheads_kv = 1;
  s.headdim = 8;
  s.window_right = 0;
  s.softcap = 4.0f;
  s.alibi = Alibi::kPerBatchHead;
  expect_gradients_match_finite_differences(s);
}

// ---- layouts and determinism --------------------------------------------------------------------

// q, k, v in one (B, S, 3, H, D) buffer and dq, dk, dv in another, as flash_attn's qkvpacked
// functions use them: interleaved gradient writes must not clobber each other.
TEST(BackwardLayout, PackedQkvAndGradients) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    CaseSpec s;
    s.seed = 51;
    s.dtype = dtype;
    s.batch = 2;
    s.seqlen_q = s.seqlen_k = 150;
    s.nheads_q = s.nheads_kv = 2;
    s.headdim = 48;
    s.causal = true;
    s.alibi = Alibi::kPerHead;
    SCOPED_TRACE(s.describe());
    const AttnCase dense = make_case(s);
    const int64_t B = 2, S = 150, H = 2, D = 48;
    const std::vector<int64_t> shape = {B, S, H, D}, strides = {S * 3 * H * D, 3 * H * D, D, 1};
    HostTensor qkv(dtype, {B, S, 3, H, D}), dqkv(dtype, {B, S, 3, H, D});
    AttnCase packed = dense;
    packed.q = HostTensor::alias(qkv, 0, shape, strides);
    packed.k = HostTensor::alias(qkv, H * D, shape, strides);
    packed.v = HostTensor::alias(qkv, 2 * H * D, shape, strides);
    packed.q.from_float(dense.q.to_float());
    packed.k.from_float(dense.k.to_float());
    packed.v.from_float(dense.v.to_float());

    const ForwardResult f = run_forward(dense, Backend::kCPU);
    const BackwardResult want = run_backward(dense, Backend::kCPU, f);
    ASSERT_TRUE(backward_written(dense, want));

    dqkv.poison();
    BackwardResult got;
    got.dq = HostTensor::alias(dqkv, 0, shape, strides);
    got.dk = HostTensor::alias(dqkv, H * D, shape, strides);
    got.dv = HostTensor::alias(dqkv, 2 * H * D, shape, strides);
    flashattn::BackwardArgs args{packed.q.view(),  packed.k.view(), packed.v.view(), f.out.view(), dense.dout.view(),
                                 f.lse.view(),     got.dq.view(),   got.dk.view(),   got.dv.view()};
    got.status = flashattn::backward(args, packed.params(Backend::kCPU));
    ASSERT_TRUE(got.status.ok()) << got.status.message;
    EXPECT_EQ(dqkv.count_nonfinite(), 0);
    EXPECT_EQ(max_abs_diff(got.dq, want.dq), 0.0);
    EXPECT_EQ(max_abs_diff(got.dk, want.dk), 0.0);
    EXPECT_EQ(max_abs_diff(got.dv, want.dv), 0.0);
  }
}

// The deterministic backward's case: four query heads on one KV head and several key tiles
// (9 of float32's 128 keys, 5 of bf16's 256), so that dQ's chunks each collect several heads'
// and tiles' sums.
CaseSpec deterministic_spec(DType dtype, int threads) {
  CaseSpec s;
  s.seed = 52;
  s.dtype = dtype;
  s.batch = 1;
  s.seqlen_q = 700;
  s.seqlen_k = 1100;
  s.nheads_q = 4;
  s.nheads_kv = 1;
  s.headdim = 32;
  s.deterministic = true;
  s.num_threads = threads;
  return s;
}

void expect_same_bits(const BackwardResult& a, const BackwardResult& b) {
  EXPECT_EQ(max_abs_diff(a.dq, b.dq), 0.0);
  EXPECT_EQ(max_abs_diff(a.dk, b.dk), 0.0);
  EXPECT_EQ(max_abs_diff(a.dv, b.dv), 0.0);
}

TEST(Backward, DeterministicIsBitwiseReproducible) {
  // As many threads as the cores up to 5 (resolve_threads), so that chunks finish in varying order.
  const CaseSpec s = deterministic_spec(DType::kFloat32, 5);
  SCOPED_TRACE(s.describe());
  const AttnCase c = make_case(s);
  const ForwardResult f = run_forward(c, Backend::kCPU);
  const BackwardResult a = run_backward(c, Backend::kCPU, f);
  ASSERT_TRUE(backward_written(c, a));
  for (int rep = 0; rep < 3; ++rep) {
    const BackwardResult b = run_backward(c, Backend::kCPU, f);
    ASSERT_TRUE(backward_written(c, b));
    expect_same_bits(a, b);
  }
}

// With `deterministic` the split of the key tiles into dQ's chunks does not follow the thread
// count, so the gradients are the same bits at 1, 2 and 7 threads (7: clamped to the processors).
TEST(Backward, DeterministicAtAnyThreadCount) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    BackwardResult first;
    for (int threads : {1, 2, 7}) {
      const CaseSpec s = deterministic_spec(dtype, threads);
      SCOPED_TRACE(s.describe());
      const AttnCase c = make_case(s);
      const ForwardResult f = run_forward(c, Backend::kCPU);
      BackwardResult g = run_backward(c, Backend::kCPU, f);
      ASSERT_TRUE(backward_written(c, g));
      if (threads == 1) {
        first = std::move(g);
        continue;
      }
      expect_same_bits(first, g);
    }
  }
}

}  // namespace
}  // namespace fa_test
