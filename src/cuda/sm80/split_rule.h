// How many pieces the sm80 forward cuts each query tile's keys into (KernelParams::num_splits):
// host code only, so the CPU tests can check the rule.
//
// A decode step (one query row, a few heads) gives the FlashAttention-2 grid of (query tiles,
// heads, batch) a handful of thread blocks on a GPU of a hundred SMs, each walking every key;
// cut into pieces the keys spread over the SMs, and a small kernel merges the pieces.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace flashattn::sm80 {

// The most pieces the library picks by itself (num_splits 0) and the workspace it may take for
// them; a caller's num_splits (up to kMaxNumSplits) is held to the same workspace.
constexpr int kAutoMaxSplits = 128;
constexpr size_t kMaxPieceWorkspaceBytes = size_t(1) << 30;

// The most key tiles a piece walks where n pieces share key_blocks (the kernel shares a row's
// visible tiles out evenly: each piece walks the floor or the ceiling of their n-th part).
constexpr int blocks_per_piece(int key_blocks, int n) { return (key_blocks + n - 1) / n; }

struct SplitShape {
  int64_t tiles = 0;        // thread blocks without splits: query tiles x heads x batch
  int64_t piece_tiles = 0;  // the key-split kernel's (its query tiles are 64 rows: forward_kernel.cuh)
  int key_blocks = 0;       // key tiles of the longest sequence
  int resident_blocks = 0;  // thread blocks the GPU runs at once (SMs x blocks per SM)
  bool varlen = false;
  size_t bytes_per_piece = 0;  // float32 O and lse of every row and head, for one piece
  int max_pieces = 1 << 30;    // the launch's own bound (the grid's z: 65535 / batch)
};

// The library's choice (requested 0): none where the grid already fills 80% of the resident
// blocks, or for variable length (the longest sequence, which sizes the pieces, is then read from
// the device outside graph capture and given under it, so the two could differ; a captured step
// must compute what an eager one does). Otherwise the fewest pieces whose waves are within 85% of
// the best waves' fill among 1..kAutoMaxSplits pieces (a wave's fill: blocks / (waves x
// resident)), counting only piece counts that change the blocks a piece walks.
inline int auto_key_splits(const SplitShape& s) {
  if (s.varlen || s.tiles <= 0 || s.key_blocks <= 1 || s.resident_blocks <= 0) return 1;
  if (static_cast<double>(s.tiles) >= 0.8 * s.resident_blocks) return 1;
  const int most = std::min(kAutoMaxSplits, s.key_blocks);
  auto fill = [&](int n) {
    const double waves = static_cast<double>(n == 1 ? s.tiles : s.piece_tiles) * n / s.resident_blocks;
    return waves / std::ceil(waves);
  };
  auto distinct = [&](int n) {  // n pieces walk fewer blocks each than n - 1 do
    return n == 1 || blocks_per_piece(s.key_blocks, n) != blocks_per_piece(s.key_blocks, n - 1);
  };
  double best = 0.0;
  for (int n = 1; n <= most; ++n) {
    if (distinct(n)) best = std::max(best, fill(n));
  }
  for (int n = 1; n <= most; ++n) {
    if (distinct(n) && fill(n) >= 0.85 * best) return n;
  }
  return 1;
}

// The pieces a forward runs with: the caller's num_splits (1 none, more that many, at most one a
// key block) or the library's choice (0); fewer where the workspace or the launch would pass its
// bound, and no more than ceil(key_blocks / blocks a piece) (so no piece past the keys; pieces of
// blocks_per_piece(key_blocks, n) blocks then).
inline int key_splits(int requested, const SplitShape& s) {
  int n = requested == 0 ? auto_key_splits(s) : std::min(requested, std::max(1, s.key_blocks));
  if (s.bytes_per_piece > 0) {
    const size_t fit = kMaxPieceWorkspaceBytes / s.bytes_per_piece;
    n = static_cast<int>(std::min<size_t>(static_cast<size_t>(n), fit));
  }
  n = std::min(n, s.max_pieces);
  if (n <= 1) return 1;
  return (s.key_blocks + blocks_per_piece(s.key_blocks, n) - 1) / blocks_per_piece(s.key_blocks, n);
}

}  // namespace flashattn::sm80
