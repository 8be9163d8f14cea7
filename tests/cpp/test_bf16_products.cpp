// The bf16 engines' products alone (cpu/bf16_products.h): C (+)= A * B on bf16 operands with B
// pair-packed from row-major (bf16_pack) or transposed (bf16_pack_transposed) sources whose
// real sizes sit short of the padded ones, against a double sum of the same bf16 values. Products
// of two bf16 are exact in float, so the only error is float accumulation: at most K roundings of
// sums bounded by sum |a b|. A wrong panel, pair or row offset misses by the size of the values.
// Runs the chosen engine, and the AVX512-BF16 one on its own where the chosen one is AMX. Then the
// backward's transposed rounding, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/host_tensor.h"
#include "cpu/bf16_engines.h"
#include "cpu/bf16_products.h"

namespace fa_test {
namespace {

using flashattn::cpu::Bf16Engine;

using Gemm = void (*)(int, int, int, const uint16_t*, int64_t, const uint32_t*, float*, int64_t, bool);

struct Operand {
  std::vector<uint16_t> bits;  // the bf16 storage
  std::vector<float> values;   // the same values, decoded
};

// rows x cols of N(0, 1) values rounded to bf16, row stride ld >= cols (the gap holds NaN, which
// must not be read).
Operand random_operand(std::mt19937& rng, int rows, int cols, int ld) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Operand o;
  o.bits.assign(static_cast<size_t>(rows) * ld, encode_bf16(std::nanf("")));
  o.values.assign(static_cast<size_t>(rows) * ld, 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const float x = round_bf16(normal(rng));
      o.bits[static_cast<size_t>(r) * ld + c] = encode_bf16(x);
      o.values[static_cast<size_t>(r) * ld + c] = x;
    }
  }
  return o;
}

// One product: A is m x k_real (padded to M x K by bf16_copy_rows), B is k_real x n_real, given
// as its rows or as the rows of its transpose, packed to K x N; C starts random when accumulating.
void check_product(Gemm gemm, int M, int N, int K, bool transposed, bool accumulate, bool sparse, uint32_t seed) {
  std::mt19937 rng(seed);
  // Real sizes short of the padding where the layout allows: the transposed source's rows are
  // head-dim rows (multiples of 8 in the API), the plain source's rows are keys (any count).
  // Sparse: a few real rows, columns and depth, so whole panels and depth blocks are padding.
  const int m = sparse ? 5 : M - 3, n = sparse ? 7 : N - 5, k = sparse ? 8 : (transposed ? K - 8 : K - 7);
  const Operand a = random_operand(rng, m, k, k + 3);
  const Operand b = transposed ? random_operand(rng, n, k, k + 2) : random_operand(rng, k, n, n + 2);
  const int ldb = transposed ? k + 2 : n + 2;

  std::vector<uint16_t> a_rows(static_cast<size_t>(M) * K, 0xffff);
  flashattn::cpu::bf16_copy_rows(a.bits.data(), m, k, k + 3, M, K, a_rows.data());
  std::vector<uint32_t> packed(static_cast<size_t>(N) * K / 2, 0xffffffffu);
  if (transposed) {
    flashattn::cpu::bf16_pack_transposed(b.bits.data(), n, k, ldb, K, N, packed.data());
  } else {
    flashattn::cpu::bf16_pack(b.bits.data(), k, n, ldb, K, N, packed.data());
  }

  const int ldc = N + 16;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> c(static_cast<size_t>(M) * ldc);
  for (float& x : c) x = normal(rng);
  const std::vector<float> c0 = c;
  flashattn::cpu::bf16_products_begin();
  gemm(M, N, K, a_rows.data(), K, packed.data(), c.data(), ldc, accumulate);
  flashattn::cpu::bf16_products_end();

  int bad = 0;
  for (int i = 0; i < M && bad < 5; ++i) {
    for (int j = 0; j < ldc && bad < 5; ++j) {
      const size_t at = static_cast<size_t>(i) * ldc + j;
      if (j >= N) {  // past the product's columns: untouched
        if (c[at] != c0[at]) ++bad, ADD_FAILURE() << "wrote C[" << i << "][" << j << "]";
        continue;
      }
      double sum = accumulate ? c0[at] : 0.0, magnitude = accumulate ? std::fabs(c0[at]) : 0.0;
      if (i < m && j < n) {
        for (int p = 0; p < k; ++p) {
          const double ab = double(a.values[static_cast<size_t>(i) * (k + 3) + p]) *
                            (transposed ? b.values[static_cast<size_t>(j) * ldb + p] : b.values[static_cast<size_t>(p) * ldb + j]);
          sum += ab;
          magnitude += std::fabs(ab);
        }
      }
      const double bound = (K + 2) * std::ldexp(1.0, -24) * magnitude;
      if (!(std::fabs(c[at] - sum) <= bound)) {
        ++bad;
        ADD_FAILURE() << "C[" << i << "][" << j << "] = " << c[at] << ", expected " << sum << " within " << bound;
      }
    }
  }
}

