// A consumer warpgroup's work on one query tile: its 64 rows of S = Q K^T per key block, the
// online softmax, and O += P V with P kept in registers.
//
// Two overlaps hide the softmax behind the tensor cores:
//  - ping-pong: the consumer warpgroups take turns issuing their GEMMs, in a ring (named barriers
//    kSchedulerBarrier0 + wg), so one warpgroup's softmax runs while the others' GEMMs execute;
//    or, where Cfg::kTurns says so, turns around the exp2 pass of the softmax instead (or both),
//    so that one warpgroup at a time has the SM's MUFU pipe;
//  - intra-warpgroup: S of block j+1 is issued together with P_j V_j, and the softmax of block
//    j+1 runs while P_j V_j is still executing. O is rescaled only after that GEMM has retired.
#pragma once

#include <type_traits>

#include "cuda/sm90/block_range.h"
#include "cuda/sm90/fragment.h"
#include "cuda/sm90/pack_gqa.h"
#include "cuda/sm90/paged_blocks.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/smem_descriptor.h"
#include "cuda/sm90/softmax.h"
#include "cuda/sm90/tile_scheduler.h"
#include "cuda/sm90/warp_scores.h"
#include "cuda/sm90/wgmma_ops.h"

namespace flashattn {
namespace sm90 {

template <class Cfg>
struct MainloopMma {
  using Element = typename Cfg::Element;
  static constexpr int kSAccum = Cfg::kBlockN / 2;
  // O's accumulators: the head dim's (kOutAccum, what the epilogue stores), and with the row sums
  // from the tensor cores four more, the ones column's (Cfg::kRowSumByTensor).
  static constexpr bool kRowSumByTensor = Cfg::kRowSumByTensor != kRowSumByAdds;
  static constexpr int kOutAccum = Cfg::kHeadDim / 2;
  static constexpr int kOAccum = kOutAccum + (kRowSumByTensor ? 4 : 0);
  static_assert(Cfg::kRowSumByTensor != kRowSumInPv || Cfg::kColumns == 1,
                "P V's ones column sits one LBO past V's start: V must have one column");
  static constexpr int kPairThreads = 2 * kWarpgroupThreads;
  using BaseSoftmax = OnlineSoftmax<Cfg::kBlockN, Cfg::kTreeRowMax, Cfg::kMaxSlack, Cfg::kMaxByVote,
                                Cfg::kKeptMaxUnitRescale, kRowSumByTensor, Cfg::kTimingWithoutExp2>;
  // With the bound tested once a tile (kHeldCheckPerTile) the softmax's state carries each
  // thread's flag: whether every kept-max block of the tile so far had its sums within the bound
  // (set at the tile's start by finish_blocks, voted on once at its end). The other kernels keep
  // OnlineSoftmax itself: a member of its own changed their machine code.
  struct SoftmaxWithKeptFlag : BaseSoftmax {
    bool kept_sums_bounded;
    float late_sums[2];  // Cfg::kHeldCheckOneBlockLate: the last kept-max block's sums, not yet tested
    // The flag ANDed with this thread's test of one block's sums.
    __device__ __forceinline__ void note_sums(const float (&sums)[2], float bound) {
      kept_sums_bounded = kept_sums_bounded && BaseSoftmax::sums_within(sums, bound);
    }
  };
  using Softmax = std::conditional_t<Cfg::kCheckedMax && Cfg::kHeldCheckPerTile, SoftmaxWithKeptFlag, BaseSoftmax>;
  // The checked max (Cfg::kCheckedMax) reads each row's sum before P V, and has no row max for a
  // hook after it; serial steps keep their own order.
  static_assert(!Cfg::kCheckedMax || (!kRowSumByTensor && !Cfg::kReleaseVAfterMax && !Cfg::kSerialSteps),
                "the checked max needs the row sums by adds, overlapped steps and no hook after the max");
  // The checked max's bound on a thread's sum of a row's exp2s in one block (kept_max_held), so
  // on each exp2: 2^15 in fp16 (largest finite 65504), 2^24 in bf16. P stays finite in the
  // 16-bit type, and O's fp32 sums keep headroom (2^104 in bf16) for V.
  static constexpr float kKeptSumBound = std::is_same<Element, __half>::value ? 32768.0f : 16777216.0f;
  // A narrowed block's key columns: half the block rounded up to whole 16-key steps of P V.
  static constexpr int kNarrowN = (Cfg::kBlockN / 2 + 15) / 16 * 16;
  static constexpr bool kNarrow = Cfg::kNarrowLastBlock && kNarrowN < Cfg::kBlockN;
  // The checked max's step packs P itself (checked_probabilities, Cfg::kPackBeforeHeldCheck).
  static constexpr bool kPacksInCheckedRound =
      Cfg::kCheckedMax && Cfg::kPackBeforeHeldCheck && !Cfg::kTimingWithoutSoftmax && !Cfg::kSerialSteps;

  const KernelParams& p;
  SharedTiles<Cfg> tiles;
  SharedBarriers<Cfg> bars;
  int wg;      // which consumer warpgroup: 0 .. Cfg::kConsumerWarpgroups - 1
  int thread;  // index inside the warpgroup

  // An event of this warpgroup's trace (trace.h; nothing without Cfg::kTrace), by its thread 0.
  __device__ __forceinline__ void trace(TraceEvent event, int arg0 = 0, int arg1 = 0) const {
    consumer_trace_event<Cfg>(wg, thread, event, arg0, arg1);
  }

