// The sm90 backward (wgmma, src/cuda/sm90/bwd_kernel.h) through the public API on Hopper, against
// the fp64 CPU reference: fresh random inputs per case, gradients poisoned before the run, errors
// within twice those of a naive same-dtype computation. Each case also checks that the API took
// the sm90 backward, and the refusals that the sm80 backward takes instead. Built where both
// kernel sets are (the sm90 backward runs inside the sm80 backward's workspace and conversion,
// and the runner is sm80_device_run's).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <tuple>

#include "common/attn_case.h"
#include "common/checks.h"
#include "cuda/kernel_sets.h"
#include "gpu/sm80_device_run.h"
#include "gpu/sm90_device.h"

namespace fa_test {
namespace {

// Forward (whichever kernel the API picks), then the backward, checked against the reference;
// expect_sm90: whether the API must have run the sm90 backward for it; override: the scope's
// FLASHATTN_SM90_BACKWARD.
void check_backward(const CaseSpec& s, bool expect_sm90 = true, const char* override_value = "1") {
  // FLASHATTN_SM90_BACKWARD: "1" runs the sm90 backward wherever it supports the problem,
  // whatever the rule says; nullptr leaves the rule.
  const ScopedEnv scoped("FLASHATTN_SM90_BACKWARD", override_value);
  SCOPED_TRACE(s.describe());
  const AttnCase c = make_case(s);
  const Reference ref = reference(c, true);
  const ForwardResult f = gpu_forward(c);
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  const int64_t before = flashattn::sm90_backward_launches();
  const BackwardResult g = gpu_backward(c, f);
  ASSERT_TRUE(g.status.ok()) << g.status.message;
  EXPECT_EQ(flashattn::sm90_backward_launches() - before, expect_sm90 ? 1 : 0)
      << (expect_sm90 ? "the API did not run the sm90 backward" : "the API ran the sm90 backward");
  const ::testing::AssertionResult close = within_twice_naive(c, ref, f, &g);
  EXPECT_TRUE(close);
  std::printf("  errors vs fp64: %s\n", close.message());
}

CaseSpec spec(DType dtype, int headdim, uint64_t seed) {
  CaseSpec s;
  s.seed = seed;
  s.dtype = dtype;
  s.batch = 2;
  s.seqlen_q = 200;
  s.seqlen_k = 333;  // several key blocks (128 keys, 64 at head dim 256), neither length a multiple of a tile
  s.nheads_q = 4;
  s.nheads_kv = 2;
  s.headdim = headdim;
  return s;
}

const CaseOption kOptions[] = {
    {"full", [](CaseSpec&) {}},
    {"causal", [](CaseSpec& s) { s.causal = true; }},
    {"causal_q_longer", [](CaseSpec& s) { s.causal = true, s.seqlen_q = 333, s.seqlen_k = 130; }},
    {"causal_square_long", [](CaseSpec& s) { s.causal = true, s.seqlen_q = s.seqlen_k = 700, s.batch = 1; }},
    {"window_left", [](CaseSpec& s) { s.window_left = 37; }},
    {"window_right", [](CaseSpec& s) { s.window_right = 21; }},
    {"window_both", [](CaseSpec& s) { s.window_left = 70, s.window_right = 5; }},
    {"causal_window", [](CaseSpec& s) { s.causal = true, s.window_left = 100; }},
    {"mqa", [](CaseSpec& s) { s.nheads_q = 6, s.nheads_kv = 1; }},
    {"mha", [](CaseSpec& s) { s.nheads_kv = s.nheads_q; }},
    {"scale", [](CaseSpec& s) { s.softmax_scale = 0.3f; }},
    {"padded_strides", [](CaseSpec& s) { s.pad = 8; }},
    {"short_k", [](CaseSpec& s) { s.seqlen_k = 7; }},
    {"single_q", [](CaseSpec& s) { s.seqlen_q = 1; }},
    {"whole_tiles", [](CaseSpec& s) { s.seqlen_q = 256, s.seqlen_k = 384; }},
    {"gqa_causal_window_padded",
     [](CaseSpec& s) { s.causal = true, s.window_left = 60, s.nheads_q = 8, s.nheads_kv = 2, s.pad = 8; }},
    {"large_scores", [](CaseSpec& s) { s.q_std = 3.0f, s.k_std = 3.0f; }},
    {"softcap", [](CaseSpec& s) { s.softcap = 5.0f; }},
    {"varlen", [](CaseSpec& s) { s.seqlens_q = {70, 0, 200, 33}, s.seqlens_k = {90, 20, 333, 0}; }},
    {"varlen_window", [](CaseSpec& s) { s.seqlens_q = {300, 90, 5}, s.seqlens_k = {260, 200, 400}, s.window_left = 40; }},
    {"varlen_causal_gqa",
     [](CaseSpec& s) { s.seqlens_q = {129, 1, 300}, s.seqlens_k = {129, 300, 250}, s.causal = true, s.nheads_q = 6; }},
    // Windows reaching past every key (the API makes them -1; i + offset + window overflowed int).
    {"huge_windows", [](CaseSpec& s) { s.window_left = INT32_MAX, s.window_right = INT32_MAX - 1; }},
    {"softcap_causal_gqa_large_scores",
     [](CaseSpec& s) { s.softcap = 8.0f, s.causal = true, s.nheads_q = 6, s.nheads_kv = 2, s.q_std = 3.0f; }},
};

class Sm90Backward : public ::testing::TestWithParam<OptionParam> {};

TEST_P(Sm90Backward, MatchesReference) {
  SKIP_UNLESS_SM90();
  const CaseOption& o = kOptions[std::get<2>(GetParam())];
  CaseSpec s = spec(std::get<0>(GetParam()), std::get<1>(GetParam()), 2000 + std::get<2>(GetParam()));
  o.apply(s);
  check_backward(s);
}

INSTANTIATE_TEST_SUITE_P(All, Sm90Backward,
                         ::testing::ValuesIn(option_params(static_cast<int>(std::size(kOptions)), {64, 128, 256})),
                         [](const auto& info) { return option_param_name(kOptions, info.param); });

// What the sm90 backward leaves to the sm80 backward: the API still answers, through sm80.
TEST(Sm90BackwardRefusals, AlibiRowsPastSequencesSequsedDeterministicHeadDimNoRows) {
  SKIP_UNLESS_SM90();
  CaseSpec b = spec(DType::kBFloat16, 64, 2102);
  b.alibi = Alibi::kPerHead;
  check_backward(b, false);
  CaseSpec c = spec(DType::kFloat16, 128, 2103);  // rows past the last sequence: sm80's
  c.seqlens_q = {70, 0, 33};
  c.seqlens_k = {90, 20, 130};
  c.extra_rows = 5;
  check_backward(c, false);
  CaseSpec q = spec(DType::kBFloat16, 128, 2107);  // rows past the last sequence in q and dout only
  q.seqlens_q = {70, 0, 33};
  q.seqlens_k = {90, 20, 130};
  q.extra_rows_q = 3;
  check_backward(q, false);
  CaseSpec u = spec(DType::kBFloat16, 128, 2106);
  u.seqused_k = {300, 100};
  check_backward(u, false);
  CaseSpec d = spec(DType::kBFloat16, 128, 2104);
  d.deterministic = true;
  check_backward(d, false);
  CaseSpec e = spec(DType::kBFloat16, 192, 2105);  // a head dim it is not built for
  check_backward(e, false);
  CaseSpec z = spec(DType::kFloat16, 64, 2108);  // no query rows at all (TMA maps need one)
  z.seqlens_q = {0, 0};
  z.seqlens_k = {40, 0};
  check_backward(z, false);
}

// The rule without the override: head dims 64, 128 and 256 take the sm90 backward, 192 the sm80
// one; and FLASHATTN_SM90_BACKWARD=0 keeps sm80.
TEST(Sm90BackwardRule, HeadDims64To256ByDefault) {
  SKIP_UNLESS_SM90();
  check_backward(spec(DType::kBFloat16, 128, 2301), true, nullptr);
  check_backward(spec(DType::kBFloat16, 64, 2302), true, nullptr);
  check_backward(spec(DType::kBFloat16, 256, 2304), true, nullptr);
  check_backward(spec(DType::kBFloat16, 192, 2306), false, nullptr);
  check_backward(spec(DType::kFloat16, 128, 2303), false, "0");
  check_backward(spec(DType::kFloat16, 256, 2305), false, "0");
}

// A small set for compute-sanitizer (memcheck, racecheck, synccheck).
TEST(Sm90BackwardSanitize, SmallCases) {
  SKIP_UNLESS_SM90();
  CaseSpec s = spec(DType::kBFloat16, 128, 2201);
  s.batch = 1;
  s.seqlen_q = 150;
  s.seqlen_k = 260;
  s.causal = true;
  s.nheads_q = 4;
  s.nheads_kv = 2;
  check_backward(s);
  CaseSpec t = spec(DType::kFloat16, 64, 2202);
  t.batch = 1;
  t.seqlen_q = 130;
  t.seqlen_k = 70;
  t.window_left = 30;
  t.window_right = 10;
  check_backward(t);
  CaseSpec w = spec(DType::kBFloat16, 256, 2209);  // head dim 256: shared keys, split dK / dV columns
  w.batch = 1;
  w.seqlen_q = 100;
  w.seqlen_k = 150;
  w.causal = true;
  w.nheads_q = 4;
  w.nheads_kv = 2;
  check_backward(w);
  for (int d : {64, 128, 256}) {  // variable length: absolute rows, per-sequence workspace offsets
    CaseSpec v = spec(DType::kBFloat16, d, 2203 + d);
    v.seqlens_q = {70, 0, 33, 150};
    v.seqlens_k = {90, 20, 130, 140};
    v.causal = true;
    v.softcap = 6.0f;
    check_backward(v);
  }
}

}  // namespace
}  // namespace fa_test
