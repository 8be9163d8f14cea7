// Every SIMD flavour this processor runs, through its function table (FLASHATTN_SIMD is read once
// per process, so the tables are the only way to reach all flavours in one run), against plain
// loops written from the contracts in src/cpu/simd/kernels.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/host_tensor.h"
#include "cpu/convert.h"
#include "cpu/simd/kernels.h"

namespace fa_test {
namespace {

namespace cpu = flashattn::cpu;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

const cpu::Kernels* flavour(const std::string& name) {
  if (name == "generic") return &cpu::kernels_generic();
  if (name == "avx2") return cpu::kernels_avx2();
  return cpu::kernels_avx512();
}

class Simd : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    k_ = flavour(GetParam());
    if (!k_) GTEST_SKIP() << GetParam() << " is not supported by this processor";
    ASSERT_EQ(std::string(k_->name), GetParam());
    ASSERT_GT(k_->nr, 0);
  }
  const cpu::Kernels* k_ = nullptr;
  std::mt19937_64 rng_{2024};
  float normal() { return std::normal_distribution<float>(0.0f, 1.0f)(rng_); }
};

// Storage of `rows x cols` values of `dtype` with row stride `ld`, and the exact values stored.
struct Matrix {
  std::vector<unsigned char> bytes;
  std::vector<float> values;  // rows x cols, what the storage decodes to
  int rows, cols;
  int64_t ld;
};

Matrix random_matrix(DType dtype, int rows, int cols, int64_t ld, std::mt19937_64& rng) {
  Matrix m{std::vector<unsigned char>(static_cast<size_t>(rows * ld + 8) * 4, 0xff),
           std::vector<float>(static_cast<size_t>(rows) * cols), rows, cols, ld};
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const float x = round_to_dtype(dtype, normal(rng));
      m.values[static_cast<size_t>(r) * cols + c] = x;
      const int64_t i = r * ld + c;
      if (dtype == DType::kFloat32) {
        std::memcpy(&m.bytes[static_cast<size_t>(i) * 4], &x, 4);
      } else {
        const uint16_t h = dtype == DType::kFloat16 ? encode_fp16(x) : encode_bf16(x);
        std::memcpy(&m.bytes[static_cast<size_t>(i) * 2], &h, 2);
      }
    }
  }
  return m;
}

TEST_P(Simd, GemmMatchesNaiveProduct) {
  const int nr = k_->nr;
  for (int M : {1, 5, 6, 7, 8, 9, 13, 64}) {
    for (int N : {nr, 3 * nr}) {
      for (int K : {1, 7, 64, 129}) {
        for (bool accumulate : {false, true}) {
          SCOPED_TRACE(testing::Message() << "M=" << M << " N=" << N << " K=" << K << " acc=" << accumulate);
          const int64_t lda = K + 3, ldc = N + 5;
          std::vector<float> A(static_cast<size_t>(M * lda)), Bm(static_cast<size_t>(K) * N), C(static_cast<size_t>(M * ldc));
          for (float& x : A) x = normal();
          for (float& x : Bm) x = normal();
          for (float& x : C) x = normal();
          // The documented panel layout: panel p holds K rows of nr contiguous columns.
          std::vector<float> Bp(static_cast<size_t>(K) * N);
          for (int p = 0; p < N / nr; ++p)
            for (int kk = 0; kk < K; ++kk)
              for (int c = 0; c < nr; ++c) Bp[(static_cast<size_t>(p) * K + kk) * nr + c] = Bm[static_cast<size_t>(kk) * N + p * nr + c];
          const std::vector<float> C0 = C;
          k_->gemm(M, N, K, A.data(), lda, Bp.data(), C.data(), ldc, accumulate);
          for (int m = 0; m < M; ++m) {
            for (int n = 0; n < ldc; ++n) {
              const size_t ci = static_cast<size_t>(m * ldc + n);
              if (n >= N) {
                ASSERT_EQ(C[ci], C0[ci]) << "wrote past N at row " << m << " col " << n;
                continue;
              }
              double want = accumulate ? C0[ci] : 0.0, mag = std::fabs(want);
              for (int kk = 0; kk < K; ++kk) {
                const double t = static_cast<double>(A[static_cast<size_t>(m * lda + kk)]) * Bm[static_cast<size_t>(kk) * N + n];
                want += t;
                mag += std::fabs(t);
              }
              ASSERT_NEAR(C[ci], want, 1e-6 * mag + 1e-30) << "row " << m << " col " << n;
            }
          }
        }
      }
    }
  }
}