  // The turns of one ring of named barriers (ring0 + wg).
  // A lone consumer warpgroup takes no turns.
  template <int ring0>
  __device__ __forceinline__ void wait_turn_on() const {
    if constexpr (Cfg::kConsumerWarpgroups > 1) named_barrier_sync(ring0 + wg, kPairThreads);
  }
  template <int ring0>
  __device__ __forceinline__ void pass_turn_on() const {
    if constexpr (Cfg::kConsumerWarpgroups == 2) {
      named_barrier_arrive(ring0 + (1 - wg), kPairThreads);
    } else if constexpr (Cfg::kConsumerWarpgroups > 2) {
      named_barrier_arrive(ring0 + (wg + 1 == Cfg::kConsumerWarpgroups ? 0 : wg + 1), kPairThreads);
    }
  }
  // Turns around the GEMM issue (none with Cfg::kTurns == kTurnsAtExp).
  __device__ __forceinline__ void wait_turn() const {
    if constexpr (Cfg::kTurns != kTurnsAtExp) {
      trace(kEvTurnWait);
      wait_turn_on<kSchedulerBarrier0>();
      trace(kEvGemmTurn);
    }
  }
  __device__ __forceinline__ void pass_turn() const {
    if constexpr (Cfg::kTurns != kTurnsAtExp) pass_turn_on<kSchedulerBarrier0>();
  }
  static constexpr int kExpRing0 = Cfg::kTurns == kTurnsAtBoth ? Cfg::kExpTurnBarrier0 : kSchedulerBarrier0;
  // KernelConfig asserts this for the turns its template arguments give; a derived config that
  // sets kTurns itself (the harness's TurnsAt) is checked here. Session 25's harness gave d64's
  // four-warpgroup tall tiles both rings that way: warpgroup 3's exp2 ring was barrier 16, which
  // does not exist.
  static_assert(kExpRing0 + Cfg::kConsumerWarpgroups <= 16, "16 named barriers an SM");
  // Turns around the exp2 pass (none with Cfg::kTurns == kTurnsAtGemms).
  __device__ __forceinline__ void wait_exp_turn() const {
    if constexpr (Cfg::kTurns != kTurnsAtGemms) {
      wait_turn_on<kExpRing0>();
      trace(kEvExpTurn);
    }
  }
  __device__ __forceinline__ void pass_exp_turn() const {
    if constexpr (Cfg::kTurns != kTurnsAtGemms) pass_turn_on<kExpRing0>();
  }
  // With O staged in K / V the GEMM turns also order the stage hand-over (release_k): without them
  // warpgroup 1 could reach the next tile's last block, and arrive on the hand-over barrier again,
  // before warpgroup 0's epilogue has synced on it for this tile (session 16's review; the
  // harness's d256 exp2-turn variants of session 16 had this race, and ran clean).
  static_assert(!(Cfg::kOutputInKV && Cfg::kTurns == kTurnsAtExp),
                "turns around the exp2s alone leave the K / V stage hand-over unordered");
  // The bound of skips_last_block assumes consecutive query rows.
  static_assert(!(Cfg::kSkipMaskedLastBlock && Cfg::kPackGqa), "skipping the masked last block needs no GQA packing");
  static_assert(!(Cfg::kReleaseVAfterMax && Cfg::kSerialSteps), "serial steps release V before the softmax already");
  static_assert(!Cfg::kRescaleAfterMax || Cfg::kReleaseVAfterMax, "O is rescaled after the max once its P V retired");
  // One arrival per warp, after the warp's wait on the wgmma that read the stage.
  __device__ __forceinline__ void release(uint32_t empty_bar) const {
    if (thread % 32 == 0) mbarrier_arrive(empty_bar);
  }
  // A K or V stage: with cluster pairs the peer CTA's producer refills its half of this stage in
  // both CTAs, so the release goes to both CTAs' empty barriers.
  __device__ __forceinline__ void release_kv(uint32_t empty_bar) const {
    if constexpr (Cfg::kClusterPairs) {
      if (thread % 32 == 0) {
        mbarrier_arrive(empty_bar);
        mbarrier_arrive_cluster(empty_bar, cluster_cta_rank() ^ 1);
      }
    } else {
      release(empty_bar);
    }
  }

  // The tile's last key block with O staged in K / V (Cfg::kOutputInKV, epilogue.h): warpgroup 0
  // stages its rows in the block's K stage and warpgroup 1 in its V stage, so each keeps its own
  // release of that stage for the epilogue (after the store has read it), and the other releases
  // it as usual and hands it over through the owner's named barrier. Both warpgroups must run
  // every tile with keys and reach its last block once: a tile one of them skipped alone would
  // leave the other's bar.sync in the epilogue waiting forever.
  // (Elsewhere every block's K is released alike: `last` is not looked at.)
  __device__ __forceinline__ void release_k(uint32_t k_empty, bool last) const {
    if constexpr (Cfg::kOutputInKV) {
      if (last) {
        if (wg == 0) return;
        release_kv(k_empty);
        named_barrier_arrive(Cfg::kStageHandoverBarrier0 + 0, kPairThreads);
        return;
      }
    }
    release_kv(k_empty);
  }
  __device__ __forceinline__ void release_last_v(uint32_t v_empty) const {
    if constexpr (Cfg::kOutputInKV) {
      if (wg == 1) return;
      release_kv(v_empty);
      named_barrier_arrive(Cfg::kStageHandoverBarrier0 + 1, kPairThreads);
    } else {
      release_kv(v_empty);
    }
  }

  // Once S of a block has retired: its K stage is free, and after the tile's last block (`last`)
  // so is Q (unless O is staged there, or Q was released at load).
  __device__ __forceinline__ void release_scores_operands(PipelineState<Cfg::kStages>& k_state, bool last) const {
    release_k(bars.k_empty(k_state.stage), last);
    if (!Cfg::kOutputInQ && !kQReleasedAtLoad && last) release(bars.q_empty());
    k_state.advance();
  }

  // Q's A fragments for S = Q K^T of the first Cfg::kQStepsInRegisters 16-column steps of the
  // head dim: this warp's 16 rows (wgmma's A layout is mma.sync's per warp); one unused step
  // where there are none.
  static constexpr int kQRegisterSteps = Cfg::kQStepsInRegisters;
  static_assert(kQRegisterSteps >= 0 && kQRegisterSteps <= Cfg::kHeadDim / 16, "Q's steps in registers");
  struct QFragments {
    uint32_t a[kQRegisterSteps > 0 ? kQRegisterSteps : 1][4];
  };
  // Q's tile released once the tile's first S is issued (Cfg::kQReleasedAtLoad), where every
  // step of S reads Q from registers; the fallback then reads Q from global memory. O staged in Q
  // and GQA packing (whose tile rows are not one head's rows) keep the tile.
  static constexpr bool kQReleasedAtLoad = Cfg::kQReleasedAtLoad && kQRegisterSteps == Cfg::kHeadDim / 16 &&
                                           !Cfg::kOutputInQ && !Cfg::kPackGqa;
  // The tile's last P V issued with the next tile's first S (Cfg::kLastPvWithNextScores; kernel.h
  // overlapped_tiles): the next Q must have landed long before. A rowless warpgroup
  // (Cfg::kSkipRowlessWarpgroups) issues its pending P V alone while the other merges it, so its
  // GEMM turns would fall out of step: with those, only where the turns are around the exp2s. Not
  // with masked last blocks passed over (a warpgroup's own block count).
  static constexpr bool kLastPvWithNextScores =
      Cfg::kLastPvWithNextScores && kQReleasedAtLoad && Cfg::kOverlapEpilogue &&
      (!Cfg::kSkipRowlessWarpgroups || Cfg::kTurns == kTurnsAtExp) && !Cfg::kSkipMaskedLastBlock &&
      !kRowSumByTensor;
  // The checked max's bound tested once a tile (KernelConfig::kHeldCheckPerTile): a warp where a
  // block passed it computes the tile again after its last P V (recompute_tile), so that P V must
  // have retired inside the tile (not with the next tile's first S, whose S registers the
  // recompute uses). The recompute reads K from global memory, as the fallback does where its
  // stages are released early (Cfg::kFallbackKeysFromGlobal; the harness's held K keeps the vote).
  static constexpr bool kHeldCheckPerTile = Cfg::kCheckedMax && Cfg::kHeldCheckPerTile && !kLastPvWithNextScores &&
                                            Cfg::kFallbackKeysFromGlobal && !Cfg::kSkipHeldCheck &&
                                            !Cfg::kTimingWithoutSoftmax;
  // A piece of the split tail is merged (split_tail.h) before the next work's first S, where a
  // pending last P V would not have reached O yet.
  static_assert(!(kLastPvWithNextScores && Cfg::kSplitTail), "the split tail needs each piece's O whole");
  static_assert(!Cfg::kSplitTail || !kRowSumByTensor, "the split tail merges O without the ones column");
  // Once Q has arrived, before the tile's first S (ldmatrix x4 as warp_scores.h loads them). Q's
  // tile stays until the first S has been issued (kQReleasedAtLoad), else until the tile's last
  // S has retired: the checked max's fallback reads it.
  __device__ __forceinline__ void load_q_fragments(QFragments& q) const {
    if constexpr (kQRegisterSteps > 0) {
      const QueriesInTile rows(tiles.q_column(0), Cfg::kQColumnBytes, wg * kRowsPerConsumer + 16 * (thread / 32),
                               thread % 32);
#pragma unroll
      for (int kk = 0; kk < kQRegisterSteps; ++kk) rows(kk, q.a[kk]);
    }
  }

