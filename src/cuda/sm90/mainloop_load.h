// The producer: one thread walks the tile schedule and issues every TMA load. Q once per tile,
// then K and V of each key block into the next free stage of the ring, in the order the
// consumers visit the blocks (last block first, so the masked blocks come first).
//
// Unused key rows (p.zero_kv_tail: seqused_k, or varlen k/v rows past the last sequence): TMA
// reads whole key blocks, so a sequence's partial last block brings rows past its length, which
// may hold NaN. K's are harmless (the mask overwrites their scores with -inf, softcap included),
// but P = 0 does not cancel a NaN of V in P V. For such a block the loading thread lands V on the
// zeroing job's barrier instead of the stage's full barrier and hands the stage and the valid
// row count to warp 2 of the producer warpgroup (otherwise idle), which zeroes the rows past the
// length in shared memory (whole 128-byte lines: the swizzle only permutes 16-byte chunks within
// a row's line), fences them for the async proxy and then arrives on the stage's full barrier
// itself. The consumers see an ordinary full V stage. The job's two words travel through global
// memory (g_zero_job), ordered by the job barriers, like the tile mailbox (tile_scheduler.h).
#pragma once

#include "cuda/sm90/block_range.h"
#include "cuda/sm90/pack_gqa.h"
#include "cuda/sm90/paged_blocks.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/split_keys.h"
#include "cuda/sm90/split_tail.h"
#include "cuda/sm90/tile_scheduler.h"

namespace flashattn {
namespace sm90 {

namespace {
// The zeroing job of each CTA of each launch slot: (stage << 16) | valid rows, or -1 to finish.
__device__ int g_zero_job[kCounterSlots][kMailboxCtas];
}  // namespace

__device__ __forceinline__ int* zero_job_entry(const KernelParams& p) {
  return &g_zero_job[p.counter_slot][cta_index_reread()];
}

template <class Cfg>
struct MainloopLoad {
  // Whether this configuration carries the V-tail zeroing (params.h). Cluster pairs never need it
  // (launch.h refuses seqused_k and varlen there), and its code would cost the 24-register
  // loading thread a spill.
  static constexpr bool kZeroesKvTail = Cfg::kHeadDim <= kZeroKvTailMaxHeadDim && !Cfg::kClusterPairs;
  static constexpr bool kReadsPages = reads_pages<Cfg>();  // paged_blocks.h
  const KernelParams& p;
  SharedTiles<Cfg> tiles;
  SharedBarriers<Cfg> bars;

  // One box per 64-column slice; rows past the tensor's end arrive zero-filled. Variable-length
  // maps have a batch extent of 1 (rows are packed), so batch is 0 there and row is absolute.
  template <int kRows>
  __device__ __forceinline__ static void load_tile(uint32_t dst, int column_bytes, const CUtensorMap* map,
                                                   uint32_t bar, int row, int head, int batch) {
    mbarrier_arrive_expect_tx(bar, kRows * kLineBytes * Cfg::kColumns);
#pragma unroll
    for (int c = 0; c < Cfg::kColumns; ++c) {
      tma_load_4d(dst + c * column_bytes, map, bar, c * kColumnElems, row, head, batch);
    }
  }

  // Cluster pairs: this CTA's half of a key block's rows, multicast into the same place of both
  // CTAs' stage; each CTA's full barrier expects the whole block (its half and the peer's). The
  // half is a whole number of 8-row swizzle atoms (config.h), so its shared-memory offset keeps
  // the 128-byte swizzle pattern.
  __device__ __forceinline__ static void load_half_block(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row,
                                                         int head, int batch) {
    constexpr int kHalf = Cfg::kBlockN / 2;
    const int rank = int(cluster_cta_rank());
    mbarrier_arrive_expect_tx(bar, Cfg::kBlockN * kLineBytes * Cfg::kColumns);
#pragma unroll
    for (int c = 0; c < Cfg::kColumns; ++c) {
      tma_load_4d_multicast(dst + c * Cfg::kKVColumnBytes + rank * kHalf * kLineBytes, map, bar, c * kColumnElems,
                            row + rank * kHalf, head, batch, uint16_t(0x3));
    }
  }

