// The public API inside CUDA graph capture (how PyTorch's CUDA graphs and serving engines call
// it): nothing may be read back from the device while a graph is captured (cu_seqlens and
// seqused are trusted, max_seqlen must then be given), allocations and scheduler counters must
// be stream-ordered, and a captured call must give the same answer on every replay. Each case
// runs forward and backward captured, replayed twice with the outputs poisoned before each
// replay, against the fp64 reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/attn_case.h"
#include "common/checks.h"
#include "cuda/sm90/kernel_choice.h"
#include "gpu/sm80_device_run.h"
#include "gpu/sm90_device.h"

namespace fa_test {
namespace {

struct GraphCase {
  const char* name;
  CaseSpec spec;
  // On Hopper: a split the captured launch must make (the graph's own workspace, split_tail.h's
  // CapturedWorkspaces), counted by these launch counters; "always" forces the split tail.
  bool splits_keys = false;
  bool splits_tail = false;
  // The key splits' pieces merged by the combine kernel (FLASHATTN_SM90_SPLIT_COMBINE=kernel), a
  // programmatic dependent of the packed launch, captured with it.
  bool combines = false;
  // FLASHATTN_SM90_PACK_GQA_ONE_WG for the case (null: unset, the rule), and on Hopper how many
  // launches of the one-warpgroup packed kernel the capture makes (-1: not checked).
  const char* one_wg_switch = nullptr;
  int one_wg_launches = -1;
  // FLASHATTN_SM90_SLICED_DECODE likewise, and the sliced decode kernel's launches (-1: not checked).
  const char* sliced_switch = nullptr;
  int sliced_launches = -1;
};

// A fixed-length bf16 case of these sizes (the fixed cases below differ by nothing else, bar a mask).
CaseSpec fixed_bf16(uint64_t seed, int batch, int seqlen_q, int seqlen_k, int nheads_q, int nheads_kv, int headdim) {
  return sized_spec(seed, DType::kBFloat16, batch, seqlen_q, seqlen_k, nheads_q, nheads_kv, headdim);
}

CaseSpec fixed_gqa_causal() {
  CaseSpec s = fixed_bf16(5101, 2, 300, 517, 8, 2, 128);
  s.causal = true;
  return s;
}

CaseSpec varlen_window_fp16() {
  CaseSpec s;
  s.seed = 5102;
  s.dtype = DType::kFloat16;
  s.seqlens_q = {77, 1, 260};
  s.seqlens_k = {150, 33, 260};
  s.extra_rows = 5;
  s.nan_in_unused_kv = true;
  s.nheads_q = 4;
  s.nheads_kv = 4;
  s.headdim = 64;
  s.window_left = 40;
  s.window_right = 8;
  return s;
}

CaseSpec varlen_seqused_d256() {
  CaseSpec s;
  s.seed = 5103;
  s.dtype = DType::kBFloat16;
  s.seqlens_q = {129, 64};
  s.seqlens_k = {200, 190};
  s.seqused_q = {100, 64};
  s.seqused_k = {131, 0};
  s.nan_in_unused_kv = true;
  s.nheads_q = 2;
  s.nheads_kv = 1;
  s.headdim = 256;
  s.causal = true;
  return s;
}

// Head dim 128 without a mask from 2048 keys, two query tiles: on Hopper the cluster-pair kernel
// (kernel_choice.h, sm90_picks_cluster_pairs), whose launch (cudaLaunchKernelEx with a cluster
// dimension, after an occupancy query) is then captured too.
CaseSpec fixed_noncausal_d128() { return fixed_bf16(5104, 2, 256, 4200, 4, 2, 128); }

// A decode step of GQA 32 / 8 over 8192 keys at head dim 128: on Hopper 8 packed tiles, each cut
// by keys into 8 pieces (kernel_choice.h, sm90_key_splits); captured again with
// FLASHATTN_SM90_SLICED_DECODE=1 on the sliced decode kernel (its pieces, the combine kernel).
CaseSpec decode_gqa_key_splits() { return fixed_bf16(5105, 1, 1, 8192, 32, 8, 128); }

// The same step at head dim 64: 8 tiles, which on Hopper the rule gives the one-warpgroup packed
// kernel (64-row tiles; kernel_choice.h, sm90_picks_pack_gqa_one_wg), cut by keys; captured
// again with FLASHATTN_SM90_PACK_GQA_ONE_WG=0 on the two-warpgroup kernel, and with
// FLASHATTN_SM90_SLICED_DECODE=1 on the sliced decode kernel (its pieces, the combine kernel).
CaseSpec decode_gqa_key_splits_d64() { return fixed_bf16(5108, 1, 1, 8192, 32, 8, 64); }

// An MQA decode step over 8192 keys: on Hopper one packed tile cut into 16 pieces, merged in two
// levels (split_keys.h), with the captured workspace's counters for them.
CaseSpec decode_mqa_key_splits() { return fixed_bf16(5107, 1, 1, 8192, 8, 1, 128); }

// 160 query tiles of 128 rows over 2100 keys at head dim 128: on Hopper the cluster pairs, with
// the split tail forced, run a whole wave of pairs and then the tail kernel, launched as a
// programmatic dependent of the pairs' kernel, so that edge is captured too.
CaseSpec waves_then_tail_d128() { return fixed_bf16(5106, 1, 1024, 2100, 20, 20, 128); }

class GpuGraphCapture : public ::testing::TestWithParam<GraphCase> {};

TEST_P(GpuGraphCapture, ReplaysMatchReference) {
  SM80_SKIP_WITHOUT_GPU();
  const GraphCase& gc = GetParam();
  const CaseSpec& s = gc.spec;
  SCOPED_TRACE(s.describe());
  std::string why;
  const bool hopper = sm90_device_present(&why);
  if (gc.combines && !flashattn::kSm90CombineKernelBuilt) GTEST_SKIP() << "built without FLASHATTN_SM90_COMBINE_KERNEL";
  const ScopedEnv forced("FLASHATTN_SM90_SPLIT_TAIL", gc.splits_tail ? "always" : nullptr);
  const ScopedEnv combine("FLASHATTN_SM90_SPLIT_COMBINE", gc.combines ? "kernel" : "merge");
  const ScopedEnv one_wg("FLASHATTN_SM90_PACK_GQA_ONE_WG", gc.one_wg_switch);
  const ScopedEnv sliced("FLASHATTN_SM90_SLICED_DECODE", gc.sliced_switch);
  const AttnCase c = make_case(s);
  const Reference ref = reference(c, true);
  const CallMode graph{2};
  const int64_t keys_before = flashattn::sm90_key_split_launches();
  const int64_t combine_before = flashattn::sm90_split_combine_launches();
  const int64_t tail_before = flashattn::sm90_split_tail_launches();
  const int64_t one_wg_before = flashattn::sm90_pack_gqa_one_wg_launches();
  const int64_t sliced_before = flashattn::sm90_sliced_decode_launches();
  const ForwardResult f = gpu_forward(c, true, graph);
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  // The capture is one launch whatever the replays; counted when the split is arranged.
  if (hopper && gc.splits_keys) {
    EXPECT_EQ(flashattn::sm90_key_split_launches() - keys_before, 1) << "the captured launch did not split its keys";
  }
  if (hopper && gc.combines) {
    EXPECT_EQ(flashattn::sm90_split_combine_launches() - combine_before, 1) << "the captured launch did not combine";
  }
  if (hopper && gc.splits_tail) {
    EXPECT_EQ(flashattn::sm90_split_tail_launches() - tail_before, 1) << "the captured launch did not split its tail";
  }
  if (hopper && gc.one_wg_launches >= 0) {
    EXPECT_EQ(flashattn::sm90_pack_gqa_one_wg_launches() - one_wg_before, gc.one_wg_launches)
        << "one-warpgroup packed launches in the capture";
  }
  if (hopper && gc.sliced_launches >= 0) {
    EXPECT_EQ(flashattn::sm90_sliced_decode_launches() - sliced_before, gc.sliced_launches)
        << "sliced decode launches in the capture";
  }
  const BackwardResult g = gpu_backward(c, f, graph);
  ASSERT_TRUE(g.status.ok()) << g.status.message;
  EXPECT_TRUE(forward_written(c, f));
  EXPECT_TRUE(backward_written(c, g));
  EXPECT_TRUE(within_twice_naive(c, ref, f, &g));
  // The captured forward gives the bytes an uncaptured call gives: the same kernels are chosen
  // where the lengths are known, and a replay is not a different computation.
  const ForwardResult direct = gpu_forward(c);
  ASSERT_TRUE(direct.status.ok()) << direct.status.message;
  if (!s.varlen()) EXPECT_TRUE(same_bytes(f.out, direct.out)) << "captured and direct forward differ";
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuGraphCapture,
                         ::testing::Values(GraphCase{"fixed_gqa_causal_d128_bf16", fixed_gqa_causal()},
                                           GraphCase{"varlen_window_d64_fp16", varlen_window_fp16()},
                                           GraphCase{"varlen_seqused_causal_d256_bf16", varlen_seqused_d256()},
                                           GraphCase{"fixed_noncausal_d128_bf16", fixed_noncausal_d128()},
                                           GraphCase{"decode_gqa_key_splits_d128_bf16", decode_gqa_key_splits(), true},
                                           GraphCase{"decode_mqa_two_level_merge_d128_bf16", decode_mqa_key_splits(), true},
                                           GraphCase{"decode_gqa_key_splits_one_wg_d64_bf16", decode_gqa_key_splits_d64(), true,
                                                     false, false, nullptr, 1},
                                           GraphCase{"decode_gqa_key_splits_two_wg_d64_bf16", decode_gqa_key_splits_d64(), true,
                                                     false, false, "0", 0},
                                           GraphCase{"decode_gqa_sliced_d64_bf16", decode_gqa_key_splits_d64(), true,
                                                     false, true, nullptr, -1, "1", 1},
                                           GraphCase{"decode_gqa_sliced_d128_bf16", decode_gqa_key_splits(), true,
                                                     false, true, nullptr, -1, "1", 1},
                                           GraphCase{"decode_gqa_combine_kernel_d128_bf16", decode_gqa_key_splits(), true,
                                                     false, true},
                                           GraphCase{"decode_mqa_combine_kernel_d128_bf16", decode_mqa_key_splits(), true,
                                                     false, true},
                                           GraphCase{"waves_then_split_tail_d128_bf16", waves_then_tail_d128(), false,
                                                     true}),
                         [](const ::testing::TestParamInfo<GraphCase>& info) { return std::string(info.param.name); });

// FLASHATTN_SM90_CAPTURED_SPLITS=0 (for graphs that memory nodes would bind: child graphs, two
// live instantiations) keeps a captured decode step unsplit, as eager calls are not.
TEST(GpuGraphCaptureArgs, CapturedSplitsCanBeTurnedOff) {
  SM80_SKIP_WITHOUT_GPU();
  std::string why;
  if (!sm90_device_present(&why)) GTEST_SKIP() << why;
  const AttnCase c = make_case(decode_gqa_key_splits());
  const Reference ref = reference(c, false);
  const int64_t before = flashattn::sm90_key_split_launches();
  ForwardResult f;
  {
    const ScopedEnv unsplit("FLASHATTN_SM90_CAPTURED_SPLITS", "0");
    f = gpu_forward(c, true, CallMode{2});
  }
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  EXPECT_EQ(flashattn::sm90_key_split_launches(), before) << "the captured launch split its keys";
  EXPECT_TRUE(forward_written(c, f));
  EXPECT_TRUE(within_twice_naive(c, ref, f, nullptr));
  const ForwardResult direct = gpu_forward(c);
  ASSERT_TRUE(direct.status.ok()) << direct.status.message;
  EXPECT_EQ(flashattn::sm90_key_split_launches(), before + 1) << "the eager launch did not split its keys";
}

// Under capture cu_seqlens cannot be read to find the longest sequence, so the bounds must be
// given; the error names the argument and nothing is launched.
TEST(GpuGraphCaptureArgs, VarlenWithoutMaxSeqlenIsRefused) {
  SM80_SKIP_WITHOUT_GPU();
  const AttnCase c = make_case(varlen_window_fp16());
  CallMode mode;
  mode.graph_replays = 1;
  mode.derive_max_seqlen = true;
  const ForwardResult f = gpu_forward(c, true, mode);
  ASSERT_FALSE(f.status.ok());
  EXPECT_NE(f.status.message.find("max_seqlen_q"), std::string::npos) << f.status.message;
  EXPECT_NE(f.status.message.find("captured"), std::string::npos) << f.status.message;
}

}  // namespace
}  // namespace fa_test