  __device__ __forceinline__ void issue_qk(float (&s)[kSAccum], int stage, const QFragments& qf) const {
    const uint64_t q = k_major_descriptor(tiles.q_column(0) + wg * kRowsPerConsumer * kLineBytes);
    const uint64_t k = k_major_descriptor(tiles.k_column(stage, 0));
#pragma unroll
    for (int kk = 0; kk < Cfg::kHeadDim / 16; ++kk) {
      const int column = kk / 4, step_bytes = (kk % 4) * 32;
      const uint64_t k_step = advance_descriptor(k, column * Cfg::kKVColumnBytes + step_bytes);
      const uint64_t q_step = advance_descriptor(q, column * Cfg::kQColumnBytes + step_bytes);
      if constexpr (kQRegisterSteps > 0) {
        if (kk < kQRegisterSteps) {
          WgmmaRSKMajorB<Element, Cfg::kBlockN>::run(s, qf.a[kk < kQRegisterSteps ? kk : 0], k_step, kk > 0);
        } else {
          WgmmaSS<Element, Cfg::kBlockN>::run(s, q_step, k_step, kk > 0);
        }
      } else {
        WgmmaSS<Element, Cfg::kBlockN>::run(s, q_step, k_step, kk > 0);
      }
    }
  }

  // accumulate = 0 (overlapped epilogue, kernel.h) for a tile's first P V: its first step
  // overwrites O, so O is not zeroed by ordinary instructions, which would write a wgmma
  // accumulator while the tile's first S = Q K^T runs (ptxas then serialises every wgmma).
  // kN: the block's keys that P V takes (fewer for a narrowed block, whose later P are 0).
  template <int kN = Cfg::kBlockN>
  __device__ __forceinline__ void issue_pv(float (&o)[kOAccum], const uint32_t (&prob)[kSAccum / 2], int stage,
                                           int accumulate) const {
    if constexpr (Cfg::kRowSumByTensor == kRowSumInPv) {
      // N = head dim + 8: V's one column, and one LBO past its start the ones tile, the same 16
      // keys of it at every step.
      const uint32_t v_address = tiles.v_column(stage, 0);
      const uint64_t v = mn_major_descriptor(v_address, tiles.ones() - v_address);
#pragma unroll
      for (int kk = 0; kk < kN / 16; ++kk) {
        const uint32_t a[4] = {prob[4 * kk], prob[4 * kk + 1], prob[4 * kk + 2], prob[4 * kk + 3]};
        WgmmaRS<Element, Cfg::kHeadDim + 8>::run(o, a, advance_descriptor_fixed_lbo_target(v, kk * 16 * kLineBytes),
                                                 kk > 0 ? 1 : accumulate);
      }
    } else {
      const uint64_t v = mn_major_descriptor(tiles.v_column(stage, 0), Cfg::kKVColumnBytes);
#pragma unroll
      for (int kk = 0; kk < kN / 16; ++kk) {
        const uint32_t a[4] = {prob[4 * kk], prob[4 * kk + 1], prob[4 * kk + 2], prob[4 * kk + 3]};
        WgmmaRS<Element, Cfg::kHeadDim>::run(leading<kOutAccum>(o), a, advance_descriptor(v, kk * 16 * kLineBytes),
                                             kk > 0 ? 1 : accumulate);
        if constexpr (Cfg::kRowSumByTensor == kRowSumOwnWgmma) {
          // Any 16 keys of the ones tile: the same descriptor at every step.
          WgmmaRS<Element, 8>::run(trailing<4>(o), a, mn_major_descriptor(tiles.ones(), Cfg::kKVColumnBytes),
                                   kk > 0 ? 1 : accumulate);
        }
      }
    }
  }

  struct NothingInTurn {
    __device__ __forceinline__ void operator()() const {}
  };
  // The softmax of one block's S, in place (kN < kBlockN: a narrowed block, which always needs the
  // mask; only the first kN / 2 registers of S are looked at). in_exp_turn runs after the exp2s,
  // inside the exp2 turn where there is one (serial steps' O rescale, Cfg::kRescaleInExpTurn);
  // after_max between the row max and the exp2s (Cfg::kReleaseVAfterMax), before the exp2 turn.
  // The soft cap and the mask on one block's S (the first kN / 2 registers).
  template <int kN = Cfg::kBlockN>
  __device__ __forceinline__ void transform_scores(float (&s)[kSAccum], const SequenceInfo& seq, const TileCoord& t,
                                                   int n_block) const {
    if (p.score_pre != 0.0f) OnlineSoftmax<kN>::apply_softcap(leading<kN / 2>(s), p.score_pre);
    if constexpr (Cfg::kPackGqa) {
      if (tile_block_needs_mask<Cfg>(p, seq, t.m_block, n_block)) {
        const FragmentPosition pos = FragmentPosition::of_thread(thread);
        const int r = wg * kRowsPerConsumer + pos.row0;
        const int rows[2] = {tile_row_query<Cfg>(p, t, r), tile_row_query<Cfg>(p, t, r + 8)};
        OnlineSoftmax<Cfg::kBlockN>::template apply_mask_rows<Cfg::kMaskByBits>(s, p, seq, rows, n_block, pos);
      }
    } else if (kN < Cfg::kBlockN || block_needs_mask<Cfg::kBlockN, Cfg::kBlockM>(p, seq, t.m_block, n_block)) {
      OnlineSoftmax<Cfg::kBlockN>::template apply_mask<kN / 8, Cfg::kMaskByBits>(
          s, p, seq, t.m_block * Cfg::kBlockM + wg * kRowsPerConsumer, n_block, FragmentPosition::of_thread(thread));
    }
  }

