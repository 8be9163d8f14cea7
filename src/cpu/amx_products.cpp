// Compiled with -mamx-tile -mamx-bf16 -mavx512f -mavx512bw -mavx512bf16 (CMakeLists.txt); runs
// only where amx_usable() said yes.
#include "cpu/amx_products.h"

#include <immintrin.h>

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>

namespace flashattn {
namespace cpu {
namespace {

constexpr int kTileBytes = 64;  // a row of a tile: 32 bf16 or 16 float32 / 32-bit words
static_assert(kAmxDepth * 2 == kTileBytes, "the depth step is one tile row of bf16");
constexpr long kArchReqXcompPerm = 0x1023;  // arch_prctl: ask for an extended state component
constexpr long kXfeatureTileData = 18;

bool detect() {
  const char* env = std::getenv("FLASHATTN_AMX");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amx_bf16 = (edx >> 22) & 1u, amx_tile = (edx >> 24) & 1u;
  if (!amx_bf16 || !amx_tile) return false;
  // The packing and rounding use AVX-512 BW and BF16 (every processor with AMX has them).
  if (!__builtin_cpu_supports("avx512bw") || !__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) || !((eax >> 5) & 1u)) {
    return false;
  }
  // Linux hands out the 8 KB of tile data per process on request (kernel 5.16 and later).
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) == 0;
}

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

inline uint32_t pair(uint16_t low, uint16_t high) { return uint32_t(low) | (uint32_t(high) << 16); }

}  // namespace

bool amx_usable() {
  static const bool usable = detect();
  return usable;
}

void amx_configure_thread() {
  TileConfig config = {};
  config.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = kTileBytes;
    config.rows[t] = kAmxRows;
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

void amx_pack_transposed(const uint16_t* src, int rows, int cols, int64_t ld, int k_pad, int n_pad, uint32_t* dst) {
  const int half_k = k_pad / 2;
  std::memset(dst, 0, size_t(n_pad) * half_k * 4);
  // A panel's row kk is the 32-bit word kk of each of its 16 source rows: one gather (16-bit
  // element offsets, scaled by 2) of the panel's rows a word.
  const bool offsets_fit = 15 * ld <= INT32_MAX - cols;
  for (int r0 = 0; r0 < rows; r0 += 16) {
    const int n = rows - r0 < 16 ? rows - r0 : 16;
    uint32_t* panel = dst + int64_t(r0 / 16) * half_k * 16;
    const uint16_t* base = src + r0 * ld;
    if (!offsets_fit) {
      for (int r = 0; r < n; ++r) {
        for (int kk = 0; kk < cols / 2; ++kk) panel[kk * 16 + r] = pair(base[r * ld + 2 * kk], base[r * ld + 2 * kk + 1]);
      }
      continue;
    }
    const __mmask16 live = __mmask16((1u << n) - 1u);
    const __m512i row_offsets = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                   _mm512_set1_epi32(int(ld)));
    for (int kk = 0; kk < cols / 2; ++kk) {
      const __m512i offsets = _mm512_add_epi32(row_offsets, _mm512_set1_epi32(2 * kk));
      const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, offsets, base, 2);
      _mm512_storeu_si512(panel + kk * 16, words);
    }
  }
}

void amx_pack(const uint16_t* src, int rows, int cols, int64_t ld, int k_pad, int n_pad, uint32_t* dst) {
  const int half_k = k_pad / 2;
  std::memset(dst, 0, size_t(n_pad) * half_k * 4);
  // Rows 2 kk and 2 kk + 1 interleaved 16 bits at a time: 32 columns make rows kk of two panels.
  __m512i first_half, second_half;
  {
    alignas(64) uint16_t a[32], b[32];
    for (int i = 0; i < 16; ++i) {
      a[2 * i] = uint16_t(i), a[2 * i + 1] = uint16_t(32 + i);
      b[2 * i] = uint16_t(16 + i), b[2 * i + 1] = uint16_t(48 + i);
    }
    first_half = _mm512_load_si512(a);
    second_half = _mm512_load_si512(b);
  }
  for (int kk = 0; 2 * kk < rows; ++kk) {
    const uint16_t* lo = src + int64_t(2 * kk) * ld;
    const uint16_t* hi = lo + ld;
    const bool has_hi = 2 * kk + 1 < rows;
    for (int c0 = 0; c0 < cols; c0 += 32) {
      const int n = cols - c0 < 32 ? cols - c0 : 32;
      const __mmask32 live = n == 32 ? ~__mmask32(0) : __mmask32((1u << n) - 1u);
      const __m512i a = _mm512_maskz_loadu_epi16(live, lo + c0);
      const __m512i b = has_hi ? _mm512_maskz_loadu_epi16(live, hi + c0) : _mm512_setzero_si512();
      uint32_t* row = dst + int64_t(c0 / 16) * half_k * 16 + kk * 16;
      _mm512_storeu_si512(row, _mm512_permutex2var_epi16(a, first_half, b));
      if (c0 + 16 < n_pad) _mm512_storeu_si512(row + half_k * 16, _mm512_permutex2var_epi16(a, second_half, b));
    }
  }
}

void amx_copy_rows(const void* src, int rows, int cols, int64_t ld, int rows_pad, int ldd, uint16_t* dst) {
  const uint16_t* in = static_cast<const uint16_t*>(src);
  for (int r = 0; r < rows; ++r) {
    std::memcpy(dst + int64_t(r) * ldd, in + r * ld, size_t(cols) * 2);
    std::memset(dst + int64_t(r) * ldd + cols, 0, size_t(ldd - cols) * 2);
  }
  std::memset(dst + int64_t(rows) * ldd, 0, size_t(rows_pad - rows) * ldd * 2);
}

void amx_round_rows(const float* src, int64_t lds, int rows, int cols, uint16_t* dst, int64_t ldd) {
  // cols a multiple of 32 (the callers' key padding): two 16-float vectors a bf16 vector.
  for (int r = 0; r < rows; ++r) {
    const float* in = src + r * lds;
    uint16_t* out = dst + r * ldd;
    for (int c = 0; c < cols; c += 32) {
      const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + c + 16), _mm512_loadu_ps(in + c));
      std::memcpy(out + c, &pair, 64);
    }
  }
}

}  // namespace cpu
}  // namespace flashattn