  // GQA packing: the G heads of KV head `head_kv`, query rows from `row` on, through the 5-D map
  // (dim, head in group, row, kv head, batch) with boxes (64, G, kBlockM / G, 1, 1).
  __device__ __forceinline__ void load_packed_q(int row, int head_kv, int batch) const {
    // The box's rows: pack_rows query rows of G heads (kBlockM where G is a power of two).
    mbarrier_arrive_expect_tx(bars.q_full(), p.pack_rows * int(p.pack_div.divisor) * kLineBytes * Cfg::kColumns);
#pragma unroll
    for (int c = 0; c < Cfg::kColumns; ++c) {
      tma_load_5d(tiles.q_column(c), &p.tma_q, bars.q_full(), c * kColumnElems, 0, row, head_kv, batch);
    }
  }

  // Cfg::kPrefetchNextQ: the Q tile of this CTA's tile in static wave `wave` + 1 (cluster pairs:
  // its pair wave) into the L2, issued before or after the loads of wave `wave`'s tile (config.h;
  // before: in the first wave after them all the same, since at the kernel's start every CTA's
  // first Q and K come from DRAM together). Past the walk's last tile, where a tail kernel
  // follows, the tail's tile p.tail_first + this CTA's index, while there is one. Called between
  // tiles, where the loop keeps only the wave live: inside the key-block loop it made the
  // 24-register loading thread spill. Only at the lengths config.h names.
  static constexpr bool prefetches_before_loads(int wave) {
    return Cfg::kPrefetchNextQ == kQPrefetchBeforeLoads && wave > 0;
  }
  static constexpr bool prefetches_after_loads(int wave) {
    return Cfg::kPrefetchNextQ == kQPrefetchAfterLoads || (Cfg::kPrefetchNextQ == kQPrefetchBeforeLoads && wave == 0);
  }
  __device__ __forceinline__ void prefetch_next_q(int wave) const {
    if (p.seqlen_k < Cfg::kQPrefetchMinKeys || p.seqlen_k > Cfg::kQPrefetchMaxKeys) return;
    int index = Cfg::kClusterPairs ? pair_tile(wave + 1) : snake_tile_reread(wave + 1);
    if (index >= p.num_tiles) {
      if (!Cfg::kHasTailKernel || p.tail_units == 0) return;
      index = p.tail_first + cta_index_reread();
      if (index >= p.tail_first + p.tail_units / p.tail_blocks) return;
    }
    const TileCoord t = tile_coord_of<Cfg>(p, index);
    const SequenceInfo s = sequence_info(p, t.batch);
    if (t.m_block * Cfg::kBlockM >= s.len_q) return;
    const int batch = p.cu_seqlens_q != nullptr ? 0 : t.batch;
#pragma unroll
    for (int c = 0; c < Cfg::kColumns; ++c) {
      tma_prefetch_l2_4d(&p.tma_q, c * kColumnElems, s.q_row0 + t.m_block * Cfg::kBlockM, t.head, batch);
    }
  }

