// The AMX engine of bf16_products.h. Compiled with -mamx-tile -mamx-bf16 (CMakeLists.txt); runs
// only where bf16_engine() chose AMX, which has asked Linux for the tile data.
#include <immintrin.h>

#include "cpu/bf16_engines.h"
#include "cpu/bf16_products.h"

namespace flashattn {
namespace cpu {
namespace {

constexpr int kTileBytes = 64;  // a row of a tile: 32 bf16 or 16 float32 / 32-bit words
static_assert(kBf16Depth * 2 == kTileBytes, "the depth step is one tile row of bf16");

struct TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

// C tiles 0-3 (a 32 x 32 block: rows 0-15 / 16-31 by columns 0-15 / 16-31), A tiles 4-5, B tiles 6-7.
template <bool kTwoRows, bool kTwoCols>
void block(int K, const uint16_t* A, int64_t lda, const uint32_t* B0, const uint32_t* B1, float* C, int64_t ldc,
           bool accumulate) {
  const int64_t a_stride = lda * 2, c_stride = ldc * 4;
  // GCC's tile loads and products are volatile asm without a memory operand: the barrier keeps
  // the plain stores of A, B and C (packing, rounding, the softmax's rescale) ahead of them.
  __asm__ volatile("" ::: "memory");
  if (accumulate) {
    _tile_loadd(0, C, c_stride);
    if (kTwoCols) _tile_loadd(1, C + 16, c_stride);
    if (kTwoRows) _tile_loadd(2, C + 16 * ldc, c_stride);
    if (kTwoRows && kTwoCols) _tile_loadd(3, C + 16 * ldc + 16, c_stride);
  } else {
    _tile_zero(0);
    if (kTwoCols) _tile_zero(1);
    if (kTwoRows) _tile_zero(2);
    if (kTwoRows && kTwoCols) _tile_zero(3);
  }
  for (int k0 = 0; k0 < K; k0 += 32) {
    // Row kk of a pair-packed panel is 16 words (64 bytes); 32 values of K are 16 of its rows.
    _tile_loadd(4, A + k0, a_stride);
    _tile_loadd(6, B0 + (k0 / 2) * 16, kTileBytes);
    if (kTwoCols) _tile_loadd(7, B1 + (k0 / 2) * 16, kTileBytes);
    if (kTwoRows) _tile_loadd(5, A + 16 * lda + k0, a_stride);
    _tile_dpbf16ps(0, 4, 6);
    if (kTwoCols) _tile_dpbf16ps(1, 4, 7);
    if (kTwoRows) _tile_dpbf16ps(2, 5, 6);
    if (kTwoRows && kTwoCols) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, C, c_stride);
  if (kTwoCols) _tile_stored(1, C + 16, c_stride);
  if (kTwoRows) _tile_stored(2, C + 16 * ldc, c_stride);
  if (kTwoRows && kTwoCols) _tile_stored(3, C + 16 * ldc + 16, c_stride);
}

}  // namespace

void amx_configure_thread() {
  TileConfig config = {};
  config.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = kTileBytes;
    config.rows[t] = kBf16Rows;
  }
  // GCC 12's _tile_loadconfig names only the first 8 bytes as its memory operand, so the stores
  // of the rows and widths were dropped as dead: the operand here is the whole configuration.
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

void amx_release_thread() { _tile_release(); }

void amx_gemm(int M, int N, int K, const uint16_t* A, int64_t lda, const uint32_t* B, float* C, int64_t ldc,
              bool accumulate) {
  const int64_t panel_words = int64_t(K / 2) * 16;
  for (int m0 = 0; m0 < M; m0 += 32) {
    const bool two_rows = m0 + 16 < M;
    for (int n0 = 0; n0 < N; n0 += 32) {
      const bool two_cols = n0 + 16 < N;
      const uint32_t* b0 = B + (n0 / 16) * panel_words;
      const uint16_t* a = A + m0 * lda;
      float* c = C + m0 * ldc + n0;
      if (two_rows && two_cols) {
        block<true, true>(K, a, lda, b0, b0 + panel_words, c, ldc, accumulate);
      } else if (two_rows) {
        block<true, false>(K, a, lda, b0, nullptr, c, ldc, accumulate);
      } else if (two_cols) {
        block<false, true>(K, a, lda, b0, b0 + panel_words, c, ldc, accumulate);
      } else {
        block<false, false>(K, a, lda, b0, nullptr, c, ldc, accumulate);
      }
    }
  }
}

}  // namespace cpu
}  // namespace flashattn
