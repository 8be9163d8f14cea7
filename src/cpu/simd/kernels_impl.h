// The body of the CPU inner loops, written once with GCC vector extensions and included by one
// translation unit per instruction set. The includer defines:
//   FA_SIMD_NS     namespace of this flavour (generic, avx2, avx512)
//   FA_SIMD_WIDTH  floats per vector register
//   FA_SIMD_MR     rows of the micro-kernel (accumulators = 2 * MR vector registers)
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "cpu/convert.h"
#include "cpu/simd/butterfly.h"
#include "cpu/simd/kernels.h"

namespace flashattn {
namespace cpu {
namespace FA_SIMD_NS {

constexpr int W = FA_SIMD_WIDTH;
constexpr int NR = 2 * W;
constexpr int MR = FA_SIMD_MR;

typedef float vf __attribute__((vector_size(W * 4)));
typedef float vfu __attribute__((vector_size(W * 4), aligned(4)));
typedef int32_t vi __attribute__((vector_size(W * 4)));
typedef uint32_t vu __attribute__((vector_size(W * 4)));
typedef uint16_t vh __attribute__((vector_size(W * 2)));
typedef uint16_t vhu __attribute__((vector_size(W * 2), aligned(2)));

static inline vf load(const float* p) { return *reinterpret_cast<const vfu*>(p); }
static inline void store(float* p, vf v) { *reinterpret_cast<vfu*>(p) = v; }
static inline vf splat(float x) { return vf{} + x; }
static inline vf iota() {
  vf v;
  for (int i = 0; i < W; ++i) v[i] = static_cast<float>(i);
  return v;
}
static inline vf vmax(vf a, vf b) { return a > b ? a : b; }
static inline vf vmin(vf a, vf b) { return a < b ? a : b; }
static inline vf vabs(vf a) { return a < 0.0f ? -a : a; }
// Lane i of the result is lane (i + H) mod W of v.
template <int H, int... I>
static inline vf rotate_lanes(vf v, std::integer_sequence<int, I...>) {
  return __builtin_shufflevector(v, v, ((I + H) % W)...);
}

// Horizontal reductions as a tree of log2(W) shuffles: a lane-by-lane chain of W dependent adds
// (4 cycles each) cost as much as the exp of a whole 128-key row.
template <int H = W / 2>
static inline vf tree_max(vf v) {
  if constexpr (H == 0) {
    return v;
  } else {
    return tree_max<H / 2>(vmax(v, rotate_lanes<H>(v, std::make_integer_sequence<int, W>{})));
  }
}
template <int H = W / 2>
static inline vf tree_sum(vf v) {
  if constexpr (H == 0) {
    return v;
  } else {
    return tree_sum<H / 2>(v + rotate_lanes<H>(v, std::make_integer_sequence<int, W>{}));
  }
}
static inline float hmax(vf v) { return tree_max(v)[0]; }
static inline float hsum(vf v) { return tree_sum(v)[0]; }

// exp(x) through 2^n * 2^f with a degree-7 Taylor polynomial on |f| <= 1/2 (relative error
// below 1e-8 before rounding). Inputs under -86 give exactly 0 (so masked scores vanish), and the
// clamp keeps every intermediate a normal float: a subnormal product costs a microcode assist of
// ~100 cycles per lane, which made causal tiles (half -inf) slower than full ones.
//
// AVX-512 has the two steps around the polynomial as instructions (round to an integer, scale by
// 2^n with zeroed lanes), so there exp takes 13 instructions instead of about 20: f = t - n of
// t = x log2(e) is the power of two's fraction, and 2^f a degree-6 polynomial fitted for relative
// error on |f| <= 1/2 (7.9e-8 at most in float arithmetic, 1.3 units of 2^-24). Without exp the
// bf16 forward on AMX ran 1.4-1.5x faster (session 78): exp was a third of its time.
#if FA_SIMD_WIDTH == 16 && defined(__AVX512F__)
static inline vf vexp(vf x) {
  const __m512 xv = (__m512)x;  // (GCC vector casts: the same 64 bytes, reinterpreted)
  // Live lanes: x >= -86 or NaN (NaN propagates; -86 and below give exactly 0, as above).
  const __mmask16 live = _mm512_cmp_ps_mask(xv, _mm512_set1_ps(-86.0f), _CMP_NLT_UQ);
  __m512 t = _mm512_mul_ps(xv, _mm512_set1_ps(1.44269504088896341f));
  // (max / min return their second operand where one is NaN: a NaN t passes through.)
  t = _mm512_min_ps(_mm512_set1_ps(128.0f), _mm512_max_ps(_mm512_set1_ps(-126.0f), t));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(1.5345810970757157e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3399930903688073e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618489071726799e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550328642129898e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.24022646248340607f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6931471824645996f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  const __m512 e = _mm512_maskz_scalef_ps(live, p, n);
  return (vf)e;
}
#else
static inline vf vexp(vf x) {
  const vf xc = vmin(vmax(x, splat(-86.0f)), splat(88.3f));
  const vf t = xc * 1.44269504088896341f;
  const vf n = (t + 12582912.0f) - 12582912.0f;
  const vf f = (t - n) * 0.693147180559945309f;
  vf p = splat(1.0f / 5040.0f);
  p = p * f + 1.0f / 720.0f;
  p = p * f + 1.0f / 120.0f;
  p = p * f + 1.0f / 24.0f;
  p = p * f + 1.0f / 6.0f;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  const vi ni = __builtin_convertvector(n, vi);
  const vi bits = (ni + 127) << 23;
  vf scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x < -86.0f ? splat(0.0f) : p * scale;
}
#endif

// tanh(|x|) = m / (m + 2) with m = exp(2 |x|) - 1, so large inputs saturate instead of
// overflowing. m comes from its series below 2 |x| = ln 2 / 2, where exp(2 |x|) - 1 would cancel:
// 1 - 2 / (e + 1), the form before, lost all of a small x (a soft cap of 1e7 turned every score
// into 0).
static inline vf vtanh(vf x) {
  const vf a = vmin(vabs(x) * 2.0f, splat(80.0f));
  const vf series =
      a * (1.0f + a * (0.5f + a * (1.0f / 6 + a * (1.0f / 24 + a * (1.0f / 120 + a * (1.0f / 720 + a * (1.0f / 5040)))))));
  const vf m = a < 0.34657359f ? series : vexp(a) - 1.0f;
  const vf t = m / (m + 2.0f);
  return x < 0.0f ? -t : t;
}

// ---- conversions ----------------------------------------------------------------------------

static inline vf bf16_vec(const uint16_t* p) {
  const vh h = *reinterpret_cast<const vhu*>(p);
  const vu u = __builtin_convertvector(h, vu) << 16;
  vf f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

static inline void store_bf16_vec(uint16_t* p, vf f) {
  vu u;
  std::memcpy(&u, &f, sizeof(u));
  u = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  *reinterpret_cast<vhu*>(p) = __builtin_convertvector(u, vh);
}

static inline vf fp16_vec(const uint16_t* p) {
#if FA_SIMD_WIDTH == 16
  vf f;
  __m512 r = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  std::memcpy(&f, &r, sizeof(f));
  return f;
#elif FA_SIMD_WIDTH == 8
  vf f;
  __m256 r = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  std::memcpy(&f, &r, sizeof(f));
  return f;
#else
  vf f;
  for (int i = 0; i < W; ++i) f[i] = fp16_to_float(p[i]);
  return f;
#endif
}

static inline void store_fp16_vec(uint16_t* p, vf f) {
#if FA_SIMD_WIDTH == 16
  __m512 r;
  std::memcpy(&r, &f, sizeof(r));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
#elif FA_SIMD_WIDTH == 8
  __m256 r;
  std::memcpy(&r, &f, sizeof(r));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
#else
  for (int i = 0; i < W; ++i) p[i] = float_to_fp16(f[i]);
#endif
}

// W storage elements at src + offset as floats.
static inline vf load_span(const void* src, DType dtype, int64_t offset) {
  if (dtype == DType::kFloat32) return load(static_cast<const float*>(src) + offset);
  if (dtype == DType::kBFloat16) return bf16_vec(static_cast<const uint16_t*>(src) + offset);
  return fp16_vec(static_cast<const uint16_t*>(src) + offset);
}

static inline float load_element(const void* src, DType dtype, int64_t offset) {
  if (dtype == DType::kFloat32) return static_cast<const float*>(src)[offset];
  if (dtype == DType::kBFloat16) return bf16_to_float(static_cast<const uint16_t*>(src)[offset]);
  return fp16_to_float(static_cast<const uint16_t*>(src)[offset]);
}

// n elements of storage dtype -> float32, times `scale`.
static inline void convert_span(const void* src, DType dtype, int n, float scale, float* dst) {
  int c = 0;
  for (; c + W <= n; c += W) store(dst + c, load_span(src, dtype, c) * scale);
  for (; c < n; ++c) dst[c] = load_element(src, dtype, c) * scale;
}

static inline const void* row_address(const void* base, DType dtype, int64_t offset) {
  return static_cast<const char*>(base) + offset * dtype_size(dtype);
}

// ---- products -------------------------------------------------------------------------------

// A's element (row r, depth p) at A[r * lda + p], or with kAT (A given transposed) at
// A[p * lda + r]: the backward's dQ = dS K reads dS straight from its keys-major dS^T.
template <int R, bool kAT = false>
static inline void micro(int K, const float* A, int64_t lda, const float* B, float* C, int64_t ldc, bool acc) {
  vf c0[R], c1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    c0[r] = acc ? load(C + r * ldc) : splat(0.0f);
    c1[r] = acc ? load(C + r * ldc + W) : splat(0.0f);
  }
  for (int p = 0; p < K; ++p) {
    const vf b0 = load(B);
    const vf b1 = load(B + W);
    B += NR;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const float a = kAT ? A[p * lda + r] : A[r * lda + p];
      c0[r] += a * b0;
      c1[r] += a * b1;
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    store(C + r * ldc, c0[r]);
    store(C + r * ldc + W, c1[r]);
  }
}

template <int R, bool kAT>
static inline void micro_tail(int rows, int K, const float* A, int64_t lda, const float* B, float* C, int64_t ldc,
                              bool acc) {
  if constexpr (R > 0) {
    if (rows == R) return micro<R, kAT>(K, A, lda, B, C, ldc, acc);
    return micro_tail<R - 1, kAT>(rows, K, A, lda, B, C, ldc, acc);
  }
}

template <bool kAT>
static void gemm_panels(int M, int N, int K, const float* A, int64_t lda, const float* Bp, float* C, int64_t ldc,
                        bool accumulate) {
  const int64_t row_step = kAT ? 1 : lda;  // from one row of A to the next
  for (int pn = 0; pn < N / NR; ++pn) {
    const float* panel = Bp + static_cast<int64_t>(pn) * K * NR;
    float* c_col = C + pn * NR;
    int m = 0;
    for (; m + MR <= M; m += MR) micro<MR, kAT>(K, A + m * row_step, lda, panel, c_col + m * ldc, ldc, accumulate);
    if (m < M) micro_tail<MR - 1, kAT>(M - m, K, A + m * row_step, lda, panel, c_col + m * ldc, ldc, accumulate);
  }
}

static void gemm(int M, int N, int K, const float* A, int64_t lda, const float* Bp, float* C, int64_t ldc,
                 bool accumulate) {
  gemm_panels<false>(M, N, K, A, lda, Bp, C, ldc, accumulate);
}

static void gemm_at(int M, int N, int K, const float* At, int64_t lda, const float* Bp, float* C, int64_t ldc,
                    bool accumulate) {
  gemm_panels<true>(M, N, K, At, lda, Bp, C, ldc, accumulate);
}

static void pack_b(const void* src, DType dtype, int rows, int cols, int64_t ld, float* dst) {
  const int panels = (cols + NR - 1) / NR, full_panels = cols / NR;
  alignas(64) float row[NR];
  for (int r = 0; r < rows; ++r) {
    const int64_t at = static_cast<int64_t>(r) * ld;
    // Whole panels straight from the source; a last partial one through a zero-padded row.
    for (int pn = 0; pn < full_panels; ++pn) {
      float* d = dst + (static_cast<int64_t>(pn) * rows + r) * NR;
      store(d, load_span(src, dtype, at + pn * NR));
      store(d + W, load_span(src, dtype, at + pn * NR + W));
    }
    if (full_panels < panels) {
      const int c0 = full_panels * NR;
      convert_span(row_address(src, dtype, at + c0), dtype, cols - c0, 1.0f, row);
      for (int c = cols - c0; c < NR; ++c) row[c] = 0.0f;
      float* d = dst + (static_cast<int64_t>(full_panels) * rows + r) * NR;
      store(d, load(row));
      store(d + W, load(row + W));
    }
  }
}

static void pack_bt(const void* src, DType dtype, int rows, int cols, int64_t ld, float* dst) {
  const int panels = (rows + NR - 1) / NR, full_cols = cols / W * W;
  for (int pn = 0; pn < panels; ++pn) {
    float* d = dst + static_cast<int64_t>(pn) * cols * NR;
    // A panel's NR source rows in two halves of W; each W x W block of them transposed in
    // registers becomes W panel rows (columns past the rows are zeros).
    for (int half = 0; half < NR; half += W) {
      const int r0 = pn * NR + half;
      const int n = rows - r0 >= W ? W : (rows > r0 ? rows - r0 : 0);
      for (int k0 = 0; k0 < full_cols; k0 += W) {
        vf m[W];
        for (int r = 0; r < W; ++r) {
          m[r] = r < n ? load_span(src, dtype, static_cast<int64_t>(r0 + r) * ld + k0) : splat(0.0f);
        }
        butterfly::transpose<vf, W>(m);
        for (int k = 0; k < W; ++k) store(d + static_cast<int64_t>(k0 + k) * NR + half, m[k]);
      }
      for (int k = full_cols; k < cols; ++k) {
        for (int r = 0; r < W; ++r) {
          d[static_cast<int64_t>(k) * NR + half + r] =
              r < n ? load_element(src, dtype, static_cast<int64_t>(r0 + r) * ld + k) : 0.0f;
        }
      }
    }
  }
}

static void dot_rows(const float* q, const void* rows, DType dtype, int64_t ld, int n, int D, float* s) {
  const int full_d = D / W * W;
  int j = 0;
  for (; j + W <= n; j += W) {
    vf acc[W];
#pragma GCC unroll 16
    for (int r = 0; r < W; ++r) acc[r] = splat(0.0f);
    for (int d = 0; d < full_d; d += W) {
      const vf qv = load(q + d);
#pragma GCC unroll 16
      for (int r = 0; r < W; ++r) acc[r] += qv * load_span(rows, dtype, static_cast<int64_t>(j + r) * ld + d);
    }
    store(s + j, butterfly::sum_rows<vf, W>(acc));
    for (int d = full_d; d < D; ++d) {
      for (int r = 0; r < W; ++r) s[j + r] += q[d] * load_element(rows, dtype, static_cast<int64_t>(j + r) * ld + d);
    }
  }
  for (; j < n; ++j) {
    vf acc = splat(0.0f);
    for (int d = 0; d < full_d; d += W) acc += load(q + d) * load_span(rows, dtype, static_cast<int64_t>(j) * ld + d);
    float sum = hsum(acc);
    for (int d = full_d; d < D; ++d) sum += q[d] * load_element(rows, dtype, static_cast<int64_t>(j) * ld + d);
    s[j] = sum;
  }
}

// o[d0 .. d0 + V W) += p V over n rows, the V vectors of o held in registers.
template <int V>
static inline void axpy_block(const float* p, const void* rows, DType dtype, int64_t ld, int n, int d0, float* o) {
  vf acc[V];
#pragma GCC unroll 8
  for (int t = 0; t < V; ++t) acc[t] = load(o + d0 + t * W);
  for (int j = 0; j < n; ++j) {
    const float pj = p[j];
#pragma GCC unroll 8
    for (int t = 0; t < V; ++t) acc[t] += pj * load_span(rows, dtype, static_cast<int64_t>(j) * ld + d0 + t * W);
  }
#pragma GCC unroll 8
  for (int t = 0; t < V; ++t) store(o + d0 + t * W, acc[t]);
}

static void axpy_rows(const float* p, const void* rows, DType dtype, int64_t ld, int n, int D, float* o) {
  const int full_d = D / W * W;
  int d0 = 0;
  for (; d0 + 8 * W <= full_d; d0 += 8 * W) axpy_block<8>(p, rows, dtype, ld, n, d0, o);
  if (d0 + 4 * W <= full_d) {
    axpy_block<4>(p, rows, dtype, ld, n, d0, o);
    d0 += 4 * W;
  }
  if (d0 + 2 * W <= full_d) {
    axpy_block<2>(p, rows, dtype, ld, n, d0, o);
    d0 += 2 * W;
  }
  if (d0 + W <= full_d) axpy_block<1>(p, rows, dtype, ld, n, d0, o);
  for (int d = full_d; d < D; ++d) {
    float sum = o[d];
    for (int j = 0; j < n; ++j) sum += p[j] * load_element(rows, dtype, static_cast<int64_t>(j) * ld + d);
    o[d] = sum;
  }
}

static void load_rows(const void* src, DType dtype, int rows, int cols, int64_t ld, float scale, float* dst,
                      int64_t ldd) {
  for (int r = 0; r < rows; ++r) {
    convert_span(row_address(src, dtype, r * ld), dtype, cols, scale, dst + r * ldd);
    for (int64_t c = cols; c < ldd; ++c) dst[r * ldd + c] = 0.0f;
  }
}

static void store_rows(const float* src, int64_t lds, int rows, int cols, const float* row_scale, void* dst,
                       DType dtype, int64_t ld) {
  for (int r = 0; r < rows; ++r) {
    const float a = row_scale ? row_scale[r] : 1.0f;
    const float* s = src + r * lds;
    int c = 0;
    if (dtype == DType::kFloat32) {
      float* d = static_cast<float*>(dst) + r * ld;
      for (; c + W <= cols; c += W) store(d + c, load(s + c) * a);
      for (; c < cols; ++c) d[c] = s[c] * a;
    } else if (dtype == DType::kBFloat16) {
      uint16_t* d = static_cast<uint16_t*>(dst) + r * ld;
      for (; c + W <= cols; c += W) store_bf16_vec(d + c, load(s + c) * a);
      for (; c < cols; ++c) d[c] = float_to_bf16(s[c] * a);
    } else {
      uint16_t* d = static_cast<uint16_t*>(dst) + r * ld;
      for (; c + W <= cols; c += W) store_fp16_vec(d + c, load(s + c) * a);
      for (; c < cols; ++c) d[c] = float_to_fp16(s[c] * a);
    }
  }
}

// ---- softmax pieces ---------------------------------------------------------------------------

static float score_row(float* s, int n, const ScoreRow& row, float* capped) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  vf running_max = splat(neg_inf);
  const vf lane = iota();
  const bool has_left = row.window_left >= 0, has_right = row.window_right >= 0;
  // The window's bounds as offsets from dist0, exact in 64 bits before the rounding to float:
  // dist_step * c stays small, so an offset that rounds (past 2^24) is far from every column
  // either way, where dist0 + dist_step * c itself rounded past 2^24 (a key beyond a window of
  // 2^24 keys let in).
  const float left = static_cast<float>(int64_t{row.window_left} - row.dist0);
  const float right = static_cast<float>(-int64_t{row.window_right} - row.dist0);
  const float dist0 = static_cast<float>(row.dist0);
  for (int c = 0; c < n; c += W) {
    vf x = load(s + c) * row.scale;
    if (row.softcap > 0.0f) {
      x = vtanh(x * (1.0f / row.softcap)) * row.softcap;
      if (capped) store(capped + c, x);
    }
    const vf col = lane + static_cast<float>(c);
    const vf offset = row.dist_step * col;
    if (row.alibi_slope != 0.0f) x -= row.alibi_slope * vabs(dist0 + offset);
    vi visible = col < static_cast<float>(row.n_valid);
    if (has_left) visible &= offset <= left;
    if (has_right) visible &= offset >= right;
    x = visible ? x : splat(neg_inf);
    running_max = vmax(running_max, x);
    store(s + c, x);
  }
  return hmax(running_max);
}

static float exp_row(float* s, int n, float m) {
  if (m == -std::numeric_limits<float>::infinity()) {
    for (int c = 0; c < n; ++c) s[c] = 0.0f;
    return 0.0f;
  }
  vf sum = splat(0.0f);
  for (int c = 0; c < n; c += W) {
    const vf p = vexp(load(s + c) - m);
    sum += p;
    store(s + c, p);
  }
  return hsum(sum);
}

static float row_max(const float* s, int n) {
  vf running_max = splat(-std::numeric_limits<float>::infinity());
  for (int c = 0; c < n; c += W) running_max = vmax(running_max, load(s + c));
  return hmax(running_max);
}

// m is the rounded product scale * max, while s * scale - m may be fused (one rounding): the
// exponent can then come out a little above 0, by up to half a unit of m, which at a large scale
// (1e9) overflowed exp to inf. The min with 0 lets NaN through (vmin returns its second operand).
// (softmax_step now sends rows of such large scores elsewhere; the min keeps every exponent <= 0.)
static float exp_row_scaled(float* s, int n, float scale, float m) {
  vf sum = splat(0.0f);
  for (int c = 0; c < n; c += W) {
    const vf p = vexp(vmin(splat(0.0f), load(s + c) * scale - m));
    sum += p;
    store(s + c, p);
  }
  return hsum(sum);
}

static void scale_row(float* x, int n, float a);

static void softmax_step(float* s, int64_t lds, int rows, int n, const ScoreRow* masked, float scale, float* m,
                         float* l, float* o, int64_t ldo, int dp) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < rows; ++r) {
    float* srow = s + r * lds;
    float tile_max;
    if (masked) {
      ScoreRow geom = *masked;
      geom.dist0 += r;
      tile_max = score_row(srow, n, geom, nullptr);
    } else {
      tile_max = scale * row_max(srow, n);
    }
    const float m_new = std::max(m[r], tile_max);
    // Fused, s * scale - m rounds once, so the largest score lands not on exp(0) but off by the
    // product's rounding error (up to half a unit of m), where the backward, rounding the scores
    // first, lands on it exactly: a mismatch of lse negligible for scores below 2^12, but at
    // 1e11 (scale 1e9) the row's largest weight underflowed to 0. Such rows round first.
    float sum;
    if (masked) {
      sum = exp_row(srow, n, m_new);
    } else if (std::fabs(m_new) < 0x1p12f) {
      sum = exp_row_scaled(srow, n, scale, m_new);
    } else {
      scale_row(srow, n, scale);
      sum = exp_row(srow, n, m_new);
    }
    if (m_new == neg_inf) continue;  // nothing visible yet (exp_row zeroed the row)
    if (m[r] != m_new) {
      const float alpha = m[r] == neg_inf ? 0.0f : std::exp(m[r] - m_new);
      l[r] *= alpha;
      scale_row(o + r * ldo, dp, alpha);
      m[r] = m_new;
    }
    l[r] += sum;
  }
}

static void exp_row_lse(float* s, int n, const float* lse) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int c = 0; c < n; c += W) {
    const vf l = load(lse + c);
    const vf p = vexp(load(s + c) - l);
    store(s + c, l == neg_inf ? splat(0.0f) : p);
  }
}

