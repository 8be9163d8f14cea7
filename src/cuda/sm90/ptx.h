// The sm90 instructions the kernel needs, each one instruction: mbarriers, TMA (cp.async.bulk.tensor),
// proxy fences, named barriers, setmaxnreg and the wgmma synchronisation. Where CCCL's cuda::ptx has
// the instruction (mbarriers, TMA, bulk groups, fences) these forward to it; named barriers,
// setmaxnreg, prefetch.tensormap, the TMA prefetch into the L2 and wgmma are not in cuda::ptx and
// stay inline PTX here.
// The kernel passes 32-bit shared-memory addresses (they live in uniform registers); cuda::ptx
// takes generic pointers and converts them back, a round trip the compiler folds away (the SASS
// is the same as with direct inline PTX).
#pragma once

#include <cstdint>

#include <cuda.h>
#include <cuda/ptx>

namespace flashattn {
namespace sm90 {

__device__ __forceinline__ uint32_t smem_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}
template <typename T>
__device__ __forceinline__ T* smem_pointer(uint32_t address) {
  return static_cast<T*>(__cvta_shared_to_generic(address));
}
__device__ __forceinline__ uint64_t* mbarrier_pointer(uint32_t bar) { return smem_pointer<uint64_t>(bar); }

// ---- mbarriers -----------------------------------------------------------------------------
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
  ::cuda::ptx::mbarrier_init(mbarrier_pointer(bar), arrivals);
}
// Makes the initialised barriers visible to the TMA unit before any copy completes on them.
__device__ __forceinline__ void fence_barrier_init() {
  ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster);
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  ::cuda::ptx::mbarrier_arrive_expect_tx(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta, ::cuda::ptx::space_shared,
                                       mbarrier_pointer(bar), bytes);
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  (void)::cuda::ptx::mbarrier_arrive(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta, ::cuda::ptx::space_shared,
                                   mbarrier_pointer(bar));
}
__device__ __forceinline__ void mbarrier_arrive_count(uint32_t bar, uint32_t count) {
  (void)::cuda::ptx::mbarrier_arrive(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta, ::cuda::ptx::space_shared,
                                   mbarrier_pointer(bar), count);
}
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    done = ::cuda::ptx::mbarrier_try_wait_parity(mbarrier_pointer(bar), parity);
  } while (!done);
}

// ---- TMA -----------------------------------------------------------------------------------
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
  const int32_t coords[4] = {c0, c1, c2, c3};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, smem_pointer<void>(dst), map,
                                  coords, mbarrier_pointer(bar));
}
// A box of a 4-D map brought into the L2 only (no shared memory, no barrier), so that a later
// load of the same box reads the L2 rather than DRAM. Not in cuda::ptx.
__device__ __forceinline__ void tma_prefetch_l2_4d(const CUtensorMap* map, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2, int c3) {
  const int32_t coords[4] = {c0, c1, c2, c3};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_global, ::cuda::ptx::space_shared, map, coords,
                                  smem_pointer<const void>(src));
}
// 3-D form: the LSE's map (row, head, batch).
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  const int32_t coords[3] = {c0, c1, c2};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_global, ::cuda::ptx::space_shared, map, coords,
                                  smem_pointer<const void>(src));
}
// 5-D forms: the GQA-packed Q / O maps (dim, head in group, row, kv head, batch); see pack_gqa.h.
__device__ __forceinline__ void tma_load_5d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3, int c4) {
  const int32_t coords[5] = {c0, c1, c2, c3, c4};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, smem_pointer<void>(dst), map,
                                  coords, mbarrier_pointer(bar));
}
__device__ __forceinline__ void tma_store_5d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2, int c3,
                                             int c4) {
  const int32_t coords[5] = {c0, c1, c2, c3, c4};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_global, ::cuda::ptx::space_shared, map, coords,
                                  smem_pointer<const void>(src));
}
__device__ __forceinline__ void bulk_commit_group() { ::cuda::ptx::cp_async_bulk_commit_group(); }
// The shared-memory source of earlier bulk stores may be overwritten after this.
__device__ __forceinline__ void bulk_wait_read_all() { ::cuda::ptx::cp_async_bulk_wait_group_read(::cuda::ptx::n32_t<0>{}); }
__device__ __forceinline__ void bulk_wait_all() { ::cuda::ptx::cp_async_bulk_wait_group(::cuda::ptx::n32_t<0>{}); }

// Ordinary shared-memory accesses must be fenced before the async proxy (TMA, wgmma) touches
// the same bytes, and the other way round.
__device__ __forceinline__ void fence_proxy_async_smem() {
  ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);
}

// Four 8 x 8 matrices of 16-bit elements to shared memory: lane l holds row l / 4, columns
// 2 (l % 4) and + 1 of matrix j in register j (the pairs of a wgmma accumulator), and lanes
// 8j .. 8j + 7 give the addresses of matrix j's eight rows.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// ---- named barriers ------------------------------------------------------------------------
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// bar.sync that also returns whether any of its threads passed true.
__device__ __forceinline__ bool named_barrier_any(int id, int threads, bool value) {
  uint32_t any;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n barrier.cta.red.or.pred q, %2, %3, p;\n"
      " selp.u32 %0, 1, 0, q;\n}"
      : "=r"(any)
      : "r"(uint32_t(value)), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
}

// Programmatic dependent launch (the split tail's kernel, launch.h): this CTA lets the kernel
// launched after it with programmatic stream serialisation start once every CTA has said so or
// exited; the dependent waits for this grid to complete, its writes visible.
__device__ __forceinline__ void launch_dependent_grids() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void wait_for_prerequisite_grids() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// ---- clusters (ClusterPairsConfig) -----------------------------------------------------------
// Not volatile: the rank is fixed for the kernel's life, so the compiler may read it once (as
// volatile it was re-read, an S2R, at every release).
__device__ __forceinline__ uint32_t cluster_cta_rank() {
  uint32_t rank;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
// Every thread of both CTAs: orders the barrier initialisations (and anything before) of each
// CTA before the other's multicast copies and remote arrivals.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// Arrives on the mbarrier at the same shared-memory offset in CTA `rank` of the cluster. The
// default semantics (release at CTA scope), as CUTLASS's cluster barriers use: `.release.cluster`
// compiled to a GPU-wide fence (MEMBAR.ALL.GPU) before every arrive, twice per key block per warp
// (session 6, helper's SASS reading; the likely cause of the pair kernel's -11..-18%). The stage's
// readers are wgmmas already waited for, so nothing of this CTA's needs publishing beyond it.
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t bar, uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}" ::"r"(bar),
      "r"(rank)
      : "memory");
}
// A TMA load whose box lands at `dst` in every CTA of `cta_mask` and completes bytes on the
// mbarrier at `bar` in each of them.
__device__ __forceinline__ void tma_load_4d_multicast(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0,
                                                      int c1, int c2, int c3, uint16_t cta_mask) {
  const int32_t coords[4] = {c0, c1, c2, c3};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_pointer<void>(dst), map,
                                  coords, mbarrier_pointer(bar), cta_mask);
}

// ---- register reallocation -----------------------------------------------------------------
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}

// ---- wgmma ordering ------------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving reads or writes of accumulator registers across an in-flight
// wgmma: the hardware owns them between issue and wait.
template <int N>
__device__ __forceinline__ void pin_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void pin_registers(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// ---- arithmetic ----------------------------------------------------------------------------
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace sm90
}  // namespace flashattn
