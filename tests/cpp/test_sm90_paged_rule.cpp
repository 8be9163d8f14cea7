// Which paged problems the sm90 packed kernel reads itself (src/cuda/sm90/kernel_choice.h,
// sm90_paged_refusal), host arithmetic only: a key block must lie inside a page, q must be
// fixed-length and short, and the table row must be addressable in 32 bits; the rest goes to the
// sm80 kernel. The kernel's reading of pages is tested on Hopper (gpu/test_sm90_paged.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "cuda/sm90/kernel_choice.h"

namespace flashattn {
namespace {

// A decode step: 8 sequences over a pool of 2048-row-reaching tables of 256-row pages.
AttentionProblem paged_decode() {
  static const int32_t table[8 * 8] = {};
  AttentionProblem p;
  p.batch = 8;
  p.seqlen_q = 1;
  p.seqlen_k = 2048;
  p.nheads_q = 32;
  p.nheads_kv = 8;
  p.headdim = 128;
  p.block_table = table;
  p.block_table_batch_stride = 8;
  p.page_size = 256;
  p.num_pages = 64;
  p.pages_per_sequence = 8;
  return p;
}

TEST(Sm90PagedRule, DecodeOnWholeBlocksIsRead) {
  AttentionProblem p = paged_decode();
  EXPECT_EQ(sm90_paged_refusal(p, 128, true), nullptr);
  p.page_size = 128;  // one block a page
  EXPECT_EQ(sm90_paged_refusal(p, 128, true), nullptr);
  p.seqlen_q = 64;  // the longest chunk the packed kernel takes
  EXPECT_EQ(sm90_paged_refusal(p, 128, true), nullptr);
}

TEST(Sm90PagedRule, InstantiationWithoutThePageCodeRefuses) {
  EXPECT_NE(sm90_paged_refusal(paged_decode(), 128, false), nullptr);
}

TEST(Sm90PagedRule, PagesThatSplitABlockAreRefused) {
  AttentionProblem p = paged_decode();
  for (int page_size : {64, 192, 200, 16}) {
    p.page_size = page_size;
    const char* why = sm90_paged_refusal(p, 128, true);
    ASSERT_NE(why, nullptr) << page_size;
    EXPECT_NE(std::string(why).find("page_size"), std::string::npos) << why;
  }
}

// d256's 64-key blocks take pages of 64 rows; d192's 112-key blocks only multiples of 112.
TEST(Sm90PagedRule, NarrowerBlocksTakeTheirOwnMultiples) {
  AttentionProblem p = paged_decode();
  p.page_size = 64;
  EXPECT_EQ(sm90_paged_refusal(p, 64, true), nullptr);
  p.page_size = 224;
  EXPECT_EQ(sm90_paged_refusal(p, 112, true), nullptr);
  for (int page_size : {128, 256, 64}) {
    p.page_size = page_size;
    EXPECT_NE(sm90_paged_refusal(p, 112, true), nullptr) << page_size;
  }
}

TEST(Sm90PagedRule, LongOrVariableQueriesAreRefused) {
  AttentionProblem p = paged_decode();
  p.seqlen_q = kSm90PackGqaMaxQuery + 1;
  EXPECT_NE(sm90_paged_refusal(p, 128, true), nullptr);
  p = paged_decode();
  static const int32_t cu[9] = {};
  p.cu_seqlens_k = cu;  // lengths over pages
  EXPECT_NE(sm90_paged_refusal(p, 128, true), nullptr);
  p.cu_seqlens_q = cu;
  EXPECT_NE(sm90_paged_refusal(p, 128, true), nullptr);
}

TEST(Sm90PagedRule, TableRowsPast32BitsAreRefused) {
  AttentionProblem p = paged_decode();
  // The last row starts at 7 * stride: just inside, then one entry past 2^31 - 1.
  p.block_table_batch_stride = (int64_t{INT32_MAX} - p.pages_per_sequence) / 7;
  EXPECT_EQ(sm90_paged_refusal(p, 128, true), nullptr);
  p.block_table_batch_stride += 1;
  EXPECT_NE(sm90_paged_refusal(p, 128, true), nullptr);
}

}  // namespace
}  // namespace flashattn