// gemm_at reads A transposed (row m, depth p at At[p * lda + m]) and sums in gemm's order: the
// same bits as gemm on A row-major, and nothing written past N.
TEST_P(Simd, GemmOfTransposedAIsGemmsBits) {
  const int nr = k_->nr;
  for (int M : {1, 7, 8, 9, 64}) {
    for (int K : {1, 33, 128}) {
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(testing::Message() << "M=" << M << " K=" << K << " acc=" << accumulate);
        const int N = 2 * nr;
        const int64_t lda = K + 1, lda_t = M + 3, ldc = N + 5;
        std::vector<float> A(static_cast<size_t>(M * lda)), At(static_cast<size_t>(K * lda_t), kNaN);
        std::vector<float> Bp(static_cast<size_t>(K) * N), C(static_cast<size_t>(M * ldc));
        for (float& x : A) x = normal();
        for (float& x : Bp) x = normal();
        for (float& x : C) x = normal();
        for (int m = 0; m < M; ++m)
          for (int kk = 0; kk < K; ++kk) At[static_cast<size_t>(kk * lda_t + m)] = A[static_cast<size_t>(m * lda + kk)];
        std::vector<float> want = C, got = C;
        k_->gemm(M, N, K, A.data(), lda, Bp.data(), want.data(), ldc, accumulate);
        k_->gemm_at(M, N, K, At.data(), lda_t, Bp.data(), got.data(), ldc, accumulate);
        for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
      }
    }
  }
}

TEST_P(Simd, PackRoundTripsEveryDtype) {
  const int nr = k_->nr;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (int rows : {1, 3, nr - 1, nr + 1, 2 * nr + 3}) {
      for (int cols : {1, 8, 13, 37, 256}) {
        SCOPED_TRACE(testing::Message() << dtype_str(dtype) << " rows=" << rows << " cols=" << cols);
        const Matrix m = random_matrix(dtype, rows, cols, cols + 3, rng_);
        // pack_b: K = rows, N = cols.
        const int pb = (cols + nr - 1) / nr;
        std::vector<float> dst(static_cast<size_t>(pb) * rows * nr, kNaN);
        k_->pack_b(m.bytes.data(), dtype, rows, cols, m.ld, dst.data());
        for (int p = 0; p < pb; ++p)
          for (int r = 0; r < rows; ++r)
            for (int c = 0; c < nr; ++c) {
              const int col = p * nr + c;
              const float want = col < cols ? m.values[static_cast<size_t>(r) * cols + col] : 0.0f;
              ASSERT_EQ(dst[(static_cast<size_t>(p) * rows + r) * nr + c], want) << "pack_b r=" << r << " col=" << col;
            }
        // pack_bt: B = src^T, K = cols, N = rows.
        const int pt = (rows + nr - 1) / nr;
        std::vector<float> dst_t(static_cast<size_t>(pt) * cols * nr, kNaN);
        k_->pack_bt(m.bytes.data(), dtype, rows, cols, m.ld, dst_t.data());
        for (int p = 0; p < pt; ++p)
          for (int kk = 0; kk < cols; ++kk)
            for (int c = 0; c < nr; ++c) {
              const int r = p * nr + c;
              const float want = r < rows ? m.values[static_cast<size_t>(r) * cols + kk] : 0.0f;
              ASSERT_EQ(dst_t[(static_cast<size_t>(p) * cols + kk) * nr + c], want) << "pack_bt r=" << r << " k=" << kk;
            }
        // load_rows with a power-of-two scale (exact) into padded rows whose tail must be zeroed.
        const int64_t ldd = cols + 11;
        std::vector<float> loaded(static_cast<size_t>(rows * ldd), kNaN);
        k_->load_rows(m.bytes.data(), dtype, rows, cols, m.ld, 0.5f, loaded.data(), ldd);
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < ldd; ++c) {
            const float want = c < cols ? 0.5f * m.values[static_cast<size_t>(r) * cols + c] : 0.0f;
            ASSERT_EQ(loaded[static_cast<size_t>(r * ldd + c)], want) << "load_rows r=" << r << " c=" << c;
          }
      }
    }
  }
}