  // The producer runs on 24 registers: the loop keeps only what the loads need live.
  __device__ void run() const {
    const bool varlen = p.cu_seqlens_q != nullptr;
    prefetch_tensor_map(&p.tma_q);
    prefetch_tensor_map(&p.tma_k);
    prefetch_tensor_map(&p.tma_v);
    PipelineState<Cfg::kStages> kv;
    // Bit 0: Q's phase; bit 1: the zeroing job's (p.zero_kv_tail only). One register for both: a
    // second one made the 24-register loop spill.
    uint32_t phases = 0;
    // Key blocks [n_lo, n_hi) of the tile only: a piece of the split tail (Cfg::kSplitTail).
    auto load_tiles_of = [&](int index, int n_lo, int n_hi) {
      int piece;  // of a split tile (Cfg::kSplitKeys, split_keys.h): index is then a work index
      const TileCoord t = tile_coord_of<Cfg>(p, split_tile_of<Cfg>(p, index, piece));
      const SequenceInfo s = sequence_info(p, t.batch);
      if (t.m_block * tile_query_rows<Cfg>(p) >= s.len_q) return;
      BlockRange<Cfg::kBlockN> range = tile_key_block_range<Cfg>(p, s, t.m_block);
      if constexpr (Cfg::kSplitTail) range.keep_within(n_lo, n_hi);
      if constexpr (Cfg::kSplitKeys) {
        if (keep_key_piece(range, piece, p.key_splits) == 0) return;
      }
      if (range.empty()) return;
      const int batch = varlen ? 0 : t.batch;
      const int head_kv = tile_kv_head<Cfg>(p, t);
      trace_event<Cfg>(kTraceLoad, kEvLoadTile, t.m_block, index);
      // With the split tail the tile's first block is told by a flag (a predicate) rather than
      // by n_end, one register fewer: the clamp to a piece had made the 24-register loop spill.
      bool q_pending = true;
      for (int n = range.n_end - 1; n >= range.n_begin; --n) {
        int k_row = s.k_row0 + n * Cfg::kBlockN, kv_batch = batch;
        if (kReadsPages && p.block_table != nullptr) place_paged_block<Cfg::kBlockN>(p, batch, n, k_row, kv_batch);
        trace_event<Cfg>(kTraceLoad, kEvKEmptyWait, kv.stage, n);
        mbarrier_wait(bars.k_empty(kv.stage), kv.phase ^ 1);
        if constexpr (Cfg::kClusterPairs) {
          load_half_block(tiles.k_column(kv.stage, 0), &p.tma_k, bars.k_full(kv.stage), k_row, head_kv, batch);
        } else {
          load_tile<Cfg::kBlockN>(tiles.k_column(kv.stage, 0), Cfg::kKVColumnBytes, &p.tma_k, bars.k_full(kv.stage),
                                  k_row, head_kv, kv_batch);
        }
        trace_event<Cfg>(kTraceLoad, kEvKLoad, kv.stage, n);
        if (Cfg::kSplitTail ? q_pending : n == range.n_end - 1) {
          q_pending = false;
          // Q waits for the previous tile's last S = Q K^T; the first K block is on its way meanwhile.
          trace_event<Cfg>(kTraceLoad, kEvQEmptyWait, t.m_block);
          mbarrier_wait(bars.q_empty(), (phases & 1) ^ 1);
          phases ^= 1;
          if constexpr (Cfg::kPackGqa) {
            load_packed_q(s.q_row0 + t.m_block * tile_query_rows<Cfg>(p), t.head, batch);
          } else {
            load_tile<Cfg::kBlockM>(tiles.q_column(0), Cfg::kQColumnBytes, &p.tma_q, bars.q_full(),
                                    s.q_row0 + t.m_block * Cfg::kBlockM, t.head, batch);
          }
          trace_event<Cfg>(kTraceLoad, kEvQLoad, t.m_block);
        }
        trace_event<Cfg>(kTraceLoad, kEvVEmptyWait, kv.stage, n);
        mbarrier_wait(bars.v_empty(kv.stage), kv.phase ^ 1);
        const int valid = s.len_k - n * Cfg::kBlockN;
        uint32_t v_bar = bars.v_full(kv.stage);
        if (kZeroesKvTail && p.zero_kv_tail && valid < Cfg::kBlockN) {
          // Partial last block: warp 2 zeroes its rows past the length (see the top of the file).
          mbarrier_wait(bars.zero_job() + 8, ((phases >> 1) & 1) ^ 1);
          phases ^= 2;
          __stcg(zero_job_entry(p), (kv.stage << 16) | valid);
          v_bar = bars.zero_job();
        }
        if constexpr (Cfg::kClusterPairs) {
          load_half_block(tiles.v_column(kv.stage, 0), &p.tma_v, v_bar, k_row, head_kv, batch);
        } else {
          load_tile<Cfg::kBlockN>(tiles.v_column(kv.stage, 0), Cfg::kKVColumnBytes, &p.tma_v, v_bar, k_row, head_kv,
                                  kv_batch);
        }
        trace_event<Cfg>(kTraceLoad, kEvVLoad, kv.stage, n);
        kv.advance();
      }
    };
    // A static walk's tile of wave `wave`, with the next wave's Q prefetched before or after its
    // loads (Cfg::kPrefetchNextQ).
    auto load_tile_of_wave = [&](int index, int wave, int n_hi) {
      if (prefetches_before_loads(wave)) prefetch_next_q(wave);
      load_tiles_of(index, 0, n_hi);
      if (prefetches_after_loads(wave)) prefetch_next_q(wave);
    };
    if constexpr (Cfg::kDynamicSchedule) {
      TileRing ring;
      for (int index = ring.receive(bars.tile_mailbox(), tile_mailbox_entry(p), true); index < p.num_tiles;
           index = ring.receive(bars.tile_mailbox(), tile_mailbox_entry(p), true)) {
        load_tiles_of(index, 0, 0);
      }
    } else if constexpr (Cfg::kClusterPairs) {
      for (int wave = 0;; ++wave) {
        const int index = pair_tile(wave);
        if (index >= p.num_tiles) break;
        load_tile_of_wave(index, wave, 0);
      }
      // The peer's consumers release this CTA's stages too: wait until every stage's last use has
      // been released by both CTAs, so no remote arrival reaches this CTA after it has exited.
      for (int i = 0; i < Cfg::kStages; ++i) {
        mbarrier_wait(bars.k_empty(kv.stage), kv.phase ^ 1);
        mbarrier_wait(bars.v_empty(kv.stage), kv.phase ^ 1);
        kv.advance();
      }
    } else {
      if constexpr (Cfg::kSplitTail) {
        // The tail kernel: this CTA's pieces of the tail, one a step.
        for (int step = 0;; ++step) {
          const int u = nth_tail_unit(p, step);
          if (u < 0) break;
          const TailPiece piece = tail_piece_at(p, u, tail_unit(p, cta_index_reread() + 1, grid_size_reread()));
          load_tiles_of(piece.index, piece.n_lo, piece.n_hi);
        }
      } else {
        for (int wave = 0; wave * grid_size_reread() < p.num_tiles; ++wave) {
          const int index = snake_tile_reread(wave);
          if (index < p.num_tiles) load_tile_of_wave(index, wave, kWholeTile);
        }
      }
    }
    if (kZeroesKvTail && p.zero_kv_tail) {
      // Ends the zeroing warp once it has finished the last job.
      mbarrier_wait(bars.zero_job() + 8, ((phases >> 1) & 1) ^ 1);
      __stcg(zero_job_entry(p), -1);
      mbarrier_arrive(bars.zero_job());
    }
  }

