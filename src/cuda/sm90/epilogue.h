// Writes a consumer warpgroup's 64 rows of O and their logsumexp.
// Staged (Cfg::kStagedOutput, head dims up to 128): O goes into the warpgroup's rows of the output
// tile in shared memory, in the swizzled layout TMA uses; fixed length then leaves with one TMA
// store per 64-column box (the TMA unit clips rows past the sequence), variable length with
// predicated 16-byte stores (a box would spill into the next sequence); so does seqused_q (rows
// past the used length must stay untouched: KernelParams::clip_rows). The store is not waited
// for: the next tile's epilogue waits for it to have read the tile before overwriting it.
// Via Q (Cfg::kOutputInQ, larger head dims, no room for the tile): the same through the
// warpgroup's rows of the Q tile, which is released after the store has read them.
// Direct (forced through KernelConfig's Output_): each thread stores its pairs of O.
// GQA packing (Cfg::kPackGqa, pack_gqa.h): tile row r is query row r >> log2 G of head
// kv * G + (r & (G - 1)); lse and the predicated paths address each row that way, and the TMA
// store goes through the 5-D output map with boxes (64, G, 64 / G, 1, 1) per warpgroup.
#pragma once

#include <cmath>

#include "cuda/sm90/block_range.h"
#include "cuda/sm90/fragment.h"
#include "cuda/sm90/pack_gqa.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/tile_scheduler.h"

namespace flashattn {
namespace sm90 {

template <class Cfg>
struct Epilogue {
  using Element = typename Cfg::Element;
  static constexpr int kOAccum = Cfg::kHeadDim / 2;
  static constexpr int kChunksPerRow = Cfg::kHeadDim / 8;  // 16-byte chunks

  const KernelParams& p;
  SharedTiles<Cfg> tiles;
  SharedBarriers<Cfg> bars;
  int wg, thread;

  __device__ __forceinline__ int64_t out_offset(const SequenceInfo& seq, const TileCoord& t, int row) const {
    return t.batch * p.out_batch_stride + int64_t(seq.q_row0 + row) * p.out_row_stride + t.head * p.out_head_stride;
  }
  // Query row `row` of query head `head` (GQA packing: the head varies with the tile row).
  __device__ __forceinline__ int64_t out_offset_at(const SequenceInfo& seq, const TileCoord& t, int row,
                                                   int head) const {
    return t.batch * p.out_batch_stride + int64_t(seq.q_row0 + row) * p.out_row_stride + head * p.out_head_stride;
  }

  __device__ __forceinline__ void store_lse(const SequenceInfo& seq, const TileCoord& t, const float (&lse)[2]) const {
    const FragmentPosition pos = FragmentPosition::of_thread(thread);
    if (p.lse == nullptr || pos.col0 != 0) return;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if constexpr (Cfg::kPackGqa) {
        const int r = wg * kRowsPerConsumer + pos.row0 + 8 * h;
        const int row = tile_row_query<Cfg>(p, t, r), head = tile_row_head<Cfg>(p, t, r);
        if (row < seq.len_q) {
          p.lse[t.batch * p.lse_batch_stride + head * p.lse_head_stride + int64_t(seq.q_row0 + row) * p.lse_row_stride] =
              lse[h];
        }
      } else {
        const int row = t.m_block * Cfg::kBlockM + wg * kRowsPerConsumer + pos.row0 + 8 * h;
        if (row < seq.len_q) {
          p.lse[t.batch * p.lse_batch_stride + t.head * p.lse_head_stride + int64_t(seq.q_row0 + row) * p.lse_row_stride] =
              lse[h];
        }
      }
    }
  }

  // Address of the 16-byte chunk `chunk` (of kChunksPerRow) of row `row` of the output tile.
  __device__ __forceinline__ uint32_t staged_chunk(int row, int chunk) const {
    const int column = chunk / 8, in_line = chunk % 8;
    const uint32_t base = Cfg::kOutputInQ ? tiles.q_column(column) : tiles.o_column(column);
    return base + row * kLineBytes + ((in_line ^ (row % 8)) * 16);
  }
  __device__ __forceinline__ uint32_t staged_column(int c) const {
    return Cfg::kOutputInQ ? tiles.q_column(c) : tiles.o_column(c);
  }
  // Output staged in Q: the warpgroup's 4 warps release Q once its rows have been read out.
  __device__ __forceinline__ void release_q() const {
    if constexpr (Cfg::kOutputInQ) {
      if (thread == 0) mbarrier_arrive_count(bars.q_empty(), kWarpgroupThreads / 32);
    }
  }

  __device__ void store(const float (&o)[kOAccum], const float (&lse)[2], const SequenceInfo& seq,
                        const TileCoord& t) const {
    store_lse(seq, t, lse);
    if constexpr (Cfg::kStagedOutput || Cfg::kOutputInQ) {
      store_staged(o, seq, t);
    } else {
      store_direct(o, seq, t);
    }
  }

