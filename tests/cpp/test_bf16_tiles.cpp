// The bf16 forward's and backward's tiles: on processors with AMX or AVX512-BF16 their products run
// on bf16 operands that need rows in 16s and keys and head dims in 32s (cpu/bf16_products.h), so
// the shapes here sit
// on either side of those steps and of the blocks (forward: 128 keys, 512 rows; backward: 64 x 64), with the options that change a
// tile's masking or scores (causal, windows, softcap, ALiBi, variable length with seqused and NaN
// in the key rows no sequence uses) and odd row strides. Each is held to the same bar as the
// other low-precision tests: no more than twice the error of a naive bf16 implementation against
// the fp64 reference on the same values. ctest runs them again with each narrower engine
// (FLASHATTN_BF16_PRODUCTS=avx512bf16, =float: the float32 products) and under the narrower SIMD
// flavours.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/attn_case.h"
#include "common/checks.h"
#include "cpu/bf16_products.h"

namespace fa_test {
namespace {


struct TileCase {
  int seqlen_q, seqlen_k, headdim, nheads_q, nheads_kv;
  bool causal;
  int window_left, window_right;
  float softcap;
  Alibi alibi = Alibi::kNone;
  int64_t pad = 0;              // extra elements in every stride but the last (odd: odd strides)
  bool varlen_seqused = false;  // two sequences of seqlen_q / seqlen_k and one shorter, seqused on both
};

CaseSpec tile_spec(const TileCase& t) {
  CaseSpec s;
  s.seed = 7000 + t.seqlen_q + t.seqlen_k + t.headdim;
  s.dtype = DType::kBFloat16;
  s.batch = 2;
  s.seqlen_q = t.seqlen_q, s.seqlen_k = t.seqlen_k, s.headdim = t.headdim;
  s.nheads_q = t.nheads_q, s.nheads_kv = t.nheads_kv;
  s.causal = t.causal, s.window_left = t.window_left, s.window_right = t.window_right, s.softcap = t.softcap;
  s.alibi = t.alibi, s.pad = t.pad;
  if (t.varlen_seqused) {
    s.seqlens_q = {t.seqlen_q, t.seqlen_q / 2 + 1, t.seqlen_q};
    s.seqlens_k = {t.seqlen_k, t.seqlen_k / 3 + 1, t.seqlen_k};
    s.seqused_q = {t.seqlen_q, t.seqlen_q / 2, t.seqlen_q - 5};
    s.seqused_k = {t.seqlen_k - 7, t.seqlen_k / 3 + 1, t.seqlen_k / 2};
    s.extra_rows = 9;
    s.nan_in_unused_kv = true;
  }
  return s;
}

std::string products() {
  return std::string(" (") + flashattn::cpu::bf16_engine_name(flashattn::cpu::bf16_engine()) + " products)";
}

// The forward alone, then forward and backward (the backward from the flash forward's O and L, as
// a training step runs it).
class ForwardBf16Tiles : public ::testing::TestWithParam<TileCase> {};

TEST_P(ForwardBf16Tiles, WithinTwiceNaiveError) {
  const CaseSpec s = tile_spec(GetParam());
  SCOPED_TRACE(s.describe() + products());
  EXPECT_TRUE(within_twice_naive(make_case(s), false));
}

class BackwardBf16Tiles : public ::testing::TestWithParam<TileCase> {};

TEST_P(BackwardBf16Tiles, WithinTwiceNaiveError) {
  const CaseSpec s = tile_spec(GetParam());
  SCOPED_TRACE(s.describe() + products());
  EXPECT_TRUE(within_twice_naive(make_case(s), true));
}

std::string tile_case_name(const ::testing::TestParamInfo<TileCase>& info) {
  const TileCase& t = info.param;
  return "q" + std::to_string(t.seqlen_q) + "_k" + std::to_string(t.seqlen_k) + "_d" + std::to_string(t.headdim) +
         "_h" + std::to_string(t.nheads_q) + "_" + std::to_string(t.nheads_kv) + (t.causal ? "_causal" : "") +
         (t.window_left >= 0 || t.window_right >= 0 ? "_window" : "") + (t.softcap > 0 ? "_softcap" : "") +
         (t.alibi != Alibi::kNone ? "_alibi" : "") + (t.pad ? "_pad" + std::to_string(t.pad) : "") +
         (t.varlen_seqused ? "_varlen_seqused" : "");
}

const auto kTileCases = ::testing::Values(TileCase{1, 1, 8, 1, 1, false, -1, -1, 0.0f},
                                           TileCase{15, 31, 24, 2, 1, false, -1, -1, 0.0f},
                                           TileCase{17, 33, 40, 2, 2, true, -1, -1, 0.0f},
                                           TileCase{100, 300, 72, 4, 2, false, -1, -1, 0.0f},
                                           TileCase{130, 129, 128, 2, 1, true, -1, -1, 0.0f},
                                           TileCase{513, 257, 64, 1, 1, false, 40, 8, 0.0f},
                                           TileCase{600, 700, 96, 2, 2, true, -1, -1, 12.0f},
                                           TileCase{64, 1000, 256, 2, 1, false, -1, -1, 0.0f},
                                           TileCase{31, 640, 160, 2, 2, false, 100, -1, 0.0f},
                                           TileCase{77, 300, 56, 4, 2, true, -1, -1, 0.0f, Alibi::kPerBatchHead, 1},
                                           TileCase{200, 150, 120, 2, 1, false, 30, 30, 0.0f, Alibi::kPerHead, 3},
                                           TileCase{90, 260, 64, 2, 2, true, -1, -1, 0.0f, Alibi::kNone, 0, true},
                                           TileCase{40, 130, 200, 4, 1, false, -1, -1, 8.0f, Alibi::kNone, 5, true});

INSTANTIATE_TEST_SUITE_P(Shapes, ForwardBf16Tiles, kTileCases, tile_case_name);
INSTANTIATE_TEST_SUITE_P(Shapes, BackwardBf16Tiles, kTileCases, tile_case_name);

}  // namespace
}  // namespace fa_test
