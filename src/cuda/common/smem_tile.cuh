// Tiles of 16-bit elements in shared memory: a swizzled layout, the ldmatrix fragment loads the
// mma operands need, and 16-byte copies between global memory and a tile.
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"

namespace flashattn::cuda {

// A kRows x kCols tile stored as 16-byte chunks (8 elements). Columns are cut into panels of 64
// (one 128-byte line per row); inside a panel, chunk c of row r is stored at c ^ (r % 8), so the
// 8 rows one ldmatrix matrix reads fall into 8 different groups of 4 banks, and so do the 8
// chunks a quarter-warp writes. A 32-column tail panel (head dims 32 and 96) has 64-byte rows,
// two per line, and xors with (r / 2) % 4 for the same effect.
template <int kRows, int kCols>
struct SwizzledTile {
  static_assert(kCols % 32 == 0, "tile width must be a multiple of 32 elements");
  static constexpr int kChunks = kCols / 8;
  static constexpr int kBytes = kRows * kCols * 2;
  static constexpr int kRowsConst = kRows;

  FA_DEV static uint32_t offset(int row, int chunk) {
    const int panel = chunk >> 3;
    const int c = chunk & 7;
    const uint32_t panel_base = static_cast<uint32_t>(panel * kRows * 128);
    if (kChunks % 8 == 0 || panel < kChunks / 8) {
      return panel_base + row * 128 + ((c ^ (row & 7)) << 4);
    }
    return panel_base + row * 64 + ((c ^ ((row >> 1) & 3)) << 4);
  }
};

// Fragment loads. Lane l of the warp supplies the address of one 8-element row of one of the
// four 8x8 matrices; which row is fixed by the mma operand layout of the PTX ISA. Two lane
// patterns cover the four operand kinds:
//   kRowsThenCols: matrices ordered (rows 0-7, c), (rows 8-15, c), (rows 0-7, c+8), (rows 8-15, c+8):
//                  A from a tile whose rows are M; B from a tile whose rows are K (with .trans).
//   kColsThenRows: (rows 0-7, c), (rows 0-7, c+8), (rows 8-15, c), (rows 8-15, c+8):
//                  B from a tile whose rows are N; A from a tile whose rows are K (with .trans).
// A fragment's row0 is a multiple of 16 and col0 of 16, so the swizzle term depends on the lane
// alone. Its 16-column step inside a panel only flips address bits 5-6, so one register per tile
// and lane pattern serves every fragment: address = (lane base ^ step << 5) + constant. This
// needs tile bases aligned to 128 bytes.
enum class LanePattern { kRowsThenCols, kColsThenRows };

template <class Tile>
struct FragmentAddress {
  uint32_t full = 0;  // tile base + this lane's offset in a 64-wide panel (step 0)
  uint32_t tail = 0;  // the same in the 32-wide tail panel

  FA_DEV static FragmentAddress make(uint32_t base, int lane, LanePattern pattern) {
    const bool rows_then_cols = pattern == LanePattern::kRowsThenCols;
    const int lr = rows_then_cols ? (lane & 7) + ((lane >> 3) & 1) * 8 : (lane & 7) + (lane >> 4) * 8;
    const int lc = rows_then_cols ? (lane >> 4) : ((lane >> 3) & 1);
    FragmentAddress f;
    f.full = base + lr * 128 + ((lc ^ (lr & 7)) << 4);
    constexpr int kFullPanels = Tile::kChunks / 8;
    f.tail = base + kFullPanels * Tile::kRowsConst * 128 + lr * 64 + ((lc ^ ((lr >> 1) & 3)) << 4);
    return f;
  }

