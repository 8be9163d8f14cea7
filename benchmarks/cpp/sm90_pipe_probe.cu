// The sm90 forward's key loop rebuilt from its GEMMs and its softmax, with the library's other
// pieces (Q in registers, a K / V ring, cluster pairs, the kept-max round, tiles) added one flag
// at a time: questions the full kernel cannot answer by itself (docs/perf.md, session 51).
//
//  isolate  Three warpgroups on one SM: up to two issue m64n128k16 wgmmas back to back, the third
//           runs a stream of MUFU.EX2, FFMA or the softmax's FFMA + EX2 + FADD on registers of
//           its own. Does the other warpgroups' arithmetic slow the tensor cores, and does a warp
//           held at the issue of a wgmma (the tensor cores' queue full) slow another warp's
//           exp2s on the same sub-partition?
//  pingpong Two warpgroups, each a loop of the library's key step: S = Q K^T (8 wgmmas) and
//           O += P V (8, P in registers) issued together, S waited for, its softmax (or a part of
//           it), P V waited for, P packed; with or without the turns, and with the pieces of
//           kFeatures. What does each piece cost the step, a clock and under the power cap?
//
// Timing: clock64 a warpgroup (cycles of its SM) and globaltimer (the wall), one CTA an SM.
// Not a test: the operands are pseudo-random and the results are thrown away (summed into one
// word so that nothing is dead code).
//
//   flashattn_sm90_pipe_probe [iterations [all|full [pp]]]   one JSON line per configuration
//   ("full": 132 CTAs only, no one-CTA runs; "pp": the pingpong runs only)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cuda/sm90/fragment.h"
#include "cuda/sm90/ptx.h"
#include "cuda/sm90/smem_descriptor.h"
#include "cuda/sm90/wgmma_ops.h"

namespace probe {

using namespace flashattn::sm90;
using Element = __nv_bfloat16;

// Shared memory: two Q tiles (64 rows x 128 dims, one a warpgroup), one K tile (128 keys x 128
// dims) K-major and one V tile (128 keys x 128 dims) MN-major, 64-element columns of 128-byte
// lines as TMA's 128B swizzle lays them out; what the bytes hold does not matter to the timing,
// only that they are not zeros (the tensor cores' power depends on the bits).
constexpr int kQColumnBytes = 64 * 128, kQBytes = 2 * kQColumnBytes;
constexpr int kKVColumnBytes = 128 * 128, kKVBytes = 2 * kKVColumnBytes;
constexpr int kQOffset = 0, kKOffset = 2 * kQBytes, kVOffset = kKOffset + kKVBytes;
constexpr int kFlagOffset = kVOffset + kKVBytes;
constexpr int kSmemBytes = kFlagOffset + 16;
constexpr double kFlopsPerGemm = 2.0 * 64 * 128 * 128;  // 8 m64n128k16 wgmmas

struct Record {
  long long cycles;       // the warpgroup's loop, clock64
  long long count;        // iterations (GEMM groups or ALU passes)
  long long issue;        // cycles spent in the wgmma issue (fence to commit)
  long long wall_ns;      // globaltimer over the loop
  long long phase[6];     // kStamps: cycles of the step's phases, summed over the steps (pingpong)
};

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Operand values (the tensor cores' power depends on their bits; session 52):
// kDataUniform: bf16 in about [-0.5, 0.5) (S within a few units, the kept max 1, scale 1/8 in
// log2 units); kDataGaussian: N(0, 1) as torch.randn and the benchmarks' inputs, the kernel's
// d128 scale log2(e) / sqrt(128) and a kept max at the row max a seqlen-8k row reaches (~3.9
// sigma of S), so that P is distributed as in the library's steady blocks.
constexpr int kDataUniform = 0, kDataGaussian = 1;

// A value of the data mode from a 32-bit hash (gaussian: Box-Muller from two 16-bit halves).
__host__ __device__ inline float operand_value(uint32_t x, int data) {
  if (data == kDataGaussian) {
    const float u1 = (float((x >> 16) & 0xFFFF) + 0.5f) / 65536.0f, u2 = float(x & 0xFFFF) / 65536.0f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
  }
  return float(x & 0xFFFF) / 65536.0f - 0.5f;
}

// The softmax's constants of a data mode: the scale (log2 units), what the plain passes subtract
// (a kept max times the scale) and the kept max of the checked round (before the scale).
struct SoftmaxConstants {
  float scale, pass_max, row_max;
};
__host__ __device__ inline SoftmaxConstants softmax_constants(int data) {
  if (data == kDataGaussian) return {0.12751743f, 0.12751743f * 3.9f * 11.3137085f, 3.9f * 11.3137085f};
  return {0.1803369f, 1.0f, 1.0f};
}

__device__ void fill_tiles(uint8_t* smem, uint32_t seed, int data = kDataUniform) {
  uint16_t* h = reinterpret_cast<uint16_t*>(smem);
  for (int i = threadIdx.x; i < kFlagOffset / 2; i += blockDim.x) {
    uint32_t x = (uint32_t(i) + seed) * 2654435761u;
    x ^= x >> 15;
    if (data == kDataGaussian) x = (x * 2246822519u) ^ (x >> 13);  // both halves drawn (uniform: as before)
    h[i] = __bfloat16_as_ushort(__float2bfloat16(operand_value(x, data)));
  }
  if (threadIdx.x == 0) *reinterpret_cast<volatile int*>(smem + kFlagOffset) = 0;
  fence_proxy_async_smem();
  __syncthreads();
}

// accumulate_all: every wgmma adds to s (the isolate loop's chain; with a first one that
// overwrites, ptxas drops every group whose result the next group overwrites).
__device__ __forceinline__ void issue_scores(float (&s)[64], uint32_t q_tile, uint32_t k_tile, bool accumulate_all = false) {
  const uint64_t q = k_major_descriptor(q_tile), k = k_major_descriptor(k_tile);
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint32_t step = (kk / 4) * kKVColumnBytes + (kk % 4) * 32;
    const uint32_t q_step = (kk / 4) * kQColumnBytes + (kk % 4) * 32;
    WgmmaSS<Element, 128>::run(s, advance_descriptor(q, q_step), advance_descriptor(k, step), accumulate_all || kk > 0);
  }
}

__device__ __forceinline__ void issue_pv(float (&o)[64], const uint32_t (&p)[32], uint32_t v_tile) {
  const uint64_t v = mn_major_descriptor(v_tile, kKVColumnBytes);
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint32_t a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    WgmmaRS<Element, 128>::run(o, a, advance_descriptor(v, kk * 16 * 128), 1);
  }
}

