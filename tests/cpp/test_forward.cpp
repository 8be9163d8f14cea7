// CPU flash forward against the fp64 reference: random shapes, every option combination, strided
// layouts. Every run starts from NaN-poisoned outputs (see run_forward), so forward_close also
// proves that each element inside a sequence was written and nothing outside the views was.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>

#include "common/attn_case.h"
#include "common/checks.h"

namespace fa_test {
namespace {

using flashattn::Backend;

void expect_flash_matches_reference(const CaseSpec& spec) {
  SCOPED_TRACE(spec.describe());
  EXPECT_TRUE(cpu_forward_matches_reference(make_case(spec)));
}

// ---- random shapes ------------------------------------------------------------------------

class ForwardRandom : public ::testing::TestWithParam<int> {};

TEST_P(ForwardRandom, FlashMatchesReference) {
  RandomLimits lim;
  lim.max_work = 4e7;
  expect_flash_matches_reference(random_spec(test_seed_base() + 1000 + GetParam(), lim));
}

INSTANTIATE_TEST_SUITE_P(Seeds, ForwardRandom, ::testing::Range(0, 40));

// Fixed lengths on both sides of the 128-key tiles and the 64-row slices of the 512-row tasks,
// seqlen_q != seqlen_k both ways.
TEST(Forward, TileEdgesAndUnequalLengths) {
  const int lengths[][2] = {{1, 1},     {1, 1000}, {1000, 1},  {127, 129}, {128, 128}, {129, 127},
                            {255, 257}, {256, 256}, {257, 255}, {513, 64},  {64, 513},  {1000, 999},
                            {511, 600}, {512, 512}, {600, 511}};
  int n = 0;
  for (const auto& len : lengths) {
    for (int causal = 0; causal < 2; ++causal) {
      CaseSpec s;
      s.seed = 77 + n;
      s.batch = 1 + n % 3;
      s.seqlen_q = len[0];
      s.seqlen_k = len[1];
      s.nheads_q = 2;
      s.nheads_kv = 1 + n % 2;
      s.headdim = 8 * (1 + (n * 5) % 16);
      s.causal = causal;
      ++n;
      expect_flash_matches_reference(s);
    }
  }
}

TEST(Forward, EveryHeadDim) {
  for (int d = 8; d <= 256; d += 8) {
    CaseSpec s;
    s.seed = 500 + d;
    s.batch = 2;
    s.seqlen_q = 70;
    s.seqlen_k = 131;
    s.nheads_q = 2;
    s.nheads_kv = 2;
    s.headdim = d;
    s.causal = (d / 8) % 2 == 0;
    expect_flash_matches_reference(s);
  }
}

// ---- every combination of options at small sizes ---------------------------------------------

// causal x window kind, each test looping over heads x varlen x softcap x ALiBi.
class ForwardOptions : public ::testing::TestWithParam<std::tuple<bool, int>> {};

CaseSpec combination_spec(uint64_t seed, bool causal, int window_kind, int heads_kind, bool varlen, bool softcap,
                          int alibi) {
  std::mt19937_64 rng(seed);
  auto uniform_int = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  CaseSpec s;
  s.seed = seed;
  static const int heads[3][2] = {{3, 3}, {4, 2}, {3, 1}};  // MHA, GQA, MQA
  s.nheads_q = heads[heads_kind][0];
  s.nheads_kv = heads[heads_kind][1];
  s.headdim = 8 * uniform_int(1, 12);
  if (varlen) {
    const int batch = uniform_int(2, 4);
    for (int b = 0; b < batch; ++b) {
      // A zero-length query or key sequence in the middle of the batch now and then.
      s.seqlens_q.push_back(uniform_int(0, 5) == 0 ? 0 : uniform_int(1, 300));
      s.seqlens_k.push_back(uniform_int(0, 5) == 0 ? 0 : uniform_int(1, 300));
    }
    s.extra_rows = uniform_int(0, 3);
  } else {
    s.batch = uniform_int(1, 3);
    s.seqlen_q = uniform_int(1, 300);
    s.seqlen_k = uniform_int(1, 300);
  }
  s.causal = causal;
  if (window_kind & 1) s.window_left = uniform_int(0, 150);
  if (window_kind & 2) s.window_right = uniform_int(0, 150);
  if (softcap) s.softcap = std::uniform_real_distribution<float>(2.0f, 20.0f)(rng);
  s.alibi = static_cast<Alibi>(alibi);
  s.pad = uniform_int(0, 2) == 0 ? 8 : 0;
  return s;
}

TEST_P(ForwardOptions, FlashMatchesReference) {
  const bool causal = std::get<0>(GetParam());
  const int window_kind = std::get<1>(GetParam());
  uint64_t seed = test_seed_base() + 3000 + (causal ? 100 : 0) + 1000 * window_kind;
  for (int heads_kind = 0; heads_kind < 3; ++heads_kind)
    for (int varlen = 0; varlen < 2; ++varlen)
      for (int softcap = 0; softcap < 2; ++softcap)
        for (int alibi = 0; alibi < 3; ++alibi) {
          expect_flash_matches_reference(
              combination_spec(seed++, causal, window_kind, heads_kind, varlen, softcap, alibi));
        }
}

std::string options_name(const ::testing::TestParamInfo<std::tuple<bool, int>>& info) {
  static const char* windows[] = {"NoWindow", "Left", "Right", "LeftRight"};
  return std::string(std::get<0>(info.param) ? "Causal" : "Full") + windows[std::get<1>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(All, ForwardOptions, ::testing::Combine(::testing::Bool(), ::testing::Range(0, 4)),
                         options_name);

// ---- layouts ------------------------------------------------------------------------------------

// flash_attn's qkvpacked layout: q, k and v are interleaved slices of one (B, S, 3, H, D) buffer.
TEST(ForwardLayout, PackedQkvMatchesContiguous) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    CaseSpec s;
    s.seed = 41;
    s.dtype = dtype;
    s.batch = 2;
    s.seqlen_q = s.seqlen_k = 200;
    s.nheads_q = s.nheads_kv = 3;
    s.headdim = 40;
    s.causal = true;
    s.softcap = 5.0f;
    SCOPED_TRACE(s.describe());
    const AttnCase dense = make_case(s);
    const int64_t B = 2, S = 200, H = 3, D = 40;
    HostTensor qkv(dtype, {B, S, 3, H, D});
    AttnCase packed = dense;
    const std::vector<int64_t> strides = {S * 3 * H * D, 3 * H * D, D, 1};
    packed.q = HostTensor::alias(qkv, 0, {B, S, H, D}, strides);
    packed.k = HostTensor::alias(qkv, H * D, {B, S, H, D}, strides);
    packed.v = HostTensor::alias(qkv, 2 * H * D, {B, S, H, D}, strides);
    packed.q.from_float(dense.q.to_float());
    packed.k.from_float(dense.k.to_float());
    packed.v.from_float(dense.v.to_float());

    const ForwardResult a = run_forward(dense, Backend::kCPU);
    const ForwardResult b = run_forward(packed, Backend::kCPU);
    ASSERT_TRUE(forward_written(dense, a));
    ASSERT_TRUE(forward_written(packed, b));
    // The same arithmetic on the same values: strides must not change a single bit.
    EXPECT_EQ(max_abs_diff(a.out, b.out), 0.0);
    EXPECT_EQ(lse_error(a.lse, b.lse), 0.0);
  }
}

// Packed K/V with GQA, a strided lse that is (B, S, H) in memory, and a key tensor shared by the
// whole batch through a zero batch stride.
TEST(ForwardLayout, StridedKvLseAndBroadcastBatch) {
  CaseSpec s;
  s.seed = 42;
  s.batch = 3;
  s.seqlen_q = 130;
  s.seqlen_k = 270;
  s.nheads_q = 4;
  s.nheads_kv = 2;
  s.headdim = 24;
  s.window_left = 100;
  s.alibi = Alibi::kPerBatchHead;
  SCOPED_TRACE(s.describe());
  AttnCase c = make_case(s);
  const int64_t B = 3, Sq = 130, Sk = 270, Hq = 4, H = 2, D = 24;
  // K and V equal across the batch, so that a zero batch stride can describe them.
  for (int64_t i = Sk * H * D; i < c.k.numel(); ++i) {
    c.k.set(i, c.k.get(i % (Sk * H * D)));
    c.v.set(i, c.v.get(i % (Sk * H * D)));
  }
  const ForwardResult ref = run_forward(c, Backend::kCPUReference);

  AttnCase packed = c;
  HostTensor kv(DType::kFloat32, {B, Sk, 2, H, D});
  const std::vector<int64_t> strides = {Sk * 2 * H * D, 2 * H * D, D, 1};
  packed.k = HostTensor::alias(kv, 0, {B, Sk, H, D}, strides);
  packed.v = HostTensor::alias(kv, H * D, {B, Sk, H, D}, strides);
  packed.k.from_float(c.k.to_float());
  packed.v.from_float(c.v.to_float());
  EXPECT_TRUE(forward_close(packed, run_forward(packed, Backend::kCPU), ref)) << "packed kv";

  AttnCase broadcast = c;
  HostTensor k1(DType::kFloat32, {1, Sk, H, D}), v1(DType::kFloat32, {1, Sk, H, D});
  for (int64_t i = 0; i < k1.numel(); ++i) {
    k1.set(i, c.k.get(i));
    v1.set(i, c.v.get(i));
  }
  broadcast.k = HostTensor::alias(k1, 0, {B, Sk, H, D}, {0, H * D, D, 1});
  broadcast.v = HostTensor::alias(v1, 0, {B, Sk, H, D}, {0, H * D, D, 1});
  EXPECT_TRUE(forward_close(broadcast, run_forward(broadcast, Backend::kCPU), ref)) << "zero batch stride";

  // lse (B, Hq, Sq) over (Hq, B, Sq) memory: only its last dimension has to be contiguous.
  HostTensor out(DType::kFloat32, {B, Sq, Hq, D}, 8);
  HostTensor lse_mem = HostTensor::strided(DType::kFloat32, {B, Hq, Sq}, {Sq, B * Sq, 1}, B * Sq * Hq);
  out.poison();
  lse_mem.poison();
  flashattn::ForwardArgs args{c.q.view(), c.k.view(), c.v.view(), out.view(), lse_mem.view()};
  ForwardResult got;
  got.status = flashattn::forward(args, c.params(Backend::kCPU));
  got.out = out;
  got.lse = lse_mem;
  EXPECT_TRUE(forward_close(c, got, ref)) << "permuted lse";
}

// The lse output is optional.
TEST(ForwardLayout, WithoutLse) {
  CaseSpec s;
  s.seed = 43;
  s.batch = 2;
  s.seqlen_q = 90;
  s.seqlen_k = 300;
  s.nheads_q = 2;
  s.headdim = 64;
  s.nheads_kv = 2;
  s.causal = true;
  SCOPED_TRACE(s.describe());
  const AttnCase c = make_case(s);
  const ForwardResult ref = run_forward(c, Backend::kCPUReference, false);
  const ForwardResult got = run_forward(c, Backend::kCPU, false);
  ASSERT_TRUE(forward_written(c, ref));
  EXPECT_TRUE(forward_close(c, got, ref));
}

// Thread counts must not change the result, and a single thread must work.
TEST(Forward, ThreadCountsAgree) {
  CaseSpec s;
  s.seed = 44;
  s.batch = 2;
  s.seqlen_q = 600;
  s.seqlen_k = 300;
  s.nheads_q = 4;
  s.nheads_kv = 1;
  s.headdim = 32;
  s.window_left = 64;
  s.window_right = 16;
  const AttnCase c1 = [&] { CaseSpec t = s; t.num_threads = 1; return make_case(t); }();
  const AttnCase c3 = [&] { CaseSpec t = s; t.num_threads = 3; return make_case(t); }();
  const ForwardResult a = run_forward(c1, Backend::kCPU), b = run_forward(c3, Backend::kCPU);
  ASSERT_TRUE(forward_written(c1, a));
  ASSERT_TRUE(forward_written(c3, b));
  EXPECT_EQ(max_abs_diff(a.out, b.out), 0.0);
  EXPECT_TRUE(forward_close(c1, a, run_forward(c1, Backend::kCPUReference)));
}

// Soft caps far above the scores leave them as they are (the CPU's tanh lost small arguments
// until session 61: at a cap of 1e8 every score became 0, the weights uniform), forward and
// backward, each dtype.
TEST(Forward, SoftcapFarAboveTheScores) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (float softcap : {1e5f, 1e8f}) {
      CaseSpec s;
      s.seed = 330;
      s.dtype = dtype;
      s.batch = 1;
      s.seqlen_q = 64;
      s.seqlen_k = 128;
      s.nheads_q = 2;
      s.nheads_kv = 2;
      s.headdim = 64;
      s.softcap = softcap;
      SCOPED_TRACE(s.describe());
      const AttnCase c = make_case(s);
      if (dtype == DType::kFloat32) {
        const ForwardResult ref_f = run_forward(c, Backend::kCPUReference), got_f = run_forward(c, Backend::kCPU);
        EXPECT_TRUE(forward_close(c, got_f, ref_f));
        EXPECT_TRUE(backward_close(c, run_backward(c, Backend::kCPU, got_f),
                                   run_backward(c, Backend::kCPUReference, ref_f)));
      } else {
        EXPECT_TRUE(within_twice_naive(c, true));
      }
    }
  }
}

