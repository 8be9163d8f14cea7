// What the C++ timing harnesses share: a CUDA call check that ends the run, and random normal
// 16-bit inputs (never zeros), drawn on the host from a seed.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "flashattn/flashattn.h"

#define CHECK_CUDA(expr)                                                         \
  do {                                                                           \
    cudaError_t err_ = (expr);                                                   \
    if (err_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(err_)); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

namespace bench {

// N(0, 1) draws rounded to bf16 (round to nearest even of the float's top half) or fp16 (exponent
// rebias, mantissa truncated, tiny values flushed to signed zero).
inline std::vector<uint16_t> random_16bit(size_t n, bool bf16, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<uint16_t> host(n);
  for (auto& h : host) {
    const float x = nd(rng);
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if (bf16) {
      h = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    } else {
      const uint32_t sign = (u >> 16) & 0x8000u;
      const int exp = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
      h = exp <= 0 ? static_cast<uint16_t>(sign)
                   : static_cast<uint16_t>(sign | (std::min(exp, 30) << 10) | ((u >> 13) & 0x3FF));
    }
  }
  return host;
}

// Fills n bf16 values of device memory.
inline void fill_random_bf16(uint16_t* dev, size_t n, uint32_t seed) {
  const std::vector<uint16_t> host = random_16bit(n, true, seed);
  CHECK_CUDA(cudaMemcpy(dev, host.data(), n * 2, cudaMemcpyHostToDevice));
}

// A bf16 device buffer as a (batch, seqlen, heads, headdim) tensor, flash_attn's layout.
inline flashattn::TensorView bshd(void* data, int64_t batch, int64_t seqlen, int64_t heads, int64_t d) {
  return flashattn::make_tensor(data, flashattn::DType::kBFloat16, {batch, seqlen, heads, d}, flashattn::Device::kCUDA, 0);
}

// Forward arguments over bf16 device buffers of that layout, lse float32 (batch, heads, seqlen).
inline flashattn::ForwardArgs bshd_forward_args(void* q, void* k, void* v, void* o, float* lse, int64_t batch,
                                                int64_t seqlen, int64_t heads, int64_t d) {
  return {bshd(q, batch, seqlen, heads, d), bshd(k, batch, seqlen, heads, d), bshd(v, batch, seqlen, heads, d),
          bshd(o, batch, seqlen, heads, d),
          flashattn::make_tensor(lse, flashattn::DType::kFloat32, {batch, heads, seqlen}, flashattn::Device::kCUDA, 0)};
}

}  // namespace bench