  // Warp 2 of the producer warpgroup when p.zero_kv_tail: zeroes V rows [valid, kBlockN) of the
  // stage each job names, then completes the stage's full barrier for the consumers.
  __device__ void zero_unused_rows() const {
    const int lane = threadIdx.x % 32;
    for (uint32_t phase = 0;; phase ^= 1) {
      mbarrier_wait(bars.zero_job(), phase);
      int job;
      asm volatile("ld.global.cg.b32 %0, [%1];" : "=r"(job) : "l"(zero_job_entry(p)) : "memory");
      if (job < 0) return;
      const int stage = job >> 16, valid = job & 0xffff;
      // Rows [valid, kBlockN) of a column are one contiguous byte range (128 bytes a row).
      const int chunks = (Cfg::kBlockN - valid) * (kLineBytes / 16);
#pragma unroll 1
      for (int c = 0; c < Cfg::kColumns; ++c) {
        const uint32_t first = tiles.v_column(stage, c) + valid * kLineBytes;
#pragma unroll 1
        for (int i = lane; i < chunks; i += 32) {
          asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(first + 16 * i), "r"(0) : "memory");
        }
      }
      // The zeros must be visible to wgmma (async proxy) once the consumers see the stage full.
      fence_proxy_async_smem();
      __syncwarp();
      if (lane == 0) {
        mbarrier_arrive(bars.v_full(stage));
        mbarrier_arrive(bars.zero_job() + 8);
      }
    }
  }
};

}  // namespace sm90
}  // namespace flashattn