// ---- isolate ----------------------------------------------------------------------------------
// gemm_wgs: how many warpgroups issue GEMMs (0-2); kDepth: 1 waits for each group before the
// next, 2 keeps one group queued behind the running one; kAlu: what the third warpgroup runs.
constexpr int kAluNone = 0, kAluMufu = 1, kAluFfma = 2, kAluSoftmax = 3;

// The ALU stream's exp2: ptx.h's fast_exp2 as a volatile asm, so that the compiler keeps one pass
// of 64 a loop iteration as written (with fast_exp2 it rotated the loop into two copies of the
// pass, another instruction stream than the one session 51's calls measured).
__device__ __forceinline__ float stream_exp2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int kAlu>
__device__ __forceinline__ float alu_pass(float (&x)[64], float sum) {
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    if constexpr (kAlu == kAluMufu) {
      x[i] = stream_exp2(-x[i]);  // stays in (0.5, 1)
    } else if constexpr (kAlu == kAluFfma) {
      x[i] = fmaf(x[i], 0.999f, 0.0005f);
    } else {
      const float e = stream_exp2(fmaf(x[i], -1.0f, 0.0f));
      sum += e;
      x[i] = e;
    }
  }
  return sum;
}

template <int kAlu>
__device__ void alu_loop(volatile int* done, long long fixed_passes, Record& r, float& out) {
  float x[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) x[i] = 0.5f + float((threadIdx.x + i) % 7) * 0.05f;
  float sum = 0.0f;
  long long n = 0;
  const uint64_t w0 = global_ns();
  const long long c0 = clock64();
  while (fixed_passes > 0 ? n < fixed_passes : *done == 0) {
    sum = alu_pass<kAlu>(x, sum);
    ++n;
  }
  r.cycles = clock64() - c0;
  r.wall_ns = global_ns() - w0;
  r.count = n;
  r.issue = 0;
  float acc = sum;
#pragma unroll
  for (int i = 0; i < 64; ++i) acc += x[i];
  out = acc;
}

template <int kDepth>
__device__ void gemm_loop(uint32_t q_tile, uint32_t k_tile, long long groups, Record& r, float& out) {
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  long long issue = 0;
  const uint64_t w0 = global_ns();
  const long long c0 = clock64();
  for (long long g = 0; g < groups; ++g) {
    const long long t0 = clock64();
    wgmma_fence();
    pin_registers(o);
    issue_scores(o, q_tile, k_tile, true);
    wgmma_commit_group();
    issue += clock64() - t0;
    wgmma_wait_group<kDepth - 1>();
  }
  wgmma_wait_group<0>();
  pin_registers(o);
  r.cycles = clock64() - c0;
  r.wall_ns = global_ns() - w0;
  r.count = groups;
  r.issue = issue;
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) acc += o[i];
  out = acc;
}

template <int kDepth, int kAlu>
__global__ void __launch_bounds__(384, 1) isolate_kernel(int gemm_wgs, long long groups, long long alu_passes,
                                                         Record* records, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t base = (smem_address(smem_raw) + 1023) & ~1023u;
  uint8_t* smem = smem_raw + (base - smem_address(smem_raw));
  fill_tiles(smem, blockIdx.x);
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0);
  volatile int* done = reinterpret_cast<volatile int*>(smem + kFlagOffset);
  Record r{};
  float out = 0.0f;
  if (wg < 2) {
    if (wg < gemm_wgs) {
      gemm_loop<kDepth>(base + kQOffset + wg * kQBytes, base + kKOffset, groups, r, out);
      // The first warpgroup's end stops the ALU stream (a second one ends about as late).
      if (wg == 0 && threadIdx.x == 0) *done = 1;
    }
  } else if (kAlu != kAluNone) {
    alu_loop<kAlu>(done, gemm_wgs == 0 ? alu_passes : 0, r, out);
  }
  if (threadIdx.x % 32 == 0) records[blockIdx.x * 12 + threadIdx.x / 32] = r;
  if (out == 1234.5f) sink[0] = out;
}

// ---- pingpong ---------------------------------------------------------------------------------
// kPass: what the softmax of a step does with S's 64 values a thread.
constexpr int kPassNone = 0;     // P packed from S as it is
constexpr int kPassFull = 1;     // FFMA, EX2, FADD each (the library's exp2 pass, kept max)
constexpr int kPassNoExp2 = 2;   // FFMA and FADD, no EX2
constexpr int kPassHalfExp2 = 3; // EX2 on every other value
constexpr int kPassChecked = 4;  // the library's kept-max round: the warp's vote that every row has
                                 // a max, the exp2s a row at a time (fragment layout: row h holds
                                 // s[4i + 2h], s[4i + 2h + 1]) with a sum chain a row, the vote that
                                 // both sums stayed within the bound, the sums carried over, and
                                 // the vote whether O needs a rescale
// kTurns: 0 none; 1 around the GEMM issue (the library's cluster pairs); 2 around the exp2 pass.
// kFeatures, the library's pieces added one at a time:
constexpr int kQInRegisters = 1;  // S = Q K^T with Q's fragments in registers (RS), as at d128
constexpr int kKvRing = 2;        // K and V through a two-stage ring that a producer warpgroup
                                  // refills from global memory (1-D bulk copies, mbarriers), S of
                                  // block j beside P V of block j - 1 as in the library's step
// Diagnostics of the ring's cost (with kKvRing):
constexpr int kRingNoData = 4;         // the producer arrives on the full barriers without copying
constexpr int kConsumersDontWait = 8;  // the consumers skip the full barriers' waits (timing only)
constexpr int kProducerSleeps = 16;    // the producer waits with a suspend-time hint, not by polling
constexpr int kThreeKStages = 32;       // K's ring three stages deep (else two)
constexpr int kThreeVStages = 64;       // V's ring three stages deep (else two)
constexpr int kProducerKFirst = 128;    // the producer loads K of block j + 1 before V of block j
constexpr int kNoWaitK = 256;           // the consumers skip the K full barrier's wait only
constexpr int kNoWaitV = 512;           // ... the V full barrier's only
constexpr int kWaitBoth = 1024;         // the K and V full barriers tested together (one round trip)
constexpr int kRingHigh = 4096;         // the ring's stages two stages higher in shared memory (the
                                        // same code, other addresses)
