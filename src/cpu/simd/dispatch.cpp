// Run-time choice of the SIMD flavour. FLASHATTN_SIMD=generic|avx2|avx512 narrows the choice
// (for tests of every flavour on one machine); an unsupported request falls back to the best.
#include <cstdlib>
#include <cstring>

#include "cpu/simd/kernels.h"

namespace flashattn::cpu {

const Kernels* kernels_avx2_table();
const Kernels* kernels_avx512_table();

const Kernels* kernels_avx2() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    return kernels_avx2_table();
  }
#endif
  return nullptr;
}

const Kernels* kernels_avx512() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return kernels_avx512_table();
  }
#endif
  return nullptr;
}

static const Kernels& choose() {
  const char* want = std::getenv("FLASHATTN_SIMD");
  if (want && std::strcmp(want, "generic") == 0) return kernels_generic();
  if (want && std::strcmp(want, "avx2") == 0 && kernels_avx2()) return *kernels_avx2();
  if (const Kernels* k = kernels_avx512()) return *k;
  if (const Kernels* k = kernels_avx2()) return *k;
  return kernels_generic();
}

const Kernels& kernels() {
  static const Kernels& chosen = choose();
  return chosen;
}

}  // namespace flashattn::cpu
