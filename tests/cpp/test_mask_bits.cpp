// columns_below (the sm90 softmax's mask as bit words, cuda/common/mask_bits.h) against the
// compares it replaces: a score at the thread's relative column 8 i + e is kept below an upper bound
// hi and, with a left window, at or above a lower bound lo. Every bound from far below 0 to past
// the widest block, the block widths the kernels use (64 / 80 / 128 / 176 keys: 8 / 10 / 16 / 22
// column groups, so one or two words a row).
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/common/mask_bits.h"

namespace flashattn {
namespace {

// The kernel's loop over one row (softmax.h mask_row with kByBits), returning which scores stay.
void kept_by_bits(int chunks, int hi, bool left, int lo, bool* kept) {
  for (int w = 0; w < (2 * chunks + 31) / 32; ++w) {
    uint32_t keep = columns_below(hi, w);
    if (left) keep &= ~columns_below(lo, w);
    for (int k = 32 * w; k < 2 * chunks && k < 32 * w + 32; ++k) kept[k] = (keep >> (k - 32 * w)) & 1u;
  }
}

TEST(MaskBits, MatchesTheComparesForEveryBound) {
  for (int chunks : {8, 10, 16, 22}) {
    for (int hi = -300; hi <= 400; ++hi) {
      for (int lo : {-1000, -9, -1, 0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 100, 175, 176, 177, 500}) {
        for (bool left : {false, true}) {
          bool kept[64];
          kept_by_bits(chunks, hi, left, lo, kept);
          for (int i = 0; i < chunks; ++i) {
            for (int e = 0; e < 2; ++e) {
              const int col = 8 * i + e;
              const bool expect = col < hi && !(left && col < lo);
              ASSERT_EQ(kept[2 * i + e], expect)
                  << "column " << col << ", hi " << hi << ", lo " << lo << ", left " << left << ", groups " << chunks;
            }
          }
        }
      }
    }
  }
}

TEST(MaskBits, WordsPastTheBoundAreFullOrEmpty) {
  EXPECT_EQ(columns_below(1 << 30, 0), 0xffffffffu);
  EXPECT_EQ(columns_below(1 << 30, 1), 0xffffffffu);
  EXPECT_EQ(columns_below(-(1 << 30), 0), 0u);
  EXPECT_EQ(columns_below(128, 0), 0xffffffffu);  // 16 groups: the whole first word
  EXPECT_EQ(columns_below(128, 1), 0u);
  EXPECT_EQ(columns_below(1, 0), 1u);   // column 0 only
  EXPECT_EQ(columns_below(2, 0), 3u);   // columns 0 and 1
  EXPECT_EQ(columns_below(8, 0), 3u);   // columns 2-7 belong to other threads
  EXPECT_EQ(columns_below(9, 0), 7u);   // and column 8
}

}  // namespace
}  // namespace flashattn
