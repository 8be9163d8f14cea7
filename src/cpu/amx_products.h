// The bf16 forward's and backward's products on Intel AMX (tile registers of 16 rows x 64 bytes and the
// TMUL's bf16 dot products, Sapphire Rapids and later): 16 x 16 x 32 multiply-adds an
// instruction against the 16 x 2 of an AVX-512 FMA on converted floats. Operands keep their
// bf16 storage; products accumulate in float32.
//
// Layouts. A (M x K) is row-major bf16. B (K x N) is "pair-packed": ceil(N / 16) panels, each
// K / 2 rows of 16 32-bit words, the word of row kk and column n holding B[2 kk][n] (low half)
// and B[2 kk + 1][n] (high half), which is the layout a tile's B operand takes. M and N are
// multiples of 16 and K of 32 (callers zero-pad).
#pragma once

#include <cstdint>

#include "flashattn/types.h"

namespace flashattn {
namespace cpu {

// The tile steps: rows of A and C in 16s, the depth K in 32 bf16 (one 64-byte tile row); callers
// pad their rows, keys, queries and head dims to these.
constexpr int kAmxRows = 16;
constexpr int kAmxDepth = 32;

// Whether this processor and operating system run AMX-BF16 (and FLASHATTN_AMX is not 0); the
// first call asks Linux for the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM), once, for the
// whole process: its signal frames grow by the 8 KB of tile data, so a later sigaltstack smaller
// than that is refused.
bool amx_usable();

// Whether problems of this dtype run their products here: bf16 where amx_usable().
inline bool amx_takes(DType dtype) { return dtype == DType::kBFloat16 && amx_usable(); }

// The CPU kernels' scratch is float buffers (AlignedBuffer); these name what the AMX path keeps
// in them: bf16 elements, or pair-packed 32-bit words.
inline uint16_t* amx_bf16(float* p) { return reinterpret_cast<uint16_t*>(p); }
inline uint32_t* amx_pairs(float* p) { return reinterpret_cast<uint32_t*>(p); }

// Tile configuration of the calling thread (all eight tiles 16 rows x 64 bytes), and its release
// so that the thread does not carry tile state between tasks. Only after amx_usable() said yes
// (without the permission the first tile instruction faults).
void amx_configure_thread();
void amx_release_thread();

// C (+)= A * B, A bf16 with row stride lda elements, B pair-packed, C float32 with row stride ldc.
void amx_gemm(int M, int N, int K, const uint16_t* A, int64_t lda, const uint32_t* B, float* C, int64_t ldc,
              bool accumulate);

// Pair-packs B = src^T for src (rows x cols, bf16, row stride ld elements): K = cols padded to
// k_pad (a multiple of 32) and N = rows padded to n_pad (a multiple of 16), zeros in the padding.
// For S = Q K^T with src = K's rows.
void amx_pack_transposed(const uint16_t* src, int rows, int cols, int64_t ld, int k_pad, int n_pad, uint32_t* dst);

// Pair-packs B = src for src (rows x cols, bf16): K = rows padded to k_pad, N = cols padded to
// n_pad. For O += P V with src = V's rows.
void amx_pack(const uint16_t* src, int rows, int cols, int64_t ld, int k_pad, int n_pad, uint32_t* dst);

// An A operand from bf16 rows: src (rows x cols, row stride ld elements) copied to dst
// (rows_pad x ldd), zeros past cols and in rows rows..rows_pad.
void amx_copy_rows(const void* src, int rows, int cols, int64_t ld, int rows_pad, int ldd, uint16_t* dst);

// dst (rows x cols bf16, row stride ldd) = src (float32, row stride lds) rounded to nearest even.
void amx_round_rows(const float* src, int64_t lds, int rows, int cols, uint16_t* dst, int64_t ldd);

}  // namespace cpu
}  // namespace flashattn
