// GQA head packing (Cfg::kPackGqa; PackGqaConfig, picked by sm90_forward for decode-like GQA: kernel_choice.h).
//
// With G = nheads_q / nheads_kv query heads per KV head (2..64), one 128-row query tile holds
// R = kBlockM / G (rounded down) query rows of all G heads of one KV head: tile row r < R * G is
// query row m_block * R + r / G of query head kv * G + r % G (divisions by KernelParams::pack_div);
// the kBlockM - R * G rows after them (none where G is a power of two) hold no query row, and
// nothing of theirs is stored; their Q lines are zeroed once at the kernel's start (kernel.h). K and V of a key block are then loaded once for the G heads instead
// of once per head, and a decode-like problem (seqlen_q * G <= 128) needs one tile per KV head
// instead of one per query head. MHA decode runs here too at G = 1 (sm90_picks_mha_key_splits):
// the tiles are then the unpacked kernel's, and what it comes for is the key splits
// (split_keys.h), which only this kernel has.
//
// Q goes through a 5-D tensor map (dim, head in group, row, kv head, batch) whose box is
// (64, G, R, 1, 1): the box lands in shared memory with the group dimension fastest, which is
// exactly the row order above (tensor_map.cu: encode_packed_operand_map). O leaves through the
// same kind of map with boxes (64, G, 64 / G, 1, 1) per warpgroup where G divides a warpgroup's
// 64 rows (a power of two), else by the epilogue's predicated stores (KernelParams::clip_rows).
// Tiles are (m block, kv head, batch): TileCoord::head is the KV head. Masks, the key-block range,
// lse and the row clipping of the output use the query row r / G; each query row is still
// bottom-right aligned to its own sequence (the same for every head of the group).
//
// Every helper here gives the unpacked expressions unchanged when Cfg::kPackGqa is false, so the
// default kernel's code is the same as before the packing was added (checked on the SASS).
#pragma once

#include "cuda/sm90/block_range.h"
#include "cuda/sm90/tile_scheduler.h"

namespace flashattn {
namespace sm90 {

// Query rows per tile.
template <class Cfg>
__device__ __forceinline__ int tile_query_rows(const KernelParams& p) {
  if constexpr (Cfg::kPackGqa) {
    return p.pack_rows;
  } else {
    return Cfg::kBlockM;
  }
}

// Whether tile row r (0 .. kBlockM - 1) holds a query row: GQA packing leaves the rows past
// pack_rows * G without one, where G does not divide kBlockM.
template <class Cfg>
__device__ __forceinline__ bool tile_row_holds_query(const KernelParams& p, int r) {
  if constexpr (Cfg::kPackGqa) {
    return r < p.pack_rows * int(p.pack_div.divisor);
  } else {
    return true;
  }
}

template <class Cfg>
__device__ __forceinline__ TileCoord tile_coord_of(const KernelParams& p, int index) {
  if constexpr (Cfg::kFastTileDecode) {
    return tile_coord_fast(p, index, p.batch * (Cfg::kPackGqa ? p.nheads_kv : p.nheads_q));
  } else if constexpr (Cfg::kPackGqa) {
    return tile_coord_packed(p, index);
  } else {
    return tile_coord(p, index);
  }
}

// KV head whose K and V the tile reads.
template <class Cfg>
__device__ __forceinline__ int tile_kv_head(const KernelParams& p, const TileCoord& t) {
  if constexpr (Cfg::kPackGqa) {
    return t.head;
  } else {
    return t.head / p.heads_per_kv;
  }
}

// Query row (within the sequence) and query head of tile row r (0 .. kBlockM - 1). A packed row
// without a query row (tile_row_holds_query) gets the next tile's first rows: callers that store
// test tile_row_holds_query first.
template <class Cfg>
__device__ __forceinline__ int tile_row_query(const KernelParams& p, const TileCoord& t, int r) {
  if constexpr (Cfg::kPackGqa) {
    return t.m_block * p.pack_rows + int(p.pack_div.quotient(uint32_t(r)));
  } else {
    return t.m_block * Cfg::kBlockM + r;
  }
}
// Whether tile row r is no query row of the sequence: a row that holds none
// (tile_row_holds_query), or one past the sequence's query rows.
template <class Cfg>
__device__ __forceinline__ bool tile_row_outside_sequence(const KernelParams& p, const TileCoord& t,
                                                          const SequenceInfo& seq, int r) {
  return !tile_row_holds_query<Cfg>(p, r) || tile_row_query<Cfg>(p, t, r) >= seq.len_q;
}
template <class Cfg>
__device__ __forceinline__ int tile_row_head(const KernelParams& p, const TileCoord& t, int r) {
  if constexpr (Cfg::kPackGqa) {
    int in_group = 0;
    p.pack_div.divide(r, in_group);
    return t.head * int(p.pack_div.divisor) + in_group;
  } else {
    return t.head;
  }
}

// Where query row `row` (within the sequence) of query head `head` goes, in elements: in O, in L.
__device__ __forceinline__ int64_t out_offset_of(const KernelParams& p, const SequenceInfo& seq, const TileCoord& t,
                                                 int row, int head) {
  return t.batch * p.out_batch_stride + int64_t(seq.q_row0 + row) * p.out_row_stride + head * p.out_head_stride;
}
__device__ __forceinline__ int64_t lse_offset_of(const KernelParams& p, const SequenceInfo& seq, const TileCoord& t,
                                                 int row, int head) {
  return t.batch * p.lse_batch_stride + head * p.lse_head_stride + int64_t(seq.q_row0 + row) * p.lse_row_stride;
}

template <class Cfg>
__device__ __forceinline__ BlockRange<Cfg::kBlockN> tile_key_block_range(const KernelParams& p,
                                                                         const SequenceInfo& s, int m_block) {
  if constexpr (Cfg::kPackGqa) {
    const int rows = tile_query_rows<Cfg>(p);
    return key_block_range_rows<Cfg::kBlockN>(p, s, m_block * rows, rows);
  } else {
    return key_block_range<Cfg::kBlockN, Cfg::kBlockM>(p, s, m_block);
  }
}

template <class Cfg>
__device__ __forceinline__ bool tile_block_needs_mask(const KernelParams& p, const SequenceInfo& s, int m_block,
                                                      int n_block) {
  if constexpr (Cfg::kPackGqa) {
    const int rows = tile_query_rows<Cfg>(p);
    return block_needs_mask_rows<Cfg::kBlockN>(p, s, m_block * rows, rows, n_block);
  } else {
    return block_needs_mask<Cfg::kBlockN, Cfg::kBlockM>(p, s, m_block, n_block);
  }
}

}  // namespace sm90
}  // namespace flashattn