// store_rows rounds to nearest even, saturates to infinity, keeps subnormals, and writes only the
// first `cols` elements of each row.
TEST_P(Simd, StoreRowsRoundsLikeTheFormat) {
  const float specials[] = {1.0f + std::ldexp(1.0f, -11),     // fp16 tie: stays 1
                            1.0f + 3 * std::ldexp(1.0f, -11), // fp16 tie: rounds up to even
                            1.0f + std::ldexp(1.0f, -8),      // bf16 tie
                            1.0f + 3 * std::ldexp(1.0f, -8),
                            70000.0f, -1e6f, 65519.0f, 65520.0f, 1e-6f, -3e-7f, 6.1e-5f, 1e-40f, 0.0f, -0.0f,
                            3.0e38f};
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (int cols : {1, 7, 16, 33, 100}) {
      for (bool with_scale : {false, true}) {
        SCOPED_TRACE(testing::Message() << dtype_str(dtype) << " cols=" << cols << " row_scale=" << with_scale);
        const int rows = 3;
        const int64_t lds = cols + 4, ld = cols + 2;
        std::vector<float> src(static_cast<size_t>(rows * lds));
        for (size_t i = 0; i < src.size(); ++i) src[i] = i % 3 == 0 ? specials[(i / 3) % 15] : normal() * 100.0f;
        std::vector<float> row_scale = {0.75f, 1.0f, -2.5f};
        const int es = dtype == DType::kFloat32 ? 4 : 2;
        std::vector<unsigned char> dst(static_cast<size_t>(rows * ld) * es, 0xab);
        k_->store_rows(src.data(), lds, rows, cols, with_scale ? row_scale.data() : nullptr, dst.data(), dtype, ld);
        for (int r = 0; r < rows; ++r) {
          for (int c = 0; c < ld; ++c) {
            const size_t at = static_cast<size_t>(r * ld + c) * es;
            if (c >= cols) {
              for (int b = 0; b < es; ++b) ASSERT_EQ(dst[at + b], 0xab) << "wrote past cols at r=" << r << " c=" << c;
              continue;
            }
            const float x = src[static_cast<size_t>(r * lds + c)] * (with_scale ? row_scale[r] : 1.0f);
            float got;
            if (dtype == DType::kFloat32) {
              std::memcpy(&got, &dst[at], 4);
            } else {
              uint16_t h;
              std::memcpy(&h, &dst[at], 2);
              got = dtype == DType::kFloat16 ? decode_fp16(h) : decode_bf16(h);
            }
            const float want = round_to_dtype(dtype, x);
            ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want))) << "x=" << x << " got " << got << " want " << want;
            ASSERT_EQ(std::signbit(got), std::signbit(want)) << "x=" << x;
          }
        }
      }
    }
  }
}

// exp stays within a few float ulps plus |x| * 2^-24 relative: the range reduction x * log2(e) is
// one float product, so the reduced argument carries that absolute error (2e-6 relative near
// -30). That is harmless in a softmax, where the absolute error |x| e^x 2^-24 stays below 3e-8,
// and the scores it is applied to are only known to the same relative precision. Below -86
// the result is exactly 0 (masked scores), and an all-masked row (m = -inf) gives zeros.
double exp_tolerance(double x) { return 1.5e-7 * (2.0 + std::fabs(x)); }

