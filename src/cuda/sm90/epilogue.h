// Writes a consumer warpgroup's 64 rows of O and their logsumexp.
// Staged (Cfg::kStagedOutput, head dims up to 128): O goes into the warpgroup's rows of the output
// tile in shared memory, in the swizzled layout TMA uses; fixed length then leaves with one TMA
// store per 64-column box (the TMA unit clips rows past the sequence), variable length with
// predicated 16-byte stores (a box would spill into the next sequence); so does seqused_q (rows
// past the used length must stay untouched: KernelParams::clip_rows). The store is not waited
// for: the next tile's epilogue waits for it to have read the tile before overwriting it.
// Via K / V (Cfg::kOutputInKV, head dims 192 / 256): the same through the K stage (warpgroup 0)
// or the V stage (warpgroup 1) of the tile's last key block, once the other warpgroup has
// finished reading it (mainloop_mma.h release_k / release_last_v); the stage is released after
// the store has read it. Via Q (Cfg::kOutputInQ, where that does not apply): the same through the
// warpgroup's rows of the Q tile, which is released after the store has read them.
// The LSE (kLseByTma, where the launch sets KernelParams::lse_by_tma): written into the tile's
// LSE rows in shared memory beside O and stored by one more TMA store of 64 rows a warpgroup
// (the map clips rows past the sequence); otherwise each row's thread stores it (store_lse).
// Direct (forced through KernelConfig's Output_): each thread stores its pairs of O.
// GQA packing (Cfg::kPackGqa, pack_gqa.h): tile row r is query row r / G of head kv * G + r % G
// (rows past pack_rows * G hold none and store nothing); lse and the predicated paths address each
// row that way, and the TMA store (G a power of two) goes through the 5-D output map with boxes
// (64, G, 64 / G, 1, 1) per warpgroup.
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
  // Both: a derived config that turns kLseThroughTma off keeps its base's kLseTile (and layout).
  static constexpr bool kLseByTma = Cfg::kLseThroughTma && Cfg::kLseTile;

  const KernelParams& p;
  SharedTiles<Cfg> tiles;
  SharedBarriers<Cfg> bars;
  int wg, thread;

  __device__ __forceinline__ int64_t out_offset(const SequenceInfo& seq, const TileCoord& t, int row) const {
    return out_offset_of(p, seq, t, row, t.head);
  }
  // Query row `row` of query head `head` (GQA packing: the head varies with the tile row).
  __device__ __forceinline__ int64_t out_offset_at(const SequenceInfo& seq, const TileCoord& t, int row,
                                                   int head) const {
    return out_offset_of(p, seq, t, row, head);
  }

  __device__ __forceinline__ void store_lse(const SequenceInfo& seq, const TileCoord& t, const float (&lse)[2]) const {
    const FragmentPosition pos = FragmentPosition::of_thread(thread);
    if (p.lse == nullptr || pos.col0 != 0) return;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if constexpr (Cfg::kPackGqa) {
        const int r = wg * kRowsPerConsumer + pos.row0 + 8 * h;
        const int row = tile_row_query<Cfg>(p, t, r), head = tile_row_head<Cfg>(p, t, r);
        if (tile_row_holds_query<Cfg>(p, r) && row < seq.len_q) p.lse[lse_offset_of(p, seq, t, row, head)] = lse[h];
      } else {
        const int row = t.m_block * Cfg::kBlockM + wg * kRowsPerConsumer + pos.row0 + 8 * h;
        if (row < seq.len_q) p.lse[lse_offset_of(p, seq, t, row, t.head)] = lse[h];
      }
    }
  }

  // Column c of the buffer O is staged in: the output tile, Q, or (kOutputInKV) this warpgroup's
  // K or V stage `kv_stage`, whose rows start at 0 rather than at the warpgroup's first row.
  __device__ __forceinline__ uint32_t staged_column(int c, int kv_stage) const {
    if constexpr (Cfg::kOutputInKV) return wg == 0 ? tiles.k_column(kv_stage, c) : tiles.v_column(kv_stage, c);
    return Cfg::kOutputInQ ? tiles.q_column(c) : tiles.o_column(c);
  }
  // The buffer row of the warpgroup's first row.
  __device__ __forceinline__ int staged_row0() const { return Cfg::kOutputInKV ? 0 : wg * kRowsPerConsumer; }
  // Address of the 16-byte chunk `chunk` (of kChunksPerRow) of buffer row `row`.
  __device__ __forceinline__ uint32_t staged_chunk(int row, int chunk, int kv_stage) const {
    return swizzled_chunk(staged_column(chunk / 8, kv_stage), row, chunk % 8);
  }
  // Output staged in Q or in a K / V stage: the warpgroup's 4 warps release it once its rows
  // have been read out.
  __device__ __forceinline__ void release_staging(int kv_stage) const {
    if constexpr (Cfg::kOutputInQ) {
      if (thread == 0) mbarrier_arrive_count(bars.q_empty(), kWarpgroupThreads / 32);
    } else if constexpr (Cfg::kOutputInKV) {
      if (thread == 0) {
        mbarrier_arrive_count(wg == 0 ? bars.k_empty(kv_stage) : bars.v_empty(kv_stage), kWarpgroupThreads / 32);
      }
    }
  }

  // A piece of the split tail that another CTA's merge stores (split_tail.h): with O staged in
  // K / V the stage is handed over and released as store_staged would, unwritten.
  __device__ void pass_over_store(int kv_stage) const {
    if constexpr (Cfg::kOutputInKV) {
      named_barrier_sync(Cfg::kStageHandoverBarrier0 + wg, 2 * kWarpgroupThreads);
      release_staging(kv_stage);
    } else if constexpr (Cfg::kOutputInQ) {
      // A piece of a split tile (split_keys.h) with O staged in Q: the warpgroup's rows of Q are
      // released as store_staged would, once every warp is past its last use of them.
      named_barrier_sync(Cfg::kEpilogueBarrier0 + wg, kWarpgroupThreads);
      release_staging(kv_stage);
    }
  }

  // kv_stage: the stage of the tile's last key block (read with Cfg::kOutputInKV only).
  __device__ void store(const float (&o)[kOAccum], const float (&lse)[2], const SequenceInfo& seq,
                        const TileCoord& t, int kv_stage = 0) const {
    if (!kLseByTma || !p.lse_by_tma) store_lse(seq, t, lse);
    if constexpr (Cfg::kStagedOutput || Cfg::kOutputInQ || Cfg::kOutputInKV) {
      store_staged(o, lse, seq, t, kv_stage);
    } else {
      store_direct(o, seq, t);
    }
  }

  // The traced kernels' steps inside the epilogue (Cfg::kTrace; by the warpgroup's thread 0).
  __device__ __forceinline__ void trace(TraceEvent event) const { consumer_trace_event<Cfg>(wg, thread, event); }

  // O converted to 16 bits and written into the warpgroup's rows of the staging buffer.
  __device__ __forceinline__ void stage_rows(const float (&o)[kOAccum], const FragmentPosition& pos, int row0,
                                             int kv_stage) const {
    if constexpr (Cfg::kStmatrixEpilogue) {
      // Matrices (row half 0, group i), (1, i), (0, i + 1), (1, i + 1) per instruction; lane l
      // addresses row l % 8 of matrix l / 8, and each matrix row is one 16-byte chunk.
      const int lane = thread % 32, matrix = lane / 8;
      const int row = row0 + (thread / 32) * 16 + 8 * (matrix % 2) + lane % 8;
#pragma unroll
      for (int i = 0; i < kOAccum / 4; i += 2) {
        stmatrix_x4(staged_chunk(row, i + matrix / 2, kv_stage), pack_pair<Element>(o[4 * i], o[4 * i + 1]),
                    pack_pair<Element>(o[4 * i + 2], o[4 * i + 3]), pack_pair<Element>(o[4 * i + 4], o[4 * i + 5]),
                    pack_pair<Element>(o[4 * i + 6], o[4 * i + 7]));
      }
    } else {
#pragma unroll
      for (int i = 0; i < kOAccum / 4; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row0 + pos.row0 + 8 * h;
          const uint32_t addr = staged_chunk(row, i, kv_stage) + pos.col0 * 2;
          const uint32_t pair = pack_pair<Element>(o[4 * i + 2 * h], o[4 * i + 2 * h + 1]);
          asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(pair) : "memory");
        }
      }
    }
  }

  __device__ void store_staged(const float (&o)[kOAccum], const float (&lse)[2], const SequenceInfo& seq,
                               const TileCoord& t, int kv_stage) const {
    const FragmentPosition pos = FragmentPosition::of_thread(thread);
    const int warpgroup_row0 = wg * kRowsPerConsumer;
    const int row0 = staged_row0();
    if constexpr (Cfg::kStagedOutput) {
      // The previous tile's TMA store must have read the output tile. (Staged in Q, the rows are
      // this warpgroup's own and its wgmmas reading them have all retired.)
      if (thread == 0) bulk_wait_read_all();
      named_barrier_sync(Cfg::kEpilogueBarrier0 + wg, kWarpgroupThreads);
      trace(kEvEpilogueSynced);
      if constexpr (kLseByTma) {
        // The previous store has read these rows too (one bulk group with O's).
        if (p.lse_by_tma && pos.col0 == 0) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            asm volatile("st.shared.f32 [%0], %1;" ::"r"(tiles.lse_row(warpgroup_row0 + pos.row0 + 8 * h)),
                         "f"(lse[h])
                         : "memory");
          }
        }
      }
    } else if constexpr (Cfg::kOutputInKV) {
      // The other warpgroup's wgmmas reading the stage have retired (its arrival, mainloop_mma.h);
      // this warpgroup's own have been waited for.
      named_barrier_sync(Cfg::kStageHandoverBarrier0 + wg, 2 * kWarpgroupThreads);
    }
    if (!harness_leaves_out(Cfg::kTimingWithoutStaging, p)) stage_rows(o, pos, row0, kv_stage);
    trace(kEvEpilogueStaged);
    // The TMA unit reads what ordinary stores wrote: fence before the barrier.
    fence_proxy_async_smem();
    named_barrier_sync(Cfg::kEpilogueBarrier0 + wg, kWarpgroupThreads);
    trace(kEvEpilogueFenced);
    const int tile_row = t.m_block * Cfg::kBlockM + warpgroup_row0;
    if (!p.clip_rows) {
      if (thread == 0 && !harness_leaves_out(Cfg::kTimingWithoutSend, p)) {
#pragma unroll
        for (int c = 0; c < Cfg::kColumns; ++c) {
          if constexpr (Cfg::kPackGqa) {
            // The warpgroup's 64 rows: 64 / G query rows of all G heads (G a power of two up to 64:
            // other groups clip rows, the launch's KernelParams::clip_rows).
            tma_store_5d(&p.tma_o, staged_column(c, kv_stage) + row0 * kLineBytes, c * kColumnElems, 0,
                         tile_row_query<Cfg>(p, t, warpgroup_row0), t.head, t.batch);
          } else {
            tma_store_4d(&p.tma_o, staged_column(c, kv_stage) + row0 * kLineBytes, c * kColumnElems, tile_row,
                         t.head, t.batch);
          }
        }
        if constexpr (kLseByTma) {
          if (p.lse_by_tma) tma_store_3d(&p.tma_lse, tiles.lse_row(warpgroup_row0), tile_row, t.head, t.batch);
        }
        bulk_commit_group();
        if constexpr (Cfg::kOutputInQ || Cfg::kOutputInKV) bulk_wait_read_all();
      }
      release_staging(kv_stage);
      return;
    }
    char* out = static_cast<char*>(p.out);
    for (int idx = thread; idx < kRowsPerConsumer * kChunksPerRow; idx += kWarpgroupThreads) {
      const int r = idx / kChunksPerRow, chunk = idx % kChunksPerRow;
      if constexpr (Cfg::kNarrowHeadDim) {
        if (8 * chunk >= p.head_dim) continue;  // the columns past the problem's head dim
      }
      if constexpr (Cfg::kPackGqa) {
        // Query rows grow with r and the rows without one come last, so the first row past the
        // sequence or past the query rows ends the loop here too.
        const int row = tile_row_query<Cfg>(p, t, warpgroup_row0 + r);
        if (!tile_row_holds_query<Cfg>(p, warpgroup_row0 + r) || row >= seq.len_q) break;
        const int64_t offset = out_offset_at(seq, t, row, tile_row_head<Cfg>(p, t, warpgroup_row0 + r));
        uint4 v;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(staged_chunk(row0 + r, chunk, kv_stage)));
        *reinterpret_cast<uint4*>(out + (offset + chunk * 8) * sizeof(Element)) = v;
        continue;
      }
      if (tile_row + r >= seq.len_q) break;
      uint4 v;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "r"(staged_chunk(row0 + r, chunk, kv_stage)));
      *reinterpret_cast<uint4*>(out + (out_offset(seq, t, tile_row + r) + chunk * 8) * sizeof(Element)) = v;
    }
    if constexpr (Cfg::kOutputInQ || Cfg::kOutputInKV) {
      // The next Q (or K / V block) arrives through TMA over what these ordinary loads read.
      fence_proxy_async_smem();
      named_barrier_sync(Cfg::kEpilogueBarrier0 + wg, kWarpgroupThreads);
      release_staging(kv_stage);
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
        if (!tile_row_holds_query<Cfg>(p, r) || row >= seq.len_q) continue;
        row_out = out + out_offset_at(seq, t, row, tile_row_head<Cfg>(p, t, r)) * sizeof(Element);
      } else {
        const int row = t.m_block * Cfg::kBlockM + wg * kRowsPerConsumer + pos.row0 + 8 * h;
        if (row >= seq.len_q) continue;
        row_out = out + out_offset(seq, t, row) * sizeof(Element);
      }