  template <int kN = Cfg::kBlockN, class InExpTurn = NothingInTurn, class AfterMax = NothingInTurn>
  __device__ __forceinline__ void scores_to_probabilities(float (&s)[kSAccum], Softmax& softmax,
                                                          const SequenceInfo& seq, const TileCoord& t,
                                                          int n_block, InExpTurn in_exp_turn = {},
                                                          AfterMax after_max = {}) const {
    transform_scores<kN>(s, seq, t, n_block);
    constexpr bool kHookAfterMax = !std::is_same<AfterMax, NothingInTurn>::value;
    if constexpr (Cfg::kTurns == kTurnsAtGemms && !kHookAfterMax) {
      if constexpr (kSkipsRowlessHalves) {
        if (second_rows_rowless(seq, t)) {
          softmax.template update_first_row<kN / 8>(s, p.score_log2);
          in_exp_turn();
          return;
        }
      }
      softmax.template update<kN / 8>(s, p.score_log2);
      in_exp_turn();
    } else {
      // Split at the max: for the exp2 turn, or for the hook (then, with the GEMM turns, the same
      // products as update's, both rows' max first).
      float m_scaled[2];
      softmax.template settle_max<kN / 8>(s, p.score_log2, m_scaled);
      trace(kEvMaxReady);
      if constexpr (kHookAfterMax) after_max();
      wait_exp_turn();
      softmax.template exponentiate<kN / 8>(s, p.score_log2, m_scaled);
      in_exp_turn();
      pass_exp_turn();
    }
  }

  // How many keys of the tile's last block this warpgroup's rows may see (<= 0: none): the bound
  // is that of the warpgroup's last row (the mask's upper bound grows with the row).
  __device__ __forceinline__ int keys_seen_in_last_block(const SequenceInfo& seq, const TileCoord& t,
                                                         const BlockRange<Cfg::kBlockN>& range) const {
    const int last_row = min(t.m_block * Cfg::kBlockM + (wg + 1) * kRowsPerConsumer, seq.len_q) - 1;
    int hi = seq.len_k;
    if (p.window_right >= 0) hi = min(hi, last_row + seq.diag() + p.window_right + 1);
    return hi - (range.n_end - 1) * Cfg::kBlockN;
  }

  // Whether this warpgroup's rows see no key of the tile's last block past its first kNarrowN:
  // then that block (the tile's first step) is narrowed: its S is computed whole (see
  // issue_first_scores), its softmax and P V over the first kNarrowN keys.
  __device__ __forceinline__ bool narrow_last_block(const SequenceInfo& seq, const TileCoord& t,
                                                    const BlockRange<Cfg::kBlockN>& range) const {
    if constexpr (!kNarrow) {
      return false;
    } else {
      return keys_seen_in_last_block(seq, t, range) <= kNarrowN;
    }
  }

  // Whether this warpgroup passes over the tile's last block (Cfg::kSkipMaskedLastBlock): its rows
  // see none of the block's keys (on the causal diagonal, warpgroup 0 where the key block is
  // narrower than the tile, d192 / d256, and warpgroups 0 and 1 of d64's 192-row tiles), and the
  // block is not the tile's only one (that one's K / V stage may hold O, kOutputInKV).
  __device__ __forceinline__ bool skips_last_block(const SequenceInfo& seq, const TileCoord& t,
                                                   const BlockRange<Cfg::kBlockN>& range) const {
    return range.n_end - 1 > range.n_begin && keys_seen_in_last_block(seq, t, range) <= 0;
  }

  // A block this warpgroup does not compute (skips_last_block): the turns its GEMMs and its exp2s
  // would have taken, so that the rings stay in step, and the releases of its K and V after they
  // have landed (a later wait on the same stage must not find the parity of two phases back).
  // Its P would be 0 and the softmax would keep its reset state, so the output is unchanged.
  __device__ __forceinline__ void pass_over_block(PipelineState<Cfg::kStages>& k_state) const {
    mbarrier_wait(bars.k_full(k_state.stage), k_state.phase);
    mbarrier_wait(bars.v_full(k_state.stage), k_state.phase);
    wait_turn();
    pass_turn();
    wait_exp_turn();
    pass_exp_turn();
    release_kv(bars.k_empty(k_state.stage));
    release_kv(bars.v_empty(k_state.stage));
    k_state.advance();
  }

  // Whether none of this warpgroup's rows is a row of the sequence (Cfg::kSkipRowlessWarpgroups).
  // Query rows grow with the tile row, and packed rows without one come last (pack_gqa.h): the
  // warpgroup's first row tells.
  __device__ __forceinline__ bool rowless(const SequenceInfo& seq, const TileCoord& t) const {
    return tile_row_outside_sequence<Cfg>(p, t, seq, wg * kRowsPerConsumer);
  }

  // Whether the second fragment rows of this warpgroup's threads (tile rows 8..15 of each warp's
  // 16) hold no query row (Cfg::kSkipRowlessHalves): query rows grow with the tile row and the
  // rows without one come last, so where its row 8 has none, none of those rows has. A decode
  // step's packed tile holds seqlen_q x G rows, 4 at (1, 32 / 8): the softmax then takes row 0's
  // exp2s alone, half the MUFU work of a block.
  static constexpr bool kSkipsRowlessHalves = Cfg::kSkipRowlessHalves && !BaseSoftmax::kVote;
  __device__ __forceinline__ bool second_rows_rowless(const SequenceInfo& seq, const TileCoord& t) const {
    return tile_row_outside_sequence<Cfg>(p, t, seq, wg * kRowsPerConsumer + 8);
  }

  // A tile this warpgroup does not compute (rowless): every key block passed over, the turn of
  // the tile's last P V, and Q released (after its arrival: an early release would count towards
  // the previous tile's phase of the Q barrier).
  __device__ __forceinline__ void pass_over_tile(const BlockRange<Cfg::kBlockN>& range,
                                                 PipelineState<Cfg::kStages>& k_state) const {
    static_assert(!Cfg::kOutputInQ && !Cfg::kOutputInKV, "Q and the K / V stages are released by the mainloop");
    for (int n = range.n_end - 1; n >= range.n_begin; --n) pass_over_block(k_state);
    wait_turn();
    pass_turn();
    release(bars.q_empty());
  }

  // The most trailing blocks a warpgroup's rows can miss on the causal diagonal: the tile rows
  // after its own, in key blocks, rounded up (Cfg::kSkipMaskedLastBlock: 1 in d256's kernels, 3 in
  // d64's tall tiles, four warpgroups of 64 rows at 64-key blocks).
  static constexpr int kMaxPassedLastBlocks =
      ((Cfg::kConsumerWarpgroups - 1) * kRowsPerConsumer + Cfg::kBlockN - 1) / Cfg::kBlockN;