constexpr int kRingMid = 8192;          // ... one stage higher
constexpr int kProducerBusy = 16384;   // the producer runs ~200 dependent integer instructions a block
constexpr int kHalfCopies = 32768;     // each stage's copy brings half its bytes (the cluster pairs'
                                        // share of a block), the rest stays as it was
constexpr int kQuarterCopies = 65536;   // ... a quarter (four CTAs a cluster)
constexpr int kPairs = 131072;         // two CTAs a cluster: each copies half of every stage into
                                        // both (multicast) and a stage is refilled once both CTAs'
                                        // consumers have released it (the library's cluster pairs)
constexpr int kEarlyRelease = 262144;  // timing only: V of block j - 1 released with K of block j,
                                        // right after S retires (before its P V has read it), and
                                        // both arrives ahead of the pass in ptxas's order (a wait on
                                        // a register the pass reads): what early releases could buy
constexpr int kTiles = 524288;         // tiles of `tile_steps` key blocks: at each tile's end the last
                                        // P V waited for, O normalised, packed, staged in shared
                                        // memory and sent by a bulk store, O reset, Q's fragments
                                        // read again (the library's boundary, not overlapped)
constexpr int kVoteAfterScores = 1048576;  // the checked round's vote that every row has a max made
                                          // from a value of S, so that ptxas cannot hoist it into
                                          // the GEMM issue (session 52: it did, as in the library)
constexpr int kPackFirst = 2097152;  // the checked round: P V waited for, V released and P packed
                                     // right after the exp2s, before the round's votes and branch
constexpr int kNoMovedVote = 4194304;  // the checked round without the vote whether O needs a rescale
constexpr int kStamps = 8388608;  // clock64 at the step's phase boundaries (waits for K / V, turn,
                                  // issue, S, softmax, the rest), summed a warp: where a step's
                                  // time goes (the stamps themselves perturb ptxas's order a little)
constexpr int kWaitAfterExp2 = 16777216;  // the P V wait gated on the exp2s' sum (a warp-voted predicate
                                          // that always holds, session 45's wgmma_wait_group_after), so
                                          // that ptxas cannot hoist the wait into the exp2 run
constexpr int kEarlyTest = 33554432;  // the next step's K / V full barriers tested (test_wait, no
                                      // blocking) once S has retired; where both had completed, the
                                      // next step's waits are skipped (off the P-to-issue chain)
constexpr int kSplitProducer = 67108864;  // two loading threads, K's (warp 0) and V's (warp 1), each
                                          // waiting only on its own ring's empty barriers
// The kept-max round with a piece of it left out or reordered (timing only, session 52):
constexpr int kNoHeldVote = 134217728;      // no vote that the sums stayed within the bound (held)
constexpr int kNoMaxVote = 268435456;       // no vote that every row has a max (taken as true)
constexpr int kInterleavedRows = 536870912;  // the exp2s in register order (both rows interleaved,
                                             // as the full pass), not a row at a time
constexpr int kAllSmem = 2048;          // the launch asks for 227 KB of shared memory (the kernel is
                                        // the same; only the L1 / shared-memory carve-out changes)
// The ring lies past the two Q tiles (the single K / V tile of the ring-less form is not used):
// at most three K and three V stages, then the barriers.
constexpr int kRingOffset = 2 * kQBytes;
constexpr int kRingSmemBytes = kRingOffset + 6 * kKVBytes + 128;

__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// Whether the barrier's phase of the given parity has completed (no blocking; acquire).
__device__ __forceinline__ bool mbarrier_test(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// mbarrier try_wait with a suspend-time hint: the thread sleeps until the phase completes or the
// hint (ns) runs out, instead of polling.
__device__ __forceinline__ void mbarrier_wait_suspending(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity), "r"(1000000u)
        : "memory");
  }
}

// Work the producer does beside its loads (kProducerBusy): a dependent integer chain.
__device__ __forceinline__ void busy_work(int j) {
  uint32_t x = uint32_t(j);
#pragma unroll 1
  for (int i = 0; i < 50; ++i) x = x * 1664525u + 1013904223u + (x >> 7);
  if (x == 0x12345678u) asm volatile("trap;");
}

// Two barriers' phases tested in one round: both try_waits issued before either result is read.
__device__ __forceinline__ void mbarrier_wait_both(uint32_t bar_a, uint32_t parity_a, uint32_t bar_b,
                                                   uint32_t parity_b) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n.reg .pred pa, pb;\nmbarrier.try_wait.parity.shared::cta.b64 pa, [%1], %2;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 pb, [%3], %4;\nand.pred pa, pa, pb;\nselp.u32 %0, 1, 0, pa;\n}\n"
        : "=r"(done)
        : "r"(bar_a), "r"(parity_a), "r"(bar_b), "r"(parity_b)
        : "memory");
  }
}

// Half a stage into the same place of both CTAs of the pair, completing bytes on the barrier at the
// same offset in each.
__device__ __forceinline__ void bulk_load_multicast(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;" ::"r"(
          dst),
      "l"(src), "r"(bytes), "r"(bar), "h"(uint16_t(0x3))
      : "memory");
}

// wgmma.wait_group 0 behind a predicate that holds in every thread (gate >= 0 or NaN, voted
// across the warp): ptxas cannot issue it before the gate's inputs exist (kWaitAfterExp2).
__device__ __forceinline__ void wait_group_after(float gate) {
  asm volatile(
      "{\n\t.reg .pred q, p;\n\tsetp.geu.f32 q, %0, 0f00000000;\n\tvote.sync.all.pred p, q, 0xffffffff;\n\t"
      "@p wgmma.wait_group.sync.aligned 0;\n\twgmma.wait_group.sync.aligned 0;\n\t}" ::"f"(gate)
      : "memory");
}

template <int kPass>
__device__ __forceinline__ float softmax_pass(float (&s)[64], float sum, float scale, float m) {
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    if constexpr (kPass == kPassFull || kPass == kPassHalfExp2) {
      const float y = fmaf(s[i], scale, -m);
      const float e = (kPass == kPassFull || i % 2 == 0) ? fast_exp2(y) : y;
      sum += e;
      s[i] = e;
    } else if constexpr (kPass == kPassNoExp2) {
      const float y = fmaf(s[i], scale, -m);
      sum += y;
      s[i] = y;
    }
  }
  return sum;
}

