// seqused (FlashAttention-3's used lengths): each sequence takes part with only its first
// seqused_q[b] / seqused_k[b] rows. The CPU flash backend and the fp64 oracle are checked against
// the naive computation over the used rows, and both must leave every row past the used lengths
// as they found it (poisoned), forward and backward. Bad seqused tensors are refused by name.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/attn_case.h"
#include "common/checks.h"
#include "problem.h"
#include "variants/sequence.h"

namespace fa_test {
namespace {

using flashattn::BackwardArgs;
using flashattn::ForwardArgs;
using Role = AttnCase::Role;

// Forward and backward of both CPU backends against each other and against the naive baseline
// (an independent implementation that reads only the used rows).
void expect_seqused_case(const CaseSpec& spec) {
  SCOPED_TRACE(spec.describe());
  const AttnCase c = make_case(spec);
  const ForwardResult ref_f = run_forward(c, Backend::kCPUReference);
  ASSERT_TRUE(forward_written(c, ref_f)) << "reference";
  const BackwardResult ref_b = run_backward(c, Backend::kCPUReference, ref_f);
  ASSERT_TRUE(backward_written(c, ref_b)) << "reference";
  const NaiveResult naive = naive_attention(c, DType::kFloat32, true);
  EXPECT_LE(rel_l2(c.used_part(ref_f.out, Role::kQ), c.used_part(naive.out, Role::kQ)), 1e-5);
  EXPECT_LE(rel_l2(c.used_part(ref_b.dv, Role::kK), c.used_part(naive.dv, Role::kK)), 1e-4);

  const ForwardResult f = run_forward(c, Backend::kCPU);
  EXPECT_TRUE(forward_close(c, f, ref_f));
  EXPECT_TRUE(backward_close(c, run_backward(c, Backend::kCPU, f), ref_b));
}

CaseSpec seqused_spec(uint64_t seed, bool varlen, bool used_q, bool used_k, bool causal) {
  std::mt19937_64 rng(seed);
  auto uniform_int = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  CaseSpec s;
  s.seed = seed;
  s.nheads_q = 4;
  s.nheads_kv = 2;
  s.headdim = 8 * uniform_int(1, 12);
  s.causal = causal;
  s.nan_in_unused_kv = true;
  const int batch = 3;
  if (varlen) {
    for (int b = 0; b < batch; ++b) {
      s.seqlens_q.push_back(uniform_int(1, 150));
      s.seqlens_k.push_back(uniform_int(1, 200));
    }
    s.extra_rows = 5;
  } else {
    s.batch = batch;
    s.seqlen_q = uniform_int(20, 150);
    s.seqlen_k = uniform_int(20, 200);
  }
  // Used lengths anywhere in [0, span], the ends included.
  for (int b = 0; b < batch; ++b) {
    if (used_q) s.seqused_q.push_back(b == 0 ? 0 : b == 1 ? s.span_q(b) : uniform_int(1, s.span_q(b)));
    if (used_k) s.seqused_k.push_back(b == 2 ? s.span_k(b) : uniform_int(b == 0 ? 1 : 0, s.span_k(b)));
  }
  return s;
}

class Seqused : public ::testing::TestWithParam<std::tuple<bool, int, bool>> {};

TEST_P(Seqused, MatchesReferenceAndLeavesUnusedRows) {
  const bool varlen = std::get<0>(GetParam());
  const int which = std::get<1>(GetParam());  // 1: q only, 2: k only, 3: both
  const bool causal = std::get<2>(GetParam());
  uint64_t seed = test_seed_base() + 31000 + 10 * which + (varlen ? 100 : 0) + (causal ? 1000 : 0);
  for (int rep = 0; rep < 3; ++rep) {
    CaseSpec s = seqused_spec(seed + rep, varlen, which & 1, which & 2, causal);
    if (rep == 2) {  // one case with the other options on
      s.window_left = 17;
      s.softcap = 20.0f;
      s.alibi = Alibi::kPerBatchHead;
    }
    expect_seqused_case(s);
  }
}

std::string seqused_name(const ::testing::TestParamInfo<Seqused::ParamType>& info) {
  return seqused_case_name(std::get<0>(info.param), std::get<1>(info.param), std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(All, Seqused, ::testing::Combine(::testing::Bool(), ::testing::Values(1, 2, 3), ::testing::Bool()),
                         seqused_name);

// A used length equal to the span is the same problem as no seqused at all.
TEST(SequsedEquivalence, FullLengthsEqualNoSeqused) {
  CaseSpec s = seqused_spec(test_seed_base() + 31500, true, false, false, true);
  const AttnCase plain = make_case(s);
  s.seqused_q = s.seqlens_q;
  s.seqused_k = s.seqlens_k;
  const AttnCase used = make_case(s);
  const ForwardResult a = run_forward(plain, Backend::kCPU), b = run_forward(used, Backend::kCPU);
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  EXPECT_EQ(max_abs_diff(plain.used_part(a.out, Role::kQ), used.used_part(b.out, Role::kQ)), 0.0);
}

// ---- validation ----------------------------------------------------------------------------

struct SmallCase {
  AttnCase c = make_case([] {
    CaseSpec s;
    s.seed = 5;
    s.batch = 2;
    s.seqlen_q = 8;
    s.seqlen_k = 12;
    s.nheads_q = 2;
    s.nheads_kv = 1;
    s.headdim = 16;
    return s;
  }());
  HostTensor out{DType::kFloat32, c.q.shape()};
  ForwardArgs args;
  SmallCase() {
    out.poison();
    args.q = c.q.view();
    args.k = c.k.view();
    args.v = c.v.view();
    args.out = out.view();
  }
};

::testing::AssertionResult refused(const SmallCase& sc, const AttentionParams& p, const std::string& arg,
                                   const std::string& also) {
  const Status s = flashattn::forward(sc.args, p);
  if (s.ok()) return ::testing::AssertionFailure() << "accepted";
  if (s.message.find(arg) == std::string::npos || s.message.find(also) == std::string::npos) {
    return ::testing::AssertionFailure() << "message lacks '" << arg << "' or '" << also << "': " << s.message;
  }
  if (sc.out.count_nonfinite() != sc.out.numel()) return ::testing::AssertionFailure() << "out was written";
  return ::testing::AssertionSuccess() << s.message;
}

// Entries nobody read back (graph capture, indices_checked) are clamped where each backend reads
// them (variants/sequence.h): the kernels take the same function, so its bounds are checked here.
TEST(SequenceBounds, EntriesOutOfRangeActAsTheirNearestBound) {
  using flashattn::SequenceSpan;
  using flashattn::sequence_of;
  // Varlen: 3 sequences over 180 rows of q and 290 of k, the longest 130 / 200.
  const int32_t cu_q[] = {-9, 50, 40, 1180}, cu_k[] = {-3, 70, 90, 1 << 30};
  const int32_t used_q[] = {-1, 7, 500}, used_k[] = {1 << 30, -5, 131};
  const auto span = [&](const int32_t* uq, const int32_t* uk, int b) {
    return sequence_of<SequenceSpan>(cu_q, cu_k, uq, uk, 130, 200, 180, 290, b);
  };
  SequenceSpan s = span(nullptr, nullptr, 0);
  EXPECT_EQ(s.q_row0, 0);  // -9 acts as 0
  EXPECT_EQ(s.len_q, 50);
  EXPECT_EQ(s.k_row0, 0);
  EXPECT_EQ(s.len_k, 70);
  s = span(nullptr, nullptr, 1);  // an end before its start: empty
  EXPECT_EQ(s.q_row0, 50);
  EXPECT_EQ(s.len_q, 0);
  EXPECT_EQ(s.len_k, 20);
  s = span(nullptr, nullptr, 2);  // ends past the rows, then longer than the longest
  EXPECT_EQ(s.q_row0, 40);
  EXPECT_EQ(s.len_q, 130);  // rows 40..180 hold 140: the longest, 130, bounds it
  EXPECT_EQ(s.k_row0, 90);
  EXPECT_EQ(s.len_k, 200);
  s = span(used_q, used_k, 0);
  EXPECT_EQ(s.len_q, 0);
  EXPECT_EQ(s.len_k, 70);  // seqused past the span: the span
  s = span(used_q, used_k, 1);
  EXPECT_EQ(s.len_q, 0);  // 7 rows of an empty span
  EXPECT_EQ(s.len_k, 0);
  s = span(used_q, used_k, 2);
  EXPECT_EQ(s.len_q, 130);
  EXPECT_EQ(s.len_k, 131);
  // Fixed length: seqused within [0, seqlen]; a paged k's cu_seqlens_k (rows bound INT64_MAX)
  // gives lengths only, bounded by the longest.
  const SequenceSpan f = sequence_of<SequenceSpan>(nullptr, nullptr, used_q, used_k, 64, 300, 0, 0, 0);
  EXPECT_EQ(f.len_q, 0);
  EXPECT_EQ(f.len_k, 300);
  const SequenceSpan paged = sequence_of<SequenceSpan>(cu_q, cu_k, nullptr, nullptr, 130, 640, 180, INT64_MAX, 2);
  EXPECT_EQ(paged.k_row0, 90);
  EXPECT_EQ(paged.len_k, 640);
}

TEST(SequsedValidation, BadTensorsAreRefusedByName) {
  const HostTensor good_q = int32_tensor({3, 8}), too_long = int32_tensor({3, 9}), negative = int32_tensor({-1, 2});
  const HostTensor wrong_count = int32_tensor({3, 4, 5}), floats(DType::kFloat32, {2});
  const HostTensor matrix(DType::kInt32, {2, 1});
  {
    SmallCase sc;
    AttentionParams p = sc.c.params(Backend::kCPU);
    p.seqused_q = too_long.view();
    EXPECT_TRUE(refused(sc, p, "seqused_q", "has 8 rows"));
    p.seqused_q = negative.view();
    EXPECT_TRUE(refused(sc, p, "seqused_q", ">= 0"));
    p.seqused_q = wrong_count.view();
    EXPECT_TRUE(refused(sc, p, "seqused_q", "one per sequence"));
    p.seqused_q = floats.view();
    EXPECT_TRUE(refused(sc, p, "seqused_q", "float32"));
    p.seqused_q = matrix.view();
    EXPECT_TRUE(refused(sc, p, "seqused_q", "dimensions"));
    p.seqused_q = good_q.view();
    const HostTensor too_long_k = int32_tensor({12, 13});
    p.seqused_k = too_long_k.view();
    EXPECT_TRUE(refused(sc, p, "seqused_k", "has 12 rows"));
  }
  {
    SmallCase sc;
    AttentionParams p = sc.c.params(Backend::kCPU);
    HostTensor strided = HostTensor::strided(DType::kInt32, {2}, {2}, 4);
    strided.set(0, 1);
    strided.set(1, 1);
    p.seqused_k = strided.view();
    EXPECT_TRUE(refused(sc, p, "seqused_k", "stride"));
  }
}

}  // namespace
}  // namespace fa_test