  // Passes over the tile's last block while skips_last_block holds, and takes it off `range`.
  __device__ __forceinline__ void pass_over_masked_last_block(const SequenceInfo& seq, const TileCoord& t,
                                                              BlockRange<Cfg::kBlockN>& range,
                                                              PipelineState<Cfg::kStages>& k_state) const {
#pragma unroll
    for (int i = 0; i < kMaxPassedLastBlocks; ++i) {
      if (!skips_last_block(seq, t, range)) break;
      pass_over_block(k_state);
      --range.n_end;
    }
  }

  // Leaves O (unnormalised) and the softmax state of the tile's rows of this warpgroup.
  __device__ __forceinline__ void compute_tile(const SequenceInfo& seq, const TileCoord& t,
                                               const BlockRange<Cfg::kBlockN>& range, float (&o)[kOAccum],
                                               Softmax& softmax,
                                               PipelineState<Cfg::kStages>& k_state) const {
    float s[kSAccum];
    QFragments q;
    load_q_fragments(q);
#pragma unroll
    for (int i = 0; i < kOAccum; ++i) o[i] = 0.0f;
    softmax.reset();
    // Two forms: finishing the tile on a copy of range even where nothing is skipped changed the
    // register allocation of the library's d192 / d256 kernels (session 17).
    if constexpr (Cfg::kSkipMaskedLastBlock) {
      BlockRange<Cfg::kBlockN> visited = range;
      pass_over_masked_last_block(seq, t, visited, k_state);
      issue_first_scores(s, k_state, q);
      finish_tile<false>(s, seq, t, visited, o, softmax, k_state, q);
    } else {
      issue_first_scores(s, k_state, q);
      finish_tile<false>(s, seq, t, range, o, softmax, k_state, q);
    }
  }

  // The tile's first S = Q K^T (its last key block), issued on this warpgroup's turn (where the
  // turns are around the GEMMs) and not waited for: with the overlapped epilogue (kernel.h) the
  // previous tile's output is stored while it runs. Q must have arrived. S is whole even where
  // the block is narrowed: with a narrower S in one path ptxas serialised every wgmma of the
  // kernel (C7515, then C7511 with the rest of S written by a wgmma of its own), as the first S
  // stays in flight under the previous tile's epilogue.
  __device__ __forceinline__ void issue_first_scores(float (&s)[kSAccum], const PipelineState<Cfg::kStages>& k_state,
                                                     const QFragments& q) const {
    trace(kEvKWait, k_state.stage, -1);
    mbarrier_wait(bars.k_full(k_state.stage), k_state.phase);
    trace(kEvKFull, k_state.stage, -1);
    wait_turn();
    pin_registers(s);
    wgmma_fence();
    issue_qk(s, k_state.stage, q);
    wgmma_commit_group();
    pass_turn();
    // The wgmma has read Q's fragments' registers, so their ldmatrix has read the tile.
    if constexpr (kQReleasedAtLoad) release(bars.q_empty());
    trace(kEvSIssued, k_state.stage);
  }

  // The previous tile's last P V (its P in prob, its V in stage v_state), then this tile's first
  // S = Q K^T, in one issue (Cfg::kLastPvWithNextScores); returns once the P V has retired, with
  // S in flight: O is final, and is normalised and stored while S runs.
  __device__ __forceinline__ void issue_last_pv_and_first_scores(uint32_t (&prob)[kSAccum / 2], float (&o)[kOAccum],
                                                                 int accumulate,
                                                                 const PipelineState<Cfg::kStages>& v_state,
                                                                 float (&s)[kSAccum],
                                                                 const PipelineState<Cfg::kStages>& k_state,
                                                                 const QFragments& q) const {
    static_assert(kLastPvWithNextScores, "the next Q must have landed: released at load");
    trace(kEvKWait, k_state.stage, -1);
    mbarrier_wait(bars.k_full(k_state.stage), k_state.phase);
    trace(kEvKFull, k_state.stage, -1);
    wait_last_v(v_state);
    wait_turn();
    pin_registers(s);
    pin_registers(o);
    pin_registers(prob);
    wgmma_fence();
    issue_pv<Cfg::kBlockN>(o, prob, v_state.stage, accumulate);
    wgmma_commit_group();
    issue_qk(s, k_state.stage, q);
    wgmma_commit_group();
    pass_turn();
    release(bars.q_empty());  // as in issue_first_scores
    trace(kEvSIssued, k_state.stage);
    wgmma_wait_group<1>();  // the P V; S still runs
    pin_registers(o);
    pin_registers(prob);
    release_last_v(bars.v_empty(v_state.stage));
    trace(kEvLastPvDone);
  }