  FA_DEV uint32_t at(int row0, int col0) const {
    const int panel = col0 / 64;
    const int step = (col0 % 64) / 16;
    if (Tile::kChunks % 8 == 0 || panel < Tile::kChunks / 8) {
      return (full ^ (step << 5)) + panel * Tile::kRowsConst * 128 + row0 * 128;
    }
    return (tail ^ (step << 5)) + row0 * 64;
  }
};

// The fragments one warp reads from a tile at a fixed warp offset (row_w, col_w), addressed
// relative to it: at(r, c) is FragmentAddress::at(row_w + r, col_w + c). When the tile has whole
// 64-column panels only and the warp's column extent kWarpCols divides or is a multiple of 64
// (and every c used is below kWarpCols), col_w's 16-column step and c's never share a bit, so
// the warp offset folds into the lane register once: address = (folded ^ step(c) << 5) + constant,
// one XOR per 16-column step instead of a XOR and an add of the warp offset. Otherwise it adds
// the warp offset per fragment (FragmentAddress).
template <class Tile, int kWarpCols>
struct WarpFragmentAddress {
  static constexpr int kCols = kWarpCols > 0 ? kWarpCols : 1;  // no % 0 below
  static constexpr bool kFolded = Tile::kChunks % 8 == 0 && kWarpCols > 0 && (kCols % 64 == 0 || 64 % kCols == 0);
  uint32_t folded = 0;
  FragmentAddress<Tile> plain;
  int row_w = 0, col_w = 0;

  FA_DEV static WarpFragmentAddress make(uint32_t base, int lane, LanePattern pattern, int row_w, int col_w) {
    WarpFragmentAddress w;
    w.plain = FragmentAddress<Tile>::make(base, lane, pattern);
    if constexpr (kFolded) {
      // col_w is a multiple of 16; its panel and rows are multiples of 128 bytes (bits 5-6 clear).
      w.folded = (w.plain.full + static_cast<uint32_t>(col_w / 64) * Tile::kRowsConst * 128 + row_w * 128) ^
                 (static_cast<uint32_t>((col_w % 64) / 16) << 5);
    } else {
      w.row_w = row_w;
      w.col_w = col_w;
    }
    return w;
  }

  FA_DEV uint32_t at(int row0, int col0) const {
    if constexpr (kFolded) {
      return (folded ^ (((col0 % 64) / 16) << 5)) + (col0 / 64) * Tile::kRowsConst * 128 + row0 * 128;
    } else {
      return plain.at(row_w + row0, col_w + col0);
    }
  }
};

// A operand (16x16, rows = M, cols = K) from a tile whose rows are M.   lanes: kRowsThenCols
template <class Addr>
FA_DEV void load_a(uint32_t (&a)[4], const Addr& t, int row0, int col0) {
  ldmatrix_x4(a, t.at(row0, col0));
}

// A operand from a tile stored transposed (rows = K, cols = M).         lanes: kColsThenRows
template <class Addr>
FA_DEV void load_a_trans(uint32_t (&a)[4], const Addr& t, int k0, int m0) {
  ldmatrix_x4_trans(a, t.at(k0, m0));
}

// B operands of two adjacent n8 tiles (n0, n0 + 8) over k0..k0+15 from a tile whose rows are N
// (K of the attention forward). b[0], b[1] feed tile n0; b[2], b[3] tile n0 + 8. lanes: kColsThenRows
template <class Addr>
FA_DEV void load_b(uint32_t (&b)[4], const Addr& t, int n0, int k0) {
  ldmatrix_x4(b, t.at(n0, k0));
}

// The same two B tiles from a tile whose rows are K (V of the attention forward). lanes: kRowsThenCols
template <class Addr>
FA_DEV void load_b_trans(uint32_t (&b)[4], const Addr& t, int k0, int n0) {
  ldmatrix_x4_trans(b, t.at(k0, n0));
}

// Stores one fp32 accumulator pair (row, col..col+1 of an m16n8 fragment) as two elements.
template <class Tile>
FA_DEV void store_pair(char* tile, int row, int col, uint32_t packed) {
  *reinterpret_cast<uint32_t*>(tile + Tile::offset(row, col >> 3) + (col & 7) * 2) = packed;
}

// Byte offsets of the accumulator-pair stores of one warp into a tile of full 64-column panels:
// element (row0 + g, col0 + nf * 8 + tig * 2) for row0 a multiple of 8 (relative to the base row)
// and n8 tile nf. The swizzle term of such a store is (chunk ^ g) with chunk = col0 / 8 + nf, so
// when col0 / 8 and nf share no bits below 8 (col0 / 8 a multiple of the power of two that bounds
// nf), the whole address is (lane offset ^ (nf % 8) << 4) + constants: one XOR per n8 tile and
// immediate offsets per store, instead of the swizzle arithmetic per store.
template <class Tile>
struct PairStoreOffset {
  static_assert(Tile::kChunks % 8 == 0, "pair stores take tiles of whole 64-column panels");
  uint32_t lane = 0;  // offset of (base_row + g, col0 + tig * 2) with the nf = 0 swizzle