  __device__ void store_staged(const float (&o)[kOAccum], const SequenceInfo& seq, const TileCoord& t) const {
    const FragmentPosition pos = FragmentPosition::of_thread(thread);
    const int warpgroup_row0 = wg * kRowsPerConsumer;
    if constexpr (!Cfg::kOutputInQ) {
      // The previous tile's TMA store must have read the output tile. (Staged in Q, the rows are
      // this warpgroup's own and its wgmmas reading them have all retired.)
      if (thread == 0) bulk_wait_read_all();
      named_barrier_sync(Cfg::kEpilogueBarrier0 + wg, kWarpgroupThreads);
    }
#pragma unroll
    for (int i = 0; i < kOAccum / 4; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warpgroup_row0 + pos.row0 + 8 * h;
        const uint32_t addr = staged_chunk(row, i) + pos.col0 * 2;
        const uint32_t pair = pack_pair<Element>(o[4 * i + 2 * h], o[4 * i + 2 * h + 1]);
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(pair) : "memory");
      }
    }
    // The TMA unit reads what ordinary stores wrote: fence before the barrier.
    fence_proxy_async_smem();
    named_barrier_sync(Cfg::kEpilogueBarrier0 + wg, kWarpgroupThreads);
    const int tile_row = t.m_block * Cfg::kBlockM + warpgroup_row0;
    if (!p.clip_rows) {
      if (thread == 0) {
#pragma unroll
        for (int c = 0; c < Cfg::kColumns; ++c) {
          if constexpr (Cfg::kPackGqa) {
            // The warpgroup's 64 rows: 64 / G query rows of all G heads (G <= 64).
            tma_store_5d(&p.tma_o, staged_column(c) + warpgroup_row0 * kLineBytes, c * kColumnElems, 0,
                         tile_row_query<Cfg>(p, t, warpgroup_row0), t.head, t.batch);
          } else {
            tma_store_4d(&p.tma_o, staged_column(c) + warpgroup_row0 * kLineBytes, c * kColumnElems, tile_row, t.head,
                         t.batch);
          }
        }
        bulk_commit_group();
        if constexpr (Cfg::kOutputInQ) bulk_wait_read_all();
      }
      release_q();
      return;
    }
    char* out = static_cast<char*>(p.out);
    for (int idx = thread; idx < kRowsPerConsumer * kChunksPerRow; idx += kWarpgroupThreads) {
      const int r = idx / kChunksPerRow, chunk = idx % kChunksPerRow;
      if constexpr (Cfg::kPackGqa) {
        // Query rows grow with r, so the first row past the sequence ends the loop here too.
        const int row = tile_row_query<Cfg>(p, t, warpgroup_row0 + r);
        if (row >= seq.len_q) break;
        const int64_t offset = out_offset_at(seq, t, row, tile_row_head<Cfg>(p, t, warpgroup_row0 + r));
        uint4 v;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(staged_chunk(warpgroup_row0 + r, chunk)));
        *reinterpret_cast<uint4*>(out + (offset + chunk * 8) * sizeof(Element)) = v;
        continue;
      }
      if (tile_row + r >= seq.len_q) break;
      uint4 v;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "r"(staged_chunk(warpgroup_row0 + r, chunk)));
      *reinterpret_cast<uint4*>(out + (out_offset(seq, t, tile_row + r) + chunk * 8) * sizeof(Element)) = v;
    }
    if constexpr (Cfg::kOutputInQ) {
      // The next Q arrives through TMA over what these ordinary loads read.
      fence_proxy_async_smem();
      named_barrier_sync(Cfg::kEpilogueBarrier0 + wg, kWarpgroupThreads);
      release_q();
    }
  }

  __device__ void store_direct(const float (&o)[kOAccum], const SequenceInfo& seq, const TileCoord& t) const {
    const FragmentPosition pos = FragmentPosition::of_thread(thread);
    char* out = static_cast<char*>(p.out);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      char* row_out;
      if constexpr (Cfg::kPackGqa) {
        const int r = wg * kRowsPerConsumer + pos.row0 + 8 * h;
        const int row = tile_row_query<Cfg>(p, t, r);
        if (row >= seq.len_q) continue;
        row_out = out + out_offset_at(seq, t, row, tile_row_head<Cfg>(p, t, r)) * sizeof(Element);
      } else {
        const int row = t.m_block * Cfg::kBlockM + wg * kRowsPerConsumer + pos.row0 + 8 * h;
        if (row >= seq.len_q) continue;
        row_out = out + out_offset(seq, t, row) * sizeof(Element);
      }
#pragma unroll
      for (int i = 0; i < kOAccum / 4; ++i) {
        *reinterpret_cast<uint32_t*>(row_out + (8 * i + pos.col0) * sizeof(Element)) =
            pack_pair<Element>(o[4 * i + 2 * h], o[4 * i + 2 * h + 1]);
      }
    }
  }

  // A tile whose rows see no key at all: O = 0 and lse = -inf, straight from registers.
  __device__ void store_empty(const SequenceInfo& seq, const TileCoord& t) const {
    const FragmentPosition pos = FragmentPosition::of_thread(thread);
    char* out = static_cast<char*>(p.out);
    float lse[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      lse[h] = -INFINITY;
      if constexpr (Cfg::kPackGqa) {
        const int r = wg * kRowsPerConsumer + pos.row0 + 8 * h;
        const int row = tile_row_query<Cfg>(p, t, r);
        if (row >= seq.len_q) continue;
        const int64_t offset = out_offset_at(seq, t, row, tile_row_head<Cfg>(p, t, r));
        for (int i = 0; i < kOAccum / 4; ++i) {
          *reinterpret_cast<uint32_t*>(out + (offset + 8 * i + pos.col0) * sizeof(Element)) = 0u;
        }
      } else {
        const int row = t.m_block * Cfg::kBlockM + wg * kRowsPerConsumer + pos.row0 + 8 * h;
        if (row >= seq.len_q) continue;
        for (int i = 0; i < kOAccum / 4; ++i) {
          *reinterpret_cast<uint32_t*>(out + (out_offset(seq, t, row) + 8 * i + pos.col0) * sizeof(Element)) = 0u;
        }
      }
    }
    store_lse(seq, t, lse);
  }
};

}  // namespace sm90
}  // namespace flashattn