template <int kPass, int kTurns, int kFeatures>
__global__ void __launch_bounds__((kFeatures & kKvRing) ? 384 : 256, 1)
    pingpong_kernel(long long steps, const uint8_t* kv_global, int kv_blocks, int tile_steps, uint8_t* o_global,
                    int data, Record* records, float* sink) {
  constexpr bool kRing = (kFeatures & kKvRing) != 0, kQRegs = (kFeatures & kQInRegisters) != 0;
  constexpr bool kPairsOn = kRing && (kFeatures & kPairs) != 0;
  constexpr bool kPackedEarly = kPass == kPassChecked && (kFeatures & kPackFirst) != 0;
  static_assert(!kPackedEarly || (kFeatures & kTiles) == 0, "the tile boundary reads P V's O after the wait");
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t base = (smem_address(smem_raw) + 1023) & ~1023u;
  uint8_t* smem = smem_raw + (base - smem_address(smem_raw));
  fill_tiles(smem, blockIdx.x, data);
  // The ring (kKvRing): KS K stages, then VS V stages, then the barriers, from kRingOffset on.
  constexpr int KS = (kFeatures & kThreeKStages) ? 3 : 2, VS = (kFeatures & kThreeVStages) ? 3 : 2;
  const uint32_t ring_base = base + kRingOffset + ((kFeatures & kRingHigh) ? 2 * kKVBytes : 0) +
                             ((kFeatures & kRingMid) ? kKVBytes : 0);
  auto k_stage = [&](int st) { return kRing ? ring_base + st * kKVBytes : base + kKOffset; };
  auto v_stage = [&](int st) { return kRing ? ring_base + (KS + st) * kKVBytes : base + kVOffset; };
  const uint32_t bars = ring_base + (KS + VS) * kKVBytes;  // k_full[3], v_full[3], k_empty[3], v_empty[3]
  // kTiles: each consumer warpgroup's output staging tile (64 rows x 128 bf16) past the barriers.
  const uint32_t o_staging = ((bars + 96 + 1023) & ~1023u);
  auto k_full = [&](int st) { return bars + 8 * st; };
  auto v_full = [&](int st) { return bars + 24 + 8 * st; };
  auto k_empty = [&](int st) { return bars + 48 + 8 * st; };
  auto v_empty = [&](int st) { return bars + 72 + 8 * st; };
  if constexpr (kRing) {
    if (threadIdx.x == 0) {
      for (int st = 0; st < 3; ++st) {
        mbarrier_init(k_full(st), 1);
        mbarrier_init(v_full(st), 1);
        mbarrier_init(k_empty(st), kPairsOn ? 16 : 8);
        mbarrier_init(v_empty(st), kPairsOn ? 16 : 8);
      }
      fence_barrier_init();
    }
    if constexpr (kPairsOn) {
      cluster_sync();
    } else {
      __syncthreads();
    }
  }
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0);
  Record r{};
  float acc = 0.0f;
  if (kRing && warpgroup == 0) {
    // The producer: V of block -1, then K and V of each block, each into its ring's next stage
    // once the consumers have released that stage's previous occupant.
    setmaxnreg_decrease<24>();
    constexpr bool kSplit = (kFeatures & kSplitProducer) != 0;
    if (threadIdx.x == 0 || (kSplit && threadIdx.x == 32)) {
      const uint32_t kBlockBytes = 2 * kKVBytes;
      auto block = [&](int b) { return kv_global + size_t((b + int(blockIdx.x)) & (kv_blocks - 1)) * kBlockBytes; };
      auto fill = [&](uint32_t dst, const uint8_t* src, uint32_t bar) {
        if constexpr ((kFeatures & kRingNoData) != 0) {
          mbarrier_arrive(bar);
        } else if constexpr (kPairsOn) {
          const uint32_t half = kKVBytes / 2, rank = cluster_cta_rank();
          mbarrier_arrive_expect_tx(bar, kKVBytes);
          bulk_load_multicast(dst + rank * half, src + rank * half, half, bar);
        } else {
          constexpr uint32_t kBytes = (kFeatures & kQuarterCopies) ? kKVBytes / 4
                                      : (kFeatures & kHalfCopies)  ? kKVBytes / 2
                                                                   : kKVBytes;
          mbarrier_arrive_expect_tx(bar, kBytes);
          bulk_load(dst, src, kBytes, bar);
        }
      };
      auto wait_empty = [&](uint32_t bar, uint32_t parity) {
        if constexpr ((kFeatures & kProducerSleeps) != 0) {
          mbarrier_wait_suspending(bar, parity);
        } else {
          mbarrier_wait(bar, parity);
        }
      };
      // K of block j and V of block j - 1 (block -1 first) go round their rings stage by stage;
      // a stage's empty barrier is waited for from its second load on (phase of the load before).
      int k_st = 0, v_st = 0;
      uint32_t k_round = 0, v_round = 0;  // completed trips round each ring
      auto load_k = [&](int j) {
        if (k_round > 0) wait_empty(k_empty(k_st), (k_round - 1) & 1);
        fill(k_stage(k_st), block(j), k_full(k_st));
        if (++k_st == KS) k_st = 0, ++k_round;
        if constexpr ((kFeatures & kProducerBusy) != 0) busy_work(j);
      };
      auto load_v = [&](int vi) {
        if (v_round > 0) wait_empty(v_empty(v_st), (v_round - 1) & 1);
        fill(v_stage(v_st), block(vi) + kKVBytes, v_full(v_st));
        if (++v_st == VS) v_st = 0, ++v_round;
      };
      if constexpr (kSplit) {
        if (threadIdx.x == 0) {
          for (int j = 0; j < int(steps); ++j) load_k(j);
        } else {
          for (int j = 0; j <= int(steps); ++j) load_v(j);
        }
      } else if (load_v(0), (kFeatures & kProducerKFirst) != 0) {
        load_k(0);
        for (int j = 0; j < int(steps); ++j) {
          if (j + 1 < int(steps)) load_k(j + 1);
          load_v(j + 1);
        }
      } else {
        for (int j = 0; j < int(steps); ++j) {
          load_k(j);
          load_v(j + 1);
        }
      }
    }
  } else {
    if constexpr (kRing) setmaxnreg_increase<240>();
    const int wg = warpgroup - (kRing ? 1 : 0);
    const uint32_t q_tile = base + kQOffset + wg * kQBytes;
    constexpr int kRing0 = 1;  // named barriers kRing0 + wg
    if (kTurns != 0 && wg == 1) named_barrier_arrive(kRing0 + 0, 256);
    float s[64], o[64];
    uint32_t p[32];
    uint32_t q[8][4];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; ++i) p[i] = pack_pair<Element>(0.25f, 0.25f);
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (data == kDataGaussian) {
          uint32_t x = (threadIdx.x * 32u + kk * 4u + e + blockIdx.x * 4096u) * 2654435761u;
          x ^= x >> 15;
          const uint32_t y = (x * 2246822519u) ^ (x >> 13);
          q[kk][e] = pack_pair<Element>(operand_value(x, data), operand_value(y, data));
        } else {
          const float v = float(int((threadIdx.x * 7 + kk * 5 + e * 3) % 17) - 8) * 0.03f;
          q[kk][e] = pack_pair<Element>(v, -v * 0.5f);
        }
      }
    }
    float sum = 0.0f;
    const SoftmaxConstants sc = softmax_constants(data);
    const float kScale = sc.scale;
    float row_max[2] = {sc.row_max, sc.row_max}, row_sum[2] = {0.0f, 0.0f}, rescale[2] = {1.0f, 1.0f};
    int moved_votes = 0;
    int steps_left_in_tile = tile_steps + 1;  // kTiles: the first tile's end comes after tile_steps steps
    const uint64_t w0 = global_ns();
    const long long c0 = clock64();
    // Stage and phase of K (block j) and V (block j - 1, load index j), advanced a step at a time.
    int ks = 0, vs = 0;
    uint32_t k_phase = 0, v_phase = 0;
    long long last_stamp = c0;
    auto stamp = [&](int phase) {
      if constexpr ((kFeatures & kStamps) != 0) {
        const long long now = clock64();
        r.phase[phase] += now - last_stamp;
        last_stamp = now;
      }
    };
    bool next_ready = false;  // kEarlyTest: this step's K and V were seen landed during the last one
    for (long long j = 0; j < steps; ++j) {
      if (next_ready) {
        // both phases completed (seen by the early test)
      } else if constexpr (kRing && (kFeatures & kWaitBoth) != 0 && (kFeatures & kConsumersDontWait) == 0) {
        mbarrier_wait_both(k_full(ks), k_phase, v_full(vs), v_phase);
      } else {
        if constexpr (kRing && (kFeatures & (kConsumersDontWait | kNoWaitK)) == 0) {
          mbarrier_wait(k_full(ks), k_phase);
        }
        if constexpr (kRing && (kFeatures & (kConsumersDontWait | kNoWaitV)) == 0) {
          mbarrier_wait(v_full(vs), v_phase);
        }
      }
      stamp(0);
      if (kTurns == 1) named_barrier_sync(kRing0 + wg, 256);
      stamp(1);
      wgmma_fence();
      pin_registers(s);
      pin_registers(o);
      if constexpr (kQRegs) {
        const uint64_t k = k_major_descriptor(k_stage(ks));
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
          const uint32_t step = (kk / 4) * kKVColumnBytes + (kk % 4) * 32;
          WgmmaRSKMajorB<Element, 128>::run(s, q[kk], advance_descriptor(k, step), kk > 0);
        }
      } else {
        issue_scores(s, q_tile, k_stage(ks));
      }
      wgmma_commit_group();
      issue_pv(o, p, v_stage(vs));
      wgmma_commit_group();
      if (kTurns == 1) named_barrier_arrive(kRing0 + (1 - wg), 256);
      stamp(2);
      wgmma_wait_group<1>();
      pin_registers(s);
      stamp(3);
      if constexpr (kRing && (kFeatures & kEarlyTest) != 0) {
        const int nks = ks + 1 == KS ? 0 : ks + 1, nvs = vs + 1 == VS ? 0 : vs + 1;
        const uint32_t nkp = ks + 1 == KS ? k_phase ^ 1 : k_phase, nvp = vs + 1 == VS ? v_phase ^ 1 : v_phase;
        const bool k_landed = mbarrier_test(k_full(nks), nkp), v_landed = mbarrier_test(v_full(nvs), nvp);
        next_ready = k_landed & v_landed;
      }
      auto release = [&](uint32_t bar) {
        if (threadIdx.x % 32 == 0) {
          if constexpr (kPairsOn) {
            mbarrier_arrive_cluster(bar, 0);
            mbarrier_arrive_cluster(bar, 1);
          } else {
            mbarrier_arrive(bar);
          }
        }
      };
      if constexpr (kRing) {
        release(k_empty(ks));
        if constexpr ((kFeatures & kEarlyRelease) != 0) {
          release(v_empty(vs));
          // The pass's first input read back through shared memory after the arrives, so that
          // ptxas cannot start the pass before them (a plain register dependence it would not see).
          s[0] += __int_as_float(*reinterpret_cast<volatile int*>(smem + kFlagOffset) & 0x80000000);
        }
      }
      if (kTurns == 2) named_barrier_sync(kRing0 + wg, 256);
      if constexpr (kPass == kPassChecked) {
        // Row state as OnlineSoftmax keeps it (softmax.h): the kept max, the running sums, the
        // rescale factors (1 while the max is kept).
        bool has_max = row_max[0] != -INFINITY && row_max[1] != -INFINITY;
        if constexpr ((kFeatures & kVoteAfterScores) != 0) has_max = has_max && s[0] != INFINITY;
        const bool every_row_has_max = (kFeatures & kNoMaxVote) != 0 ? true : __all_sync(0xffffffffu, has_max);
        float block_sum[2] = {0.0f, 0.0f};
        if constexpr ((kFeatures & kInterleavedRows) != 0) {
          const float m_scaled[2] = {row_max[0] * kScale, row_max[1] * kScale};
#pragma unroll
          for (int i = 0; i < 64; ++i) {
            const int h = (i >> 1) & 1;
            s[i] = fast_exp2(fmaf(s[i], kScale, -m_scaled[h]));
            block_sum[h] += s[i];
          }
        } else {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float m_scaled = row_max[h] * kScale;
#pragma unroll
            for (int i = 0; i < 16; ++i) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                float& x = s[4 * i + 2 * h + e];
                x = fast_exp2(fmaf(x, kScale, -m_scaled));
                block_sum[h] += x;
              }
            }
          }
        }
        if constexpr (kPackedEarly) {
          if constexpr ((kFeatures & kWaitAfterExp2) != 0) {
            wait_group_after(block_sum[0] + block_sum[1]);
          } else {
            wgmma_wait_group<0>();
          }
          pin_registers(o);
          if constexpr (kRing && (kFeatures & kEarlyRelease) == 0) release(v_empty(vs));
          accumulator_to_operand<Element>(s, p);
        }
        const bool held =
            (kFeatures & kNoHeldVote) != 0 ? true : __all_sync(0xffffffffu, block_sum[0] <= 256.0f && block_sum[1] <= 256.0f);
        if (held && every_row_has_max) {
#pragma unroll
          for (int h = 0; h < 2; ++h) row_sum[h] = row_sum[h] * rescale[h] + block_sum[h];
        } else {
          row_max[0] += 1.0f;  // never taken with these inputs; keeps the branch
        }
        if constexpr ((kFeatures & kNoMovedVote) == 0) {
          moved_votes += __any_sync(0xffffffffu, rescale[0] != 1.0f || rescale[1] != 1.0f) ? 1 : 0;
        }
      } else {
        sum = softmax_pass<kPass>(s, sum, sc.scale, sc.pass_max);
      }
      if (kTurns == 2) named_barrier_arrive(kRing0 + (1 - wg), 256);
      stamp(4);
      if constexpr (!kPackedEarly) {
        if constexpr ((kFeatures & kWaitAfterExp2) != 0) {
          wait_group_after(sum + row_sum[0]);
        } else {
          wgmma_wait_group<0>();
        }
        pin_registers(o);
        if constexpr (kRing && (kFeatures & kEarlyRelease) == 0) release(v_empty(vs));
      }
      if constexpr ((kFeatures & kTiles) != 0) {
        // A countdown, not j % tile_steps: a 64-bit remainder a step cost the step 13% (call 15).
        if (--steps_left_in_tile == 0) {
          steps_left_in_tile = tile_steps;
          // The previous tile's O is final (its last P V just retired): normalise, stage, send.
          float l = sum;
          l += __shfl_xor_sync(0xffffffffu, l, 1);
          l += __shfl_xor_sync(0xffffffffu, l, 2);
          const float inv = 1.0f / l;
          const uint32_t stage_wg = o_staging + wg * 16384;
          if (threadIdx.x % 128 == 0) bulk_wait_read_all();  // the previous send has read it
          named_barrier_sync(3 + wg, 128);
#pragma unroll
          for (int c = 0; c < 8; ++c) {
            uint32_t w[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) w[e] = pack_pair<Element>(o[8 * c + 2 * e] * inv, o[8 * c + 2 * e + 1] * inv);
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(stage_wg + (threadIdx.x % 128) * 16 +
                                                                          c * 2048),
                         "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                         : "memory");
          }
          fence_proxy_async_smem();
          named_barrier_sync(3 + wg, 128);
          if (threadIdx.x % 128 == 0) {
            asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
                             o_global + (size_t(blockIdx.x) * 2 + wg) * 16384),
                         "r"(stage_wg), "r"(16384)
                         : "memory");
            bulk_commit_group();
          }
