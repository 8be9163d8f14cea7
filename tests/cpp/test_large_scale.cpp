// Softmax scales so large that the scores reach 1e11: the flash path's fused s * scale - m, one
// rounding where the maximum m had one of its own, put exp's argument up to half a unit of m
// away from 0 for the row's largest score, so exp overflowed (inf, then NaN outputs) or the
// largest weight underflowed to 0. Integer inputs make the ties and the answer exact.
#include <gtest/gtest.h>

#include <cstdint>

#include "common/attn_case.h"

namespace fa_test {
namespace {

AttnCase integer_case(float scale) {
  CaseSpec s = sized_spec(5, DType::kFloat32, 1, 16, 16, 2, 1, 32);
  s.softmax_scale = scale;
  AttnCase c = make_case(s);
  uint32_t state = 1;
  for (HostTensor* t : {&c.q, &c.k, &c.v, &c.dout}) {
    for (int64_t i = 0; i < t->numel(); ++i) {
      state = state * 1103515245u + 12345u;
      t->set(i, static_cast<float>(static_cast<int>((state >> 8) % 5) - 2));  // -2 .. 2
    }
  }
  return c;
}

TEST(LargeScale, FlashMatchesTheReference) {
  for (float scale : {3e6f, 1e8f, 1e9f, 1e10f}) {
    SCOPED_TRACE("softmax_scale " + std::to_string(scale));
    const AttnCase c = integer_case(scale);
    const ForwardResult ref = run_forward(c, Backend::kCPUReference);
    const ForwardResult got = run_forward(c, Backend::kCPU);
    ASSERT_TRUE(ref.status.ok()) << ref.status.message;
    ASSERT_TRUE(got.status.ok()) << got.status.message;
    EXPECT_EQ(got.out.count_nonfinite(), 0);
    EXPECT_EQ(got.lse.count_nonfinite(), 0);
    EXPECT_LE(max_abs_diff(got.out, ref.out), 1e-5);
    EXPECT_LE(rel_l2(got.lse, ref.lse), 1e-6);
    const BackwardResult ref_grads = run_backward(c, Backend::kCPUReference, ref);
    const BackwardResult grads = run_backward(c, Backend::kCPU, got);
    ASSERT_TRUE(grads.status.ok()) << grads.status.message;
    for (const HostTensor* g : {&grads.dq, &grads.dk, &grads.dv}) EXPECT_EQ(g->count_nonfinite(), 0);
    EXPECT_LE(max_abs_diff(grads.dv, ref_grads.dv), 1e-4);
  }
}

}  // namespace
}  // namespace fa_test