#pragma unroll
      for (int i = 0; i < kOAccum / 4; ++i) {
        if constexpr (Cfg::kNarrowHeadDim) {
          if (8 * i >= p.head_dim) break;
        }
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
        if (!tile_row_holds_query<Cfg>(p, r) || row >= seq.len_q) continue;
        const int64_t offset = out_offset_at(seq, t, row, tile_row_head<Cfg>(p, t, r));
        for (int i = 0; i < kOAccum / 4; ++i) {
          if constexpr (Cfg::kNarrowHeadDim) {
            if (8 * i >= p.head_dim) break;
          }
          *reinterpret_cast<uint32_t*>(out + (offset + 8 * i + pos.col0) * sizeof(Element)) = 0u;
        }
      } else {
        const int row = t.m_block * Cfg::kBlockM + wg * kRowsPerConsumer + pos.row0 + 8 * h;
        if (row >= seq.len_q) continue;
        for (int i = 0; i < kOAccum / 4; ++i) {
          if constexpr (Cfg::kNarrowHeadDim) {
            if (8 * i >= p.head_dim) break;
          }
          *reinterpret_cast<uint32_t*>(out + (out_offset(seq, t, row) + 8 * i + pos.col0) * sizeof(Element)) = 0u;
        }
      }
    }
    store_lse(seq, t, lse);
  }
};

}  // namespace sm90
}  // namespace flashattn
