// Which bf16 engine runs (bf16_products.h), and the calls that differ between engines. Compiled
// for the baseline instruction set: it runs before anything is known of the processor.
#include "cpu/bf16_products.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "cpu/bf16_engines.h"

namespace flashattn {
namespace cpu {
namespace {

constexpr long kArchReqXcompPerm = 0x1023;  // arch_prctl: ask for an extended state component
constexpr long kXfeatureTileData = 18;

// vdpbf16ps, and the packing's and rounding's AVX-512 BW and BF16 (bf16_packing.cpp), which
// both engines use. __builtin_cpu_supports also checks that the OS saves the zmm state.
bool has_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) return false;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && ((eax >> 5) & 1u);
}

bool has_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool amx_bf16 = (edx >> 22) & 1u, amx_tile = (edx >> 24) & 1u;
  return amx_bf16 && amx_tile;
}

Bf16Engine choose() {
  const char* want = std::getenv("FLASHATTN_BF16_PRODUCTS");
  const char* amx = std::getenv("FLASHATTN_AMX");  // session 57's switch, still honoured
  const bool float_only = want != nullptr && std::strcmp(want, "float") == 0;
  const bool no_amx = (want != nullptr && std::strcmp(want, "avx512bf16") == 0) ||
                      (amx != nullptr && std::strcmp(amx, "0") == 0);
  if (float_only || !has_avx512_bf16()) return Bf16Engine::kNone;
  // Linux hands out the 8 KB of tile data per process on request (kernel 5.16 and later).
  if (!no_amx && has_amx_bf16() && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) == 0) {
    return Bf16Engine::kAmx;
  }
  return Bf16Engine::kDotPairs;
}

}  // namespace

Bf16Engine bf16_engine() {
  static const Bf16Engine engine = choose();
  return engine;
}

const char* bf16_engine_name(Bf16Engine engine) {
  switch (engine) {
    case Bf16Engine::kAmx: return "AMX";
    case Bf16Engine::kDotPairs: return "AVX512-BF16";
    case Bf16Engine::kNone: break;
  }
  return "float32";
}

int bf16_row_step() { return bf16_engine() == Bf16Engine::kAmx ? kBf16Rows : kDotPairsRows; }

void bf16_products_begin() {
  if (bf16_engine() == Bf16Engine::kAmx) amx_configure_thread();
}

void bf16_products_end() {
  if (bf16_engine() == Bf16Engine::kAmx) amx_release_thread();
}

void bf16_gemm(int M, int N, int K, const uint16_t* A, int64_t lda, const uint32_t* B, float* C, int64_t ldc,
               bool accumulate) {
  if (bf16_engine() == Bf16Engine::kAmx) {
    amx_gemm(M, N, K, A, lda, B, C, ldc, accumulate);
  } else {
    dot_pairs_gemm(M, N, K, A, lda, B, C, ldc, accumulate);
  }
}

}  // namespace cpu
}  // namespace flashattn
