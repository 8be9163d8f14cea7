// The persistent forward kernel: warpgroup 0 gives its registers away and one of its threads runs
// the TMA producer; the consumer warpgroups (two, or three at hdim 64) take the registers and run
// mainloop + epilogue per tile.
#pragma once

#include "cuda/sm90/epilogue.h"
#include "cuda/sm90/mainloop_load.h"
#include "cuda/sm90/mainloop_mma.h"
#include "cuda/sm90/pack_gqa.h"

namespace flashattn {
namespace sm90 {

template <class Cfg>
__device__ void consumer_loop(const KernelParams& p, SharedTiles<Cfg> tiles, SharedBarriers<Cfg> bars, int wg) {
  const int thread = threadIdx.x % kWarpgroupThreads;
  const MainloopMma<Cfg> mma{p, tiles, bars, wg, thread};
  const Epilogue<Cfg> epilogue{p, tiles, bars, wg, thread};
  // Warpgroup 0 issues first; from then on the turns go round (see mainloop_mma.h).
  if (wg == Cfg::kConsumerWarpgroups - 1) named_barrier_arrive(kSchedulerBarrier0, 2 * kWarpgroupThreads);

  PipelineState<Cfg::kStages> kv_state;
  uint32_t q_phase = 0;
  auto run_tile = [&](int index) {
    const TileCoord t = tile_coord_of<Cfg>(p, index);
    const SequenceInfo seq = sequence_info(p, t.batch);
    if (t.m_block * tile_query_rows<Cfg>(p) >= seq.len_q) return;
    const BlockRange<Cfg::kBlockN> range = tile_key_block_range<Cfg>(p, seq, t.m_block);
    if (range.empty()) {
      epilogue.store_empty(seq, t);
      return;
    }
    mbarrier_wait(bars.q_full(), q_phase);
    q_phase ^= 1;
    float o[MainloopMma<Cfg>::kOAccum];
    OnlineSoftmax<Cfg::kBlockN> softmax;
    mma.compute_tile(seq, t, range, o, softmax, kv_state);
    float lse[2];
    softmax.finalize(o, p.score_log2, lse);
    epilogue.store(o, lse, seq, t);
  };
  if constexpr (Cfg::kDynamicSchedule) {
    // The next index is read at the start of a tile and used at its end, so the L2 read of the
    // mailbox is hidden under the tile (the scheduler has published it a tile earlier).
    TileRing ring;
    int index = ring.receive(bars.tile_mailbox(), tile_mailbox_entry(p), false);
    while (index < p.num_tiles) {
      const int next = ring.receive(bars.tile_mailbox(), tile_mailbox_entry(p), false);
      run_tile(index);
      index = next;
    }
  } else {
    for (int wave = 0, first = 0; first < p.num_tiles; ++wave, first += gridDim.x) {
      const int index = snake_tile(wave, first);
      if (index < p.num_tiles) run_tile(index);
    }
  }
  // Takes the last turn the last warpgroup handed over, so no named-barrier arrival outlives the CTA.
  if (wg == 0) named_barrier_sync(kSchedulerBarrier0, 2 * kWarpgroupThreads);
  if (thread == 0) bulk_wait_all();
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1) forward_kernel(const __grid_constant__ KernelParams p) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t base = (smem_address(smem_raw) + kSwizzleAtomBytes - 1) & ~uint32_t(kSwizzleAtomBytes - 1);
  const SharedTiles<Cfg> tiles{base};
  const SharedBarriers<Cfg> bars{base + Cfg::kBarrierOffset};
  if (threadIdx.x == 0) bars.init();
  __syncthreads();

  // Through a shuffle from lane 0 the compiler knows the index is warp-uniform, so values derived
  // from it (the Q descriptors of S = Q K^T) can live in uniform registers.
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x / kWarpgroupThreads), 0);
  if (warpgroup == 0) {
    setmaxnreg_decrease<kProducerRegisters>();
    if (threadIdx.x == 0) MainloopLoad<Cfg>{p, tiles, bars}.run();
    if constexpr (Cfg::kDynamicSchedule) {
      if (threadIdx.x == 32) schedule_tiles(p, bars.tile_mailbox());
    }
    if constexpr (MainloopLoad<Cfg>::kZeroesKvTail) {
      if (threadIdx.x / 32 == 2 && p.zero_kv_tail) MainloopLoad<Cfg>{p, tiles, bars}.zero_unused_rows();
    }
  } else {
    setmaxnreg_increase<Cfg::kConsumerRegisters>();
    consumer_loop<Cfg>(p, tiles, bars, warpgroup - 1);
  }
}

}  // namespace sm90
}  // namespace flashattn
