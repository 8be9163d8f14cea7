// Paged k / v on Hopper (AttentionParams::block_table): the sm90 packed kernel reads each key
// block from its page (cuda/sm90/paged_blocks.h) for decode steps and short chunks with pages a
// multiple of its key blocks (128 keys up to head dim 128, 112 at 192, 64 at 256); every other
// paged problem goes to the sm80 kernel. Checked against the fp64 oracle on the contiguous keys
// the pages hold, the pages shuffled among spare pages of NaN and NaN past each sequence's used
// keys (common/paged_kv.h), and that the kernel the rule names ran (launch counters).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "common/paged_kv.h"
#include "cuda/sm90/kernel_choice.h"
#include "gpu/compiled_set.h"
#include "gpu/sm80_device_run.h"
#include "gpu/sm90_device.h"

namespace fa_test {
namespace {

enum class Route { kPacked, kSm80 };

// Keys 128..255 of every sequence scaled 8x: block 1's scores stand ~20 nats above the others,
// so a tile that visits the last block first (the kept max) fails the checked max there and
// reads block 1's keys again from global memory (mainloop_mma.h, recompute_scores_from).
void boost_second_block(AttnCase& c) {
  for (int b = 0; b < c.spec.batch_size(); ++b) {
    for (int j = 128; j < 256 && j < c.spec.span_k(b); ++j) {
      for (int h = 0; h < c.spec.nheads_kv; ++h) {
        for (int d = 0; d < c.spec.headdim; ++d) {
          const int64_t i = c.k_index(b, j, h, d);
          c.k.set(i, 8.0f * c.k.get(i));
        }
      }
    }
  }
}

// The paged forward of s (changed by `tweak` where given) matches the oracle, and the launch went
// where `route` says: one packed launch, or no sm90 launch at all. Cases of a (dtype, head dim)
// this build left out are passed over, saying so.
void check_paged(const CaseSpec& s, int page_size, Route route, CallMode mode = {}, int64_t table_pad = 0,
                 void (*tweak)(AttnCase&) = nullptr) {
  SCOPED_TRACE(s.describe() + " page_size " + std::to_string(page_size) + " table_pad " + std::to_string(table_pad));
  if (!compiled(s.dtype == DType::kBFloat16 ? "bf16" : "fp16", s.headdim)) {
    std::printf("  passed over: this build has no kernels of that dtype and head dim\n");
    return;
  }
  AttnCase c = make_case(s);
  if (tweak != nullptr) tweak(c);
  const int64_t packed = flashattn::sm90_pack_gqa_launches(), any = sm90_any_launches();
  expect_paged_forward_matches(c, paginate(c, page_size, 3, s.seed, table_pad), mode);
  if (route == Route::kPacked) {
    // Graph capture records the launch once and replays it: one API call either way.
    EXPECT_EQ(flashattn::sm90_pack_gqa_launches() - packed, 1) << "the packed kernel did not read the pages";
  } else {
    EXPECT_EQ(sm90_any_launches(), any) << "an sm90 kernel ran a paged problem it should leave to sm80";
  }
}

TEST(Sm90Paged, DecodeAndChunksMatchReference) {
  SKIP_UNLESS_SM90();
  uint64_t seed = 900;
  for (int d : {64, 128}) {
    for (int page_size : {128, 256}) {
      const DType dtype = (d == 128) == (page_size == 128) ? DType::kBFloat16 : DType::kFloat16;
      for (int splits : {0, 1, 3}) {
        // GQA 8 / 2, seqused_k with a partial last block, an empty sequence and a full one.
        CaseSpec decode = paged_spec(++seed, dtype, d, page_size, 1, true);
        decode.num_splits = splits;
        check_paged(decode, page_size, Route::kPacked, {}, splits == 3 ? 5 : 0);
        // A causal chunk of 37 queries (148 packed rows a KV head).
        CaseSpec chunk = paged_spec(++seed, dtype, d, page_size, 37, true);
        chunk.num_splits = splits;
        check_paged(chunk, page_size, Route::kPacked);
      }
    }
  }
}

TEST(Sm90Paged, HeadLayoutsAndOptionsMatchReference) {
  SKIP_UNLESS_SM90();
  // MHA decode (G = 1), every key used.
  CaseSpec mha = paged_spec(930, DType::kBFloat16, 128, 128, 1, false);
  mha.nheads_q = 4, mha.nheads_kv = 4;
  check_paged(mha, 128, Route::kPacked);
  // MQA (G = 16) with softcap, pages of 512 rows (four key blocks a page).
  CaseSpec mqa = paged_spec(931, DType::kBFloat16, 128, 512, 1, true);
  mqa.nheads_q = 16, mqa.nheads_kv = 1;
  mqa.softcap = 8.0f;
  check_paged(mqa, 512, Route::kPacked);
  // A left window over a decode step, and one over a causal chunk.
  CaseSpec window = paged_spec(932, DType::kFloat16, 64, 128, 1, true);
  window.window_left = 150;
  check_paged(window, 128, Route::kPacked);
  CaseSpec window_chunk = paged_spec(933, DType::kBFloat16, 128, 128, 20, true);
  window_chunk.window_left = 70;
  check_paged(window_chunk, 128, Route::kPacked);
  // Head dim 96 (d128's blocks over 96 columns), and pages whose rows and heads lie apart (a pad
  // of 8 elements keeps TMA's 16-byte strides).
  check_paged(paged_spec(934, DType::kBFloat16, 96, 128, 1, true), 128, Route::kPacked);
  CaseSpec padded = paged_spec(935, DType::kFloat16, 64, 256, 3, true);
  padded.pad = 8;
  check_paged(padded, 256, Route::kPacked);
}

// The sliced decode kernel (FLASHATTN_SM90_SLICED_DECODE=1) reading the pages at head dims 64
// and 128: decode steps and 4-query chunks (16 packed rows) by its own splits, none, and the
// caller's 3 (with a padded table), pages of one, two and four key blocks, a left window, rows
// and heads apart in the pages. Each launch counted as the sliced kernel's.
TEST(Sm90Paged, SlicedDecodeMatchesReference) {
  SKIP_UNLESS_SM90();
  const ScopedEnv sliced("FLASHATTN_SM90_SLICED_DECODE", "1");
  uint64_t seed = 960;
  for (int d : {64, 128}) {
    for (int page_size : {128, 256, 512}) {
      const DType dtype = (page_size == 256) == (d == 64) ? DType::kFloat16 : DType::kBFloat16;
      for (int splits : {0, 1, 3}) {
        for (int seqlen_q : {1, 4}) {
          CaseSpec decode = paged_spec(++seed, dtype, d, page_size, seqlen_q, true);
          decode.num_splits = splits;
          if (seqlen_q == 4) decode.window_left = 200;
          const int64_t before = flashattn::sm90_sliced_decode_launches();
          check_paged(decode, page_size, Route::kPacked, {}, splits == 3 ? 5 : 0);
          if (compiled(dtype == DType::kBFloat16 ? "bf16" : "fp16", d)) {
            EXPECT_EQ(flashattn::sm90_sliced_decode_launches() - before, 1) << "the sliced kernel did not run";
          }
        }
      }
    }
    CaseSpec padded = paged_spec(++seed, DType::kFloat16, d, 256, 2, true);
    padded.pad = 8, padded.softcap = 10.0f;
    check_paged(padded, 256, Route::kPacked);
  }
}

// Head dims 192 and 256, whose packed kernels' loading thread takes 32 registers for the table
// read (KernelConfig::kProducerRegisters): 112- and 64-key blocks, so pages of 224 / 448 rows at
// 192 (two and four blocks a page) and of 64 / 128 / 256 at 256 (one, two and four).
TEST(Sm90Paged, WideHeadDimsMatchReference) {
  SKIP_UNLESS_SM90();
  if (!compiled("bf16", 256) && !compiled("fp16", 256) && !compiled("bf16", 192) && !compiled("fp16", 192)) {
    GTEST_SKIP() << "this build has no head dim 192 or 256 kernels";
  }
  uint64_t seed = 970;
  for (int page_size : {64, 128, 256}) {
    const DType dtype = page_size == 128 ? DType::kFloat16 : DType::kBFloat16;
    for (int splits : {0, 3}) {
      CaseSpec decode = paged_spec(++seed, dtype, 256, page_size, 1, true);
      decode.num_splits = splits;
      check_paged(decode, page_size, Route::kPacked, {}, splits == 3 ? 5 : 0);
    }
    CaseSpec chunk = paged_spec(++seed, dtype, 256, page_size, 21, true);
    check_paged(chunk, page_size, Route::kPacked);
  }
  for (int page_size : {224, 448}) {
    const DType dtype = page_size == 224 ? DType::kBFloat16 : DType::kFloat16;
    CaseSpec decode = paged_spec(++seed, dtype, 192, page_size, 1, true);
    decode.num_splits = page_size == 224 ? 3 : 0;
    check_paged(decode, page_size, Route::kPacked);
    CaseSpec chunk = paged_spec(++seed, dtype, 192, page_size, 13, true);
    chunk.window_left = 100;
    check_paged(chunk, page_size, Route::kPacked);
  }
  // MQA with softcap at 256.
  CaseSpec mqa = paged_spec(++seed, DType::kBFloat16, 256, 128, 1, true);
  mqa.nheads_q = 16, mqa.nheads_kv = 1;
  mqa.softcap = 8.0f;
  check_paged(mqa, 128, Route::kPacked);
  // MHA (G = 1: the packed kernel's key splits for MHA decode), and a graph-captured step.
  CaseSpec mha = paged_spec(++seed, DType::kFloat16, 256, 128, 1, false);
  mha.nheads_q = 4, mha.nheads_kv = 4;
  check_paged(mha, 128, Route::kPacked);
  CaseSpec captured = paged_spec(++seed, DType::kBFloat16, 256, 256, 1, true);
  captured.num_splits = 4;
  check_paged(captured, 256, Route::kPacked, CallMode{2}, 5);
}

// The paged problems the packed kernel does not take run on the sm80 kernel, still correct.
TEST(Sm90Paged, OtherPagedProblemsGoToSm80) {
  SKIP_UNLESS_SM90();
  // Head dim 192 with pages of 128 rows, not a multiple of its packed kernel's 112-key blocks.
  check_paged(paged_spec(940, DType::kBFloat16, 192, 128, 1, true), 128, Route::kSm80);
  // 65 query rows, past kSm90PackGqaMaxQuery.
  check_paged(paged_spec(941, DType::kBFloat16, 128, 128, 65, true), 128, Route::kSm80);
  // Pages of 64 rows, narrower than the packed kernel's 128-key blocks (sm80's are 64 at d128).
  check_paged(paged_spec(942, DType::kBFloat16, 128, 64, 1, true), 64, Route::kSm80);
  // Variable length over pages.
  check_paged(paged_varlen_spec(943, DType::kBFloat16, 128, 128, true, true), 128, Route::kSm80, {}, 4);
  // ALiBi (no sm90 kernel implements it).
  CaseSpec alibi = paged_spec(944, DType::kFloat16, 64, 128, 1, true);
  alibi.alibi = Alibi::kPerHead;
  check_paged(alibi, 128, Route::kSm80);
  // FLASHATTN_SM90_PACK_GQA=0 leaves the packed kernel, and so the pages, out.
  const ScopedEnv unpacked("FLASHATTN_SM90_PACK_GQA", "0");
  check_paged(paged_spec(945, DType::kBFloat16, 128, 128, 1, true), 128, Route::kSm80);
}

// The checked max's fallback (head dims 96 / 128) reads K from global memory itself: from the
// table's pages too. Five 128-key blocks, one piece a tile (the last block visited first).
TEST(Sm90Paged, ScoresThatJumpMidRowMatchReference) {
  SKIP_UNLESS_SM90();
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    CaseSpec s = paged_spec(dtype == DType::kBFloat16 ? 955 : 956, dtype, 128, 128, 1, true);
    s.num_splits = 1;
    check_paged(s, 128, Route::kPacked, {}, 0, boost_second_block);
    CaseSpec chunk = paged_spec(dtype == DType::kBFloat16 ? 957 : 958, dtype, 128, 256, 9, true);
    check_paged(chunk, 256, Route::kPacked, {}, 0, boost_second_block);
  }
}

TEST(Sm90Paged, UnderGraphCapture) {
  SKIP_UNLESS_SM90();
  CaseSpec s = paged_spec(950, DType::kBFloat16, 128, 256, 1, true);
  check_paged(s, 256, Route::kPacked, CallMode{2});
  s.num_splits = 4;
  check_paged(s, 256, Route::kPacked, CallMode{2}, 5);
}

// A table entry past the pages, vouched for by the caller (indices_checked: nothing read back,
// nothing checked): it acts as the last page (UntrustedIndices.* checks the bound's bytes), so
// the call neither faults nor poisons the context (device_session.sh's sanitizer set runs
// Sm90Paged.* under memcheck). The sequence's output is then wrong by contract; the other
// sequences' must not be.
TEST(Sm90Paged, VouchedEntryPastThePagesDoesNotFault) {
  SKIP_UNLESS_SM90();
  if (!compiled("bf16", 128)) GTEST_SKIP() << "this build has no bf16 head dim 128 kernels";
  CaseSpec s = paged_spec(960, DType::kBFloat16, 128, 128, 1, true);
  s.num_splits = 1;  // one piece a tile: the two runs below round alike
  const AttnCase c = make_case(s);
  PagedKV pages = paginate(c, 128, 3, s.seed);
  const int64_t width = pages.block_table.shape()[1];
  const int64_t num_pages = pages.k.shape()[0];
  // Sequence 2 (all but its last key used): its second page names a page past the pool.
  pages.block_table.set(2 * width + 1, static_cast<float>(num_pages + 3));
  CallMode vouched;
  vouched.indices_checked = true;
  const int64_t packed = flashattn::sm90_pack_gqa_launches();
  const ForwardResult f = gpu_paged_forward(c, pages, vouched);
  ASSERT_TRUE(f.status.ok()) << f.status.message;
  EXPECT_EQ(flashattn::sm90_pack_gqa_launches() - packed, 1);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // Sequence 0 is untouched by the bad entry: its rows match a run with the good table.
  const ForwardResult good = gpu_paged_forward(c, paginate(c, 128, 3, s.seed), vouched);
  ASSERT_TRUE(good.status.ok()) << good.status.message;
  const int64_t row_elems = int64_t(s.nheads_q) * s.headdim;
  for (int64_t i = 0; i < int64_t(s.seqlen_q) * row_elems; ++i) {
    ASSERT_EQ(f.out.get(i), good.out.get(i)) << "sequence 0's output changed at element " << i;
  }
}

}  // namespace
}  // namespace fa_test