// A window side that reaches every key from every row is no mask (the API drops it: a causal
// decode is an unmasked problem): the same bits as without it, and the reference's answer. One
// key short of that, it is a mask again: the last row loses key 0 (left) or row 0 the last key
// (right), and the output differs.
TEST(Forward, WindowSidesThatReachEveryKey) {
  struct Sides {
    int sq, sk;
    bool causal;
    int left, right;
    bool is_mask;  // whether the sides still mask something
  };
  const Sides sides[] = {
      {1, 700, true, -1, -1, false},     // causal decode
      {300, 300, true, 299, -1, false},  // causal, the left side reaching key 0 from the last row
      {200, 500, false, -1, 199, false},  // the right side reaching the last key from row 0
      {200, 500, false, 499, 199, false},
      {300, 300, true, 298, -1, true},   // one key short on the left
      {200, 500, false, -1, 198, true},  // one key short on the right
  };
  int n = 0;
  for (const Sides& w : sides) {
    CaseSpec s;
    s.seed = 310 + n++;
    s.batch = 2;
    s.seqlen_q = w.sq;
    s.seqlen_k = w.sk;
    s.nheads_q = 4;
    s.nheads_kv = 2;
    s.headdim = 64;
    s.causal = w.causal;
    s.window_left = w.left;
    s.window_right = w.right;
    CaseSpec plain = s;  // the same inputs without the window: causal alone (but for the decode) or no mask
    plain.window_left = plain.window_right = -1;
    plain.causal = w.causal && w.sq > 1;
    SCOPED_TRACE(s.describe());
    const AttnCase c = make_case(s), p = make_case(plain);
    const ForwardResult a = run_forward(c, Backend::kCPU), b = run_forward(p, Backend::kCPU);
    ASSERT_TRUE(forward_written(c, a));
    EXPECT_TRUE(forward_close(c, a, run_forward(c, Backend::kCPUReference)));
    if (w.is_mask) {
      EXPECT_GT(max_abs_diff(a.out, b.out), 0.0) << "a side one key short masked nothing";
    } else {
      EXPECT_EQ(max_abs_diff(a.out, b.out), 0.0) << "a side reaching every key changed the output";
    }
  }
}

}  // namespace
}  // namespace fa_test