TEST_P(Simd, ExpRowAccuracy) {
  const int n = 8 * k_->nr;
  std::vector<float> s(static_cast<size_t>(n));
  const float m = 3.5f;
  for (int c = 0; c < n; ++c) s[c] = m - (c < n - 6 ? 88.0f * c / n : 87.31f + c);
  s[5] = kNegInf;
  std::vector<float> in = s;
  const float sum = k_->exp_row(s.data(), n, m);
  double want_sum = 0.0;
  for (int c = 0; c < n; ++c) {
    const double want = std::exp(static_cast<double>(in[c]) - m);
    if (in[c] - m < -86.0f) {
      ASSERT_EQ(s[c], 0.0f) << "c=" << c;
      continue;
    }
    want_sum += want;
    ASSERT_NEAR(s[c], want, exp_tolerance(in[c] - m) * want) << "x=" << in[c] - m;
  }
  EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum);

  // The one-pass step of unmasked tiles, on two rows: the first row's maximum moves (so its l and
  // output row are rescaled), the second's does not.
  const int dp = k_->nr;
  const float scale = 0.125f;
  std::vector<float> raw(static_cast<size_t>(2 * n)), o(static_cast<size_t>(2 * dp));
  for (float& x : raw) x = normal() * 7.0f;
  for (float& x : o) x = normal();
  raw[n / 3] = 41.5f;
  raw[n + 5] = 20.0f;
  float m_run[2] = {2.0f, 30.0f}, l_run[2] = {3.0f, 5.0f};
  std::vector<float> p = raw, o_out = o;
  k_->softmax_step(p.data(), n, 2, n, nullptr, scale, m_run, l_run, o_out.data(), dp, dp);
  const double m_want[2] = {scale * 41.5, 30.0};
  EXPECT_EQ(m_run[0], scale * 41.5f);
  EXPECT_EQ(m_run[1], 30.0f);
  for (int r = 0; r < 2; ++r) {
    const double alpha = r == 0 ? std::exp(2.0 - m_want[0]) : 1.0;
    double want_l = (r == 0 ? 3.0 : 5.0) * alpha;
    for (int c = 0; c < n; ++c) {
      const double x = static_cast<double>(scale) * raw[r * n + c] - m_want[r];
      const double want = std::exp(x);
      want_l += want;
      ASSERT_NEAR(p[r * n + c], want, exp_tolerance(x) * want + 1e-30) << "row " << r << " x=" << x;
    }
    EXPECT_NEAR(l_run[r], want_l, 1e-6 * want_l) << "row " << r;
    for (int c = 0; c < dp; ++c) ASSERT_NEAR(o_out[r * dp + c], o[r * dp + c] * alpha, 1e-6) << "row " << r;
  }

  std::vector<float> masked(static_cast<size_t>(n), kNegInf);
  EXPECT_EQ(k_->exp_row(masked.data(), n, kNegInf), 0.0f);
  for (float x : masked) ASSERT_EQ(x, 0.0f);

  std::vector<float> lse(static_cast<size_t>(n)), t(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) {
    lse[c] = c % 7 == 0 ? kNegInf : normal() * 10.0f;
    t[c] = lse[c] - std::fabs(normal()) * 5.0f;
    if (c % 7 == 0) t[c] = c % 2 ? kNegInf : normal();
  }
  const std::vector<float> t_in = t;
  k_->exp_row_lse(t.data(), n, lse.data());
  for (int c = 0; c < n; ++c) {
    if (lse[c] == kNegInf) {
      ASSERT_EQ(t[c], 0.0f) << "c=" << c;
    } else {
      const double want = std::exp(static_cast<double>(t_in[c]) - lse[c]);
      ASSERT_NEAR(t[c], want, exp_tolerance(t_in[c] - lse[c]) * want + 1e-38) << "c=" << c;
    }
  }
}

