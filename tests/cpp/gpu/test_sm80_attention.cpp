// The sm80 FlashAttention-2 kernels (forward and backward) against the fp64 CPU reference, through
// the public API with Backend::kCUDA. Fresh random inputs per case (never zeros), outputs poisoned
// before each run; errors must stay within twice those of a naive same-dtype computation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "common/attn_case.h"
#include "common/checks.h"
#include "gpu/sm80_device_run.h"

namespace fa_test {
namespace {

using Role = AttnCase::Role;

// Runs forward and backward on the GPU and checks both against the reference.
void check_case(const CaseSpec& s, bool with_backward = true) {
  SCOPED_TRACE(s.describe());
  const AttnCase c = make_case(s);
  const Reference ref = reference(c, with_backward);
  const ForwardResult f = gpu_forward(c);
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  BackwardResult g;
  if (with_backward) {
    g = gpu_backward(c, f);
    ASSERT_TRUE(g.status.ok()) << g.status.message;
  }
  const ::testing::AssertionResult close = within_twice_naive(c, ref, f, with_backward ? &g : nullptr);
  EXPECT_TRUE(close);
  std::printf("  errors vs fp64: %s\n", close.message());  // the measured levels, for the record
}

CaseSpec base_spec(DType dtype, int headdim, uint64_t seed) {
  CaseSpec s;
  s.seed = seed;
  s.dtype = dtype;
  s.batch = 2;
  s.seqlen_q = 200;
  s.seqlen_k = 333;  // neither a multiple of any tile
  s.nheads_q = 4;
  s.nheads_kv = 2;
  s.headdim = headdim;
  return s;
}

// ---- every instantiated head dim, both dtypes, with and without the causal mask ---------------

class Sm80HeadDims : public ::testing::TestWithParam<std::tuple<DType, int, bool>> {};

TEST_P(Sm80HeadDims, MatchesReference) {
  SM80_SKIP_WITHOUT_GPU();
  CaseSpec s = base_spec(std::get<0>(GetParam()), std::get<1>(GetParam()), 11 + std::get<1>(GetParam()));
  s.causal = std::get<2>(GetParam());
  check_case(s);
}

INSTANTIATE_TEST_SUITE_P(All, Sm80HeadDims,
                         ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16),
                                            ::testing::Values(32, 64, 96, 128, 192, 256), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(dtype_str(std::get<0>(info.param))) + "_d" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_causal" : "_full");
                         });

// ---- head dims between the instantiated ones run zero padded ----------------------------------

TEST(Sm80Attention, PaddedHeadDims) {
  SM80_SKIP_WITHOUT_GPU();
  for (int d : {8, 40, 80, 136, 200, 248}) check_case(base_spec(DType::kBFloat16, d, 100 + d));
}

// ---- options, one at a time and combined ------------------------------------------------------

const CaseOption kOptions[] = {
    {"causal", [](CaseSpec& s) { s.causal = true; }},
    {"causal_q_longer", [](CaseSpec& s) { s.causal = true, s.seqlen_q = 333, s.seqlen_k = 130; }},
    {"window_left", [](CaseSpec& s) { s.window_left = 37; }},
    {"window_right", [](CaseSpec& s) { s.window_right = 21; }},
    {"window_both", [](CaseSpec& s) { s.window_left = 70, s.window_right = 5; }},
    {"causal_window", [](CaseSpec& s) { s.causal = true, s.window_left = 100; }},
    {"softcap", [](CaseSpec& s) { s.softcap = 5.0f; }},
    {"alibi_head", [](CaseSpec& s) { s.alibi = Alibi::kPerHead; }},
    {"alibi_batch_head", [](CaseSpec& s) { s.alibi = Alibi::kPerBatchHead; }},
    {"mqa", [](CaseSpec& s) { s.nheads_q = 6, s.nheads_kv = 1; }},
    {"mha", [](CaseSpec& s) { s.nheads_kv = s.nheads_q; }},
    {"scale", [](CaseSpec& s) { s.softmax_scale = 0.3f; }},
    {"padded_strides", [](CaseSpec& s) { s.pad = 8; }},
    {"short_k", [](CaseSpec& s) { s.seqlen_k = 7; }},
    {"single_q", [](CaseSpec& s) { s.seqlen_q = 1; }},
    {"softcap_alibi_causal_gqa",
     [](CaseSpec& s) { s.softcap = 8.0f, s.alibi = Alibi::kPerHead, s.causal = true, s.nheads_q = 6, s.nheads_kv = 2; }},
    {"window_softcap_padded", [](CaseSpec& s) { s.window_left = 50, s.window_right = 50, s.softcap = 3.0f, s.pad = 8; }},
    {"alibi_window_q_longer",
     [](CaseSpec& s) { s.alibi = Alibi::kPerBatchHead, s.window_left = 20, s.seqlen_q = 400, s.seqlen_k = 150; }},
};

