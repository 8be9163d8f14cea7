// The bf16 engines' shared preparation of operands (bf16_products.h): pair-packing B, copying A's
// rows with their padding, rounding float rows to bf16. Compiled with -mavx512f -mavx512bw
// -mavx512bf16 (CMakeLists.txt), which both engines imply (bf16_products.cpp checks them).
#include <immintrin.h>

#include <cstring>

#include "cpu/bf16_products.h"

namespace flashattn {
namespace cpu {
namespace {

// m (16 rows of 16 words) transposed in place: four butterfly stages, each swapping the
// off-diagonal half x half blocks inside every 2 half x 2 half block (half = 8, 4, 2, 1). For a
// row pair (i, i + half) with bit `half` clear in i, lane c of the new row i is row i's lane c
// where bit `half` of c is clear, else row i + half's lane c - half; the new row i + half is
// row i's lane c + half where clear, else row i + half's lane c.
template <int kHalf>
struct ButterflyLanes {
  int low[16] = {}, high[16] = {};
  constexpr ButterflyLanes() {
    for (int c = 0; c < 16; ++c) {
      const bool upper = c & kHalf;
      low[c] = upper ? 16 + c - kHalf : c;  // vpermt2d: lanes 16-31 name the second source's
      high[c] = upper ? 16 + c : c + kHalf;
    }
  }
};

template <int kHalf>
inline void butterfly(__m512i* m) {
  static constexpr ButterflyLanes<kHalf> lanes{};
  const __m512i take_low = _mm512_loadu_si512(lanes.low), take_high = _mm512_loadu_si512(lanes.high);
  for (int i = 0; i < 16; ++i) {
    if (i & kHalf) continue;
    const __m512i a = m[i], b = m[i + kHalf];
    m[i] = _mm512_permutex2var_epi32(a, take_low, b);
    m[i + kHalf] = _mm512_permutex2var_epi32(a, take_high, b);
  }
}

inline void transpose_words(__m512i* m) {
  butterfly<8>(m);
  butterfly<4>(m);
  butterfly<2>(m);
  butterfly<1>(m);
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