  FA_DEV static PairStoreOffset make(uint32_t tile_offset, int base_row, int col0, int g, int tig) {
    const int chunk0 = col0 >> 3;
    PairStoreOffset s;
    s.lane = tile_offset + (chunk0 >> 3) * Tile::kRowsConst * 128 + (base_row + g) * 128 +
             (((chunk0 & 7) ^ g) << 4) + tig * 4;
    return s;
  }
  // Offset of the pair in rows row0 (a multiple of 8) below the base row, n8 tile nf.
  FA_DEV uint32_t at(int row0, int nf) const {
    return (lane ^ ((nf & 7) << 4)) + (nf >> 3) * Tile::kRowsConst * 128 + row0 * 128;
  }
};

// Threads of a block cover a tile as (rows x power-of-two chunk slots), so a thread keeps one
// chunk and steps down the rows by a multiple of 8: its swizzle term never changes and every
// access is base + constant. A row step of 4 (128 threads on 32-chunk rows) alternates between
// two swizzle terms: access i is base(i % 2) + constant.
template <class Tile, int kThreads>
struct TileCopyPlan {
  static constexpr int kSlots = Tile::kChunks <= 4 ? 4 : Tile::kChunks <= 8 ? 8 : Tile::kChunks <= 16 ? 16 : 32;
  static constexpr int kRowStep = kThreads / kSlots;
  static constexpr int kIters = Tile::kRowsConst / kRowStep;
  static_assert((kRowStep % 8 == 0 || (kRowStep == 4 && Tile::kChunks % 8 == 0)) && Tile::kRowsConst % kRowStep == 0,
                "tile copy plan needs rows in steps of 8 (or 4 on whole 64-column panels)");
  static constexpr int kRowBytesTail = 64;
  FA_DEV static int row(int tid) { return tid / kSlots; }
  FA_DEV static int chunk(int tid) { return tid % kSlots; }
  FA_DEV static uint32_t row_step_bytes(int chunk) {
    return (Tile::kChunks % 8 == 0 || chunk < (Tile::kChunks / 8) * 8) ? kRowStep * 128 : kRowStep * 64;
  }
  // Offset of access i relative to access 0 (or to access 1 for odd i when the step is 4).
  FA_DEV static uint32_t access_offset(uint32_t base0, uint32_t base1, uint32_t step, int i) {
    if (kRowStep % 8 == 0) return base0 + i * step;
    return (i % 2 == 0 ? base0 : base1) + (i / 2) * 2 * step;
  }
};

// Issues cp.async for rows [0, valid_rows) and chunks [0, valid_chunks) of a tile whose row r
// starts at gmem + r * row_stride; the rest of the tile is zero-filled.
template <class Tile, int kThreads, typename Element>
FA_DEV void copy_tile_async(uint32_t base, const Element* gmem, int64_t row_stride, int valid_rows,
                            int valid_chunks, int tid) {
  using Plan = TileCopyPlan<Tile, kThreads>;
  const int row = Plan::row(tid), chunk = Plan::chunk(tid);
  if (chunk >= Tile::kChunks) return;
  const uint32_t dst0 = base + Tile::offset(row, chunk);
  const uint32_t dst1 = Plan::kRowStep % 8 == 0 ? dst0 : base + Tile::offset(row + Plan::kRowStep, chunk);
  const uint32_t step = Plan::row_step_bytes(chunk);
  const bool chunk_valid = chunk < valid_chunks;
  const Element* src = gmem + row * row_stride + chunk * 8;
#pragma unroll
  for (int i = 0; i < Plan::kIters; ++i) {
    const bool valid = chunk_valid && row + i * Plan::kRowStep < valid_rows;
    cp_async_16(Plan::access_offset(dst0, dst1, step, i), valid ? src + i * Plan::kRowStep * row_stride : gmem, valid);
  }
}

// copy_tile_async with the thread's own source given: `thread_src` is the tile's row 0 plus this
// thread's row * row_stride + chunk * 8, computed once and kept wherever the caller likes
// (shared memory, for a kernel whose registers are all taken across its key loop).
template <class Tile, int kThreads, typename Element>
FA_DEV void copy_tile_async_from(uint32_t base, const Element* thread_src, int64_t row_stride, int valid_rows,
                                 int valid_chunks, int tid) {
  using Plan = TileCopyPlan<Tile, kThreads>;
  const int row = Plan::row(tid), chunk = Plan::chunk(tid);
  if (chunk >= Tile::kChunks) return;
  const uint32_t dst0 = base + Tile::offset(row, chunk);
  const uint32_t dst1 = Plan::kRowStep % 8 == 0 ? dst0 : base + Tile::offset(row + Plan::kRowStep, chunk);
  const uint32_t step = Plan::row_step_bytes(chunk);
  const bool chunk_valid = chunk < valid_chunks;
#pragma unroll
  for (int i = 0; i < Plan::kIters; ++i) {
    const bool valid = chunk_valid && row + i * Plan::kRowStep < valid_rows;
    cp_async_16(Plan::access_offset(dst0, dst1, step, i),
                valid ? thread_src + i * Plan::kRowStep * row_stride : thread_src, valid);
  }
}

// copy_tile_async for a tile whose rows and chunks all hold data: no bounds, no zero fill, no
// address selects. Thread `tid` (< kThreads) issues kIters copies at gmem + its row and chunk,
// each one row step further; the row step is the only 64-bit arithmetic per copy.
template <class Tile, int kThreads, typename Element>
FA_DEV void copy_whole_tile_async(uint32_t base, const Element* gmem, int64_t row_stride, unsigned tid) {
  using Plan = TileCopyPlan<Tile, kThreads>;
  const unsigned row = tid / Plan::kSlots, chunk = tid % Plan::kSlots;
  if (Plan::kSlots != Tile::kChunks && chunk >= static_cast<unsigned>(Tile::kChunks)) return;
  const uint32_t dst0 = base + Tile::offset(static_cast<int>(row), static_cast<int>(chunk));
  const uint32_t dst1 = Plan::kRowStep % 8 == 0 ? dst0 : base + Tile::offset(static_cast<int>(row) + Plan::kRowStep, static_cast<int>(chunk));
  const uint32_t step = Plan::row_step_bytes(static_cast<int>(chunk));
  const Element* src = gmem + row * row_stride + chunk * 8;
  const int64_t src_step = Plan::kRowStep * row_stride;
#pragma unroll
  for (int i = 0; i < Plan::kIters; ++i) {
    cp_async_16(Plan::access_offset(dst0, dst1, step, i), src, true);
    src += src_step;
  }
}

// Writes rows [0, valid_rows) and chunks [0, valid_chunks) of a tile to global memory, 16 bytes
// per thread and access.
template <class Tile, int kThreads, typename Element>
FA_DEV void store_tile(const char* tile, Element* gmem, int64_t row_stride, int valid_rows, int valid_chunks,
                       int tid) {
  using Plan = TileCopyPlan<Tile, kThreads>;
  const int row = Plan::row(tid), chunk = Plan::chunk(tid);
  if (chunk >= Tile::kChunks || chunk >= valid_chunks) return;
  const uint32_t step = Plan::row_step_bytes(chunk);
  const uint32_t src0 = Tile::offset(row, chunk);
  const uint32_t src1 = Plan::kRowStep % 8 == 0 ? src0 : Tile::offset(row + Plan::kRowStep, chunk);
#pragma unroll
  for (int i = 0; i < Plan::kIters; ++i) {
    if (row + i * Plan::kRowStep < valid_rows) {
      const uint4 v = *reinterpret_cast<const uint4*>(tile + Plan::access_offset(src0, src1, step, i));
      *reinterpret_cast<uint4*>(gmem + (row + i * Plan::kRowStep) * row_stride + chunk * 8) = v;
    }
  }
}

}  // namespace flashattn::cuda
