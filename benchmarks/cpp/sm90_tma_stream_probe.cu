// The packed decode kernel's K / V stream alone (session 90): one loading thread a CTA fills a ring
// of key blocks with the library's TMA boxes (encode_operand_map: 128 rows of 64-column slices,
// the 128-byte swizzle, the library's L2 promotion) and one warp frees each stage once it has
// landed, after spinning `consume` cycles, a stand-in for the key loop's work. One CTA a (batch,
// KV head, key piece), as the decode grid. What the full kernel cannot answer by itself: what one
// SM's stream of d64 boxes (128-byte rows 1 KB apart in a bshd cache) reaches alone and beside 63
// or 127 others, and whether the ring's depth or the consumer's time sets it; against d128's boxes
// and the head-major layout. Session 90 ruled out the ring's depth and the softmax in the kernel
// (docs/perf.md): if the stream alone also stops near 2.0 TB/s at 128 CTAs, the loads' shape is
// what holds d64 decode under cuDNN's 2.14. Two more questions (session 91, before its first run):
// whether two CTAs an SM (the 256-CTA shape, rings of 2-3 stages; cuDNN runs 256 CTAs, two an SM)
// stream faster than one, and whether boxes of two heads' rows (256 contiguous bytes a row in bshd)
// stream faster than one head's 128.
//
// Not a test: the cache holds a constant pattern and the words read are summed into one counter
// so that the reads are not dead code.
//
//   flashattn_sm90_tma_stream_probe [reps]   one JSON line per configuration
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cuda/sm90/ptx.h"
#include "cuda/sm90/tensor_map.h"

namespace probe {

using namespace flashattn;
using namespace flashattn::sm90;

constexpr int kBlockRows = 128;                   // key rows a block, the packed kernel's kBlockN
constexpr uint32_t kBoxBytes = kBlockRows * 128;  // one 64-column slice of a block
constexpr int kMaxStages = 6;

struct StreamParams {
  int heads = 0, batch = 0, blocks = 0, stages = 0;
  long long consume = 0;  // cycles the consumer spins on each landed stage before freeing it
  unsigned* sink = nullptr;
};

// Threads 0..31: thread 0 loads; threads 32..63: the consumer warp. kPairedHeads: each box is 64
// key rows of two adjacent KV heads (the GQA-packed 5-D map, group 2) rather than 128 rows of one,
// the same 16 KB; in a bshd cache its rows are 256 contiguous bytes instead of 128. p.heads then
// counts head pairs.
template <int kColumns, bool kPairedHeads>
__global__ void __launch_bounds__(64, 1) stream_kernel(const __grid_constant__ CUtensorMap k_map,
                                                       const __grid_constant__ CUtensorMap v_map,
                                                       const StreamParams p) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // The 128-byte swizzle's boxes start on 1024-byte boundaries.
  const uint32_t base = (smem_address(smem_raw) + 1023u) & ~1023u;
  constexpr uint32_t kStageBytes = 2 * kColumns * kBoxBytes;  // K and V of one block
  const uint32_t bars = base + p.stages * kStageBytes;
  auto full = [&](int s) { return bars + 16u * s; };
  auto empty = [&](int s) { return bars + 16u * s + 8u; };
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) mbarrier_init(full(s), 1), mbarrier_init(empty(s), 1);
    fence_barrier_init();
  }
  __syncthreads();
  const int head = blockIdx.x % p.heads, batch = (blockIdx.x / p.heads) % p.batch;
  constexpr int kRows = kPairedHeads ? kBlockRows / 2 : kBlockRows;  // key rows a block
  const int row0 = blockIdx.x / (p.heads * p.batch) * p.blocks * kRows;
  if (threadIdx.x == 0) {
    prefetch_tensor_map(&k_map);
    prefetch_tensor_map(&v_map);
    for (int n = 0; n < p.blocks; ++n) {
      const int s = n % p.stages;
      const uint32_t phase = (n / p.stages) & 1;
      mbarrier_wait(empty(s), phase ^ 1);  // a fresh barrier passes parity 1 at once
      mbarrier_arrive_expect_tx(full(s), kStageBytes);
      const uint32_t stage = base + s * kStageBytes;
      const int row = row0 + n * kRows;
      // Column slice c of the block from `map` into the stage's box `box` (K's first, then V's).
      auto load = [&](const CUtensorMap* map, int box, int c) {
        if constexpr (kPairedHeads) {
          tma_load_5d(stage + box * kBoxBytes, map, full(s), 64 * c, 0, row, head, batch);
        } else {
          tma_load_4d(stage + box * kBoxBytes, map, full(s), 64 * c, row, head, batch);
        }
      };
#pragma unroll
      for (int c = 0; c < kColumns; ++c) load(&k_map, c, c);
#pragma unroll
      for (int c = 0; c < kColumns; ++c) load(&v_map, kColumns + c, c);
    }
  } else if (threadIdx.x >= 32) {
    const int lane = threadIdx.x - 32;
    uint32_t acc = 0;
    for (int n = 0; n < p.blocks; ++n) {
      const int s = n % p.stages;
      mbarrier_wait(full(s), (n / p.stages) & 1);
      if (p.consume > 0) {
        const long long t0 = clock64();
        while (clock64() - t0 < p.consume) {
        }
      }
      // One word of K's and of V's first slice a lane.
      const uint32_t stage = base + s * kStageBytes;
      acc += *smem_pointer<uint32_t>(stage + 4u * lane) + *smem_pointer<uint32_t>(stage + kColumns * kBoxBytes + 4u * lane);
      __syncwarp();
      if (lane == 0) mbarrier_arrive(empty(s));
    }
    if (acc == 0x9e3779b9u) atomicAdd(p.sink, 1u);
  }
}