class Sm80Options : public ::testing::TestWithParam<OptionParam> {};

TEST_P(Sm80Options, MatchesReference) {
  SM80_SKIP_WITHOUT_GPU();
  const CaseOption& o = kOptions[std::get<2>(GetParam())];
  CaseSpec s = base_spec(std::get<0>(GetParam()), std::get<1>(GetParam()), 1000 + std::get<2>(GetParam()));
  o.apply(s);
  check_case(s);
}

INSTANTIATE_TEST_SUITE_P(All, Sm80Options, ::testing::ValuesIn(option_params(static_cast<int>(std::size(kOptions)))),
                         [](const auto& info) { return option_param_name(kOptions, info.param); });

// ---- variable length, zero-length sequences and rows no sequence owns -------------------------

TEST(Sm80Attention, VarlenWithEmptySequences) {
  SM80_SKIP_WITHOUT_GPU();
  for (bool causal : {false, true}) {
    CaseSpec s = base_spec(DType::kBFloat16, 128, causal ? 7 : 8);
    s.seqlens_q = {130, 0, 1, 64, 257, 5};
    s.seqlens_k = {200, 17, 0, 64, 129, 300};
    s.extra_rows = 3;
    s.causal = causal;
    check_case(s);
  }
  CaseSpec s = base_spec(DType::kFloat16, 64, 9);
  s.seqlens_q = {0, 0};
  s.seqlens_k = {40, 0};
  check_case(s);
}

// ---- rows that see no key: O = 0 and lse = -inf exactly, dQ = 0; unseen keys get dK = dV = 0 -----

TEST(Sm80Attention, FullyMaskedRows) {
  SM80_SKIP_WITHOUT_GPU();
  CaseSpec s = base_spec(DType::kBFloat16, 64, 21);
  s.seqlen_q = 300;
  s.seqlen_k = 100;
  s.causal = true;  // bottom-right aligned: the first 200 query rows see nothing
  const AttnCase c = make_case(s);
  const ForwardResult f = gpu_forward(c);
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  const BackwardResult g = gpu_backward(c, f);
  ASSERT_TRUE(g.status.ok()) << g.status.message;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.nheads_q; ++h)
      for (int i = 0; i < 200; ++i) {
        ASSERT_EQ(f.lse.get(c.lse_index(b, h, i)), -INFINITY) << b << " " << h << " " << i;
        for (int d = 0; d < s.headdim; ++d) {
          ASSERT_EQ(f.out.get(c.q_index(b, i, h, d)), 0.0f);
          ASSERT_EQ(g.dq.get(c.q_index(b, i, h, d)), 0.0f);
        }
      }
  EXPECT_TRUE(within_twice_naive(c, reference(c, true), f, &g));

  CaseSpec w = base_spec(DType::kFloat16, 128, 22);
  w.window_left = 0;
  w.window_right = 0;
  w.seqlen_q = 100;
  w.seqlen_k = 300;  // keys 0..199 are on no query's diagonal
  check_case(w);
}

