// Where one sequence of the batch lives and which tiles of its score matrix hold any visible
// score. Forward and backward derive their loop bounds from the same two functions, so the
// tiles one visits are exactly the tiles the other visits.
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "variants/sequence.h"
#include "variants/variant.h"

namespace flashattn::cuda {

struct DeviceSequence {
  int64_t q_row0 = 0, k_row0 = 0;  // first row of the sequence in the varlen tensors, else 0
  int len_q = 0, len_k = 0;
  FA_HD int64_t diag_offset() const { return len_k - len_q; }
};

// cu_seqlens and seqused are device pointers (null when not given): variants/sequence.h.
FA_DEV DeviceSequence device_sequence(const int32_t* cu_seqlens_q, const int32_t* cu_seqlens_k,
                                      const int32_t* seqused_q, const int32_t* seqused_k, int seqlen_q,
                                      int seqlen_k, int64_t rows_q, int64_t rows_k, int b) {
  return sequence_of<DeviceSequence>(cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, seqlen_q, seqlen_k, rows_q,
                                     rows_k, b);
}

// Half-open range of tile indices.
struct TileRange {
  int begin = 0, end = 0;
  FA_HD bool empty() const { return end <= begin; }
};

// Key tiles (of kBlockN columns) that query rows [row_first, row_last] see. The visible keys of a
// row form an interval whose ends grow by one per row, so the union over the rows is one interval.
FA_HD TileRange key_tiles(const MaskPolicy& mask, int64_t row_first, int64_t row_last, int64_t diag, int len_k,
                          int block_n) {
  int64_t lo = mask.key_begin(row_first, diag);
  int64_t hi = mask.key_end(row_last, diag, len_k);
  lo = lo < 0 ? 0 : lo;
  hi = hi > len_k ? len_k : hi;
  TileRange r;
  if (hi <= lo) return r;
  r.begin = static_cast<int>(lo / block_n);
  r.end = static_cast<int>((hi + block_n - 1) / block_n);
  return r;
}

// Query tiles (of block_m rows) that see any key of columns [col_first, col_last]: the inverse of
// key_tiles, from the same inequalities j >= i + diag - window_left and j <= i + diag + window_right.
FA_HD TileRange query_tiles(const MaskPolicy& mask, int64_t col_first, int64_t col_last, int64_t diag, int len_q,
                            int block_m) {
  int64_t lo = mask.window_right < 0 ? 0 : col_first - diag - mask.window_right;
  int64_t hi = mask.window_left < 0 ? len_q : col_last - diag + mask.window_left + 1;
  lo = lo < 0 ? 0 : lo;
  hi = hi > len_q ? len_q : hi;
  TileRange r;
  if (hi <= lo) return r;
  r.begin = static_cast<int>(lo / block_m);
  r.end = static_cast<int>((hi + block_m - 1) / block_m);
  return r;
}

// True when every (row, col) of rows [row_first, row_last] x cols [col_first, col_last] is visible,
// so the tile can skip the element-wise mask.
FA_HD bool tile_fully_visible(const MaskPolicy& mask, int64_t row_first, int64_t row_last, int64_t col_first,
                              int64_t col_last, int64_t diag, int len_k) {
  if (col_last >= len_k) return false;
  if (!mask.has_mask()) return true;
  return mask.key_begin(row_last, diag) <= col_first && mask.key_end(row_first, diag, len_k) > col_last;
}

}  // namespace flashattn::cuda
