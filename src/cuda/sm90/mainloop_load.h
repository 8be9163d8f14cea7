// The producer: one thread walks the tile schedule and issues every TMA load. Q once per tile,
// then K and V of each key block into the next free stage of the ring, in the order the
// consumers visit the blocks (last block first, so the masked blocks come first).
#pragma once

#include "cuda/sm90/block_range.h"
#include "cuda/sm90/pack_gqa.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/tile_scheduler.h"

namespace flashattn {
namespace sm90 {

template <class Cfg>
struct MainloopLoad {
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

  // GQA packing: the G heads of KV head `head_kv`, query rows from `row` on, through the 5-D map
  // (dim, head in group, row, kv head, batch) with boxes (64, G, kBlockM / G, 1, 1).
  __device__ __forceinline__ void load_packed_q(int row, int head_kv, int batch) const {
    mbarrier_arrive_expect_tx(bars.q_full(), kBlockM * kLineBytes * Cfg::kColumns);
#pragma unroll
    for (int c = 0; c < Cfg::kColumns; ++c) {
      tma_load_5d(tiles.q_column(c), &p.tma_q, bars.q_full(), c * kColumnElems, 0, row, head_kv, batch);
    }
  }

  // The producer runs on 24 registers: the loop keeps only what the loads need live.
  __device__ void run() const {
    const bool varlen = p.cu_seqlens_q != nullptr;
    prefetch_tensor_map(&p.tma_q);
    prefetch_tensor_map(&p.tma_k);
    prefetch_tensor_map(&p.tma_v);
    PipelineState<Cfg::kStages> kv;
    uint32_t q_phase = 0;
    auto load_tiles_of = [&](int index) {
      const TileCoord t = tile_coord_of<Cfg>(p, index);
      const SequenceInfo s = sequence_info(p, t.batch);
      if (t.m_block * tile_query_rows<Cfg>(p) >= s.len_q) return;
      const BlockRange<Cfg::kBlockN> range = tile_key_block_range<Cfg>(p, s, t.m_block);
      if (range.empty()) return;
      const int batch = varlen ? 0 : t.batch;
      const int head_kv = tile_kv_head<Cfg>(p, t);
      for (int n = range.n_end - 1; n >= range.n_begin; --n) {
        const int k_row = s.k_row0 + n * Cfg::kBlockN;
        mbarrier_wait(bars.k_empty(kv.stage), kv.phase ^ 1);
        load_tile<Cfg::kBlockN>(tiles.k_column(kv.stage, 0), Cfg::kKVColumnBytes, &p.tma_k, bars.k_full(kv.stage),
                                k_row, head_kv, batch);
        if (n == range.n_end - 1) {
          // Q waits for the previous tile's last S = Q K^T; the first K block is on its way meanwhile.
          mbarrier_wait(bars.q_empty(), q_phase ^ 1);
          q_phase ^= 1;
          if constexpr (Cfg::kPackGqa) {
            load_packed_q(s.q_row0 + t.m_block * tile_query_rows<Cfg>(p), t.head, batch);
          } else {
            load_tile<kBlockM>(tiles.q_column(0), Cfg::kQColumnBytes, &p.tma_q, bars.q_full(),
                               s.q_row0 + t.m_block * kBlockM, t.head, batch);
          }
        }
        mbarrier_wait(bars.v_empty(kv.stage), kv.phase ^ 1);
        load_tile<Cfg::kBlockN>(tiles.v_column(kv.stage, 0), Cfg::kKVColumnBytes, &p.tma_v, bars.v_full(kv.stage),
                                k_row, head_kv, batch);
        kv.advance();
      }
    };
    if constexpr (Cfg::kDynamicSchedule) {
      TileRing ring;
      for (int index = ring.receive(bars.tile_mailbox(), tile_mailbox_entry(p), true); index < p.num_tiles;
           index = ring.receive(bars.tile_mailbox(), tile_mailbox_entry(p), true)) {
        load_tiles_of(index);
      }
    } else {
      for (int wave = 0, first = 0; first < p.num_tiles; ++wave, first += gridDim.x) {
        const int index = snake_tile(wave, first);
        if (index < p.num_tiles) load_tiles_of(index);
      }
    }
  }
};

}  // namespace sm90
}  // namespace flashattn
