// The AVX512-BF16 engine of bf16_products.h: vdpbf16ps adds to each of 16 float lanes the two
// products of a pair of bf16, so one instruction is 32 multiply-adds where an AVX-512 FMA on
// converted floats is 16. Compiled with -mavx512f -mavx512bf16 (CMakeLists.txt); runs only where
// bf16_engine() chose it.
#include <immintrin.h>

#include <cstring>

#include "cpu/bf16_engines.h"

namespace flashattn {
namespace cpu {
namespace {

constexpr int kLanes = 16;      // a pair-packed panel's width: one zmm of 32-bit words
constexpr int kBlockRows = kDotPairsRows;  // rows of C a block
constexpr int kBlockPanels = 3; // 8 x 3 accumulators + 3 panel rows + 1 broadcast of 32 zmm

// C[kRows x 16 kPanels] (+)= A * B over half_k pairs: a step loads one word row of each panel and,
// per row of A, broadcasts that row's pair (A[r][2 kk], A[r][2 kk + 1]) against them.
template <int kRows, int kPanels>
void block(int half_k, const uint16_t* A, int64_t lda, const uint32_t* B, int64_t panel_words, float* C,
           int64_t ldc, bool accumulate) {
  __m512 acc[kRows][kPanels];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 3
    for (int p = 0; p < kPanels; ++p) {
      acc[r][p] = accumulate ? _mm512_loadu_ps(C + r * ldc + p * kLanes) : _mm512_setzero_ps();
    }
  }
  for (int kk = 0; kk < half_k; ++kk) {
    __m512bh b[kPanels];
#pragma GCC unroll 3
    for (int p = 0; p < kPanels; ++p) b[p] = (__m512bh)_mm512_loadu_si512(B + p * panel_words + kk * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      int pair_word;
      std::memcpy(&pair_word, A + r * lda + 2 * kk, sizeof(pair_word));
      const __m512bh a = (__m512bh)_mm512_set1_epi32(pair_word);
#pragma GCC unroll 3
      for (int p = 0; p < kPanels; ++p) acc[r][p] = _mm512_dpbf16_ps(acc[r][p], a, b[p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 3
    for (int p = 0; p < kPanels; ++p) _mm512_storeu_ps(C + r * ldc + p * kLanes, acc[r][p]);
  }
}

template <int kPanels>
void panel_column(int M, int half_k, const uint16_t* A, int64_t lda, const uint32_t* B, int64_t panel_words,
                  float* C, int64_t ldc, bool accumulate) {
  for (int m0 = 0; m0 < M; m0 += kBlockRows) {
    block<kBlockRows, kPanels>(half_k, A + m0 * lda, lda, B, panel_words, C + m0 * ldc, ldc, accumulate);
  }
}

}  // namespace

void dot_pairs_gemm(int M, int N, int K, const uint16_t* A, int64_t lda, const uint32_t* B, float* C, int64_t ldc,
                    bool accumulate) {
  const int half_k = K / 2;
  const int64_t panel_words = int64_t(half_k) * kLanes;
  const int panels = N / kLanes;
  int p0 = 0;
  // Each group of panels streams its B rows from L1 under every block of A's rows.
  for (; p0 + kBlockPanels <= panels; p0 += kBlockPanels) {
    panel_column<kBlockPanels>(M, half_k, A, lda, B + p0 * panel_words, panel_words, C + p0 * kLanes, ldc, accumulate);
  }
  if (panels - p0 == 2) {
    panel_column<2>(M, half_k, A, lda, B + p0 * panel_words, panel_words, C + p0 * kLanes, ldc, accumulate);
  } else if (panels - p0 == 1) {
    panel_column<1>(M, half_k, A, lda, B + p0 * panel_words, panel_words, C + p0 * kLanes, ldc, accumulate);
  }
}

}  // namespace cpu
}  // namespace flashattn
