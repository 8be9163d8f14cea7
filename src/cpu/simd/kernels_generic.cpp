// Baseline x86-64 (SSE2) flavour; also the fallback on other processors.
#define FA_SIMD_NS generic
#define FA_SIMD_WIDTH 4
#define FA_SIMD_MR 6
#define FA_SIMD_NAME "generic"
#include "cpu/simd/kernels_impl.h"

namespace flashattn::cpu {
const Kernels& kernels_generic() { return generic::kTable; }
}  // namespace flashattn::cpu