TEST_P(Simd, ScoreRowMasksCapsAndBiases) {
  const int n = 3 * k_->nr;
  for (float step : {-1.0f, 1.0f}) {
    for (float softcap : {0.0f, 4.0f}) {
      for (int wl : {-1, 0, 5}) {
        for (int wr : {-1, 0, 3}) {
          SCOPED_TRACE(testing::Message() << "step=" << step << " softcap=" << softcap << " wl=" << wl << " wr=" << wr);
          cpu::ScoreRow row;
          row.n_valid = n - 5;
          row.dist0 = 7;
          row.dist_step = step;
          row.window_left = wl;
          row.window_right = wr;
          row.scale = 0.3f;
          row.softcap = softcap;
          row.alibi_slope = 0.25f;
          std::vector<float> s(static_cast<size_t>(n)), capped(static_cast<size_t>(n), kNaN);
          for (float& x : s) x = normal() * 10.0f;
          const std::vector<float> raw = s;
          const float mx = k_->score_row(s.data(), n, row, capped.data());
          float want_max = kNegInf;
          for (int c = 0; c < n; ++c) {
            double x = 0.3 * raw[c];
            if (softcap > 0) {
              x = softcap * std::tanh(x / softcap);
              ASSERT_NEAR(capped[c], x, 2e-6 * softcap) << "capped c=" << c;
            }
            const double dist = 7.0 + step * c;
            const bool visible = c < n - 5 && (wl < 0 || dist <= wl) && (wr < 0 || dist >= -wr);
            if (!visible) {
              ASSERT_EQ(s[c], kNegInf) << "c=" << c;
              continue;
            }
            x -= 0.25 * std::fabs(dist);
            ASSERT_NEAR(s[c], x, 1e-5 * (1.0 + std::fabs(x))) << "c=" << c;
            want_max = std::max(want_max, s[c]);
          }
          EXPECT_EQ(mx, want_max);
        }
      }
    }
  }
}

// Windows past 2^24 keys: the distance to the diagonal no longer fits a float's 24 bits, but
// the window's edge must still fall on the right column (each side, 196 columns in; the first
// column outside lies at an odd distance past 2^24, which a float rounds onto the edge).
TEST_P(Simd, ScoreRowWindowsPastTwoTo24) {
  const int n = ((256 + k_->nr - 1) / k_->nr) * k_->nr;
  const int64_t far = int64_t{1} << 24;
  for (int side = 0; side < 2; ++side) {
    SCOPED_TRACE(side == 0 ? "left" : "right");
    cpu::ScoreRow row;
    row.n_valid = n;
    row.scale = 1.0f;
    if (side == 0) {  // dist = far + 200 - c <= far + 4 from c = 196 on
      row.dist0 = far + 200, row.dist_step = -1.0f, row.window_left = int(far + 4);
    } else {  // dist = -(far + 200) + c >= -(far + 4) from c = 196 on
      row.dist0 = -(far + 200), row.dist_step = 1.0f, row.window_right = int(far + 4);
    }
    std::vector<float> s(static_cast<size_t>(n), 1.0f);
    k_->score_row(s.data(), n, row, nullptr);
    for (int c = 0; c < n; ++c) {
      if (c < 196) {
        ASSERT_EQ(s[c], kNegInf) << "c=" << c << " lies outside the window";
      } else {
        ASSERT_EQ(s[c], 1.0f) << "c=" << c << " lies inside the window";
      }
    }
  }
}

// Soft caps far above the scores: cap * tanh(x / cap) is x to float precision, not 0 (the form
// 1 - 2 / (exp(2x) + 1) cancelled there) and not anything else.
TEST_P(Simd, SoftcapOfScoresFarBelowIt) {
  const int n = 4 * k_->nr;
  for (float softcap : {30.0f, 1e3f, 1e5f, 1e7f, 1e8f, 1e20f}) {
    SCOPED_TRACE(testing::Message() << "softcap=" << softcap);
    cpu::ScoreRow row;
    row.n_valid = n;
    row.scale = 1.0f;
    row.softcap = softcap;
    std::vector<float> s(static_cast<size_t>(n)), capped(static_cast<size_t>(n), kNaN);
    for (int c = 0; c < n; ++c) s[c] = c == 0 ? 0.0f : normal() * (c % 3 == 0 ? 50.0f : 3.0f);
    const std::vector<float> raw = s;
    k_->score_row(s.data(), n, row, capped.data());
    for (int c = 0; c < n; ++c) {
      const double want = double(softcap) * std::tanh(double(raw[c]) / softcap);
      ASSERT_NEAR(capped[c], want, 4e-7 * std::fabs(want) + 1e-30) << "c=" << c << " score " << raw[c];
      ASSERT_EQ(s[c], capped[c]) << "c=" << c;
    }
  }
}