#pragma unroll
          for (int i = 0; i < 64; ++i) o[i] = 0.0f;
          sum = 0.0f;
          // Q's fragments again, as each tile's ldmatrix (here plain shared-memory loads).
#pragma unroll
          for (int kk = 0; kk < 8; ++kk) {
            asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(q[kk][0]), "=r"(q[kk][1]), "=r"(q[kk][2]), "=r"(q[kk][3])
                         : "r"(q_tile + (threadIdx.x % 128) * 16 + kk * 2048)
                         : "memory");
          }
        }
      }
      if constexpr (!kPackedEarly) accumulator_to_operand<Element>(s, p);
      pin_registers(p);
      stamp(5);
      if (++ks == KS) ks = 0, k_phase ^= 1;
      if (++vs == VS) vs = 0, v_phase ^= 1;
    }
    r.cycles = clock64() - c0;
    r.wall_ns = global_ns() - w0;
    r.count = steps;
    if (kTurns != 0 && wg == 0) named_barrier_sync(kRing0 + 0, 256);
    acc = sum + row_sum[0] + row_sum[1] + float(moved_votes);
#pragma unroll
    for (int i = 0; i < 64; ++i) acc += o[i];
  }
  if constexpr ((kFeatures & kTiles) != 0) {
    if (threadIdx.x % 128 == 0) bulk_wait_all();
  }
  // The pair's CTAs leave together: no remote arrival may reach a CTA that has exited.
  if constexpr (kPairsOn) cluster_sync();
  // Records: the consumers' eight warps first (the producer's are not timed).
  const int consumer_warp = int(threadIdx.x / 32) - (kRing ? 4 : 0);
  if (consumer_warp >= 0 && threadIdx.x % 32 == 0) records[blockIdx.x * 8 + consumer_warp] = r;
  if (acc == 1234.5f) sink[0] = acc;
}

