// Persistent schedules; the grid is at most one CTA per SM and tiles are numbered longest first
// for causal masks (tile_coord).
// Static: in wave w (tiles w * grid to w * grid + grid - 1) CTA c takes tile c when w is even and
// grid - 1 - c when w is odd, which evens the work per CTA. Producer and consumers walk the same
// sequence independently, so the schedule needs no communication.
// Dynamic (Cfg::kDynamicSchedule): CTA c starts with tile c; afterwards a scheduler thread of the
// producer warpgroup (not the loading thread, whose 24 registers are spoken for) takes grid + the
// next value of a global atomic counter and hands each index to the loading thread and the
// consumers through a two-slot mailbox (TileRing). The index past the last tile
// ends every role. Counters live in a ring of kCounterSlots per translation unit, one
// slot per launch (chosen on the host); the CTA that finishes last resets its slot, so no host
// memset is needed and up to kCounterSlots launches may be in flight at once.
#pragma once

#include "cuda/sm90/config.h"
#include "cuda/sm90/params.h"
#include "cuda/sm90/ptx.h"
#include "cuda/sm90/trace.h"

namespace flashattn {
namespace sm90 {

struct TileCoord {
  int m_block = 0, head = 0, batch = 0;
};

// Tile of this CTA in wave `wave` (tiles first .. first + grid - 1). Written as plain arithmetic
// on the loop counters: a search loop here (v2's TileWalk) made the compiler treat the consumers'
// pipeline state as non-uniform, moving the wgmma descriptors out of uniform registers (an R2UR
// before every HGMMA, about 8% slower).
__device__ __forceinline__ int snake_tile(int wave, int first) {
  return first + ((wave & 1) ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x));
}

// The same tile for the loading thread, whose 24 registers cannot also hold the CTA index and the
// grid size across its loads (ptxas spilled them to the stack): both are read again at each call
// (volatile), and the wave counter is all its loop keeps.
__device__ __forceinline__ int grid_size_reread() {
  int grid;
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(grid));
  return grid;
}
__device__ __forceinline__ int cta_index_reread() {
  int cta;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(cta));
  return cta;
}
__device__ __forceinline__ int snake_tile_reread(int wave) {
  const int cta = cta_index_reread();
  const int grid = grid_size_reread();
  return wave * grid + ((wave & 1) ? grid - 1 - cta : cta);
}

// Cluster pairs (ClusterPairsConfig, static): CTA rank r of cluster c takes tile
// 2 (wave * clusters + c) + r, so the two CTAs of a cluster hold query tiles 2i and 2i + 1 of one
// head (unmasked order, num_m_blocks even: launch.h checks) and read the same K/V blocks. Both
// CTAs of a cluster walk the same number of waves. Read afresh like snake_tile_reread.
__device__ __forceinline__ int pair_tile(int wave) {
  const int cta = cta_index_reread();
  const int clusters = grid_size_reread() >> 1;
  return 2 * (wave * clusters + (cta >> 1)) + (cta & 1);
}

// Causal order. The last query blocks see the most keys; running them first keeps the tail
// short. Taken over all heads at once (v1-v5), that makes the CTAs running together work on as
// many different heads as there are CTAs: at short sequences (512 rows: 4 tiles a head) a head's
// later, shorter tiles run when its K/V has likely left the L2 (at causal 2k, hdim 128, ncu read
// 5x Q + K + V from DRAM). So the (batch, head) pairs go in groups of p.l2_group_heads, longest
// first within a group; the last group may be smaller. The launch sizes the groups by head dim
// and length (launch.h, causal_group_heads; kernel_choice.h has the rule and the measurements):
// one head, as many heads as have their K and V in half the L2, or all heads (v5's order).
__device__ __forceinline__ void longest_first_in_l2_group(const KernelParams& p, int heads, int index, int& m_block,
                                                          int& bh) {
  const int group_tiles = p.l2_group_heads * p.num_m_blocks;
  const int group = index / group_tiles;
  const int first = group * p.l2_group_heads;
  const int size = min(p.l2_group_heads, heads - first);
  const int r = index - group * group_tiles;
  const int step = r / size;
  m_block = p.num_m_blocks - 1 - step;
  bh = first + (r - step * size);
}