TEST_P(Simd, DsScaleAndDotRows) {
  const int n = 4 * k_->nr;
  std::vector<float> p(static_cast<size_t>(n)), dp(static_cast<size_t>(n)), delta(static_cast<size_t>(n)), capped(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) {
    p[c] = std::fabs(normal()) * 0.1f;
    dp[c] = normal();
    delta[c] = normal();
    capped[c] = normal() * 2.0f;
  }
  for (bool softcap : {false, true}) {
    std::vector<float> ds = dp;
    k_->ds_row(ds.data(), p.data(), n, delta.data(), softcap ? capped.data() : nullptr, 0.125f, softcap ? 5.0f : 0.0f);
    for (int c = 0; c < n; ++c) {
      double want = static_cast<double>(p[c]) * (dp[c] - delta[c]) * 0.125;
      if (softcap) want *= 1.0 - (capped[c] / 5.0) * (capped[c] / 5.0);
      ASSERT_NEAR(ds[c], want, 1e-6 * (std::fabs(want) + 1e-3)) << "softcap=" << softcap << " c=" << c;
    }
  }
  for (int len : {1, 5, 17, n - 1, n}) {
    std::vector<float> x(static_cast<size_t>(len) + 1, 9.0f);
    for (int c = 0; c < len; ++c) x[c] = normal();
    const std::vector<float> x0 = x;
    k_->scale_row(x.data(), len, -0.75f);
    for (int c = 0; c < len; ++c) ASSERT_EQ(x[c], -0.75f * x0[c]);
    ASSERT_EQ(x[len], 9.0f) << "scale_row wrote past n";
    double want = 0.0, mag = 0.0;
    for (int c = 0; c < len; ++c) {
      want += static_cast<double>(x0[c]) * dp[c];
      mag += std::fabs(static_cast<double>(x0[c]) * dp[c]);
    }
    EXPECT_NEAR(k_->dot_row(x0.data(), dp.data(), len), want, 1e-6 * mag) << "len=" << len;
  }
}

INSTANTIATE_TEST_SUITE_P(Flavours, Simd, ::testing::Values("generic", "avx2", "avx512"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The chosen flavour is one of the tables and the best the processor supports (unless forced).
TEST(SimdDispatch, ChoosesBestSupported) {
  const char* forced = std::getenv("FLASHATTN_SIMD");
  if (forced) GTEST_SKIP() << "FLASHATTN_SIMD=" << forced;
  const cpu::Kernels* best = cpu::kernels_avx512() ? cpu::kernels_avx512()
                             : cpu::kernels_avx2() ? cpu::kernels_avx2()
                                                   : &cpu::kernels_generic();
  EXPECT_EQ(&cpu::kernels(), best);
}

// The library's scalar conversions against the test helpers, which compute the same roundings a
// different way (scaled double arithmetic): every fp16 pattern, and many floats of every size.
TEST(Conversions, LibraryScalarsMatchIndependentHelpers) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float lib = flashattn::fp16_to_float(static_cast<uint16_t>(h)), mine = decode_fp16(static_cast<uint16_t>(h));
    ASSERT_TRUE(lib == mine || (std::isnan(lib) && std::isnan(mine))) << "fp16 bits " << h;
    ASSERT_EQ(std::signbit(lib), std::signbit(mine)) << "fp16 bits " << h;
  }
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 400000; ++i) {
    uint32_t u = bits(rng);
    // Half the draws in fp16's range, where subnormals, ties and overflow live.
    if (i % 2) u = (u & 0x807fffffu) | ((100u + u % 45u) << 23);
    float x;
    std::memcpy(&x, &u, 4);
    if (std::isnan(x)) continue;
    ASSERT_EQ(flashattn::fp16_to_float(flashattn::float_to_fp16(x)), round_fp16(x)) << "x=" << x;
    ASSERT_EQ(flashattn::bf16_to_float(flashattn::float_to_bf16(x)), round_bf16(x)) << "x=" << x;
    if (!std::isinf(round_fp16(x))) ASSERT_EQ(flashattn::float_to_fp16(round_fp16(x)), encode_fp16(round_fp16(x)));
  }
}

}  // namespace
}  // namespace fa_test