  // One step of the key loop: S of block n issued with P V of the block before it (kPvN of its
  // keys: fewer when that block was narrowed), the softmax of S while P V runs, then O rescaled.
  // With serial steps (Cfg::kSerialSteps) both GEMMs are waited for before the softmax, and O is
  // rescaled during it: inside the exp2 turn with Cfg::kRescaleInExpTurn (every block, no vote),
  // else after it where some row's max moved. The products are those of the overlapped step in
  // the same order (O times a block's rescale once the P V before it has landed): the output is
  // bit-identical.
  template <int kPvN>
  __device__ __forceinline__ void block_step(float (&s)[kSAccum], uint32_t (&prob)[kSAccum / 2], float (&o)[kOAccum],
                                             Softmax& softmax, const SequenceInfo& seq,
                                             const TileCoord& t, const BlockRange<Cfg::kBlockN>& range, int n,
                                             int accumulate, PipelineState<Cfg::kStages>& k_state,
                                             PipelineState<Cfg::kStages>& v_state, const QFragments& q) const {
    trace(kEvKWait, k_state.stage, n);
    mbarrier_wait(bars.k_full(k_state.stage), k_state.phase);
    trace(kEvKFull, k_state.stage, n);
    trace(kEvVWait, v_state.stage, n + 1);
    mbarrier_wait(bars.v_full(v_state.stage), v_state.phase);
    trace(kEvVFull, v_state.stage, n + 1);
    wait_turn();
    pin_registers(s);
    pin_registers(o);
    pin_registers(prob);
    wgmma_fence();
    issue_qk(s, k_state.stage, q);
    wgmma_commit_group();
    issue_pv<kPvN>(o, prob, v_state.stage, accumulate);
    wgmma_commit_group();
    pass_turn();
    trace(kEvSPvIssued, k_state.stage, n);
    if constexpr (Cfg::kTimingWithoutSoftmax) {
      wgmma_wait_group<1>();
      pin_registers(s);
      release_scores_operands(k_state, n == range.n_begin);
      trace(kEvSReady);
      wait_exp_turn();
      pass_exp_turn();
      retire_previous_pv(o, prob, v_state);
      trace(kEvProbsReady);
    } else if constexpr (Cfg::kSerialSteps) {
      wgmma_wait_group<0>();
      pin_registers(s);
      pin_registers(o);
      pin_registers(prob);
      release_scores_operands(k_state, n == range.n_begin);
      release_kv(bars.v_empty(v_state.stage));
      v_state.advance();
      trace(kEvSReady);
      if constexpr (Cfg::kRescaleInExpTurn) {
        scores_to_probabilities(s, softmax, seq, t, n, [&]() { softmax.rescale_output(o); });
      } else {
        scores_to_probabilities(s, softmax, seq, t, n);
        softmax.rescale_output_where_moved(o);
      }
      trace(kEvProbsReady);
    } else if constexpr (Cfg::kCheckedMax) {
      wgmma_wait_group<1>();  // S of this block is ready; P V of the previous one still runs
      pin_registers(s);
      // The kept max where the warp's rows all have one. On the tile's last block only where Q
      // was released at load (the fallback reads it from global memory): elsewhere that block's
      // Q is released as soon as S has retired (the next tile's Q loads under the rest of this
      // one; held until the softmax's end, d64's unmasked 512 lost 9%). K stays until the check
      // has passed unless the fallback reads it from global memory: a warp that fails the check
      // computes S again from Q and K.
      const bool kept_max = (kQReleasedAtLoad || n != range.n_begin) && softmax.every_row_has_max();
      if (!kept_max || Cfg::kFallbackKeysFromGlobal) release_scores_operands(k_state, n == range.n_begin);
      trace(kEvSReady);
      checked_probabilities(s, o, prob, softmax, seq, t, n, kept_max, k_state, v_state);
      softmax.rescale_output_where_moved(o);
    } else {
      wgmma_wait_group<1>();  // S of this block is ready; P V of the previous one still runs
      pin_registers(s);
      release_scores_operands(k_state, n == range.n_begin);
      trace(kEvSReady);
      if constexpr (Cfg::kReleaseVAfterMax) {
        // P V's wait moves from after the exp2s to after the max (and before the exp2 turn):
        // the same operations in another order.
        scores_to_probabilities(s, softmax, seq, t, n, NothingInTurn{}, [&]() {
          retire_previous_pv(o, prob, v_state);
          if constexpr (Cfg::kRescaleAfterMax) {
            softmax.rescale_output_where_moved(o);
          }
        });
        trace(kEvProbsReady);
        if constexpr (!Cfg::kRescaleAfterMax) {
          softmax.rescale_output_where_moved(o);
        }
      } else {
        scores_to_probabilities(s, softmax, seq, t, n);
        trace(kEvProbsReady);
        retire_previous_pv(o, prob, v_state);
        softmax.rescale_output_where_moved(o);
      }
    }
    if constexpr (!kPacksInCheckedRound) accumulator_to_operand<Element>(s, prob);
  }

  // Waits for the previous block's P V (issued with this block's S) and releases its V stage.
  __device__ __forceinline__ void retire_previous_pv(float (&o)[kOAccum], uint32_t (&prob)[kSAccum / 2],
                                                     PipelineState<Cfg::kStages>& v_state) const {
    wgmma_wait_group<0>();
    pin_registers(o);
    pin_registers(prob);
    release_kv(bars.v_empty(v_state.stage));
    v_state.advance();
    trace(kEvPvDone);
  }

  // One round of a block's softmax with the checked max (Cfg::kCheckedMax): the soft cap and the
  // mask, each row's max (kept: every row of the warp has one; else made from the block's
  // scores), the exp2s (in the exp2 turn where there is one and `in_turn`), and with a kept max
  // the warp's vote that every exp2 stayed within the bound. Returns whether the block is done:
  // false leaves s holding exp2s that cannot be used (rare: the maxes came from earlier blocks'
  // scores), and the warp computes S again (recompute_scores) for a round with the block's own
  // max, outside the exp2 turn it has passed.
  __device__ __forceinline__ bool checked_round(float (&s)[kSAccum], Softmax& softmax, const SequenceInfo& seq,
                                                const TileCoord& t, int n, bool kept_max, bool in_turn) const {
    transform_scores(s, seq, t, n);
    float m_scaled[2], block_sum[2];
    if (kept_max) {
      softmax.keep_row_maxes(p.score_log2, m_scaled);
    } else {
      softmax.settle_max(s, p.score_log2, m_scaled);
    }
    if (in_turn) wait_exp_turn();
    softmax.exponentiate_block(s, p.score_log2, m_scaled, block_sum);
    if (in_turn) pass_exp_turn();
    if constexpr (kHeldCheckPerTile) {
      // No vote here: one after the tile's last P V (finish_tile).
      if constexpr (Cfg::kHeldCheckOneBlockLate) {
        softmax.note_sums(softmax.late_sums, kKeptSumBound);
#pragma unroll
        for (int h = 0; h < 2; ++h) softmax.late_sums[h] = kept_max ? block_sum[h] : 0.0f;
      } else {
        if (kept_max) softmax.note_sums(block_sum, kKeptSumBound);
      }
      softmax.add_block_sums(block_sum);
      return true;
    } else {
      const bool done = !kept_max || Cfg::kSkipHeldCheck || softmax.kept_max_held(block_sum, kKeptSumBound);
      if (done) softmax.add_block_sums(block_sum);
      return done;
    }
  }

  // S of this warp's rows for key block n (in K stage `stage`, or in global memory with
  // Cfg::kFallbackKeysFromGlobal) again, with mma.sync (warp_scores.h).
  __device__ __forceinline__ void recompute_scores(float (&s)[kSAccum], const SequenceInfo& seq, const TileCoord& t,
                                                   int n, int stage) const {
    const int row0 = wg * kRowsPerConsumer + 16 * (thread / 32), lane = thread % 32;
    if constexpr (kQReleasedAtLoad) {
      // The sequence's row 0 of the tile's head (Operand's offsets, problem.h, as the epilogue's
      // rows; varlen batch strides are 0).
      const Element* rows = static_cast<const Element*>(p.q) + t.batch * p.q_batch_stride +
                            int64_t(seq.q_row0) * p.q_row_stride + t.head * p.q_head_stride;
      recompute_scores_from(s, seq, t, n, stage,
                            QueriesInGlobal<Element, Cfg::kNarrowHeadDim>(rows, p.q_row_stride,
                                                                          t.m_block * Cfg::kBlockM + row0, seq.len_q,
                                                                          p.head_dim, lane));
    } else {
      recompute_scores_from(s, seq, t, n, stage, QueriesInTile(tiles.q_column(0), Cfg::kQColumnBytes, row0, lane));
    }
  }
  template <class QueryFragments>
  __device__ __forceinline__ void recompute_scores_from(float (&s)[kSAccum], const SequenceInfo& seq,
                                                        const TileCoord& t, int n, int stage,
                                                        QueryFragments queries) const {
    const int lane = thread % 32;
    if constexpr (Cfg::kFallbackKeysFromGlobal) {
      const int key0 = n * Cfg::kBlockN;
      int k_row = seq.k_row0 + key0, kv_batch = t.batch;
      if (reads_pages<Cfg>() && p.block_table != nullptr) {
        // The block's page, as the loading thread found it (paged_blocks.h).
        place_paged_block<Cfg::kBlockN>(p, t.batch, n, k_row, kv_batch);
      }
      // Operand's offset (problem.h; varlen batch strides are 0), as the epilogue's rows.
      const Element* block = static_cast<const Element*>(p.k) + kv_batch * p.k_batch_stride +
                             int64_t(k_row) * p.k_row_stride + tile_kv_head<Cfg>(p, t) * p.k_head_stride;
      warp_scores<Cfg::kHeadDim, Cfg::kBlockN, Element>(
          s, queries,
          KeysInGlobal<Element, Cfg::kNarrowHeadDim>(block, p.k_row_stride, seq.len_k - key0, p.head_dim, lane));
    } else {
      warp_scores<Cfg::kHeadDim, Cfg::kBlockN, Element>(
          s, queries, KeysInStage(tiles.k_column(stage, 0), Cfg::kKVColumnBytes, lane));
    }
  }