__device__ __forceinline__ TileCoord tile_coord(const KernelParams& p, int index) {
  const int heads = p.batch * p.nheads_q;
  TileCoord t;
  int bh;
  if (p.longest_first) {
    longest_first_in_l2_group(p, heads, index, t.m_block, bh);
  } else {
    // Consecutive tiles share a head, so the CTAs running at once reuse its K and V from L2.
    t.m_block = index % p.num_m_blocks;
    bh = index / p.num_m_blocks;
  }
  t.head = bh % p.nheads_q;
  t.batch = bh / p.nheads_q;
  return t;
}

// GQA head packing (pack_gqa.h): the same numbering over KV heads; TileCoord::head is then the
// KV head. Kept beside tile_coord rather than sharing its body, so that the default kernel's code
// stays exactly as it was (a shared body with the head count as an argument changed the SASS of
// the default, static and packed instantiations).
__device__ __forceinline__ TileCoord tile_coord_packed(const KernelParams& p, int index) {
  const int heads = p.batch * p.nheads_kv;
  TileCoord t;
  int bh;
  if (p.longest_first) {
    longest_first_in_l2_group(p, heads, index, t.m_block, bh);
  } else {
    t.m_block = index % p.num_m_blocks;
    bh = index / p.num_m_blocks;
  }
  t.head = bh % p.nheads_kv;
  t.batch = bh / p.nheads_kv;
  return t;
}

// tile_coord and tile_coord_packed with the launch's FastDivisors (Cfg::kFastTileDecode): the same
// numbering, four multiply-highs instead of four divisions. `heads` is the numbering's (batch,
// head) pairs: batch * nheads_q, or batch * nheads_kv when packing.
__device__ __forceinline__ TileCoord tile_coord_fast(const KernelParams& p, int index, int heads) {
  TileCoord t;
  int bh;
  if (p.longest_first) {
    int r;
    const int group = p.div_group_tiles.divide(index, r);
    const int first = group * p.l2_group_heads;
    const FastDivisor& size = first + p.l2_group_heads <= heads ? p.div_group : p.div_last_group;
    int pair;
    const int step = size.divide(r, pair);
    t.m_block = p.num_m_blocks - 1 - step;
    bh = first + pair;
  } else {
    bh = p.div_m_blocks.divide(index, t.m_block);
  }
  t.batch = p.div_heads.divide(bh, t.head);
  return t;
}

constexpr int kCounterSlots = 64;
namespace {
// [slot][0]: tiles handed out beyond the first wave; [slot][1]: CTAs that have taken their last.
__device__ unsigned int g_tile_counters[kCounterSlots][2];
}  // namespace

// Scheduler thread only. Next tile index for this CTA.
__device__ __forceinline__ int fetch_next_tile(const KernelParams& p) {
  return int(gridDim.x) + int(atomicAdd(&g_tile_counters[p.counter_slot][0], 1u));
}
// Scheduler thread only, after its fetch returned an index past the last tile: the last CTA to
// get here knows every CTA has stopped fetching and resets the slot for the next launch using it.
__device__ __forceinline__ void retire_tile_counter(const KernelParams& p) {
  __threadfence();
  if (atomicAdd(&g_tile_counters[p.counter_slot][1], 1u) == gridDim.x - 1) {
    atomicExch(&g_tile_counters[p.counter_slot][0], 0u);
    atomicExch(&g_tile_counters[p.counter_slot][1], 0u);
  }
}

