// The producer: one thread walks the tile schedule and issues every TMA load. Q once per tile,
// then K and V of each key block into the next free stage of the ring, in the order the
// consumers visit the blocks (last block first, so the masked blocks come first).
#pragma once

#include "cuda/sm90/block_range.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/tile_scheduler.h"

namespace flashattn {
namespace sm90 {

template <class Cfg>
struct MainloopLoad {
  const KernelParams& p;
  SharedTiles<Cfg> tiles;
  SharedBarriers<Cfg> bars;

  // Rows past the tensor's end arrive zero-filled from the TMA unit.
  __device__ __forceinline__ void load_q(const SequenceInfo& s, const TileCoord& t, bool varlen) const {
    const int row = t.m_block * kBlockM;
    mbarrier_arrive_expect_tx(bars.q_full(), Cfg::kQBytes);
#pragma unroll
    for (int c = 0; c < Cfg::kColumns; ++c) {
      if (varlen) {
        tma_load_3d(tiles.q_column(c), &p.tma_q, bars.q_full(), c * kColumnElems, s.q_row0 + row, t.head);
      } else {
        tma_load_4d(tiles.q_column(c), &p.tma_q, bars.q_full(), c * kColumnElems, row, t.head, t.batch);
      }
    }
  }

  __device__ __forceinline__ void load_kv(const CUtensorMap* map, bool is_v, int stage, uint32_t bar,
                                          const SequenceInfo& s, const TileCoord& t, int n_block,
                                          bool varlen) const {
    const int row = n_block * Cfg::kBlockN;
    const int head_kv = t.head / p.heads_per_kv;
    mbarrier_arrive_expect_tx(bar, Cfg::kKVStageBytes);
#pragma unroll
    for (int c = 0; c < Cfg::kColumns; ++c) {
      const uint32_t dst = is_v ? tiles.v_column(stage, c) : tiles.k_column(stage, c);
      if (varlen) {
        tma_load_3d(dst, map, bar, c * kColumnElems, s.k_row0 + row, head_kv);
      } else {
        tma_load_4d(dst, map, bar, c * kColumnElems, row, head_kv, t.batch);
      }
    }
  }

  __device__ void run() const {
    const bool varlen = p.cu_seqlens_q != nullptr;
    prefetch_tensor_map(&p.tma_q);
    prefetch_tensor_map(&p.tma_k);
    prefetch_tensor_map(&p.tma_v);
    PipelineState<Cfg::kStages> kv;
    uint32_t q_phase = 0;
    for (int index = blockIdx.x; index < p.num_tiles; index += gridDim.x) {
      const TileCoord t = tile_coord(p, index);
      const SequenceInfo s = sequence_info(p, t.batch);
      if (t.m_block * kBlockM >= s.len_q) continue;
      const BlockRange<Cfg::kBlockN> range = key_block_range<Cfg::kBlockN>(p, s, t.m_block);
      if (range.empty()) continue;
      for (int n = range.n_end - 1; n >= range.n_begin; --n) {
        mbarrier_wait(bars.k_empty(kv.stage), kv.phase ^ 1);
        load_kv(&p.tma_k, false, kv.stage, bars.k_full(kv.stage), s, t, n, varlen);
        if (n == range.n_end - 1) {
          // The consumers stage the previous tile's output in the Q tile, so Q waits for that
          // epilogue; the first K block is already on its way meanwhile.
          mbarrier_wait(bars.q_empty(), q_phase ^ 1);
          q_phase ^= 1;
          load_q(s, t, varlen);
        }
        mbarrier_wait(bars.v_empty(kv.stage), kv.phase ^ 1);
        load_kv(&p.tma_v, true, kv.stage, bars.v_full(kv.stage), s, t, n, varlen);
        kv.advance();
      }
    }
  }
};

}  // namespace sm90
}  // namespace flashattn