// ---- host -------------------------------------------------------------------------------------

struct Summary {
  double cycles_per_item[3] = {0, 0, 0};  // a warpgroup's loop cycles / its count (0, 1, 2)
  double issue_per_group[2] = {0, 0};
  double phase_per_item[6] = {0, 0, 0, 0, 0, 0};  // warpgroups 0 and 1 together
  double mhz = 0;                         // clock64 cycles / globaltimer ns of warpgroup 0
  double wall_ms = 0;
};

Summary summarise(const std::vector<Record>& rec, int ctas, int warps_per_cta, int wgs) {
  Summary s;
  for (int w = 0; w < wgs; ++w) {
    double cyc = 0, cnt = 0, iss = 0;
    for (int c = 0; c < ctas; ++c) {
      for (int k = 0; k < 4; ++k) {
        const Record& r = rec[c * warps_per_cta + 4 * w + k];
        if (r.count == 0) continue;
        cyc += double(r.cycles);
        cnt += double(r.count);
        iss += double(r.issue);
        if (w < 2) {
          for (int f = 0; f < 6; ++f) s.phase_per_item[f] += double(r.phase[f]) / double(r.count);
        }
      }
    }
    if (cnt > 0) {
      s.cycles_per_item[w] = cyc / cnt;
      if (w < 2) s.issue_per_group[w] = iss / cnt;
    }
  }
  for (double& f : s.phase_per_item) f /= 8.0 * ctas;  // the two warpgroups' eight warps a CTA
  double cyc = 0, ns = 0;
  for (int c = 0; c < ctas; ++c) {
    const Record& r = rec[c * warps_per_cta];
    cyc += double(r.cycles);
    ns += double(r.wall_ns);
  }
  s.mhz = ns > 0 ? 1e3 * cyc / ns : 0;
  return s;
}