// A mailbox of kMailboxSlots tile indices per CTA, each slot with a full mbarrier (the scheduler
// thread's arrival after writing the index) and an empty one (one arrival per consumer warp and one
// by the loading thread once each is done with the index). The slots are used in turn.
// Two slots, and a receiver releases a slot only at its next receive (when the index it read has
// long been used): the scheduler claims tile k + 1 while the consumers still run tile k - 1, so
// neither the loading thread nor the consumers wait for the counter's atomic. With one slot (v4) the
// claim of tile k + 1 started only once every consumer warp had read tile k at the start of tile k,
// an atomic round trip the producer then waited for on short tiles.
// The index itself lives in global memory (g_tile_mailbox, this launch's slot, this CTA's entries),
// written to and read from L2, ordered by the mbarriers (release on arrive, acquire on wait).
// Kept out of shared memory because compute-sanitizer's racecheck does not follow mbarriers for
// ordinary shared-memory accesses (it reported the correct shared-memory version as racing), and
// shared-memory atomics instead cost hdim 256 consumers spills.
namespace {
__device__ int g_tile_mailbox[kCounterSlots][kMailboxCtas][kMailboxSlots];
}  // namespace

// The CTA index comes through a volatile read so that the compiler recomputes the address at each
// use instead of keeping it in two registers across the consumers' whole tile loop (that cost the
// hdim 256 consumers spills).
__device__ __forceinline__ int* tile_mailbox_entry(const KernelParams& p) {
  return &g_tile_mailbox[p.counter_slot][cta_index_reread()][0];
}

struct TileRing {
  // Indices published (scheduler) or received (others) so far: slot = count % kMailboxSlots, and
  // the mbarrier phase flips each time the slots wrap. One register for the whole ring.
  uint32_t count = 0;
  __device__ __forceinline__ int slot() const { return int(count % kMailboxSlots); }
  __device__ __forceinline__ uint32_t phase() const { return (count / kMailboxSlots) & 1; }
  // `bar`: the first slot's full mbarrier; its empty one is at bar + 8, the next slot's pair 16 on.
  __device__ __forceinline__ static uint32_t full(uint32_t bar, int slot) { return bar + 16 * slot; }
  __device__ __forceinline__ static uint32_t empty(uint32_t bar, int slot) { return bar + 16 * slot + 8; }

  __device__ __forceinline__ void publish(uint32_t bar, int* entry, int index) {
    mbarrier_wait(empty(bar, slot()), phase() ^ 1);
    __stcg(entry + slot(), index);
    mbarrier_arrive(full(bar, slot()));
    ++count;
  }
  // Called by every thread of a consumer warp, or by the loading thread alone (one_thread). First
  // releases the slot of the previous receive: its index has been used by the caller since.
  __device__ __forceinline__ int receive(uint32_t bar, const int* entry, bool one_thread) {
    if (count > 0) {
      if (!one_thread) __syncwarp();
      if (one_thread || threadIdx.x % 32 == 0) mbarrier_arrive(empty(bar, int((count - 1) % kMailboxSlots)));
    }
    mbarrier_wait(full(bar, slot()), phase());
    int index;
    asm volatile("ld.global.cg.b32 %0, [%1];" : "=r"(index) : "l"(entry + slot()) : "memory");
    ++count;
    return index;
  }
};

// The scheduler thread's whole life (dynamic schedule): this CTA's first tile, then one claim from
// the counter each time the mailbox has been emptied, and the index past the end to finish.
template <class Cfg>
__device__ __forceinline__ void schedule_tiles(const KernelParams& p, uint32_t mailbox) {
  TileRing ring;
  int index = blockIdx.x;
  while (true) {
    ring.publish(mailbox, tile_mailbox_entry(p), index);
    trace_event<Cfg>(kTraceScheduler, kEvPublish, 0, index);
    if (index >= p.num_tiles) break;
    index = fetch_next_tile(p);
    trace_event<Cfg>(kTraceScheduler, kEvClaim, 0, index);
  }
  retire_tile_counter(p);
}

}  // namespace sm90
}  // namespace flashattn
