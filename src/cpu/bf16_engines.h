// The two engines behind bf16_products.h, each in its own translation unit compiled for its
// instruction set; bf16_products.cpp calls them only after detecting that set.
#pragma once

#include <cstdint>

namespace flashattn {
namespace cpu {

// AMX (bf16_amx.cpp, -mamx-tile -mamx-bf16).
void amx_configure_thread();
void amx_release_thread();
void amx_gemm(int M, int N, int K, const uint16_t* A, int64_t lda, const uint32_t* B, float* C, int64_t ldc,
              bool accumulate);

// AVX512-BF16 (bf16_dot_pairs.cpp, -mavx512f -mavx512bf16): M a multiple of its register block's rows.
constexpr int kDotPairsRows = 8;
void dot_pairs_gemm(int M, int N, int K, const uint16_t* A, int64_t lda, const uint32_t* B, float* C, int64_t ldc,
                    bool accumulate);

}  // namespace cpu
}  // namespace flashattn
