// seqused on the GPU (the forward kernel the API picks, and the sm80 backward) against the fp64
// reference: each sequence takes part with only its first seqused rows, and the rows past them
// must keep their poison in out, lse, dq, dk and dv.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "common/attn_case.h"
#include "common/checks.h"
#include "gpu/sm80_device_run.h"

namespace fa_test {
namespace {

using Role = AttnCase::Role;

class GpuSeqused : public ::testing::TestWithParam<std::tuple<bool, int, bool>> {};

TEST_P(GpuSeqused, MatchesReferenceAndLeavesUnusedRows) {
  SM80_SKIP_WITHOUT_GPU();
  const bool varlen = std::get<0>(GetParam());
  const int which = std::get<1>(GetParam());  // 1: q, 2: k, 3: both
  const bool causal = std::get<2>(GetParam());
  CaseSpec s = three_sequences_spec(4100 + which + (varlen ? 10 : 0) + (causal ? 20 : 0),
                                    which == 2 ? DType::kFloat16 : DType::kBFloat16, which == 1 ? 64 : 128, varlen,
                                    causal);
  for (int b = 0; b < 3; ++b) {
    // Zero, full, and a length that is not a tile multiple.
    if (which & 1) s.seqused_q.push_back(b == 0 ? 0 : b == 1 ? s.span_q(b) : s.span_q(b) - 77);
    if (which & 2) s.seqused_k.push_back(b == 0 ? s.span_k(b) - 3 : b == 1 ? 0 : 131);
  }
  SCOPED_TRACE(s.describe());
  const AttnCase c = make_case(s);
  const Reference ref = reference(c, true);
  const ForwardResult f = gpu_forward(c);
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  const BackwardResult g = gpu_backward(c, f);
  ASSERT_TRUE(g.status.ok()) << g.status.message;
  EXPECT_TRUE(forward_written(c, f));
  EXPECT_TRUE(backward_written(c, g));
  EXPECT_TRUE(within_twice_naive(c, ref, f, &g));
}

std::string gpu_seqused_name(const ::testing::TestParamInfo<GpuSeqused::ParamType>& info) {
  return seqused_case_name(std::get<0>(info.param), std::get<1>(info.param), std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(All, GpuSeqused,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(1, 2, 3), ::testing::Bool()),
                         gpu_seqused_name);

}  // namespace
}  // namespace fa_test
