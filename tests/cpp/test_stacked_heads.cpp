// The CPU forward's stacked GQA heads (flash_fwd.cpp, heads_per_task): with short query rows a
// task holds the rows of several q heads of one kv head, head after head, so its 64-row slices
// cross heads, each head keeps its own ALiBi slope and its queries restart at the head's first
// row; on the direct path (fp32 decode) it stacks several kv heads, each row reading its own. Every case runs at one thread, where the rule stacks (batch * q heads / stacked heads >= 2
// tasks, every sequence's rows times the stacked heads <= 512): fp32 against the fp64 reference,
// bf16 within twice a naive bf16's error. Then again at every thread the machine has, where the
// rule may stack fewer heads or none: a row's result must not depend on the rows beside it, so
// the two outputs are the same bits. ctest runs them again with OMP_NUM_THREADS=64, where the
// second run stacks nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>

#include "common/attn_case.h"
#include "common/checks.h"

namespace fa_test {
namespace {

using flashattn::Backend;

struct StackCase {
  const char* name;
  CaseSpec spec;
};

// ctest lists a case by its name instead of its bytes.
void PrintTo(const StackCase& c, std::ostream* os) { *os << c.name; }

CaseSpec base(uint64_t seed, int batch, int seqlen_q, int seqlen_k, int nheads_q, int nheads_kv, int headdim) {
  CaseSpec s = sized_spec(seed, DType::kFloat32, batch, seqlen_q, seqlen_k, nheads_q, nheads_kv, headdim);
  s.num_threads = 1;
  return s;
}

std::vector<StackCase> stack_cases() {
  std::vector<StackCase> v;
  CaseSpec s = base(8101, 1, 1, 700, 8, 2, 128);  // decode: 4 heads of one row each
  s.causal = true;
  v.push_back({"decode_g4_causal", s});
  s = base(8102, 2, 5, 300, 6, 2, 64);  // 3 heads of 5 rows, a window, a slope per (batch, head)
  s.window_left = 40, s.window_right = 8, s.alibi = Alibi::kPerBatchHead;
  v.push_back({"g3_window_alibi", s});
  s = base(8103, 1, 37, 260, 16, 2, 96);  // 8 heads of 37 rows: slices of 64 cross heads
  s.causal = true, s.softcap = 9.0f;
  v.push_back({"g8_causal_softcap_slices_cross_heads", s});
  s = base(8104, 1, 100, 130, 12, 3, 72);  // padded strides, a left window, a slope per head
  s.pad = 8, s.window_left = 20, s.window_right = 0, s.alibi = Alibi::kPerHead;
  v.push_back({"g4_padded_window_alibi", s});
  s = base(8105, 1, 130, 200, 4, 1, 32);  // 4 heads of 130 rows do not fit 512: 2 stacked
  s.causal = true;
  v.push_back({"g4_two_stacked", s});
  s = base(8106, 1, 128, 300, 8, 2, 64);  // exactly 512 rows
  v.push_back({"g4_full_task", s});
  s = base(8107, 2, 50, 20, 8, 2, 40);  // causal with more queries than keys: early rows see none
  s.causal = true;
  v.push_back({"g4_rows_without_keys", s});
  s = base(8108, 1, 1, 1, 4, 1, 8);
  s.seqlens_q = {3, 1, 60}, s.seqlens_k = {200, 90, 500};  // varlen, seqused, NaN in unused K/V
  s.seqused_q = {3, 0, 55}, s.seqused_k = {190, 90, 333};
  s.extra_rows = 5, s.nan_in_unused_kv = true, s.causal = true;
  v.push_back({"g4_varlen_seqused", s});
  // The direct path (fp32, queries x group <= 2) stacks whole kv heads, read 16 keys at a time
  // across them: MHA and G = 2 decode, two MHA queries, varlen with seqused and NaN in unused K/V.
  s = base(8109, 2, 1, 700, 8, 8, 128);
  v.push_back({"direct_mha_decode", s});
  s = base(8110, 1, 1, 333, 12, 6, 64);  // a tail of 13 keys past the last 16-key chunk
  s.alibi = Alibi::kPerHead, s.softcap = 5.0f;
  v.push_back({"direct_g2_decode_alibi_softcap", s});
  s = base(8111, 1, 2, 290, 6, 6, 40);
  s.causal = true, s.window_left = 100;
  v.push_back({"direct_mha_two_queries_window", s});
  s = base(8112, 1, 1, 1, 4, 4, 32);
  s.seqlens_q = {1, 1, 1}, s.seqlens_k = {200, 17, 500};
  s.seqused_k = {190, 0, 333};
  s.extra_rows = 5, s.nan_in_unused_kv = true;
  v.push_back({"direct_mha_varlen_seqused", s});
  return v;
}

class StackedHeads : public ::testing::TestWithParam<StackCase> {};

// Elements that differ (NaN, the poison of rows no sequence uses, equals NaN; -inf, the lse of rows
// that see no key, equals -inf).
int64_t differing(const HostTensor& a, const HostTensor& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float x = a.get(i), y = b.get(i);
    n += !(x == y || (std::isnan(x) && std::isnan(y)));
  }
  return n;
}

void expect_same_at_every_thread(const CaseSpec& one_thread, const ForwardResult& stacked) {
  CaseSpec all = one_thread;
  all.num_threads = 0;
  const AttnCase c = make_case(all);
  const ForwardResult r = run_forward(c, Backend::kCPU);
  ASSERT_TRUE(forward_written(c, r));
  EXPECT_EQ(differing(stacked.out, r.out), 0);
  EXPECT_EQ(differing(stacked.lse, r.lse), 0);
}

TEST_P(StackedHeads, Fp32MatchesReference) {
  const CaseSpec s = GetParam().spec;
  SCOPED_TRACE(s.describe());
  ForwardResult got;
  EXPECT_TRUE(cpu_forward_matches_reference(make_case(s), &got));
  expect_same_at_every_thread(s, got);
}

TEST_P(StackedHeads, Bf16WithinTwiceNaive) {
  CaseSpec s = GetParam().spec;
  s.dtype = DType::kBFloat16;
  SCOPED_TRACE(s.describe());
  const AttnCase c = make_case(s);
  EXPECT_TRUE(within_twice_naive(c, false));
  expect_same_at_every_thread(s, run_forward(c, Backend::kCPU));
}

INSTANTIATE_TEST_SUITE_P(Cases, StackedHeads, ::testing::ValuesIn(stack_cases()),
                         [](const ::testing::TestParamInfo<StackCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace fa_test
