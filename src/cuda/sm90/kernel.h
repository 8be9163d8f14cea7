// The persistent forward kernel: warpgroup 0 gives its registers away and one of its threads runs
// the TMA producer; the consumer warpgroups (two, or three at hdim 64) take the registers and run
// mainloop + epilogue per tile.
#pragma once

#include <type_traits>

#include "cuda/sm90/epilogue.h"
#include "cuda/sm90/mainloop_load.h"
#include "cuda/sm90/mainloop_mma.h"
#include "cuda/sm90/pack_gqa.h"
#include "cuda/sm90/split_keys.h"
#include "cuda/sm90/split_tail.h"

namespace flashattn {
namespace sm90 {

// The consumers' tile loop with the epilogue overlapped (Cfg::kOverlapEpilogue): the next tile's
// first S = Q K^T is issued before this tile's output is stored, so the tensor cores work on it
// while the warpgroup converts and stores O. Both warpgroups reach a tile's end together (they
// share its key blocks), so in the plain loop the tensor cores waited for both epilogues at every
// tile boundary: 5-20% of a tile's time at 512-2k keys. Needs Q free before the epilogue (an
// output tile of its own, not O staged through Q) and S's registers beside O's in the epilogue.
// With MainloopMma::kLastPvWithNextScores (harness only) the last P V instead waits for the next
// tile's first S and goes out with it.
template <class Cfg>
__device__ __forceinline__ void overlapped_tiles(const KernelParams& p, const MainloopMma<Cfg>& mma,
                                                 const Epilogue<Cfg>& epilogue, PipelineState<Cfg::kStages>& kv_state,
                                                 uint32_t& q_phase) {
  struct Work {
    TileCoord t;
    SequenceInfo seq;
    BlockRange<Cfg::kBlockN> range;
    int kind;  // kNone: past its sequence's rows; kEmpty: no key visible; kScores: its first S issued
    int unit;  // a piece of the split tail (Cfg::kSplitTail): its first unit; -1: a whole tile
    // Key splits (Cfg::kSplitKeys): the tile, this piece of it and how many it has.
    int tile, piece, pieces;
  };
  constexpr int kNone = 0, kEmpty = 1, kScores = 2;
  float s[MainloopMma<Cfg>::kSAccum];
  typename MainloopMma<Cfg>::QFragments q;  // Cfg::kQStepsInRegisters
  // `unit`: the first unit of a piece of the split tail, -1 for a whole tile.
  auto classify = [&](int index, int unit) {
    Work w;
    w.tile = split_tile_of<Cfg>(p, index, w.piece);
    w.t = tile_coord_of<Cfg>(p, w.tile);
    w.seq = sequence_info(p, w.t.batch);
    w.kind = kNone;
    w.unit = -1;
    w.pieces = 1;
    if (w.t.m_block * tile_query_rows<Cfg>(p) < w.seq.len_q) {
      w.range = tile_key_block_range<Cfg>(p, w.seq, w.t.m_block);
      if constexpr (Cfg::kSplitTail) {
        if (unit >= 0) {
          const TailPiece piece = tail_piece_of_this_cta(p, unit);
          w.range.keep_within(piece.n_lo, piece.n_hi);
          if (piece.n_lo > 0 || piece.n_hi < p.tail_blocks) w.unit = unit;
        }
      }
      if constexpr (Cfg::kSplitKeys) {
        w.pieces = keep_key_piece(w.range, w.piece, p.key_splits);
        if (w.pieces == 0) return w;  // a work index past its tile's pieces: nothing to do
      }
      w.kind = w.range.empty() ? kEmpty : kScores;
    }
    return w;
  };
  Work prev;
  prev.kind = kNone;
  float o[MainloopMma<Cfg>::kOAccum];  // the previous tile's O until its epilogue; a tile's first P V overwrites it
  float lse[2];
  typename MainloopMma<Cfg>::Softmax softmax;
  // With MainloopMma::kLastPvWithNextScores the previous tile's last P V waits for the next tile's
  // first S (or for the loop's next turn): its P, V stage and accumulate flag. Pending exactly
  // when prev.kind == kScores, and O and the softmax are then still the previous tile's.
  constexpr bool kLastPvWithNextScores = MainloopMma<Cfg>::kLastPvWithNextScores;
  uint32_t last_prob[MainloopMma<Cfg>::kSAccum / 2];
  PipelineState<Cfg::kStages> last_v;
  int last_accumulate = 1;
  // The pending last P V alone, and the previous tile's O normalised (before store_previous).
  auto finish_previous_alone = [&]() {
    if constexpr (kLastPvWithNextScores) {
      if (prev.kind == kScores) {
        mma.template last_pv<Cfg::kBlockN>(last_prob, o, last_accumulate, last_v);
        softmax.finalize(o, p.score_log2, lse);
      }
    }
  };
  // The tile-start and epilogue trace calls sit under an `if constexpr (Cfg::kTrace)` of their own
  // although trace() is empty without it: their unused arguments reordered the static d64 / d128
  // kernels' PTX registers, and so ptxas's allocation (session 18).
  auto store_previous = [&]() {
    if (prev.kind == kScores) {
      if (harness_leaves_out(Cfg::kTimingWithoutStore, p)) return;
      if constexpr (Cfg::kTrace) mma.trace(kEvEpilogueStart, prev.t.m_block);
      epilogue.store(leading<MainloopMma<Cfg>::kOutAccum>(o), lse, prev.seq, prev.t);
      if constexpr (Cfg::kTrace) mma.trace(kEvEpilogueEnd, prev.t.m_block);
    } else if (prev.kind == kEmpty) {
      epilogue.store_empty(prev.seq, prev.t);
    }
  };
  TileRing ring;  // dynamic schedule
  int wave = 0;  // static schedule
  auto take_next = [&]() {
    if constexpr (Cfg::kDynamicSchedule) {
      // Read at the start of a tile, used at its end: the scheduler has published it a tile
      // earlier, and the L2 read is hidden under the tile (see plain_tiles).
      return ring.receive(mma.bars.tile_mailbox(), tile_mailbox_entry(p), false);
    } else if constexpr (Cfg::kClusterPairs) {
      ++wave;
      return min(pair_tile(wave), p.num_tiles);
    } else {
      // A CTA's first index past the last tile ends its walk (later waves lie further beyond).
      ++wave;
      if constexpr (Cfg::kSplitTail) {
        // The tail kernel: this CTA's next piece of the tail.
        return tail_tile_of_step(p, wave);
      } else {
        const int first = wave * int(gridDim.x);
        return first < p.num_tiles ? snake_tile(wave, first) : p.num_tiles;
      }
    }
  };
  // The first index (take_next's forms for wave 0; calling it with wave = -1 changed the static
  // kernels' SASS, so it stays written out).
  int index;
  if constexpr (Cfg::kDynamicSchedule) {
    index = ring.receive(mma.bars.tile_mailbox(), tile_mailbox_entry(p), false);
  } else if constexpr (Cfg::kClusterPairs) {
    index = min(pair_tile(0), p.num_tiles);
  } else if constexpr (Cfg::kSplitTail) {
    index = tail_tile_of_step(p, 0);
  } else {
    index = snake_tile(0, 0);
  }
  // Each turn opens tile `index`, stores the previous tile's output while the tile's first S runs,
  // then finishes the tile. The first S is issued and waited for under one condition: ptxas
  // serialises every wgmma of the kernel when its analysis finds a path on which an issued wgmma's
  // accumulators could be written before its wait (it does not correlate two separate tests of
  // the same flag). With kLastPvWithNextScores the previous tile's last P V goes out with the
  // first S and is waited for in the same branch, so that every path leaves only S in flight;
  // where no tile with keys follows it goes alone (last_pv).
  while (true) {
    if constexpr (Cfg::kSplitTail) {
      // The previous work a piece: merged with its tile's other pieces before anything is issued
      // (under the next S ptxas serialised every wgmma), and stored below only by the last of
      // them to arrive.
      if (prev.kind == kScores && prev.unit >= 0 &&
          !TailMerge<Cfg>{p, epilogue.wg, epilogue.thread}.merge(leading<MainloopMma<Cfg>::kOutAccum>(o), lse,
                                                                 prev.unit)) {
        prev.kind = kNone;
      }
    }
    if constexpr (Cfg::kSplitKeys) {
      // The previous work a piece of a split tile: merged as the split tail's pieces are above.
      if (prev.kind == kScores && prev.pieces > 1 &&
          !KeySplitMerge<Cfg>{p, epilogue.wg, epilogue.thread}.merge(leading<MainloopMma<Cfg>::kOutAccum>(o), lse,
                                                                     prev.seq, prev.t, prev.tile, prev.piece,
                                                                     prev.pieces)) {
        prev.kind = kNone;
      }
    }
    Work cur;
    cur.kind = kNone;
    // A piece of the split tail is found again from the step count (no state of its own).
    if (index < p.num_tiles) {
      cur = classify(index, Cfg::kSplitTail ? nth_tail_unit(p, wave) : -1);
    }
    int next;
    if (cur.kind == kScores) {
      // Written under its own test: even unused, the arguments' reads reordered the static
      // kernels' PTX registers (and ptxas's allocation).
      if constexpr (Cfg::kTrace) mma.trace(kEvTileStart, cur.t.m_block, index);
      mbarrier_wait(mma.bars.q_full(), q_phase);
      mma.trace(kEvQFull);
      q_phase ^= 1;
      if constexpr (Cfg::kSkipRowlessWarpgroups) {
        if (mma.rowless(cur.seq, cur.t)) {
          // Nothing of this warpgroup's to compute or store (the epilogue is per warpgroup); a
          // pending last P V goes alone first (its V stage precedes this tile's).
          finish_previous_alone();
          mma.pass_over_tile(cur.range, kv_state);
          store_previous();
          prev.kind = kNone;
          index = take_next();
          continue;
        }
      }
      if constexpr (Cfg::kSkipMaskedLastBlock) mma.pass_over_masked_last_block(cur.seq, cur.t, cur.range, kv_state);
      mma.load_q_fragments(q);
      if constexpr (kLastPvWithNextScores) {
        if (prev.kind == kScores) {
          mma.issue_last_pv_and_first_scores(last_prob, o, last_accumulate, last_v, s, kv_state, q);
          softmax.finalize(o, p.score_log2, lse);
        } else {
          mma.issue_first_scores(s, kv_state, q);
        }
      } else {
        mma.issue_first_scores(s, kv_state, q);
      }
      store_previous();
      next = take_next();
      softmax.reset();
      if constexpr (kLastPvWithNextScores) {
        last_accumulate = mma.template finish_tile_but_last_pv<true>(s, cur.seq, cur.t, cur.range, o, softmax,
                                                                     kv_state, q, last_prob, last_v);
      } else {
        mma.template finish_tile<true>(s, cur.seq, cur.t, cur.range, o, softmax, kv_state, q);
        softmax.finalize(o, p.score_log2, lse);
        // The normalisation's end in the harness's traces (as in plain_tiles; sessions 37-38).
        mma.trace(kEvFinalized);
      }
    } else {
      finish_previous_alone();
      store_previous();
      if (index >= p.num_tiles) break;
      next = take_next();
    }
    prev = cur;
    index = next;
  }
}

// The consumers' tile loop without an output tile of its own (O staged through Q, or through the
// last key block's K / V stage): each tile whole, its epilogue before the next tile's first
// S = Q K^T.
template <class Cfg>
__device__ __forceinline__ void plain_tiles(const KernelParams& p, const MainloopMma<Cfg>& mma,
                                            const Epilogue<Cfg>& epilogue, PipelineState<Cfg::kStages>& kv_state,
                                            uint32_t& q_phase) {
  // Key blocks [n_lo, n_hi) of the tile only, the CTA's piece `step` of the split tail (the
  // tail kernel, Cfg::kSplitTail).
  auto run_tile = [&](int index, int n_lo, int n_hi, int step) {
    int piece;  // of a split tile (Cfg::kSplitKeys): index is then a work index
    const int tile = split_tile_of<Cfg>(p, index, piece);
    const TileCoord t = tile_coord_of<Cfg>(p, tile);
    const SequenceInfo seq = sequence_info(p, t.batch);
    if (t.m_block * tile_query_rows<Cfg>(p) >= seq.len_q) return;
    BlockRange<Cfg::kBlockN> range = tile_key_block_range<Cfg>(p, seq, t.m_block);
    if constexpr (Cfg::kSplitTail) range.keep_within(n_lo, n_hi);
    int pieces = 1;
    if constexpr (Cfg::kSplitKeys) {
      pieces = keep_key_piece(range, piece, p.key_splits);
      if (pieces == 0) return;
    }
    if (range.empty()) {
      epilogue.store_empty(seq, t);
      return;
    }
    if constexpr (Cfg::kTrace) mma.trace(kEvTileStart, t.m_block, index);
    mbarrier_wait(mma.bars.q_full(), q_phase);
    mma.trace(kEvQFull);
    q_phase ^= 1;
    // The tail's timeline (harness): piece `step`'s Q landed, O final, stored.
    timeline_mark<Cfg>(kTimelinePiece0 + kTimelinePieceSlots * step, true);
    float o[MainloopMma<Cfg>::kOAccum];
    typename MainloopMma<Cfg>::Softmax softmax;
    mma.compute_tile(seq, t, range, o, softmax, kv_state);
    float lse[2];
    softmax.finalize(o, p.score_log2, lse);
    mma.trace(kEvFinalized);
    timeline_mark<Cfg>(kTimelinePiece0 + kTimelinePieceSlots * step + 1, true);
    // The stage of the tile's last key block (kv_state has moved one past it): with O staged in
    // K / V (Cfg::kOutputInKV) the epilogue stages there.
    const int last_stage = kv_state.stage == 0 ? Cfg::kStages - 1 : kv_state.stage - 1;
    if constexpr (Cfg::kSplitTail) {
      // A piece: stored by the last of its tile's pieces to arrive, merged with the others. Its
      // unit is found again from the step (one register fewer across the tile: the d256 tail
      // kernel spilled one).
      const int unit = nth_tail_unit(p, step);
      const TailPiece piece = tail_piece_of_this_cta(p, unit);
      const bool whole = piece.n_lo == 0 && piece.n_hi == p.tail_blocks;
      if (!whole && !TailMerge<Cfg>{p, epilogue.wg, epilogue.thread}.merge(leading<MainloopMma<Cfg>::kOutAccum>(o), lse,
                                                                           unit)) {
        epilogue.pass_over_store(last_stage);
        timeline_mark<Cfg>(kTimelinePiece0 + kTimelinePieceSlots * step + 2, true);
        return;
      }
    }
    if constexpr (Cfg::kSplitKeys) {
      // A piece of a split tile: stored by the last of the tile's pieces to arrive.
      if (pieces > 1 && !KeySplitMerge<Cfg>{p, epilogue.wg, epilogue.thread}.merge(
                            leading<MainloopMma<Cfg>::kOutAccum>(o), lse, seq, t, tile, piece, pieces)) {
        epilogue.pass_over_store(last_stage);
        return;
      }
    }
    if constexpr (Cfg::kTrace) mma.trace(kEvEpilogueStart, t.m_block);
    epilogue.store(leading<MainloopMma<Cfg>::kOutAccum>(o), lse, seq, t, last_stage);
    if constexpr (Cfg::kTrace) mma.trace(kEvEpilogueEnd, t.m_block);
    timeline_mark<Cfg>(kTimelinePiece0 + kTimelinePieceSlots * step + 2, true);
  };
  if constexpr (Cfg::kDynamicSchedule) {
    // The next index is read at the start of a tile and used at its end, so the L2 read of the
    // mailbox is hidden under the tile (the scheduler has published it a tile earlier).
    TileRing ring;
    int index = ring.receive(mma.bars.tile_mailbox(), tile_mailbox_entry(p), false);
    while (index < p.num_tiles) {
      const int next = ring.receive(mma.bars.tile_mailbox(), tile_mailbox_entry(p), false);
      run_tile(index, 0, kWholeTile, 0);
      index = next;
    }
  } else if constexpr (Cfg::kClusterPairs) {
    for (int wave = 0;; ++wave) {
      const int index = pair_tile(wave);
      if (index >= p.num_tiles) break;
      run_tile(index, 0, kWholeTile, 0);
    }
  } else {
    if constexpr (Cfg::kSplitTail) {
      // The tail kernel: this CTA's pieces of the tail, one a step (at most two: its share is
      // shorter than a tile).
      for (int step = 0;; ++step) {
        const int unit = nth_tail_unit(p, step);
        if (unit < 0) break;
        const TailPiece piece = tail_piece_of_this_cta(p, unit);
        run_tile(piece.index, piece.n_lo, piece.n_hi, step);
      }
    } else {
      for (int wave = 0, first = 0; first < p.num_tiles; ++wave, first += gridDim.x) {
        const int index = snake_tile(wave, first);
        if (index < p.num_tiles) run_tile(index, 0, kWholeTile, 0);
      }
    }
  }
}

// Calls visit with the first named barrier of each ring of turns (mainloop_mma.h): the one on
// kSchedulerBarrier0 (around the GEMMs, or around the exp2s alone), and with turns around both the
// exp2 ring on Cfg::kExpTurnBarrier0.
template <class Cfg, class Visit>
__device__ __forceinline__ void for_each_turn_ring(Visit visit) {
  if constexpr (Cfg::kConsumerWarpgroups == 1) return;  // no turns
  visit(kSchedulerBarrier0);
  if constexpr (Cfg::kTurns == kTurnsAtBoth) visit(Cfg::kExpTurnBarrier0);
}

template <class Cfg>
__device__ void consumer_loop(const KernelParams& p, SharedTiles<Cfg> tiles, SharedBarriers<Cfg> bars, int wg) {
  const int thread = threadIdx.x % kWarpgroupThreads;
  const MainloopMma<Cfg> mma{p, tiles, bars, wg, thread};
  const Epilogue<Cfg> epilogue{p, tiles, bars, wg, thread};
  // Warpgroup 0 takes the first turn of each ring; from then on the turns go round (see mainloop_mma.h).
  for_each_turn_ring<Cfg>([&](int ring0) {
    if (wg == Cfg::kConsumerWarpgroups - 1) named_barrier_arrive(ring0, 2 * kWarpgroupThreads);
  });

  PipelineState<Cfg::kStages> kv_state;
  uint32_t q_phase = 0;
  if constexpr (Cfg::kOverlapEpilogue) {
    overlapped_tiles<Cfg>(p, mma, epilogue, kv_state, q_phase);
  } else {
    plain_tiles<Cfg>(p, mma, epilogue, kv_state, q_phase);
  }
  // Takes the last turn the last warpgroup handed over on each ring, so no named-barrier arrival
  // outlives the CTA.
  for_each_turn_ring<Cfg>([&](int ring0) {
    if (wg == 0) named_barrier_sync(ring0, 2 * kWarpgroupThreads);
  });
  if (thread == 0) bulk_wait_all();
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kCtasPerSm) forward_kernel(const __grid_constant__ KernelParams p) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t base = (smem_address(smem_raw) + kSwizzleAtomBytes - 1) & ~uint32_t(kSwizzleAtomBytes - 1);
  const SharedTiles<Cfg> tiles{base};
  const SharedBarriers<Cfg> bars{base + Cfg::kBarrierOffset};
  if (threadIdx.x == 0) bars.init();
  if constexpr (Cfg::kRowSumByTensor != kRowSumByAdds) {
    // The ones tile, written once; the wgmmas read it through the async proxy.
    const uint32_t one_pair = std::is_same<typename Cfg::Element, __half>::value ? 0x3C003C00u : 0x3F803F80u;
    uint32_t* ones = reinterpret_cast<uint32_t*>(smem_raw + (tiles.ones() - smem_address(smem_raw)));
    for (int i = threadIdx.x; i < Cfg::kOnesBytes / 4; i += Cfg::kThreads) ones[i] = one_pair;
    fence_proxy_async_smem();
  }
  if constexpr (Cfg::kPackGqa) {
    // Tile rows past pack_rows * G (G not dividing kBlockM) hold no query row and no TMA box writes
    // their Q lines: zeroed once here, their scores are 0, not whatever an earlier kernel left in
    // shared memory, which would reach the checked max's per-warp votes (and through them the
    // arithmetic of the warp's other rows). Staging O in Q (kOutputInQ) later leaves finite values
    // there, in configurations without those votes.
    const int first_word = p.pack_rows * int(p.pack_div.divisor) * kLineBytes / 4;
#pragma unroll 1
    for (int c = 0; c < Cfg::kColumns; ++c) {
      uint32_t* q = reinterpret_cast<uint32_t*>(smem_raw + (tiles.q_column(c) - smem_address(smem_raw)));
      for (int i = first_word + int(threadIdx.x); i < Cfg::kQColumnBytes / 4; i += Cfg::kThreads) q[i] = 0u;
    }
    fence_proxy_async_smem();
  }
  // Launched as a programmatic dependent of the stream's previous kernel (launch.h, builds with
  // FLASHATTN_SM90_PDL): the shared memory set up above overlaps that kernel's end, and nothing
  // global is touched before it has ended and its writes are visible, in every thread (the
  // consumers read lengths, slopes and counters themselves). Without a prerequisite grid the wait
  // returns at once. The tail kernel waits at its end instead: its prerequisite is the whole
  // waves' kernel, which passed this wait before it let the tail start.
  // (FLASHATTN_SM90_UNSAFE_NO_GRID_WAIT leaves the wait out: a build that shows
  // tests/python/test_gpu_stream_order.py failing without it. Never for use.)
#if defined(FLASHATTN_SM90_PDL) && !defined(FLASHATTN_SM90_UNSAFE_NO_GRID_WAIT)
  if constexpr (!Cfg::kSplitTail) wait_for_prerequisite_grids();
#endif
  trace_start<Cfg>();
  // The tail kernel (Cfg::kHasTailKernel) may take each SM as soon as this CTA leaves it; the
  // key splits' combine kernel (split_combine.h) the SMs this grid leaves idle, where it waits.
  if constexpr (Cfg::kHasTailKernel || (Cfg::kSplitKeys && kSm90CombineKernelBuilt)) launch_dependent_grids();
  if constexpr (Cfg::kClusterPairs) {
    cluster_sync();  // the peer's barriers exist before any multicast copy or remote arrival
  } else {
    __syncthreads();
  }

