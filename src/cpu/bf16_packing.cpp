// The bf16 engines' shared preparation of operands (bf16_products.h): pair-packing B, copying A's
// rows with their padding, rounding float rows to bf16. Compiled with -mavx512f -mavx512bw
// -mavx512bf16 (CMakeLists.txt), which both engines imply (bf16_products.cpp checks them).
#include <immintrin.h>

#include <cstring>

#include "cpu/bf16_products.h"
#include "cpu/simd/butterfly.h"

namespace flashattn {
namespace cpu {
namespace {

// 16 rows of 16 32-bit words transposed in place (simd/butterfly.h's stages on a word vector).
typedef int32_t Words __attribute__((vector_size(64)));

inline void transpose_words(__m512i* m) {
  Words w[16];
  for (int r = 0; r < 16; ++r) w[r] = reinterpret_cast<Words>(m[r]);
  butterfly::transpose<Words, 16>(w);
  for (int r = 0; r < 16; ++r) m[r] = reinterpret_cast<__m512i>(w[r]);
}

}  // namespace

void bf16_pack_transposed(const uint16_t* src, int rows, int cols, int64_t ld, int k_pad, int n_pad, uint32_t* dst) {
  const int half_k = k_pad / 2, words = cols / 2;
  // A panel's row kk is the 32-bit word kk of each of its 16 source rows: the panel is the
  // transpose of its rows read as words, taken 16 x 16 words at a time (a gather a row of the
  // panel took 4x as long on Zen 4). Blocks past the rows or the words are zeros.
  for (int r0 = 0; r0 < n_pad; r0 += 16) {
    uint32_t* panel = dst + int64_t(r0 / 16) * half_k * 16;
    const int n = rows - r0 < 16 ? (rows > r0 ? rows - r0 : 0) : 16;
    for (int k0 = 0; k0 < half_k; k0 += 16) {
      uint32_t* out = panel + int64_t(k0) * 16;
      if (n == 0 || k0 >= words) {
        for (int w = 0; w < 16; ++w) _mm512_storeu_si512(out + w * 16, _mm512_setzero_si512());
        continue;
      }
      const int live_words = words - k0 < 16 ? words - k0 : 16;
      const __mmask16 live = __mmask16((1u << live_words) - 1u);
      __m512i block[16];
      for (int r = 0; r < 16; ++r) {
        block[r] = r < n ? _mm512_maskz_loadu_epi32(live, src + (r0 + r) * ld + 2 * k0) : _mm512_setzero_si512();
      }
      transpose_words(block);
      for (int w = 0; w < 16; ++w) _mm512_storeu_si512(out + w * 16, block[w]);
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

void bf16_round_transposed(const float* src, int64_t lds, int rows, int cols, uint16_t* dst, int64_t ldd,
                           int dst_rows, int dst_cols) {
  // 32 source rows make 32 bf16 of each destination row: two 16 x 16 word transposes whose rows
  // pair up in one vcvtne2ps2bf16.
  for (int c0 = 0; c0 < dst_rows; c0 += 16) {
    const int live_cols = cols - c0 >= 16 ? 16 : (cols > c0 ? cols - c0 : 0);
    const __mmask16 live = __mmask16((1u << live_cols) - 1u);
    for (int r0 = 0; r0 < dst_cols; r0 += 32) {
      __m512i low[16], high[16];
      for (int r = 0; r < 16; ++r) {
        low[r] = r0 + r < rows ? _mm512_maskz_loadu_epi32(live, src + (r0 + r) * lds + c0) : _mm512_setzero_si512();
        high[r] = r0 + 16 + r < rows ? _mm512_maskz_loadu_epi32(live, src + (r0 + 16 + r) * lds + c0)
                                     : _mm512_setzero_si512();
      }
      transpose_words(low);
      transpose_words(high);
      for (int w = 0; w < 16; ++w) {
        const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_castsi512_ps(high[w]), _mm512_castsi512_ps(low[w]));
        std::memcpy(dst + (c0 + w) * ldd + r0, &pair, 64);
      }
    }
  }
}

}  // namespace cpu
}  // namespace flashattn