// ---- causal backward at seqlen_k >= 2048: the key-tile-major grid order for head dims > 64 -------
// (backward_launch.cuh's key_tile_major_pays; d64 keeps the default order): GQA, ragged lengths,
// seqlen_q != seqlen_k, varlen.

TEST(Sm80Attention, CausalLongKeyTileMajorGrid) {
  SM80_SKIP_WITHOUT_GPU();
  CaseSpec s = base_spec(DType::kBFloat16, 64, 41);
  s.batch = 1;
  s.seqlen_q = 2100;
  s.seqlen_k = 2170;  // neither a multiple of a tile; 17 key tiles of 128
  s.nheads_q = 2;
  s.nheads_kv = 1;
  s.causal = true;
  check_case(s);
  CaseSpec t = base_spec(DType::kFloat16, 256, 42);  // 64-column key tiles
  t.batch = 1;
  t.seqlen_q = 1100;
  t.seqlen_k = 2060;
  t.nheads_q = 1;
  t.nheads_kv = 1;
  t.causal = true;
  check_case(t);
  CaseSpec v = base_spec(DType::kBFloat16, 128, 43);
  v.seqlens_q = {2049, 300};
  v.seqlens_k = {2100, 2050};
  v.nheads_q = 2;
  v.nheads_kv = 2;
  v.causal = true;
  check_case(v);
}

// ---- deterministic backward: bitwise equal across runs ----------------------------------------

// One forward, then `runs` + 1 deterministic backwards whose gradients must be byte for byte
// equal; with `check_reference` the first is also checked against the fp64 oracle.
void expect_bitwise_reproducible(const CaseSpec& s, int runs, bool check_reference) {
  SCOPED_TRACE(s.describe());
  const AttnCase c = make_case(s);
  const ForwardResult f = gpu_forward(c);
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  const BackwardResult first = gpu_backward(c, f);
  ASSERT_TRUE(first.status.ok()) << first.status.message;
  for (int run = 0; run < runs; ++run) {
    const BackwardResult again = gpu_backward(c, f);
    ASSERT_TRUE(again.status.ok()) << again.status.message;
    EXPECT_TRUE(same_bytes(first.dq, again.dq)) << "dq differs in run " << run;
    EXPECT_TRUE(same_bytes(first.dk, again.dk)) << "dk differs in run " << run;
    EXPECT_TRUE(same_bytes(first.dv, again.dv)) << "dv differs in run " << run;
  }
  if (check_reference) EXPECT_TRUE(within_twice_naive(c, reference(c, true), f, &first));
}

TEST(Sm80Attention, DeterministicBackwardIsBitwiseReproducible) {
  SM80_SKIP_WITHOUT_GPU();
  for (bool causal : {false, true}) {
    CaseSpec s = base_spec(DType::kBFloat16, 128, 31);
    s.seqlen_q = 700;
    s.seqlen_k = 650;
    s.nheads_q = 8;
    s.nheads_kv = 2;
    s.causal = causal;
    s.deterministic = true;
    expect_bitwise_reproducible(s, 3, true);
  }
  // Causal at seqlen 2100 runs the key-tile-major grid: the semaphores must order it too.
  CaseSpec l = base_spec(DType::kBFloat16, 128, 33);
  l.batch = 1;
  l.seqlen_q = l.seqlen_k = 2100;
  l.nheads_q = 2;
  l.nheads_kv = 1;
  l.causal = true;
  l.deterministic = true;
  expect_bitwise_reproducible(l, 1, true);
  CaseSpec v = base_spec(DType::kFloat16, 64, 32);
  v.seqlens_q = {300, 0, 129};
  v.seqlens_k = {260, 50, 400};
  v.window_left = 64;
  v.deterministic = true;
  expect_bitwise_reproducible(v, 1, false);
}

// ---- forward without lse; head-major strides ---------------------------------------------------

