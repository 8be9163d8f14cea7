// The bf16 forward's tiles: on processors with AMX its products run on bf16 tiles that need rows
// in 16s and keys and head dims in 32s (cpu/amx_products.h), so the shapes here sit on either
// side of those steps and of the 128-key and 512-row blocks, with every option that changes a
// tile's masking. Each is held to the same bar as the other low-precision tests: no more than
// twice the error of a naive bf16 implementation against the fp64 reference on the same values.
// (Elsewhere the same checks cover the float32 products.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/attn_case.h"
#include "common/checks.h"

namespace fa_test {
namespace {

using Role = AttnCase::Role;

struct TileCase {
  int seqlen_q, seqlen_k, headdim, nheads_q, nheads_kv;
  bool causal;
  int window_left, window_right;
  float softcap;
};

class ForwardBf16Tiles : public ::testing::TestWithParam<TileCase> {};

TEST_P(ForwardBf16Tiles, WithinTwiceNaiveError) {
  const TileCase& t = GetParam();
  CaseSpec s;
  s.seed = 7000 + t.seqlen_q + t.seqlen_k + t.headdim;
  s.dtype = DType::kBFloat16;
  s.batch = 2;
  s.seqlen_q = t.seqlen_q, s.seqlen_k = t.seqlen_k, s.headdim = t.headdim;
  s.nheads_q = t.nheads_q, s.nheads_kv = t.nheads_kv;
  s.causal = t.causal, s.window_left = t.window_left, s.window_right = t.window_right, s.softcap = t.softcap;
  SCOPED_TRACE(s.describe());
  const AttnCase c = make_case(s);
  const ForwardResult ref = run_forward(convert_case(c, DType::kFloat32), Backend::kCPUReference);
  const NaiveResult naive = naive_attention(c, DType::kBFloat16, false);
  const ForwardResult f = run_forward(c, Backend::kCPU);
  ASSERT_TRUE(forward_written(c, f));
  const double floor = 1e-5;
  const double flash_out = rel_l2(c.used_part(f.out, Role::kQ), c.used_part(ref.out, Role::kQ));
  const double naive_out = rel_l2(c.used_part(naive.out, Role::kQ), c.used_part(ref.out, Role::kQ));
  EXPECT_LE(flash_out, 2 * naive_out + floor) << "out: flash " << flash_out << " naive " << naive_out;
  const double flash_lse = lse_error(c.used_part(f.lse, Role::kLse), c.used_part(ref.lse, Role::kLse));
  const double naive_lse = lse_error(c.used_part(naive.lse, Role::kLse), c.used_part(ref.lse, Role::kLse));
  EXPECT_LE(flash_lse, 2 * naive_lse + floor) << "lse: flash " << flash_lse << " naive " << naive_lse;
}

std::string tile_case_name(const ::testing::TestParamInfo<TileCase>& info) {
  const TileCase& t = info.param;
  return "q" + std::to_string(t.seqlen_q) + "_k" + std::to_string(t.seqlen_k) + "_d" + std::to_string(t.headdim) +
         "_h" + std::to_string(t.nheads_q) + "_" + std::to_string(t.nheads_kv) + (t.causal ? "_causal" : "") +
         (t.window_left >= 0 || t.window_right >= 0 ? "_window" : "") + (t.softcap > 0 ? "_softcap" : "");
}

INSTANTIATE_TEST_SUITE_P(Shapes, ForwardBf16Tiles,
                         ::testing::Values(TileCase{1, 1, 8, 1, 1, false, -1, -1, 0.0f},
                                           TileCase{15, 31, 24, 2, 1, false, -1, -1, 0.0f},
                                           TileCase{17, 33, 40, 2, 2, true, -1, -1, 0.0f},
                                           TileCase{100, 300, 72, 4, 2, false, -1, -1, 0.0f},
                                           TileCase{130, 129, 128, 2, 1, true, -1, -1, 0.0f},
                                           TileCase{513, 257, 64, 1, 1, false, 40, 8, 0.0f},
                                           TileCase{600, 700, 96, 2, 2, true, -1, -1, 12.0f},
                                           TileCase{64, 1000, 256, 2, 1, false, -1, -1, 0.0f},
                                           TileCase{31, 640, 160, 2, 2, false, 100, -1, 0.0f}),
                         tile_case_name);

}  // namespace
}  // namespace fa_test