struct Engine {
  const char* name;
  Gemm gemm;
  int row_step;  // M's step
};

std::vector<Engine> engines_here() {
  std::vector<Engine> engines;
  const Bf16Engine chosen = flashattn::cpu::bf16_engine();
  if (chosen == Bf16Engine::kNone) return engines;
  engines.push_back({flashattn::cpu::bf16_engine_name(chosen), flashattn::cpu::bf16_gemm, flashattn::cpu::bf16_row_step()});
  // AMX is chosen only where AVX512-BF16 exists too (the packing needs it).
  if (chosen == Bf16Engine::kAmx) {
    engines.push_back({"AVX512-BF16", flashattn::cpu::dot_pairs_gemm, flashattn::cpu::kDotPairsRows});
  }
  return engines;
}

TEST(Bf16Products, EveryEngineAgainstDoubleSums) {
  const std::vector<Engine> engines = engines_here();
  if (engines.empty()) GTEST_SKIP() << "no bf16 dot-product instructions here (or FLASHATTN_BF16_PRODUCTS=float)";
  uint32_t seed = 1;
  for (const Engine& engine : engines) {
    for (int M : {8, 16, 24, 32, 48, 80}) {
      if (M % engine.row_step != 0) continue;
      for (int N : {16, 32, 48, 64, 80, 128, 144}) {
        for (int K : {32, 64, 96, 256}) {
          for (int variant = 0; variant < 8; ++variant) {
            const bool transposed = variant & 1, accumulate = variant & 2, sparse = variant & 4;
            SCOPED_TRACE(std::string(engine.name) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                         " K=" + std::to_string(K) + (transposed ? " transposed" : "") +
                         (accumulate ? " accumulate" : "") + (sparse ? " sparse" : ""));
            check_product(engine.gemm, M, N, K, transposed, accumulate, sparse, seed++);
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  }
}

// The backward's dS for dQ: the transpose of float rows rounded to bf16 (to nearest even, as the
// tests' own rounding), zeros in the padding, nothing read outside the rows and columns (NaN there).
TEST(Bf16Products, RoundTransposedMatchesScalarRounding) {
  if (flashattn::cpu::bf16_engine() == Bf16Engine::kNone) GTEST_SKIP() << "no bf16 engine here";
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int rows : {1, 15, 16, 17, 33, 64}) {
    for (int cols : {1, 8, 16, 31, 64}) {
      const int lds = cols + 5, dst_rows = (cols + 15) / 16 * 16 + 16, dst_cols = (rows + 31) / 32 * 32;
      const int ldd = dst_cols + 8;
      std::vector<float> src(static_cast<size_t>(rows + 1) * lds, std::nanf(""));
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) src[static_cast<size_t>(r) * lds + c] = normal(rng);
      }
      std::vector<uint16_t> dst(static_cast<size_t>(dst_rows) * ldd, 0xabcd);
      flashattn::cpu::bf16_round_transposed(src.data(), lds, rows, cols, dst.data(), ldd, dst_rows, dst_cols);
      int bad = 0;
      for (int i = 0; i < dst_rows && bad < 5; ++i) {
        for (int j = 0; j < ldd && bad < 5; ++j) {
          const uint16_t want = j >= dst_cols ? 0xabcd
                                : (i < cols && j < rows) ? encode_bf16(round_bf16(src[static_cast<size_t>(j) * lds + i]))
                                                         : 0;
          const uint16_t got = dst[static_cast<size_t>(i) * ldd + j];
          if (got != want) {
            ++bad;
            ADD_FAILURE() << "rows " << rows << " cols " << cols << ": dst[" << i << "][" << j << "] = " << got
                          << ", expected " << want;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fa_test