TEST(Sm80Attention, ForwardWithoutLse) {
  SM80_SKIP_WITHOUT_GPU();
  const AttnCase c = make_case(base_spec(DType::kFloat16, 96, 41));
  const ForwardResult f = gpu_forward(c, false);
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  EXPECT_TRUE(within_twice_naive(c, reference(c, false), f, nullptr));
}

// q, k, v, dout stored (batch, head, row, dim): the row stride is smaller than the head stride.
HostTensor head_major_copy(const HostTensor& t) {
  const int64_t B = t.size(0), S = t.size(1), H = t.size(2), D = t.size(3);
  HostTensor out = HostTensor::strided(t.dtype(), {B, S, H, D}, {H * S * D, D, S * D, 1}, B * H * S * D);
  for (int64_t i = 0; i < t.numel(); ++i) out.set(i, t.get(i));
  return out;
}

TEST(Sm80Attention, HeadMajorStrides) {
  SM80_SKIP_WITHOUT_GPU();
  AttnCase c = make_case(base_spec(DType::kBFloat16, 128, 51));
  c.q = head_major_copy(c.q);
  c.k = head_major_copy(c.k);
  c.v = head_major_copy(c.v);
  c.dout = head_major_copy(c.dout);
  const Reference ref = reference(c, true);
  const ForwardResult f = gpu_forward(c);
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  const BackwardResult g = gpu_backward(c, f);
  ASSERT_TRUE(g.status.ok()) << g.status.message;
  EXPECT_TRUE(within_twice_naive(c, ref, f, &g));
}

// ---- what the kernels do not run is refused with a message, not computed ----------------------

TEST(Sm80Attention, RefusesFloat32) {
  SM80_SKIP_WITHOUT_GPU();
  CaseSpec s = base_spec(DType::kFloat32, 64, 61);
  const AttnCase c = make_case(s);
  const ForwardResult f = gpu_forward(c);
  EXPECT_EQ(f.status.code, flashattn::StatusCode::kUnsupported);
  EXPECT_NE(f.status.message.find("float32"), std::string::npos) << f.status.message;
}

// ---- random shapes and options -----------------------------------------------------------------

class Sm80Random : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(Sm80Random, MatchesReference) {
  SM80_SKIP_WITHOUT_GPU();
  RandomLimits lim;
  lim.max_seqlen = 700;
  lim.max_work = 1.5e7;
  CaseSpec s = random_spec(7000 + std::get<1>(GetParam()), lim);
  s.dtype = std::get<0>(GetParam());
  if (s.pad % 8 != 0) s.pad = 8;  // the CUDA backend needs 16-byte strides
  s.deterministic = std::get<1>(GetParam()) % 3 == 0;
  check_case(s);
}

