// The bf16 forward's two products on Intel AMX (tile registers of 16 rows x 64 bytes and the
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

namespace flashattn {
namespace cpu {

// Whether this processor and operating system run AMX-BF16 (and FLASHATTN_AMX is not 0); the
// first call asks Linux for the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM), once, for the
// whole process: its signal frames grow by the 8 KB of tile data, so a later sigaltstack smaller
// than that is refused.
bool amx_usable();

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

// dst (rows x cols bf16, row stride ldd) = src (float32, row stride lds) rounded to nearest even.
void amx_round_rows(const float* src, int64_t lds, int rows, int cols, uint16_t* dst, int64_t ldd);

}  // namespace cpu
}  // namespace flashattn
