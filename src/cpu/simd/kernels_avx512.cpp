// AVX-512 flavour: 32 vector registers, so 8 rows x 2 vectors of accumulators.
#define FA_SIMD_NS avx512
#define FA_SIMD_WIDTH 16
#define FA_SIMD_MR 8
#define FA_SIMD_NAME "avx512"
#include "cpu/simd/kernels_impl.h"

namespace flashattn::cpu {
const Kernels* kernels_avx512_table() { return &avx512::kTable; }
}  // namespace flashattn::cpu
