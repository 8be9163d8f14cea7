// The bf16 forward's and backward's products on the processor's bf16 dot-product instructions,
// operands in their bf16 storage, float32 accumulation. Two engines take the same layouts:
//   AMX (Sapphire Rapids and later): tile registers of 16 rows x 64 bytes, 16 x 16 x 32
//     multiply-adds an instruction (bf16_amx.cpp);
//   AVX512-BF16 (Zen 4 and later, Cooper Lake, and AMX processors with AMX refused):
//     vdpbf16ps, 16 lanes of a pair of multiply-adds, twice an FMA's on converted floats
//     (bf16_dot_pairs.cpp).
// Against the float32 path of the SIMD kernels, which converts every operand and multiplies floats.
//
// Layouts. A (M x K) is row-major bf16. B (K x N) is "pair-packed": ceil(N / 16) panels, each
// K / 2 rows of 16 32-bit words, the word of row kk and column n holding B[2 kk][n] (low half)
// and B[2 kk + 1][n] (high half): an AMX tile's B operand, and a vdpbf16ps operand a row. M and N
// are multiples of 16 and K of 32 (callers zero-pad).
#pragma once

#include <cstdint>

#include "flashattn/types.h"

namespace flashattn {
namespace cpu {

// The steps: rows of A and C in 16s (or bf16_row_step()), the depth K in 32 bf16 (one 64-byte tile
// row); callers pad their rows, keys, queries and head dims to these.
constexpr int kBf16Rows = 16;
constexpr int kBf16Depth = 32;

enum class Bf16Engine { kNone, kDotPairs, kAmx };

// The engine this process runs, chosen once: the best the processor and operating system offer,
// at most the one FLASHATTN_BF16_PRODUCTS names (amx | avx512bf16 | float; unset or another
// value: the best; FLASHATTN_AMX=0 as avx512bf16).
// Choosing AMX asks Linux for the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM), once, for the
// whole process: its signal frames grow by the 8 KB of tile data, so a later sigaltstack smaller
// than that is refused (FLASHATTN_BF16_PRODUCTS=avx512bf16 avoids it).
Bf16Engine bf16_engine();
const char* bf16_engine_name(Bf16Engine engine);

// The row step of A and C that this process's engine takes: AMX's 16-row tiles, or the
// AVX512-BF16 engine's 8-row register blocks (a decode step's few stacked rows pad to 8, not 16).
int bf16_row_step();

// Whether problems of this dtype run their products here: bf16 where an engine exists.
inline bool bf16_products_take(DType dtype) {
  return dtype == DType::kBFloat16 && bf16_engine() != Bf16Engine::kNone;
}

// The CPU kernels' scratch is float buffers (AlignedBuffer); these name what the bf16 path keeps
// in them: bf16 elements, or pair-packed 32-bit words.
inline uint16_t* as_bf16(float* p) { return reinterpret_cast<uint16_t*>(p); }
inline uint32_t* as_pairs(float* p) { return reinterpret_cast<uint32_t*>(p); }

// Around a thread's products: AMX configures the thread's tiles and releases them after, so that
// the thread does not carry tile state between tasks; the other engine needs neither.
void bf16_products_begin();
void bf16_products_end();

// C (+)= A * B, A bf16 with row stride lda elements, B pair-packed, C float32 with row stride ldc;
// M a multiple of bf16_row_step() (kBf16Rows always is).
void bf16_gemm(int M, int N, int K, const uint16_t* A, int64_t lda, const uint32_t* B, float* C, int64_t ldc,
               bool accumulate);

// Pair-packs B = src^T for src (rows x cols, bf16, row stride ld elements): K = cols (even: a
// head dim) padded to k_pad (a multiple of 32) and N = rows padded to n_pad (a multiple of 16),
// zeros in the padding.
// For S = Q K^T with src = K's rows.
void bf16_pack_transposed(const uint16_t* src, int rows, int cols, int64_t ld, int k_pad, int n_pad, uint32_t* dst);

// Pair-packs B = src for src (rows x cols, bf16): K = rows padded to k_pad, N = cols padded to
// n_pad. For O += P V with src = V's rows.
void bf16_pack(const uint16_t* src, int rows, int cols, int64_t ld, int k_pad, int n_pad, uint32_t* dst);

// An A operand from bf16 rows: src (rows x cols, row stride ld elements) copied to dst
// (rows_pad x ldd), zeros past cols and in rows rows..rows_pad.
void bf16_copy_rows(const void* src, int rows, int cols, int64_t ld, int rows_pad, int ldd, uint16_t* dst);

// dst (rows x cols bf16, row stride ldd) = src (float32, row stride lds) rounded to nearest even.
void bf16_round_rows(const float* src, int64_t lds, int rows, int cols, uint16_t* dst, int64_t ldd);

// dst (dst_rows x dst_cols bf16, row stride ldd; dst_rows a multiple of 16, dst_cols of 32) =
// the transpose of src (rows x cols float32, row stride lds) rounded to nearest even, zeros
// outside it. For dQ = dS K from the backward's dS^T.
void bf16_round_transposed(const float* src, int64_t lds, int rows, int cols, uint16_t* dst, int64_t ldd,
                           int dst_rows, int dst_cols);

}  // namespace cpu
}  // namespace flashattn