struct Shape {
  int batch, seqlen, pieces;
};

int run(int reps) {
  constexpr int kHeads = 8;
  // 64, 128 and 256 CTAs; at 256 two CTAs share an SM where the ring fits twice (d64 up to three
  // stages), cuDNN's arrangement for this grid.
  const Shape shapes[] = {{1, 32768, 8}, {2, 32768, 8}, {8, 8192, 2}, {1, 32768, 16}, {2, 32768, 16}};
  const long long consumes[] = {0, 1200, 2400};
  size_t most_elems = 0;
  for (const Shape& sh : shapes) most_elems = std::max(most_elems, size_t(sh.batch) * sh.seqlen * kHeads * 128);
  void *k = nullptr, *v = nullptr;
  unsigned* sink = nullptr;
  CHECK_CUDA(cudaMalloc(&k, most_elems * 2));
  CHECK_CUDA(cudaMalloc(&v, most_elems * 2));
  CHECK_CUDA(cudaMalloc(&sink, sizeof(unsigned)));
  CHECK_CUDA(cudaMemset(k, 0x3c, most_elems * 2));
  CHECK_CUDA(cudaMemset(v, 0x3d, most_elems * 2));
  for (auto kernel : {stream_kernel<1, false>, stream_kernel<2, false>, stream_kernel<1, true>}) {
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    // As the library's two-CTA launch: room for as many rings as fit (session 91's run had not).
    CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  }
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  // d64, d128, then d64 with boxes of two heads' rows (bshd: 256-byte rows).
  for (int pass = 0; pass < 3; ++pass) {
    const int headdim = pass == 1 ? 128 : 64;
    const int columns = headdim / 64;
    const bool paired = pass == 2;
    for (bool head_major : {false, true}) {
      for (const Shape& sh : shapes) {
        const int64_t width = int64_t(kHeads) * headdim;
        // bshd: a key row holds every head's slice; bhsd: each head's rows contiguous.
        const Operand op_k = head_major ? Operand{k, width * sh.seqlen, headdim, int64_t(sh.seqlen) * headdim}
                                        : Operand{k, width * sh.seqlen, width, headdim};
        Operand op_v = op_k;
        op_v.data = v;
        CUtensorMap k_map, v_map;
        auto encode = [&](CUtensorMap* map, const Operand& op) {
          return paired ? encode_packed_operand_map(map, op, DType::kBFloat16, headdim, sh.seqlen, kHeads / 2, 2,
                                                    sh.batch, false, kBlockRows / 2)
                        : encode_operand_map(map, op, DType::kBFloat16, headdim, sh.seqlen, kHeads, sh.batch, false,
                                             kBlockRows);
        };
        Status st = encode(&k_map, op_k);
        if (st.ok()) st = encode(&v_map, op_v);
        if (!st.ok()) {
          std::fprintf(stderr, "tensor map: %s\n", st.message.c_str());
          return 1;
        }
        StreamParams p;
        // Paired: half the CTAs a piece, twice the pieces (the same CTAs, each the same bytes).
        const int pieces = paired ? 2 * sh.pieces : sh.pieces;
        p.heads = paired ? kHeads / 2 : kHeads, p.batch = sh.batch, p.sink = sink;
        p.blocks = sh.seqlen / (paired ? kBlockRows / 2 : kBlockRows) / pieces;
        const int ctas = p.heads * sh.batch * pieces;
        const auto kernel = paired ? stream_kernel<1, true> : columns == 1 ? stream_kernel<1, false> : stream_kernel<2, false>;
        const uint32_t stage_bytes = 2 * columns * kBoxBytes;
        for (int stages = 2; stages <= kMaxStages; ++stages) {
          const uint32_t smem = stages * stage_bytes + 16 * stages + 1024;
          if (smem > 227 * 1024) break;
          p.stages = stages;
          for (long long consume : consumes) {
            p.consume = consume;
            auto launch = [&]() { kernel<<<ctas, 64, smem>>>(k_map, v_map, p); };
            int resident = 0;  // CTAs an SM holds at once
            CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, 64, smem));
            for (int i = 0; i < 3; ++i) launch();
            CHECK_CUDA(cudaGetLastError());
            CHECK_CUDA(cudaEventRecord(start));
            for (int i = 0; i < reps; ++i) launch();
            CHECK_CUDA(cudaEventRecord(stop));
            CHECK_CUDA(cudaEventSynchronize(stop));
            CHECK_CUDA(cudaGetLastError());
            float ms = 0.0f;
            CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
            const double us = 1000.0 * ms / reps;
            const double bytes = double(ctas) * p.blocks * stage_bytes;
            std::printf(
                "{\"headdim\": %d, \"heads_a_box\": %d, \"layout\": \"%s\", \"batch\": %d, \"seqlen\": %d, \"pieces\": %d, \"ctas\": %d, "
                "\"ctas_an_sm\": %d, \"stages\": %d, \"consume_cycles\": %lld, \"us\": %.2f, \"tb_s\": %.3f, "
                "\"gb_s_a_cta\": %.1f}\n",
                headdim, paired ? 2 : 1, head_major ? "bhsd" : "bshd", sh.batch, sh.seqlen, pieces, ctas, resident, stages, consume, us,
                bytes / us / 1e6, bytes / us / 1e3 / ctas);
          }
        }
      }
    }
  }
  return 0;
}

}  // namespace probe

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  if (reps < 1) {
    std::fprintf(stderr, "reps: a positive count, got %s\n", argv[1]);
    return 2;
  }
  return probe::run(reps);
}