INSTANTIATE_TEST_SUITE_P(Seeds, Sm80Random,
                         ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16), ::testing::Range(0, 24)),
                         [](const auto& info) {
                           return std::string(dtype_str(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

// ---- key splits: each query tile's keys cut into pieces, merged by the combine kernel -----------
// (split_combine.cuh). The backward runs on the merged out and lse, so it checks the lse too.

TEST(Sm80Attention, KeySplits) {
  SM80_SKIP_WITHOUT_GPU();
  // Decode, GQA 8 / 2, over 3000 keys: the library cuts it by itself (num_splits 0).
  CaseSpec decode = base_spec(DType::kBFloat16, 128, 81);
  decode.seqlen_q = 1;
  decode.seqlen_k = 3000;
  decode.nheads_q = 8;
  decode.num_splits = 0;
  check_case(decode);
  // The caller's counts, with the options each piece must keep whole-row: causal with rows that
  // see no key (bottom-right aligned, 300 queries over 100 keys) and pieces past a tile's keys.
  CaseSpec causal = base_spec(DType::kFloat16, 64, 82);
  causal.seqlen_q = 300;
  causal.seqlen_k = 100 * 5 + 33;
  causal.causal = true;
  causal.num_splits = 5;
  check_case(causal);
  causal.seqlen_k = 100;
  causal.num_splits = 3;
  check_case(causal);
  CaseSpec mods = base_spec(DType::kBFloat16, 256, 83);
  mods.seqlen_q = 70;
  mods.seqlen_k = 900;
  mods.window_left = 300, mods.window_right = 40;
  mods.softcap = 6.0f;
  mods.alibi = Alibi::kPerBatchHead;
  mods.num_splits = 7;
  check_case(mods);
  // More pieces than key tiles (held to one a tile), a padded head dim.
  CaseSpec many = base_spec(DType::kFloat16, 40, 84);
  many.seqlen_q = 3;
  many.num_splits = 64;
  check_case(many);
  // Variable length with an empty sequence, seqused_k and NaN in the key rows no sequence uses.
  CaseSpec varlen = base_spec(DType::kBFloat16, 96, 85);
  varlen.seqlens_q = {1, 0, 17, 2};
  varlen.seqlens_k = {700, 30, 1100, 64};
  varlen.seqused_k = {650, 0, 1100, 1};
  varlen.nan_in_unused_kv = true;
  varlen.extra_rows = 5;
  varlen.causal = true;
  varlen.num_splits = 4;
  check_case(varlen);
  // Used lengths far below seqlen_k (a cache filled to its cache_seqlens) and a left window, with
  // the pieces the library sizes from seqlen_k: each row's visible tiles are shared out over them.
  CaseSpec used = base_spec(DType::kBFloat16, 128, 86);
  used.batch = 4;
  used.seqlen_q = 1;
  used.seqlen_k = 8192;
  used.nheads_q = 8;
  used.seqused_k = {300, 8192, 0, 1000};
  used.nan_in_unused_kv = true;
  used.num_splits = 0;
  check_case(used);
  CaseSpec window = used;
  window.seed = 87;
  window.seqused_k.clear();
  window.window_left = 500;
  check_case(window);
}

// GQA / MQA decode steps, whose query heads of a KV head the sm80 dispatch runs as that head's
// query rows (decode_heads_as_rows.h), with and without pieces; and the steps it must leave
// alone (a left window, ALiBi), which then run head by head.
TEST(Sm80Attention, DecodeHeadsAsRows) {
  SM80_SKIP_WITHOUT_GPU();
  for (int splits : {0, 1}) {
    CaseSpec gqa = base_spec(DType::kFloat16, 64, 91 + splits);
    gqa.batch = 3;
    gqa.seqlen_q = 1;
    gqa.seqlen_k = 1500;
    gqa.nheads_q = 12, gqa.nheads_kv = 3;
    gqa.causal = true;
    gqa.softcap = 5.0f;
    gqa.seqused_k = {1500, 0, 777};
    gqa.nan_in_unused_kv = true;
    gqa.pad = 8;
    gqa.num_splits = splits;
    check_case(gqa);
    CaseSpec mqa = base_spec(DType::kBFloat16, 256, 93 + splits);
    mqa.seqlen_q = 1;
    mqa.seqlen_k = 900;
    mqa.nheads_q = 16, mqa.nheads_kv = 1;
    mqa.num_splits = splits;
    check_case(mqa);
    // 96 query heads of one KV head: 96 rows, two query tiles and their pieces.
    CaseSpec wide = base_spec(DType::kBFloat16, 128, 97 + splits);
    wide.batch = 1;
    wide.seqlen_q = 1;
    wide.seqlen_k = 2000;
    wide.nheads_q = 96, wide.nheads_kv = 1;
    wide.num_splits = splits;
    check_case(wide, false);
  }
  CaseSpec window = base_spec(DType::kBFloat16, 128, 95);
  window.seqlen_q = 1;
  window.seqlen_k = 1000;
  window.nheads_q = 8;
  window.window_left = 100;
  check_case(window);
  window.window_left = -1;
  window.alibi = Alibi::kPerHead;
  check_case(window);
}

// The pieces really run: num_splits 1 and 6 give lse that differ in float32 rounding, yet both
// match the reference (were num_splits lost on the way, both would run the same kernel). A row's
// lse is ~log(4000) + m, whose ulp (~1e-6) hides most of the pieces' rounding in log(l): a row
// reads the same bits either way more often than not, so the case has 256 rows, not 4 (with 4,
// the even shares of session 80 happened to give all four the same bits).
TEST(Sm80Attention, KeySplitsReachTheKernel) {
  SM80_SKIP_WITHOUT_GPU();
  CaseSpec s = base_spec(DType::kBFloat16, 128, 86);
  s.batch = 8;
  s.seqlen_q = 1;
  s.seqlen_k = 4000;
  s.nheads_q = 32;
  s.nheads_kv = 4;
  s.num_splits = 1;
  const AttnCase whole = make_case(s);
  s.num_splits = 6;
  const AttnCase pieces = make_case(s);  // the same seed: the same inputs
  const ForwardResult a = gpu_forward(whole), b = gpu_forward(pieces);
  ASSERT_TRUE(a.status.ok()) << a.status.message;
  ASSERT_TRUE(b.status.ok()) << b.status.message;
  EXPECT_FALSE(same_bytes(a.lse, b.lse)) << "num_splits 1 and 6 ran the same kernel";
  const Reference ref = reference(pieces, false);
  EXPECT_TRUE(within_twice_naive(pieces, ref, b, nullptr));
  EXPECT_TRUE(within_twice_naive(whole, ref, a, nullptr));
}

// ---- a small set for compute-sanitizer (memcheck, racecheck) -----------------------------------

TEST(Sm80Sanitize, SmallCases) {
  SM80_SKIP_WITHOUT_GPU();
  CaseSpec pieces = base_spec(DType::kBFloat16, 128, 70);  // key splits and their combine
  pieces.seqlen_q = 2;
  pieces.seqlen_k = 700;
  pieces.causal = true;
  pieces.num_splits = 4;
  check_case(pieces);
  CaseSpec s = base_spec(DType::kBFloat16, 64, 71);
  s.batch = 1;
  s.seqlen_q = 150;
  s.seqlen_k = 140;
  s.causal = true;
  check_case(s);
  CaseSpec v = base_spec(DType::kFloat16, 128, 72);
  v.seqlens_q = {70, 0, 33};
  v.seqlens_k = {90, 20, 0};
  v.deterministic = true;
  v.softcap = 4.0f;
  check_case(v);
  CaseSpec w = base_spec(DType::kBFloat16, 256, 73);
  w.batch = 1;
  w.seqlen_q = 90;
  w.seqlen_k = 130;
  w.window_left = 20;
  w.alibi = Alibi::kPerHead;
  check_case(w);
  // Backward per head-dim class: d32 (128-row query tiles), d96 and d192 (zero-padded chunks
  // absent, 64-row tiles), d128 with whole query tiles (the unchecked dQ reduction path).
  CaseSpec x = base_spec(DType::kBFloat16, 32, 74);
  x.batch = 1;
  x.seqlen_q = 260;
  x.seqlen_k = 200;
  check_case(x);
  for (int d : {96, 192}) {
    CaseSpec y = base_spec(DType::kFloat16, d, 75 + d);
    y.batch = 1;
    y.seqlen_q = 100;
    y.seqlen_k = 150;
    y.causal = true;
    check_case(y);
  }
  CaseSpec z = base_spec(DType::kBFloat16, 128, 76);
  z.batch = 1;
  z.seqlen_q = 192;
  z.seqlen_k = 192;
  z.causal = true;
  check_case(z);
  // The key-tile-major grid (causal, seqlen_k >= 2048, head dim > 64), ragged.
  CaseSpec k = base_spec(DType::kBFloat16, 128, 77);
  k.batch = 1;
  k.seqlen_q = 100;
  k.seqlen_k = 2090;
  k.nheads_q = 1;
  k.nheads_kv = 1;
  k.causal = true;
  check_case(k);
}

}  // namespace
}  // namespace fa_test