  // Through a shuffle from lane 0 the compiler knows the index is warp-uniform, so values derived
  // from it (the Q descriptors of S = Q K^T) can live in uniform registers.
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x / kWarpgroupThreads), 0);
  if (warpgroup == 0) {
    setmaxnreg_decrease<Cfg::kProducerRegisters>();
    if (threadIdx.x == 0) MainloopLoad<Cfg>{p, tiles, bars}.run();
    if constexpr (Cfg::kDynamicSchedule) {
      if (threadIdx.x == 32) schedule_tiles<Cfg>(p, bars.tile_mailbox());
    }
    if constexpr (MainloopLoad<Cfg>::kZeroesKvTail) {
      if (threadIdx.x / 32 == 2 && p.zero_kv_tail) MainloopLoad<Cfg>{p, tiles, bars}.zero_unused_rows();
    }
  } else {
    setmaxnreg_increase<Cfg::kConsumerRegisters>();
    timeline_mark<Cfg>(kTimelineStart);
    consumer_loop<Cfg>(p, tiles, bars, warpgroup - 1);
    timeline_mark<Cfg>(kTimelineEnd);
  }
  // The tail kernel ends after the whole waves' kernel, so that work after both in the stream
  // sees every tile's output.
  if constexpr (Cfg::kSplitTail) wait_for_prerequisite_grids();
}

}  // namespace sm90
}  // namespace flashattn
