// Decode-sized rows on the float path read K and V rows where they lie (flash_fwd.cpp kDirectRows:
// a sequence's queries times the q heads of a kv head at most 2; Kernels::dot_rows / axpy_rows):
// 1-5 queries with MHA (4/4 heads: 1 and 2 queries take that path) and GQA (4/2: 1 query does),
// the rest on the packed path beside them, against the fp64 reference. Head dims sit on both
// sides of the vector widths (8, 40 and 72 leave a scalar tail at 16 lanes), key counts cross the
// 16-key blocks of dot_rows and the 128-key tiles, and every option that changes a score is
// there: fp32 against the reference's tolerance, fp16 and bf16 within twice a naive
// implementation's error (bf16 takes this path where ctest runs it without its engine).
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "common/attn_case.h"
#include "common/checks.h"

namespace fa_test {
namespace {

struct FewCase {
  int seqlen_q, seqlen_k, headdim;
  int variant;  // 0 plain, 1 causal + softcap, 2 window + ALiBi + padded strides, 3 varlen + seqused
};

CaseSpec few_spec(const FewCase& f, DType dtype) {
  CaseSpec s;
  s.seed = 9100 + f.seqlen_q * 131 + f.seqlen_k + f.headdim * 7 + f.variant;
  s.dtype = dtype;
  s.batch = 2;
  s.seqlen_q = f.seqlen_q, s.seqlen_k = f.seqlen_k, s.headdim = f.headdim;
  s.nheads_q = 4, s.nheads_kv = f.variant % 2 == 0 ? 4 : 2;
  if (f.variant == 1) s.causal = true, s.softcap = 7.0f;
  if (f.variant == 2) s.window_left = 50, s.window_right = 3, s.alibi = Alibi::kPerBatchHead, s.pad = 8;
  if (f.variant == 3) {
    s.seqlens_q = {f.seqlen_q, 1, f.seqlen_q + 2};
    s.seqlens_k = {f.seqlen_k, 17, f.seqlen_k + 40};
    s.seqused_q = {f.seqlen_q, 1, f.seqlen_q};
    s.seqused_k = {std::max(0, f.seqlen_k - 5), 17, f.seqlen_k};
    s.extra_rows = 3, s.nan_in_unused_kv = true, s.causal = true;
  }
  return s;
}

// ctest lists a case by its fields instead of its bytes.
void PrintTo(const FewCase& f, std::ostream* os) {
  *os << "q" << f.seqlen_q << " k" << f.seqlen_k << " d" << f.headdim << " variant " << f.variant;
}

class FewQueries : public ::testing::TestWithParam<FewCase> {};

TEST_P(FewQueries, MatchesReference) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    const CaseSpec s = few_spec(GetParam(), dtype);
    SCOPED_TRACE(s.describe());
    const AttnCase c = make_case(s);
    if (dtype == DType::kFloat32) {
      EXPECT_TRUE(cpu_forward_matches_reference(c));
    } else {
      EXPECT_TRUE(within_twice_naive(c, false));
    }
  }
}

std::vector<FewCase> few_cases() {
  std::vector<FewCase> v;
  const int keys[] = {1, 15, 17, 130, 300};
  int i = 0;
  for (int q : {1, 2, 3, 4, 5}) {
    for (int d : {8, 40, 72, 128, 256}) {
      v.push_back({q, keys[i % 5], d, i % 4});
      ++i;
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, FewQueries, ::testing::ValuesIn(few_cases()),
                         [](const ::testing::TestParamInfo<FewCase>& info) {
                           const FewCase& f = info.param;
                           return "q" + std::to_string(f.seqlen_q) + "_k" + std::to_string(f.seqlen_k) + "_d" +
                                  std::to_string(f.headdim) + "_v" + std::to_string(f.variant);
                         });

}  // namespace
}  // namespace fa_test
