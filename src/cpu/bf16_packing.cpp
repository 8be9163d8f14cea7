// The bf16 engines' shared preparation of operands (bf16_products.h): pair-packing B, copying A's
// rows with their padding, rounding float rows to bf16. Compiled with -mavx512f -mavx512bw
// -mavx512bf16 (CMakeLists.txt), which both engines imply (bf16_products.cpp checks them).
#include <immintrin.h>

#include <climits>
#include <cstring>

#include "cpu/bf16_products.h"

namespace flashattn {
namespace cpu {
namespace {

inline uint32_t pair(uint16_t low, uint16_t high) { return uint32_t(low) | (uint32_t(high) << 16); }

}  // namespace

void bf16_pack_transposed(const uint16_t* src, int rows, int cols, int64_t ld, int k_pad, int n_pad, uint32_t* dst) {
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

void bf16_pack(const uint16_t* src, int rows, int cols, int64_t ld, int k_pad, int n_pad, uint32_t* dst) {
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

void bf16_copy_rows(const void* src, int rows, int cols, int64_t ld, int rows_pad, int ldd, uint16_t* dst) {
  const uint16_t* in = static_cast<const uint16_t*>(src);
  for (int r = 0; r < rows; ++r) {
    std::memcpy(dst + int64_t(r) * ldd, in + r * ld, size_t(cols) * 2);
    std::memset(dst + int64_t(r) * ldd + cols, 0, size_t(ldd - cols) * 2);
  }
  std::memset(dst + int64_t(rows) * ldd, 0, size_t(rows_pad - rows) * ldd * 2);
}

void bf16_round_rows(const float* src, int64_t lds, int rows, int cols, uint16_t* dst, int64_t ldd) {
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
