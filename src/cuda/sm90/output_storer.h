// The thread of the producer warpgroup that sends the staged output tile to global memory
// (Cfg::kStoreByProducerWarp). A consumer warpgroup stages its 64 rows of O (and their LSE) in
// the output tile as before, fences them for the async proxy and hands them over: its thread 0
// writes a message (what to store, where), and each of its warps arrives once on the
// warpgroup's output_full mbarrier. This thread issues the TMA stores, waits for them to have
// read the tile, and arrives on output_free, which the warpgroup's next epilogue waits for
// before writing the tile again.
// Why: in the consumers' own store the warpgroup's thread 0 waited for the previous store's
// read, the four warps met on a named barrier before the tile was written and again after it,
// and thread 0 issued the TMA stores; all of it on the tile boundary's chain, which both
// consumer warpgroups run at about the same time (docs/perf.md, session 38: the tensor cores
// idle ~9% of a 512-key tile's time there).
// The messages of the warpgroups are taken in whatever order they come (a warpgroup without
// rows in a tile stores nothing for it), by polling each warpgroup's barrier without waiting.
#pragma once

#include "cuda/sm90/params.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/ptx.h"

namespace flashattn {
namespace sm90 {

// What a message asks for.
enum StoreRequest : int {
  kStoreEnd = 0,      // the warpgroup has no more tiles (no output_free follows)
  kStoreRows = 1,     // TMA-store the warpgroup's rows at (row, head, batch)
  kStoreNothing = 2,  // the warpgroup stored its rows itself (clipped rows): the tile is free
};

// The consumer side: warpgroup wg's message and its warps' arrivals, once every thread has
// written (and fenced) what the message covers.
template <class Cfg>
__device__ __forceinline__ void hand_over_output(const SharedBarriers<Cfg>& bars, int wg, int thread,
                                                 StoreRequest request, int row, int head, int batch) {
  if (thread == 0) {
    asm volatile("st.shared.v4.s32 [%0], {%1, %2, %3, %4};" ::"r"(bars.store_message(wg)), "r"(int(request)),
                 "r"(row), "r"(head), "r"(batch)
                 : "memory");
  }
  __syncwarp();
  if (thread % 32 == 0) mbarrier_arrive(bars.output_full(wg));
}

template <class Cfg>
struct OutputStorer {
  // Between two polls that found no message: the hand-over is off the consumers' critical path
  // (the next wait on output_free is a tile later), so the storing thread leaves the issue slots
  // of its SM sub-partition to the consumer warps there.
  static constexpr unsigned kIdleNanoseconds = Cfg::kStorerIdleNanoseconds;

  const KernelParams& p;
  SharedTiles<Cfg> tiles;
  SharedBarriers<Cfg> bars;

  __device__ void run() const {
    uint32_t parity = 0;                                  // bit wg: the parity of warpgroup wg's next message
    uint32_t open = (1u << Cfg::kConsumerWarpgroups) - 1;  // bit wg: warpgroup wg has not ended
    while (open != 0) {
      bool idle = true;
#pragma unroll
      for (int wg = 0; wg < Cfg::kConsumerWarpgroups; ++wg) {
        if (!((open >> wg) & 1u) || !mbarrier_test_parity(bars.output_full(wg), (parity >> wg) & 1u)) continue;
        parity ^= 1u << wg;
        idle = false;
        int request, row, head, batch;
        asm volatile("ld.shared.v4.s32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(request), "=r"(row), "=r"(head), "=r"(batch)
                     : "r"(bars.store_message(wg))
                     : "memory");
        if (request == kStoreEnd) {
          open &= ~(1u << wg);
          continue;
        }
        if (request == kStoreRows) send(wg, row, head, batch);
        mbarrier_arrive(bars.output_free(wg));
      }
      if (idle) __nanosleep(kIdleNanoseconds);
    }
    bulk_wait_all();
  }

  // Warpgroup wg's rows of the output tile, one TMA store per 64-column box (and its LSE rows),
  // waited for until the TMA unit has read them. row: the tile's first query row of the
  // warpgroup (GQA packing: of its query heads).
  __device__ __forceinline__ void send(int wg, int row, int head, int batch) const {
    const uint32_t rows = wg * kRowsPerConsumer * kLineBytes;
#pragma unroll
    for (int c = 0; c < Cfg::kColumns; ++c) {
      if constexpr (Cfg::kPackGqa) {
        tma_store_5d(&p.tma_o, tiles.o_column(c) + rows, c * kColumnElems, 0, row, head, batch);
      } else {
        tma_store_4d(&p.tma_o, tiles.o_column(c) + rows, c * kColumnElems, row, head, batch);
      }
    }
    if constexpr (Cfg::kLseThroughTma && Cfg::kLseTile) {
      if (p.lse_by_tma) tma_store_3d(&p.tma_lse, tiles.lse_row(wg * kRowsPerConsumer), row, head, batch);
    }
    bulk_commit_group();
    bulk_wait_read_all();
  }
};

}  // namespace sm90
}  // namespace flashattn
