// The CPU backend's inner loops, compiled once per instruction set and chosen at run time.
//
// Matrices are float32. A "panel-packed" B operand of a product C[M x N] = A[M x K] * B[K x N]
// is stored as ceil(N / nr) panels, each K rows of nr contiguous floats (zero padded past N),
// so the micro-kernel streams one panel from L1 while broadcasting A.
#pragma once

#include <cstdint>

#include "flashattn/types.h"

namespace flashattn {
namespace cpu {

// Geometry of a score row for the epilogue: element c of the row has
//   dist = dist0 + dist_step * c   (the signed distance i + (sk - sq) - j to the diagonal)
// and is visible when c < n_valid and -window_right <= dist <= window_left (a side < 0: unbounded).
struct ScoreRow {
  int n_valid = 0;
  int64_t dist0 = 0;
  float dist_step = -1.0f;
  int window_left = -1;
  int window_right = -1;
  float scale = 1.0f;
  float softcap = 0.0f;
  float alibi_slope = 0.0f;
};

struct Kernels {
  const char* name;
  int nr;  // panel width in floats

  // C (+)= A * Bp for M x N x K; N is a multiple of nr; A row-major with lda; C row-major with ldc.
  void (*gemm)(int M, int N, int K, const float* A, int64_t lda, const float* Bp, float* C, int64_t ldc,
               bool accumulate);
  // The same with A given transposed: A's row m, depth p at At[p * lda + m] (the same bits as
  // gemm on A laid out row-major).
  void (*gemm_at)(int M, int N, int K, const float* At, int64_t lda, const float* Bp, float* C, int64_t ldc,
                  bool accumulate);
  // Panel-pack src[rows x cols] (storage dtype, row stride ld) as B with K = rows, N = cols.
  void (*pack_b)(const void* src, DType dtype, int rows, int cols, int64_t ld, float* dst);
  // Panel-pack the transpose: B = src^T, so K = cols and N = rows.
  void (*pack_bt)(const void* src, DType dtype, int rows, int cols, int64_t ld, float* dst);
  // Convert rows to float32 row-major (dst row stride ldd), multiplied by `scale`; columns
  // [cols, ldd) are zeroed.
  void (*load_rows)(const void* src, DType dtype, int rows, int cols, int64_t ld, float scale, float* dst,
                    int64_t ldd);
  // Write float32 rows back in the storage dtype, each multiplied by row_scale[r] (null: 1).
  void (*store_rows)(const float* src, int64_t lds, int rows, int cols, const float* row_scale, void* dst,
                     DType dtype, int64_t ld);

  // Raw dot products -> scores with scale, softcap, ALiBi and mask (masked = -inf) over n
  // elements (n a multiple of nr). Returns the row maximum. If `capped` is not null it receives
  // the soft-capped score before ALiBi (what the softcap derivative needs).
  float (*score_row)(float* s, int n, const ScoreRow& row, float* capped);
  // s[c] = exp(s[c] - m) in place; returns the sum over the row.
  float (*exp_row)(float* s, int n, float m);
  // One online-softmax step of the forward over `rows` rows of raw dot products (row r at
  // s + r * lds, n a multiple of nr). With `masked` null the score is just scale * q.k and is
  // folded into the exp (one pass); otherwise row r goes through score_row with the geometry
  // *masked shifted by r along the diagonal (dist0 + r). Then m_new = max(m[r], row max),
  // s = exp(score - m_new), and when the maximum moved, l[r] and the unscaled output row
  // o + r * ldo (dp floats) are rescaled by exp(m[r] - m_new) before l[r] += the row sum. A row
  // that has seen no key yet keeps m = -inf, l = 0 and its output row untouched.
  void (*softmax_step)(float* s, int64_t lds, int rows, int n, const ScoreRow* masked, float scale, float* m,
                       float* l, float* o, int64_t ldo, int dp);
  void (*exp_row_lse)(float* s, int n, const float* lse);
  // ds[c] = p[c] * (dp[c] - delta[c]) * d(score)/d(dot) at capped[c] (capped may be null).
  void (*ds_row)(float* ds, const float* p, int n, const float* delta, const float* capped, float scale,
                 float softcap);
  // Rows of a storage-dtype matrix (row stride ld) used where they lie, for a few query rows
  // (decode) that would not repay packing: s[j] = sum over d < D of q[d] * rows[j][d] for j < n,
  // and o[d] += sum over j < n of p[j] * rows[j][d] for d < D (in order of j, as gemm adds).
  void (*dot_rows)(const float* q, const void* rows, DType dtype, int64_t ld, int n, int D, float* s);
  void (*axpy_rows)(const float* p, const void* rows, DType dtype, int64_t ld, int n, int D, float* o);
  // x[c] *= a
  void (*scale_row)(float* x, int n, float a);
  // sum over c of a[c] * b[c]
  float (*dot_row)(const float* a, const float* b, int n);
};

const Kernels& kernels();             // the best set this processor runs
const Kernels& kernels_generic();
const Kernels* kernels_avx2();        // null when the processor lacks AVX2/FMA/F16C
const Kernels* kernels_avx512();      // null when the processor lacks AVX-512

}  // namespace cpu
}  // namespace flashattn