  // A block's softmax with the checked max and the wait for the previous block's P V; K (held
  // where kept_max, unless the fallback reads it from global memory) is released once the block
  // is done. With kPacksInCheckedRound P is packed here, before the held vote's branch, and again
  // after a fallback round. Every warp of the warpgroup reaches the
  // P V wait (retire_previous_pv, a wgmma.wait_group, .aligned) at one PC: a warp whose check
  // failed computes S again with mma.sync after it, in a second copy of the round outside the
  // exp2 turn. Session 26 tried two other forms: the wait inside the failing warp's branch broke
  // .aligned (synccheck: per-warp PCs of wgmma.wait_group); a loop over checked_round with the
  // mma.sync beside the previous P V lost 15% in the static d128 kernel.
  __device__ __forceinline__ void checked_probabilities(float (&s)[kSAccum], float (&o)[kOAccum],
                                                        uint32_t (&prob)[kSAccum / 2], Softmax& softmax,
                                                        const SequenceInfo& seq, const TileCoord& t, int n,
                                                        bool kept_max, PipelineState<Cfg::kStages>& k_state,
                                                        PipelineState<Cfg::kStages>& v_state) const {
    constexpr bool kHeld = !Cfg::kFallbackKeysFromGlobal;  // K stays in its stage until here
    const int stage = k_state.stage;
    const bool done = checked_round(s, softmax, seq, t, n, kept_max, true);
    if (kHeld && done && kept_max) release_scores_operands(k_state, false);
    retire_previous_pv(o, prob, v_state);
    if constexpr (kPacksInCheckedRound) accumulator_to_operand<Element>(s, prob);
    if (!kHeldCheckPerTile && !done) {
      recompute_scores(s, seq, t, n, stage);
      checked_round(s, softmax, seq, t, n, false, false);
      if (kHeld) release_scores_operands(k_state, false);
      if constexpr (kPacksInCheckedRound) accumulator_to_operand<Element>(s, prob);
    }
    trace(kEvProbsReady);
  }

  // Waits for the V of the tile's last P V to land (its key block traced as -1).
  __device__ __forceinline__ void wait_last_v(const PipelineState<Cfg::kStages>& v_state) const {
    trace(kEvVWait, v_state.stage, -1);
    mbarrier_wait(bars.v_full(v_state.stage), v_state.phase);
    trace(kEvVFull, v_state.stage, -1);
  }

  // The tile's last P V: of the block the loop visited last (kPvN of its keys).
  template <int kPvN>
  __device__ __forceinline__ void last_pv(uint32_t (&prob)[kSAccum / 2], float (&o)[kOAccum], int accumulate,
                                          PipelineState<Cfg::kStages>& v_state) const {
    wait_last_v(v_state);
    wait_turn();
    pin_registers(o);
    pin_registers(prob);
    wgmma_fence();
    issue_pv<kPvN>(o, prob, v_state.stage, accumulate);
    wgmma_commit_group();
    pass_turn();
    trace(kEvPvIssued, v_state.stage);
    wgmma_wait_group<0>();
    pin_registers(o);
    release_last_v(bars.v_empty(v_state.stage));
    v_state.advance();
    trace(kEvLastPvDone);
  }

  // The rest of the tile once issue_first_scores has issued S of its last key block; the softmax
  // must be reset, and O zeroed unless kFirstPvOverwrites (then the tile's first P V overwrites
  // it). Leaves O (unnormalised) and the softmax state. Where narrow_last_block holds, the
  // softmax and P V of that first block take only its first kNarrowN keys.
  template <bool kFirstPvOverwrites>
  __device__ __forceinline__ void finish_tile(float (&s)[kSAccum], const SequenceInfo& seq, const TileCoord& t,
                                              const BlockRange<Cfg::kBlockN>& range, float (&o)[kOAccum],
                                              Softmax& softmax, PipelineState<Cfg::kStages>& k_state,
                                              const QFragments& q) const {
    // K and V of a block share a stage; V trails K by one block inside the tile and catches up
    // at its end, so only the K position lives across tiles.
    PipelineState<Cfg::kStages> v_state = k_state;
    uint32_t prob[kSAccum / 2];
    const int accumulate = finish_blocks<kFirstPvOverwrites>(s, seq, t, range, o, softmax, k_state, v_state, prob, q);
    if (kNarrow && range.n_end - 1 == range.n_begin && narrow_last_block(seq, t, range)) {
      last_pv<kNarrowN>(prob, o, accumulate, v_state);
    } else {
      last_pv<Cfg::kBlockN>(prob, o, accumulate, v_state);
    }
    if constexpr (kHeldCheckPerTile) {
      if constexpr (Cfg::kHeldCheckOneBlockLate) softmax.note_sums(softmax.late_sums, kKeptSumBound);
      if (!__all_sync(0xffffffffu, softmax.kept_sums_bounded)) {
        if constexpr (Cfg::kTimingWithoutTileRecompute) {
          o[0] = __int_as_float(0x7fffffff);
        } else {
          recompute_tile(s, o, softmax, seq, t, range);
        }
      }
    }
  }

