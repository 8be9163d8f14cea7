// Paged k / v on the GPU (AttentionParams::block_table): the sm80 kernel's key-split twin reads
// each key tile from its page. On Hopper the sm90 packed kernel takes many of these cases
// (test_sm90_paged.cpp); FLASHATTN_CUDA_KERNELS=sm80 keeps them on sm80 there. Checked against the
// fp64 oracle on the contiguous keys the pages hold, with the pages shuffled among spare pages of
// NaN and NaN past each sequence's used keys; decode steps (GQA, MQA, with the heads as rows) and
// a chunk of causal queries, the library's pieces, none, and a caller's count; under graph capture;
// with the indices checked by the caller (nothing read back); variable length.
#include <gtest/gtest.h>

#include <string>

#include "common/paged_kv.h"
#include "gpu/sm80_device_run.h"

namespace fa_test {
namespace {

void check_paged(const CaseSpec& s, int page_size, CallMode mode = {}, int64_t table_pad = 0) {
  SCOPED_TRACE(s.describe() + " page_size " + std::to_string(page_size) + " table_pad " + std::to_string(table_pad));
  const AttnCase c = make_case(s);
  expect_paged_forward_matches(c, paginate(c, page_size, 2, s.seed, table_pad), mode);
}

TEST(Sm80Paged, MatchesReference) {
  SM80_SKIP_WITHOUT_GPU();
  uint64_t seed = 700;
  for (int d : {64, 128, 256}) {
    const DType dtype = d == 128 ? DType::kFloat16 : DType::kBFloat16;
    for (int splits : {0, 1, 3}) {
      CaseSpec decode = paged_spec(++seed, dtype, d, 128, 1, true);
      decode.num_splits = splits;
      check_paged(decode, 128);
      CaseSpec chunk = paged_spec(++seed, dtype, d, 128, 37, true);
      chunk.num_splits = splits;
      check_paged(chunk, 128, {}, splits == 3 ? 5 : 0);  // a sliced table's rows 10 entries apart
    }
  }
  // Pages of 256 rows (two or four key tiles a page), MQA with softcap, every key used.
  CaseSpec mqa = paged_spec(++seed, DType::kBFloat16, 128, 256, 1, true);
  mqa.nheads_q = 16, mqa.nheads_kv = 1;
  mqa.softcap = 8.0f;
  mqa.seqused_k.clear();
  check_paged(mqa, 256);
  // A left window and ALiBi (heads stay apart: the rewrite declines them).
  CaseSpec window = paged_spec(++seed, DType::kFloat16, 64, 128, 1, true);
  window.window_left = 150;
  window.alibi = Alibi::kPerHead;
  check_paged(window, 128);
}

// Variable length over pages (flash_attn_varlen_func's block_table): a prefill chunk beside
// decode steps and an empty sequence, cu_seqlens_k giving lengths only.
TEST(Sm80Paged, VarlenMatchesReference) {
  SM80_SKIP_WITHOUT_GPU();
  uint64_t seed = 760;
  for (int d : {64, 128, 256}) {
    for (bool causal : {false, true}) {
      for (int splits : {0, 3}) {
        CaseSpec s = paged_varlen_spec(++seed, d == 64 ? DType::kFloat16 : DType::kBFloat16, d, 128, causal,
                                       splits == 3);
        s.num_splits = splits;
        check_paged(s, 128, {}, causal ? 4 : 0);
      }
    }
  }
}

TEST(Sm80Paged, UnderGraphCapture) {
  SM80_SKIP_WITHOUT_GPU();
  CaseSpec s = paged_spec(790, DType::kBFloat16, 128, 128, 1, true);
  check_paged(s, 128, CallMode{2});
  s.num_splits = 4;
  check_paged(s, 128, CallMode{2}, 5);
}

// AttentionParams::indices_checked: the caller vouches for seqused_k and the table, so the call
// reads neither back and returns while its stream is still held by a host callback; the same
// call without it waits for the device (the control: else the hold would prove nothing).
TEST(Sm80Paged, CheckedIndicesAreNotReadBack) {
  SM80_SKIP_WITHOUT_GPU();
  const CaseSpec s = paged_spec(798, DType::kBFloat16, 128, 128, 1, true);
  bool returned_while_held = false;
  CallMode checked;
  checked.indices_checked = true;
  checked.returned_while_held = &returned_while_held;
  check_paged(s, 128, checked);
  EXPECT_TRUE(returned_while_held) << "the call waited for the device though its indices were checked";
  bool control_returned_while_held = true;
  CallMode control;
  control.returned_while_held = &control_returned_while_held;
  check_paged(s, 128, control);
  EXPECT_FALSE(control_returned_while_held) << "the call without indices_checked read nothing back";
}

// A key tile must lie inside a page: 64-row pages are refused where the tiles are 128 keys wide
// (head dim 64), by name, and taken where they are 64 (head dim 128).
TEST(Sm80Paged, PagesNarrowerThanATileAreRefused) {
  SM80_SKIP_WITHOUT_GPU();
  const AttnCase narrow = make_case(paged_spec(795, DType::kBFloat16, 64, 64, 1, true));
  const ForwardResult r = gpu_paged_forward(narrow, paginate(narrow, 64, 0, 795));
  EXPECT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message.find("page_size"), std::string::npos) << r.status.message;
  EXPECT_EQ(r.out.count_nonfinite(), r.out.numel()) << "out was written";
  check_paged(paged_spec(796, DType::kBFloat16, 128, 64, 1, true), 64);
}

}  // namespace
}  // namespace fa_test
