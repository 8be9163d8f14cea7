// Thin wrappers over the sm80 instructions the attention kernels are built from: asynchronous
// global->shared copies, ldmatrix fragment loads, the m16n8k16 tensor-core product and exp2.
// Written as inline PTX so the kernels depend on nothing beyond the CUDA toolkit headers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#define FA_DEV __device__ __forceinline__

namespace flashattn::cuda {

FA_DEV uint32_t smem_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// 16-byte copy that lands in shared memory without passing through registers. When `valid` is
// false no byte is read and the destination is zero-filled, which is how ragged tiles get zero
// rows (zero K rows give finite scores, zero V rows keep 0 * garbage out of the output).
FA_DEV void cp_async_16(uint32_t smem_addr, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(src_bytes));
}

// 4-byte variant for per-row scalars (lse, D); zero-filled when `valid` is false.
FA_DEV void cp_async_4(uint32_t smem_addr, const void* gmem, bool valid) {
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(src_bytes));
}

FA_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `kPending` committed groups are still in flight.
template <int kPending>
FA_DEV void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

FA_DEV void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

FA_DEV void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// An 8x8 matrix of 16-bit elements transposed in registers: lane l holds row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1 (the lower in the low half), before and after.
FA_DEV uint32_t movmatrix_trans(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// D = A * B + D with A 16x16 (row), B 16x8 (col), accumulators in fp32.
template <typename Element>
FA_DEV void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
FA_DEV void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
FA_DEV void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x on the special-function unit; 2^-inf = 0, which the masked scores rely on.
FA_DEV float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats rounded to nearest into one 32-bit register of 16-bit elements (lo in the low half),
// the operand format of mma and of 4-byte shared stores.
template <typename Element>
FA_DEV uint32_t pack_pair(float lo, float hi);

template <>
FA_DEV uint32_t pack_pair<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

template <>
FA_DEV uint32_t pack_pair<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

template <typename Element>
FA_DEV float to_float(Element x);
template <>
FA_DEV float to_float<__half>(__half x) { return __half2float(x); }
template <>
FA_DEV float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

// Adds a pair of adjacent floats (8-byte aligned) to global memory. Hopper has a vector
// reduction that does both in one request, halving the atomic traffic of the dQ accumulation.
FA_DEV void atomic_add_pair(float* addr, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(addr, a);
  atomicAdd(addr + 1, b);
#endif
}

// Thread and lane index read through volatile asm: values derived from them inside a loop are
// recomputed there (a few integer ops) instead of being hoisted out and kept in registers for
// the whole loop, which is what pushes a kernel that sits at 255 registers into spilling.
FA_DEV int fresh_thread_index() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
  return t;
}

// The same for the block index (an epilogue that needs the block's coordinates again).
FA_DEV uint3 fresh_block_index() {
  uint3 b;
  asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(b.x));
  asm volatile("mov.u32 %0, %%ctaid.y;\n" : "=r"(b.y));
  asm volatile("mov.u32 %0, %%ctaid.z;\n" : "=r"(b.z));
  return b;
}

// A pair of 64-bit values in shared memory, read back through volatile asm so that ptxas reloads
// them at each use: values a loop needs now and then (a thread's copy source pointers) then do
// not hold registers across it in a kernel at the 255-register limit.
FA_DEV void store_shared_pair(uint32_t addr, uint64_t a, uint64_t b) {
  asm volatile("st.shared.v2.u64 [%0], {%1, %2};\n" ::"r"(addr), "l"(a), "l"(b) : "memory");
}
FA_DEV void load_shared_pair(uint32_t addr, uint64_t& a, uint64_t& b) {
  asm volatile("ld.shared.v2.u64 {%0, %1}, [%2];\n" : "=l"(a), "=l"(b) : "r"(addr) : "memory");
}

FA_DEV float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

FA_DEV float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace flashattn::cuda