  // The warp's 16 rows of the tile again, the way FlashAttention-2 computes them (each block's
  // max settled before its exp2s, O rescaled where it moved), for a warp where some block's exp2s
  // against the kept max passed the bound (kHeldCheckPerTile): O and the sums built with it are
  // thrown away. A warp alone, with mma.sync (warp_scores.h): Q, K and V from global memory (Q's
  // tile has been released, the stages refilled), S and P in the registers the loop used for
  // them. Rare: scores jumping past the tile's first block's max by more than 16 nats.
  __device__ __forceinline__ void recompute_tile(float (&s)[kSAccum], float (&o)[kOAccum], Softmax& softmax,
                                                 const SequenceInfo& seq, const TileCoord& t,
                                                 const BlockRange<Cfg::kBlockN>& range) const {
    const int row0 = wg * kRowsPerConsumer + 16 * (thread / 32), lane = thread % 32;
    // Operand's offsets (problem.h; varlen batch strides are 0), each row by its query row and
    // head (pack_gqa.h), rows past the sequence reading its last (their output is never stored).
    const Element* q_rows = static_cast<const Element*>(p.q) + t.batch * p.q_batch_stride +
                            int64_t(seq.q_row0) * p.q_row_stride;
    const auto query_row = [&](int r) {
      return q_rows + int64_t(min(tile_row_query<Cfg>(p, t, r), seq.len_q - 1)) * p.q_row_stride +
             int64_t(tile_row_head<Cfg>(p, t, r)) * p.q_head_stride;
    };
    const QueriesInGlobal<Element, Cfg::kNarrowHeadDim> queries(query_row(row0 + lane / 4),
                                                                query_row(row0 + lane / 4 + 8), p.head_dim, lane);
    const int kv_head = tile_kv_head<Cfg>(p, t);
    const Element* v_rows = static_cast<const Element*>(p.v) + t.batch * p.v_batch_stride +
                            int64_t(seq.k_row0) * p.v_row_stride + int64_t(kv_head) * p.v_head_stride;
#pragma unroll
    for (int i = 0; i < kOAccum; ++i) o[i] = 0.0f;
    softmax.reset();
#pragma unroll 1
    for (int n = range.n_end - 1; n >= range.n_begin; --n) {
      recompute_scores_from(s, seq, t, n, 0, queries);
      transform_scores(s, seq, t, n);
      softmax.update(s, p.score_log2);
      softmax.rescale_output(o);
      const int key0 = n * Cfg::kBlockN;
      warp_values<Cfg::kHeadDim, Cfg::kBlockN, Element>(
          leading<kOutAccum>(o), s,
          ValuesInGlobal<Element, Cfg::kNarrowHeadDim>(v_rows + int64_t(key0) * p.v_row_stride, p.v_row_stride,
                                                        seq.len_k - key0, p.head_dim, lane));
    }
  }

  // finish_tile up to its last P V (kLastPvWithNextScores), which is left in prob, v_state (its V
  // stage) and the returned accumulate flag for issue_last_pv_and_first_scores or last_pv. It
  // takes the whole block: where that block was narrowed (the tile's only one), P's later keys
  // are zeroed (V's rows there are finite: keys of the block, or rows zeroed past the sequence).
  template <bool kFirstPvOverwrites>
  __device__ __forceinline__ int finish_tile_but_last_pv(float (&s)[kSAccum], const SequenceInfo& seq,
                                                          const TileCoord& t, const BlockRange<Cfg::kBlockN>& range,
                                                          float (&o)[kOAccum], Softmax& softmax,
                                                          PipelineState<Cfg::kStages>& k_state, const QFragments& q,
                                                          uint32_t (&prob)[kSAccum / 2],
                                                          PipelineState<Cfg::kStages>& v_state) const {
    v_state = k_state;
    const int accumulate = finish_blocks<kFirstPvOverwrites>(s, seq, t, range, o, softmax, k_state, v_state, prob, q);
    if (kNarrow && range.n_end - 1 == range.n_begin && narrow_last_block(seq, t, range)) {
#pragma unroll
      for (int i = kNarrowN / 4; i < kSAccum / 2; ++i) prob[i] = 0u;
    }
    return accumulate;
  }

  // finish_tile's key blocks: every S, softmax and P V but the last P V. Returns its accumulate.
  template <bool kFirstPvOverwrites>
  __device__ __forceinline__ int finish_blocks(float (&s)[kSAccum], const SequenceInfo& seq, const TileCoord& t,
                                               const BlockRange<Cfg::kBlockN>& range, float (&o)[kOAccum],
                                               Softmax& softmax, PipelineState<Cfg::kStages>& k_state,
                                               PipelineState<Cfg::kStages>& v_state, uint32_t (&prob)[kSAccum / 2],
                                               const QFragments& q) const {
    int n = range.n_end - 1;
    const bool narrow = narrow_last_block(seq, t, range);
    if constexpr (kHeldCheckPerTile) {
      softmax.kept_sums_bounded = true;
      if constexpr (Cfg::kHeldCheckOneBlockLate) softmax.late_sums[0] = softmax.late_sums[1] = 0.0f;
    }
    wgmma_wait_group<0>();
    pin_registers(s);
    release_scores_operands(k_state, n == range.n_begin);
    trace(kEvSReady);
    if (kNarrow && narrow) {
      first_probabilities<kNarrowN>(s, prob, softmax, seq, t, n);
    } else {
      first_probabilities<Cfg::kBlockN>(s, prob, softmax, seq, t, n);
    }
    trace(kEvProbsReady);

    // A narrowed block's P V takes only its first kNarrowN keys: in the first step, or at the end
    // when it is the tile's only block. That is found again after the loop rather than kept in
    // a flag across it: the flag was spilled in d64's three warpgroups with the checked max
    // (session 27), and a branch before the loop spilled 32 bytes there. (Session 12 had chosen
    // the flag because the block count spilled 16 bytes at head dim 256 then; check_sass finds
    // no spill in any kernel now.)
    int accumulate = kFirstPvOverwrites ? 0 : 1;
    --n;
    if (kNarrow && narrow && n >= range.n_begin) {
      block_step<kNarrowN>(s, prob, o, softmax, seq, t, range, n, accumulate, k_state, v_state, q);
      accumulate = 1;
      --n;
    }
    for (; n >= range.n_begin; --n) {
      block_step<Cfg::kBlockN>(s, prob, o, softmax, seq, t, range, n, accumulate, k_state, v_state, q);
      accumulate = 1;
    }
    return accumulate;
  }

  // The softmax of the tile's first block (its last key block, kN of its keys), packed into P.
  // Nothing has been added to O yet, so it is not rescaled (with serial steps an O rescale here
  // made ptxas serialise every wgmma, C7515).
  template <int kN>
  __device__ __forceinline__ void first_probabilities(float (&s)[kSAccum], uint32_t (&prob)[kSAccum / 2],
                                                      Softmax& softmax, const SequenceInfo& seq, const TileCoord& t,
                                                      int n) const {
    if constexpr (Cfg::kTimingWithoutSoftmax) {
      wait_exp_turn();
      pass_exp_turn();
    } else {
      scores_to_probabilities<kN>(s, softmax, seq, t, n);
    }
    accumulator_to_operand<Element>(leading<kN / 2>(s), leading<kN / 4>(prob));
  }
};

}  // namespace sm90
}  // namespace flashattn