template <class Kernel, class... Args>
Summary launch(Kernel kernel, int threads, int smem_bytes, int ctas, int warps_per_cta, int wgs, int cluster,
               Args... args) {
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  Record* d_rec;
  float* d_sink;
  CHECK_CUDA(cudaMalloc(&d_rec, sizeof(Record) * ctas * warps_per_cta));
  CHECK_CUDA(cudaMemset(d_rec, 0, sizeof(Record) * ctas * warps_per_cta));
  CHECK_CUDA(cudaMalloc(&d_sink, sizeof(float)));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(ctas);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem_bytes;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = cluster;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  CHECK_CUDA(cudaLaunchKernelEx(&config, kernel, args..., d_rec, d_sink));  // warm-up
  CHECK_CUDA(cudaEventRecord(e0));
  CHECK_CUDA(cudaLaunchKernelEx(&config, kernel, args..., d_rec, d_sink));
  CHECK_CUDA(cudaEventRecord(e1));
  CHECK_CUDA(cudaDeviceSynchronize());
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  std::vector<Record> rec(size_t(ctas) * warps_per_cta);
  CHECK_CUDA(cudaMemcpy(rec.data(), d_rec, sizeof(Record) * rec.size(), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaFree(d_rec));
  CHECK_CUDA(cudaFree(d_sink));
  Summary s = summarise(rec, ctas, warps_per_cta, wgs);
  s.wall_ms = ms;
  return s;
}

const char* kAluNames[] = {"none", "mufu", "ffma", "softmax"};

template <int kDepth, int kAlu>
void isolate(int ctas, int gemm_wgs, long long groups) {
  // Without GEMMs the ALU stream runs for about as long as the GEMM configurations do.
  const long long alu_passes = groups / 4;
  const Summary s = launch(isolate_kernel<kDepth, kAlu>, 384, kSmemBytes + 1024, ctas, 12, 3, 1, gemm_wgs, groups, alu_passes);
  // Tensor cores a clock: 4096 dense bf16 FLOP an SM (989 TFLOP/s at 1830 MHz over 132 SMs).
  const double per_group = s.cycles_per_item[0];
  const double tensor_share = gemm_wgs > 0 && per_group > 0 ? gemm_wgs * kFlopsPerGemm / per_group / 4096.0 : 0;
  std::printf(
      "{\"probe\":\"isolate\",\"ctas\":%d,\"gemm_wgs\":%d,\"depth\":%d,\"alu\":\"%s\",\"groups\":%lld,"
      "\"cycles_per_group\":%.1f,\"issue_cycles_per_group\":%.1f,\"tensor_share_per_clock\":%.4f,"
      "\"alu_cycles_per_pass\":%.1f,\"alu_cycles_per_warp_instruction\":%.2f,\"mhz\":%.0f,\"ms\":%.3f}\n",
      ctas, gemm_wgs, kDepth, kAluNames[kAlu], groups, per_group, s.issue_per_group[0], tensor_share,
      s.cycles_per_item[2], s.cycles_per_item[2] / 64.0, s.mhz, s.wall_ms);
}

const char* kPassNames[] = {"none", "full", "noexp2", "halfexp2", "checked"};
const char* kTurnNames[] = {"none", "gemm", "exp2"};

// K / V blocks in global memory for the ring (4 MB: one head's K and V at 8k keys, d128), bf16
// values of the data mode (the uniform mode's as before session 52: bits 8..23 of an LCG).
const uint8_t* kv_blocks_on_device(int blocks, int data) {
  static uint8_t* d[2] = {nullptr, nullptr};
  if (d[data] == nullptr) {
    std::vector<uint16_t> h(size_t(blocks) * 2 * kKVBytes / 2);
    uint32_t x = 12345u;
    for (auto& v : h) {
      x = x * 1664525u + 1013904223u;
      const uint32_t bits = data == kDataGaussian ? (x >> 8) ^ (x * 2246822519u & 0xFFFF0000u) : (x >> 8);
      __nv_bfloat16 b = __float2bfloat16(operand_value(bits, data));
      v = *reinterpret_cast<uint16_t*>(&b);
    }
    CHECK_CUDA(cudaMalloc(&d[data], h.size() * 2));
    CHECK_CUDA(cudaMemcpy(d[data], h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  }
  return d[data];
}
const char* kDataNames[] = {"uniform", "gaussian"};

const char* feature_name(int f) {
  static const char* names[] = {"smemQ", "regQ", "smemQ+ring", "regQ+ring"};
  static std::string name;
  name = names[f & 3];
  if (f & kRingNoData) name += "+nodata";
  if (f & kConsumersDontWait) name += "+nowait";
  if (f & kProducerSleeps) name += "+sleep";
  if (f & kThreeKStages) name += "+k3";
  if (f & kThreeVStages) name += "+v3";
  if (f & kProducerKFirst) name += "+kfirst";
  if (f & kNoWaitK) name += "+nowaitK";
  if (f & kNoWaitV) name += "+nowaitV";
  if (f & kWaitBoth) name += "+waitboth";
  if (f & kAllSmem) name += "+allsmem";
  if (f & kRingHigh) name += "+high";
  if (f & kRingMid) name += "+mid";
  if (f & kProducerBusy) name += "+busy";
  if (f & kHalfCopies) name += "+half";
  if (f & kQuarterCopies) name += "+quarter";
  if (f & kPairs) name += "+pairs";
  if (f & kEarlyRelease) name += "+early";
  if (f & kTiles) name += "+tiles";
  if (f & kVoteAfterScores) name += "+voteafters";
  if (f & kPackFirst) name += "+packfirst";
  if (f & kNoMovedVote) name += "+nomovedvote";
  if (f & kStamps) name += "+stamps";
  if (f & kWaitAfterExp2) name += "+waitafterexp2";
  if (f & kEarlyTest) name += "+earlytest";
  if (f & kSplitProducer) name += "+splitproducer";
  if (f & kNoHeldVote) name += "+noheldvote";
  if (f & kNoMaxVote) name += "+nomaxvote";
  if (f & kInterleavedRows) name += "+interleaved";
  return name.c_str();
}

template <int kPass, int kTurns, int kFeatures = 0>
void pingpong(int ctas, long long steps, int tile_steps = 64, int data = kDataUniform) {
  constexpr bool kRing = (kFeatures & kKvRing) != 0;
  constexpr int kBlocks = 64;
  // kAllSmem: the same kernel as without it (the flag is masked out of the template argument).
  constexpr int kKernelFeatures = kFeatures & ~kAllSmem;
  const int smem = (kFeatures & (kAllSmem | kRingHigh | kRingMid)) ? 227 * 1024
                                                                  : (kRing ? kRingSmemBytes : kSmemBytes) + 1024;
  const int cluster = (kFeatures & kPairs) && ctas % 2 == 0 ? 2 : 1;
  if ((kFeatures & kPairs) && cluster == 1) return;  // pairs need whole clusters
  static uint8_t* o_global = nullptr;
  if (o_global == nullptr) CHECK_CUDA(cudaMalloc(&o_global, size_t(264) * 2 * 16384));
  const Summary s = launch(pingpong_kernel<kPass, kTurns, kKernelFeatures>, kRing ? 384 : 256, smem, ctas, 8, 2, cluster, steps,
                           kv_blocks_on_device(kBlocks, data), kBlocks, tile_steps, o_global, data);
  const double per_step = 0.5 * (s.cycles_per_item[0] + s.cycles_per_item[1]);
  // A step of both warpgroups: 2 x (S + P V) = 4 x kFlopsPerGemm.
  const double share = 4 * kFlopsPerGemm / per_step / 4096.0;
  const double tflops = ctas * steps * 4 * kFlopsPerGemm / (s.wall_ms * 1e-3) / 1e12;
  std::printf(
      "{\"probe\":\"pingpong\",\"ctas\":%d,\"data\":\"%s\",\"pass\":\"%s\",\"turns\":\"%s\",\"features\":\"%s\",\"tile_steps\":%d,\"steps\":%lld,"
      "\"cycles_per_step\":%.1f,\"tensor_share_per_clock\":%.4f,\"tflops\":%.1f,\"mhz\":%.0f,\"ms\":%.3f,"
      "\"phases\":[%.0f,%.0f,%.0f,%.0f,%.0f,%.0f]}\n",
      ctas, kDataNames[data], kPassNames[kPass], kTurnNames[kTurns], feature_name(kFeatures), (kFeatures & kTiles) ? tile_steps : 0, steps,
      per_step, share, tflops, s.mhz,
      s.wall_ms, s.phase_per_item[0], s.phase_per_item[1], s.phase_per_item[2], s.phase_per_item[3],
      s.phase_per_item[4], s.phase_per_item[5]);
}

}  // namespace probe

int main(int argc, char** argv) {
  using namespace probe;
  const long long groups = argc > 1 ? std::atoll(argv[1]) : 20000;
  const bool all_ctas_only = argc > 2 && argv[2][0] == 'f';  // "full": skip the one-CTA runs
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<int> ctas_list = {sms};
  if (!all_ctas_only) ctas_list.push_back(1);
  const bool pingpong_only = argc > 3 && argv[3][0] == 'p';  // "pp": skip the isolate runs
  for (int ctas : pingpong_only ? std::vector<int>{} : ctas_list) {
    isolate<2, kAluNone>(ctas, 1, groups);
    isolate<2, kAluNone>(ctas, 2, groups);
    isolate<1, kAluNone>(ctas, 1, groups);
    isolate<1, kAluNone>(ctas, 2, groups);
    isolate<2, kAluMufu>(ctas, 0, groups);
    isolate<2, kAluSoftmax>(ctas, 0, groups);
    isolate<2, kAluMufu>(ctas, 2, groups);
    isolate<1, kAluMufu>(ctas, 2, groups);
    isolate<2, kAluFfma>(ctas, 2, groups);
    isolate<2, kAluSoftmax>(ctas, 2, groups);
    isolate<1, kAluSoftmax>(ctas, 2, groups);
  }
  const long long steps = groups / 2;
  constexpr int kLib = kQInRegisters | kKvRing;  // the library's d128 form
  ctas_list.push_back(2);  // one pair alone (no power limit), beside one CTA
  for (int round = 0; round < 2; ++round) {
    for (int ctas : ctas_list) {
      for (int data : {kDataGaussian}) {
        pingpong<kPassNone, 1, kLib | kPairs>(ctas, steps, 64, data);  // the GEMMs alone
        pingpong<kPassFull, 1, kLib | kPairs>(ctas, steps, 64, data);
        pingpong<kPassChecked, 1, kLib | kPairs>(ctas, steps, 64, data);
        pingpong<kPassChecked, 1, kLib | kPairs | kNoHeldVote>(ctas, steps, 64, data);
        pingpong<kPassChecked, 1, kLib | kPairs | kNoMaxVote>(ctas, steps, 64, data);
        pingpong<kPassChecked, 1, kLib | kPairs | kNoMovedVote>(ctas, steps, 64, data);
        pingpong<kPassChecked, 1, kLib | kPairs | kNoHeldVote | kNoMaxVote | kNoMovedVote>(ctas, steps, 64, data);
        pingpong<kPassChecked, 1, kLib | kPairs | kInterleavedRows>(ctas, steps, 64, data);
        pingpong<kPassChecked, 1, kLib | kPairs | kInterleavedRows | kNoHeldVote | kNoMaxVote | kNoMovedVote>(ctas, steps, 64, data);
        pingpong<kPassChecked, 1, kLib | kPairs | kSplitProducer>(ctas, steps, 64, data);
        pingpong<kPassChecked, 1, kLib | kPairs | kSplitProducer | kNoHeldVote | kNoMaxVote | kNoMovedVote>(ctas, steps, 64, data);
      }
    }
  }
  return 0;
}
