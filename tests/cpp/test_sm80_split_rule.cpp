// The sm80 forward's key-split rule (src/cuda/sm80/split_rule.h), host arithmetic only: when the
// library cuts a query tile's keys into pieces by itself, how a caller's num_splits is held to
// the keys and to the workspace, and that the pieces always cover the key tiles exactly.
#include <gtest/gtest.h>

#include "cuda/sm80/split_rule.h"

namespace flashattn::sm80 {
namespace {

// A decode step on a 108-SM GPU (two blocks an SM): batch x heads query tiles of one row.
SplitShape decode(int64_t batch_heads, int key_blocks) {
  SplitShape s;
  s.tiles = s.piece_tiles = batch_heads;
  s.key_blocks = key_blocks;
  s.resident_blocks = 216;
  s.bytes_per_piece = static_cast<size_t>(batch_heads) * 129 * 4;
  return s;
}

TEST(Sm80SplitRule, DecodeWithFewHeadsIsCut) {
  // 8 heads of one sequence over 8192 keys (128 tiles of 64): 8 blocks alone fill 4% of the GPU.
  // Cut, the 8 x n blocks fill one wave of the 216 to at least 85% and do not spill into a second.
  const int n = auto_key_splits(decode(8, 128));
  EXPECT_GE(8 * n, 0.85 * 216) << n;
  EXPECT_LE(8 * n, 216) << n;
  // One head over 1000 key tiles: as many pieces as the rule allows that walk fewer tiles each
  // (at most 128), so at least 64 of them.
  const int one = auto_key_splits(decode(1, 1000));
  EXPECT_GE(one, 64);
  EXPECT_LE(one, kAutoMaxSplits);
}

TEST(Sm80SplitRule, FullGridsAndVariableLengthAreNotCut) {
  EXPECT_EQ(auto_key_splits(decode(216, 128)), 1);  // the grid fills the GPU already
  EXPECT_EQ(auto_key_splits(decode(173, 128)), 1);  // 80% of it
  SplitShape v = decode(8, 128);
  v.varlen = true;  // the longest sequence may be read back eagerly and given under capture
  EXPECT_EQ(auto_key_splits(v), 1);
  EXPECT_EQ(auto_key_splits(decode(8, 1)), 1);  // one key tile: nothing to share
  EXPECT_EQ(auto_key_splits(decode(8, 0)), 1);  // no keys
}

TEST(Sm80SplitRule, CallersCountIsHeldToTheKeysAndTheWorkspace) {
  EXPECT_EQ(key_splits(1, decode(8, 128)), 1);
  EXPECT_EQ(key_splits(5, decode(8, 128)), 5);    // 26 tiles a piece, the last 24
  EXPECT_EQ(key_splits(200, decode(8, 20)), 20);  // at most one piece a key tile
  EXPECT_EQ(key_splits(7, decode(8, 12)), 6);     // 2 tiles a piece cover 12 in 6 pieces
  SplitShape big = decode(8, 4096);
  big.bytes_per_piece = kMaxPieceWorkspaceBytes / 3;
  EXPECT_EQ(key_splits(64, big), 3);  // the workspace holds three pieces
  big.bytes_per_piece = kMaxPieceWorkspaceBytes + 1;
  EXPECT_EQ(key_splits(64, big), 1);
  SplitShape launch = decode(8, 4096);
  launch.max_pieces = 4;  // the launch's grid bound
  EXPECT_EQ(key_splits(64, launch), 4);
  EXPECT_EQ(key_splits(0, launch), 4);
}

TEST(Sm80SplitRule, PiecesCoverTheKeyTilesExactly) {
  for (int key_blocks = 1; key_blocks <= 300; ++key_blocks)
    for (int requested : {0, 2, 3, 7, 64, 256}) {
      const SplitShape s = decode(4, key_blocks);
      const int n = key_splits(requested, s);
      ASSERT_GE(n, 1);
      ASSERT_LE(n, key_blocks);
      if (n == 1) continue;
      const int per = blocks_per_piece(key_blocks, n);
      // Pieces 0..n-2 walk `per` tiles, the last the rest, which is at least one tile.
      ASSERT_GE(key_blocks - (n - 1) * per, 1) << key_blocks << " " << requested;
      ASSERT_LE(key_blocks - (n - 1) * per, per) << key_blocks << " " << requested;
    }
}

}  // namespace
}  // namespace flashattn::sm80
