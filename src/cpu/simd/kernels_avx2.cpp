// AVX2 + FMA + F16C flavour: 16 vector registers, so 6 rows x 2 vectors of accumulators.
#define FA_SIMD_NS avx2
#define FA_SIMD_WIDTH 8
#define FA_SIMD_MR 6
#define FA_SIMD_NAME "avx2"
#include "cpu/simd/kernels_impl.h"

namespace flashattn::cpu {
const Kernels* kernels_avx2_table() { return &avx2::kTable; }
}  // namespace flashattn::cpu