static void ds_row(float* ds, const float* p, int n, const float* delta, const float* capped, float scale,
                   float softcap) {
  const float inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
  for (int c = 0; c < n; c += W) {
    vf g = load(p + c) * (load(ds + c) - load(delta + c));
    if (softcap > 0.0f) {
      const vf t = load(capped + c) * inv_cap;
      g *= scale * (1.0f - t * t);
    } else {
      g *= scale;
    }
    store(ds + c, g);
  }
}

static void scale_row(float* x, int n, float a) {
  int c = 0;
  for (; c + W <= n; c += W) store(x + c, load(x + c) * a);
  for (; c < n; ++c) x[c] *= a;
}

static float dot_row(const float* a, const float* b, int n) {
  vf acc = splat(0.0f);
  int c = 0;
  for (; c + W <= n; c += W) acc += load(a + c) * load(b + c);
  float s = hsum(acc);
  for (; c < n; ++c) s += a[c] * b[c];
  return s;
}

static const Kernels kTable = {FA_SIMD_NAME, NR,        gemm,    gemm_at,      pack_b,      pack_bt,     load_rows,
                               store_rows,   score_row, exp_row, softmax_step, exp_row_lse, ds_row,
                               dot_rows,     axpy_rows, scale_row, dot_row};

}  // namespace FA_SIMD_NS
}  // namespace cpu
}  // namespace flashattn
