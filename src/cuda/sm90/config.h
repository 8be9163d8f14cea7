// Every compile-time constant of the sm90 forward kernel: thread roles, register budget, tile
// shapes and the shared-memory layout. Nothing else in sm90/ hard-codes a size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace flashattn {
namespace sm90 {

// Warpgroup 0 produces (one thread issues TMA); the others (KernelConfig::kConsumerWarpgroups,
// two to four) consume (wgmma + softmax).
constexpr int kWarpgroupThreads = 128;
// The producer needs almost no registers; the consumers take the rest (KernelConfig).
constexpr int kProducerRegisters = 24;

// One wgmma covers 64 rows, so each consumer warpgroup owns 64 rows of the query tile.
constexpr int kRowsPerConsumer = 64;
// The most query rows a tile has (four consumer warpgroups: d64's tall tiles).
constexpr int kMaxBlockM = 4 * kRowsPerConsumer;

// Shared-memory tiles are stored as columns of 64 16-bit elements: one row of a column is one
// 128-byte line, the widest swizzle that both TMA and wgmma understand (bank-conflict free).
constexpr int kColumnElems = 64;
constexpr int kLineBytes = 128;
constexpr int kSwizzleAtomBytes = 8 * kLineBytes;  // 8 lines: the period of the 128B swizzle

// The shared address of 16-byte chunk `chunk` of line `line` of a tile (1024-byte aligned) in the
// 128-byte swizzle: the chunk index is XORed with address bits 7-9, the line mod 8. Taken from the
// line's address, a thread keeps one value live where line % 8 beside it was a second (d64's
// three warpgroups spilled it, session 27).
__host__ __device__ constexpr uint32_t swizzled_chunk(uint32_t tile, int line, int chunk) {
  return tile + line * kLineBytes + ((chunk ^ (((tile + line * kLineBytes) >> 7) & 7)) << 4);
}

// Named barriers (id 0 is __syncthreads): one per consumer warpgroup for its turns (around its
// GEMMs or its exp2s, KernelConfig::kTurns), then one per consumer warpgroup for its epilogue
// (KernelConfig::kEpilogueBarrier0), then with O staged in K / V one per consumer warpgroup for
// the hand-over of its stage (KernelConfig::kStageHandoverBarrier0), then with turns around both
// one per consumer warpgroup for the exp2 turns (KernelConfig::kExpTurnBarrier0).
constexpr int kSchedulerBarrier0 = 1;

// Where the consumer warpgroups take turns (KernelConfig::kTurns): around the issue of their GEMMs
// (FlashAttention-3's ping-pong), around the exp2s of their softmax (cuDNN's, session 16's reading
// of its d64 SASS: the MUFU pipe is the SM's and, at head dim 64, as busy as the tensor cores), or
// both (the exp2 turns then on named barriers of their own, KernelConfig::kExpTurnBarrier0).
constexpr int kTurnsAtGemms = 0, kTurnsAtExp = 1, kTurnsAtBoth = 2;
// KernelConfig's Turns_ when the rule in KernelConfig::kTurns decides.
constexpr int kTurnsByRule = -1;

// Tile indices the dynamic schedule's mailbox holds per CTA (tile_scheduler.h, TileRing).
constexpr int kMailboxSlots = 2;
// CTAs of one launch the mailbox and the V-tail zeroing (mainloop_load.h) hold entries for: the
// launch caps a dynamically scheduled grid, and any grid of two CTAs an SM, at this (cta_slots,
// below). Two CTAs on each of an H100's or H200's 132 SMs fit.
constexpr int kMailboxCtas = 320;

// Key-block width and K/V ring depth per head dim: the largest that fits 227 KB of shared
// memory with the register budget above (S is kBlockN/2, O is HeadDim/2 floats per thread),
// except at head dim 256 (below).
template <int HeadDim>
struct TileShape;
// Consumer warpgroups, where a TileShape does not say otherwise.
constexpr int kDefaultConsumers = 2;
template <class Shape, class = void>
struct ConsumersOf {
  static constexpr int value = kDefaultConsumers;
};
template <class Shape>
struct ConsumersOf<Shape, decltype(void(Shape::kConsumers))> {
  static constexpr int value = Shape::kConsumers;
};
template <>
struct TileShape<64> {
  static constexpr int kBlockN = 128, kStages = 4;
  // Three consumer warpgroups (192-row tiles; FlashAttention-3's choice at head dim 64): at 64
  // columns a warpgroup's GEMMs of a key block take about as long as its softmax's exponentials
  // (MUFU, 16 a cycle per SM), so with two warpgroups taking turns the tensor cores wait for the
  // softmax; with three, a warpgroup's softmax has two other warpgroups' GEMMs to hide under.
  static constexpr int kConsumers = 3;
};
template <>
struct TileShape<128> {
  static constexpr int kBlockN = 128, kStages = 2;
};
// Head dim 96 in d128's shape: its tiles keep two 64-element columns, the second half used (TMA
// zero-fills the rest, wgmma reads 96 of its K and N; KernelConfig::kColumns), so d128's layout,
// descriptors and loaders serve it unchanged, and every product runs on 96 columns, not 128.
template <>
struct TileShape<96> : TileShape<128> {};

// Head dims above 64 up to 128 (96 and 128 are built) take d128's flags below, each timed at 128
// only: d96's kernels are d128's on three quarters of the columns.
constexpr bool in_d128_class(int head_dim) { return head_dim > 64 && head_dim <= 128; }
template <>
struct TileShape<192> {
  static constexpr int kBlockN = 112, kStages = 2;
};
// 64-key blocks, though 80 fit: a 128-row causal tile's diagonal ends on a 64-key boundary, so
// they compute 11% fewer keys at causal 512 (6% at 1k), and once the running max's slack and its
// vote (KernelConfig::kMaxSlack, kMaxByVote) took most of a step's rescale and shuffles away the
// extra steps no longer cost more than that (session 20's harness, two calls, same process:
// +2.5..+3.0% at causal 512, -1.5..+2.7% elsewhere; the cluster pairs, one call, -0.7..+0.7% from
// 1k; session 10, without the slack, had 64-key blocks at -0.4..-11.4%).
template <>
struct TileShape<256> {
  static constexpr int kBlockN = 64, kStages = 2;
};

// Where the row sums of the softmax come from (KernelConfig::kRowSumByTensor).
constexpr int kRowSumByAdds = 0, kRowSumInPv = 1, kRowSumOwnWgmma = 2;
// When the loading thread prefetches the next tile's Q into the L2 (KernelConfig::kPrefetchNextQ).
constexpr int kQPrefetchOff = 0, kQPrefetchBeforeLoads = 1, kQPrefetchAfterLoads = 2;
// Static (snake) or dynamic (atomic counter) persistent tile schedule; see tile_scheduler.h.
// FLASHATTN_SM90_DEFAULT_DYNAMIC=0/1 overrides the default (the device script builds a second
// test binary with the other schedule).
#ifdef FLASHATTN_SM90_DEFAULT_DYNAMIC
constexpr bool kDefaultDynamicSchedule = FLASHATTN_SM90_DEFAULT_DYNAMIC != 0;
#else
constexpr bool kDefaultDynamicSchedule = true;
#endif

// BlockN_, Stages_ and Dynamic_ default to TileShape and the default schedule; benchmarks
// instantiate other shapes through them.
// Output_: how O leaves (see kStagedOutput, kOutputInQ below); kOutputAuto picks by head dim.
// PackGqa_: GQA head packing (see kPackGqa below).
constexpr int kOutputAuto = 0, kOutputDirect = 1, kOutputViaQ = 2;

// Consumers_: consumer warpgroups (1 to 4), 64 query rows each; one only in the packed d64
// kernel of PackGqaOneWgConfig (below), two CTAs an SM.
// Turns_: where the consumer warpgroups take turns (kTurnsAtGemms ...), or kTurnsByRule.
template <int HeadDim_, typename Element_, int BlockN_ = TileShape<HeadDim_>::kBlockN,
          int Stages_ = TileShape<HeadDim_>::kStages, bool Dynamic_ = kDefaultDynamicSchedule,
          int Output_ = kOutputAuto, bool PackGqa_ = false,
          int Consumers_ = PackGqa_ ? kDefaultConsumers : ConsumersOf<TileShape<HeadDim_>>::value,
          int Turns_ = kTurnsByRule>
struct KernelConfig {
  static constexpr int kConsumerWarpgroups = Consumers_;
  // Four only in d64's tall tiles (TallTilesConfig, session 23; the harness's since session 22).
  static_assert(Consumers_ >= 1 && Consumers_ <= 4, "one to four consumer warpgroups");
  static_assert(Consumers_ != 1 || (PackGqa_ && HeadDim_ == 64), "one consumer warpgroup: packed d64 only");
  static_assert(!(PackGqa_ && Consumers_ > 2), "GQA head packing takes tiles of 64 or 128 rows");
  static constexpr int kThreads = kWarpgroupThreads * (1 + kConsumerWarpgroups);
  // CTAs an SM: two with one consumer warpgroup (cuDNN's arrangement of the decode grid: two
  // streams of K / V an SM), one elsewhere. Sets the launch bounds, the register and
  // shared-memory budgets, the grid and the key splits' count of slots.
  static constexpr int kCtasPerSm = Consumers_ == 1 ? 2 : 1;
  static constexpr int kConsumerWarps = kConsumerWarpgroups * kWarpgroupThreads / 32;
  static constexpr int kBlockM = kRowsPerConsumer * kConsumerWarpgroups;
  // setmaxnreg moves registers within what the CTA got at launch (__launch_bounds__(kThreads, 1):
  // 65536 / kThreads rounded down to 8: 168 with two consumer warpgroups, 128 with three, 96 with
  // four). The consumers take what the producer's registers (kProducerRegisters, below: 24 but in
  // the wide packed kernels) leave, at most 240: 240 with two (128 * 24 + 256 * 240 = 64512; 232
  // beside a producer of 32), 160 with three, 112 with four (the launch's 96 a thread, not the 120
  // the register file would leave, bound it there). Asking for more makes the consumers' increase
  // wait forever (two warpgroups: 32 / 240 hangs, which is why the producer stays at 24 elsewhere).
  static constexpr int kLaunchRegisters = (65536 / (kThreads * kCtasPerSm)) / 8 * 8;
  // The loading warpgroup's registers: 24, except in the packed kernels above head dim 128, where
  // the key-block loop with its page lookup (paged_blocks.h: 4 or 3 TMA boxes a block, the table
  // entry and the row in its page live beside the stage's) spilled at 24 (CUDA 13.0: 4 bytes
  // stored, 24 loaded, on every block's path) and fits in 32; their consumers then take 232.
  static constexpr int kProducerRegisters = PackGqa_ && HeadDim_ > 128 ? 32 : sm90::kProducerRegisters;
  static_assert(kProducerRegisters % 8 == 0 && kProducerRegisters >= 24 && kProducerRegisters <= kLaunchRegisters,
                "setmaxnreg.dec takes a multiple of 8 from 24 up to the launch's count");
  static constexpr int kRegistersLeftPerConsumer =
      ((kThreads * kLaunchRegisters / kWarpgroupThreads - kProducerRegisters) / kConsumerWarpgroups) / 8 * 8;
  static constexpr int kConsumerRegisters = kRegistersLeftPerConsumer > 240 ? 240 : kRegistersLeftPerConsumer;
  // (The formula keeps the total within the launch's; the asserts guard a later edit of it.)
  static_assert(kWarpgroupThreads * (kProducerRegisters + kConsumerWarpgroups * kConsumerRegisters) <=
                    kThreads * kLaunchRegisters,
                "setmaxnreg budget exceeds the registers allocated at launch");
  static_assert(kConsumerRegisters >= kLaunchRegisters && kConsumerRegisters % 8 == 0,
                "setmaxnreg.inc takes a multiple of 8 no lower than the launch's count");
  // Named barrier of consumer warpgroup wg's epilogue: kEpilogueBarrier0 + wg.
  static constexpr int kEpilogueBarrier0 = kSchedulerBarrier0 + kConsumerWarpgroups;
  // With O staged in K / V (kOutputInKV): warpgroup wg waits on kStageHandoverBarrier0 + wg until
  // the other has finished reading the stage buffer wg stages its rows in.
  static constexpr int kStageHandoverBarrier0 = kEpilogueBarrier0 + kConsumerWarpgroups;
  // Turns around the issue of the GEMMs and / or around the exp2s (kTurnsAtGemms above); the
  // exp2 turns go round kExpTurnBarrier0 + wg, which is kSchedulerBarrier0 + wg unless both take
  // turns. Around the exp2s only for the two-warpgroup kernel at head dim 64 (the API's short-row
  // kernel; session 16: harness +1.6..+4.1%, package causal 512 / 1k +2.6 / +3.2%), and for the
  // static d128 kernel, which the API runs for masked rows (session 16 and 17's harness on causal
  // rows: -0.6 / +0.4% at 512 / 1k, +0.8..+2.2% from 2k; since session 22 it also runs the
  // unmasked rows up to 2k keys, where these turns had lost 4-6% in session 17 but led the GEMM
  // turns by +0.8..+3.6% in sessions 21-22, with the slack and the vote). Around the GEMMs
  // elsewhere.
  // The dynamic d128 kernel (the API's for unmasked rows from 2049 keys that cluster pairs do not
  // take) took turns around both from session 17 (+2.8..+4.3% from 2k then); with the running
  // max's slack (kMaxSlack below) the GEMM turns alone are faster (session 20's harness, all with
  // the slack: +1.6..+3.3% from 2k over both rings, +0.3..+1.0% over the exp2 ring; against
  // session 19's kernel, both rings without the slack, +1.4..+2.9% from 2k). d256's cluster
  // pairs set their own (ClusterPairsConfig). Measured elsewhere: three warpgroups at d64
  // -3.4..+1.3% with the exp2 turns, -3.2..+1.8% with both; d256 static -1..-2.5% /
  // -0.9..+1.3%, dynamic +0..+4% / -0.8..+3.1% but the API ran it for causal rows up to 1k keys
  // (until session 22; local windows only since), where it gained 0..1%; GQA packing not timed.
  // d96's static kernel (d128's tiles on three quarters of the columns) takes the GEMM turns:
  // with a quarter less product time a block, two warpgroups whose exp2s may not overlap wait on
  // each other (session 59's harness: the GEMM turns +9..+13% unmasked at every length, causal
  // -0.7..+1.2% up to 8k and +21% at 16k, against the exp2 turns). It keeps Q released at load
  // (kQReleasedAtLoad below), the form that harness timed.
  static constexpr bool kStaticD96Class = in_d128_class(HeadDim_) && HeadDim_ <= 96 && !PackGqa_ && !Dynamic_;
  static constexpr int kTurns = Turns_ != kTurnsByRule                                   ? Turns_
                                : (HeadDim_ <= 64 && Consumers_ == 2 && !PackGqa_)        ? kTurnsAtExp
                                : kStaticD96Class                                         ? kTurnsAtGemms
                                : (in_d128_class(HeadDim_) && !PackGqa_ && !Dynamic_)     ? kTurnsAtExp
                                                                                          : kTurnsAtGemms;
  static constexpr int kExpTurnBarrier0 = kStageHandoverBarrier0 + kConsumerWarpgroups;
  static_assert(kStageHandoverBarrier0 + kConsumerWarpgroups <= 16, "16 named barriers an SM");
  static_assert(kTurns != kTurnsAtBoth || kExpTurnBarrier0 + kConsumerWarpgroups <= 16, "16 named barriers an SM");
  static constexpr bool kDynamicSchedule = Dynamic_;
  // Causal tiles longest first within L2-sized groups of heads where the launch's rule allows
  // (true), or always over all heads at once as up to v5 (tile_scheduler.h,
  // longest_first_in_l2_group; the harness times both).
  static constexpr bool kCausalL2Groups = true;
  // GQA head packing (pack_gqa.h): the query heads that share a KV head fill one 128-row tile
  // together. PackGqaConfig sets it; sm90_forward picks that for decode-like GQA (kernel_choice.h).
  static constexpr bool kPackGqa = PackGqa_;
  // The packed kernel's tiles may be cut into pieces by keys (split_keys.h): a decode step has
  // one packed tile per KV head and batch, often fewer than the SMs. A run-time choice
  // (KernelParams::key_splits); the unpacked kernels have no such code.
  static constexpr bool kSplitKeys = PackGqa_;
  // Problems whose head dim is below kHeadDim (a multiple of 8; NarrowHeadDimConfig below).
  static constexpr bool kNarrowHeadDim = false;
  // Clusters of two CTAs on neighbouring query tiles of one head, each loading half of every K/V
  // block into both (ClusterPairsConfig below).
  static constexpr bool kClusterPairs = false;
  // The tile index is decoded (tile_scheduler.h, tile_coord_fast) by FastDivisor's multiply-high
  // instead of integer divisions by run-time values: at every tile start, between the last product
  // of one tile and the first of the next (session 11; false: the divisions, for the harness).
  static constexpr bool kFastTileDecode = true;
  // The epilogue stages O with stmatrix (four 8 x 8 matrices an instruction: d / 32 a thread)
  // instead of one 4-byte store per pair (d / 4): session 12's harness, +0.7-1.5% at head dim 64
  // up to 1k rows, +1-2.6% at head dim 128 unmasked 4k-16k, within +-1% elsewhere, outputs
  // bit-identical (false: the stores, for the harness).
  static constexpr bool kStmatrixEpilogue = true;
  // The LSE goes through shared memory and leaves with O's TMA stores (epilogue.h; where the
  // launch allows it, KernelParams::lse_by_tma) instead of 4-byte global stores whose addresses
  // take the LSE's three 64-bit strides from the kernel's parameters in the epilogue, on the tile
  // boundary's chain (session 36: the traced epilogue ~250 cycles shorter; harness against the
  // stores, 3 rounds: static d128 +1.0..+2.4% up to 2k, d64's static / dynamic / tall kernels
  // +1..+4% at 512 and 1k, level from 4k, cluster pairs level). false: the stores, as before.
  static constexpr bool kLseThroughTma = true;
  // Session 39 (kStoreByProducerWarp, removed): the staged tile handed over through mbarriers to
  // a thread of the producer warpgroup, which issued the TMA stores, so the consumers' epilogue
  // had no named barrier and no TMA issue. No kernel gained at 512 / 1k keys; the long rows lost
  // 1-2.6%, about half of it the thread's polls (docs/perf.md).
  // The mask tests each score against one bit of a per-row word of kept columns (softmax.h
  // mask_row, cuda/common/mask_bits.h) instead of comparing its column with the row's bound:
  // ptxas moves seven bits at a time into predicates (R2P), where the compares took one ISETP a
  // score. On for 128-key blocks (head dims 64 / 128: session 13's harness, +0.7..+1.5% at d64
  // causal, +1.9% at d128 causal 512, outputs bit-identical); off for d256's blocks (at 80 keys,
  // before session 20, it read -0.5..-3%, mostly unmasked rows, whose one partial block the mask
  // touches: the schedule, not the mask; 64 keys not measured) and the other widths not measured
  // (false: the compares, for the harness).
  static constexpr bool kMaskByBits = BlockN_ == 128;
  // A block's row max as a tree of pairwise fmax (OnlineSoftmax): a thread's kBlockN / 4 scores
  // of a row in log2(kBlockN / 4) + 1 dependent fmax before the exp2s instead of two chains of
  // kBlockN / 8 (cuDNN's order, read from its SASS). On at head dim 64 (session 16's harness:
  // three consumer warpgroups +1.1..+2.4% up to 2k, two within +-0.2% at the causal rows they
  // run); off above, where it read -0.5..+0.5% at d128 and -0.1..-1.4% at d256 (outputs
  // bit-identical; the harness flips it either way).
  static constexpr bool kTreeRowMax = HeadDim_ <= 64;
  // Serial steps (MainloopMma::block_step): a block's softmax waits for both its S and the
  // previous block's P V, which are issued together, so O is free during the softmax (cuDNN's
  // loop as session 16 read its d64 SASS). false: the softmax of S under the previous P V
  // (FlashAttention-3's intra-warpgroup overlap). Harness only (session 17: -19..-22% unmasked,
  // -3..-5% causal at d64 two warpgroups; docs/perf.md).
  static constexpr bool kSerialSteps = false;
  // With serial steps and turns around the exp2s: O rescaled unconditionally inside the exp2 turn,
  // its multiplies free to fill the MUFU's issue gaps (cuDNN's), instead of after the softmax and
  // only when some row's max moved.
  static constexpr bool kRescaleInExpTurn = false;
  // A consumer warpgroup whose rows see no key of the tile's last block passes over it (its turns
  // and releases, no GEMM or softmax; MainloopMma::pass_over_block): on the causal diagonal,
  // warpgroup 0 at d256's 80-key blocks as timed (one block a tile at 512 causal rows, 4 of its 18
  // a head; with the 64-key blocks since session 20, the last block of every diagonal tile),
  // and warpgroup 0 of every 192-row d64 tile (warpgroup 1 of some), where the narrowed block
  // still computes S whole. Not with GQA packing. Session 18: within the noise wherever the API
  // runs these kernels (80-key blocks, no slack). Session 21, 64-key blocks, two harness calls of
  // 4 rounds: the dynamic d256 kernel (the API's for causal rows up to 1k) +2.0 / +2.2% at causal
  // 512, +0.2 / +1.9% at 1k, +0.2..+2.3% beyond, unmasked level; the static one -1.3..-2.7% from
  // causal 2k. So on in the dynamic d256 kernel only from session 21. Session 22 moved d256's
  // causal rows up to 1k to the static kernel with one head a group (kernel_choice.h), where it
  // read (harness, 6 rounds, one head a group at every length) +2.8 / +2.0% at causal 512 / 1k,
  // +1.4 / +0.8 / +0.6 / +0.6% at 2k / 4k / 8k / 16k: on in both d256 kernels since. On with four
  // warpgroups (d64's tall tiles, where up to three trailing 64-key blocks of a diagonal tile are
  // passed over): session 23's harness, 4 rounds, +6.7 / +6.8% at causal 512 / 1k. False elsewhere
  // (d192 not timed).
  static constexpr bool kSkipMaskedLastBlock = (HeadDim_ == 256 || Consumers_ == 4) && !PackGqa_;
  // A consumer warpgroup none of whose rows is a row of the sequence (the last query tile of a
  // sequence whose length is not a multiple of the tile's rows: at d64's 192-row tiles the third
  // warpgroup at 512 and 2k rows, the second and third at 1k; in 128-row tiles the second where
  // the length is 1..64 past a multiple of 128) passes over the whole tile (its turns and
  // releases, no GEMM, softmax or store; MainloopMma::pass_over_tile) instead of computing the
  // key blocks for rows that are never stored. Overlapped epilogue only (kernel.h; the plain tile
  // loop computes them). Session 21's
  // harness, same process, 4 rounds, d64's three warpgroups (static / dynamic): causal 512 +3.8 /
  // +3.8%, 1k +7.8 / +7.6%, 2k +3.9 / -0.8%; unmasked 512 +0.1 / +1.1%, 1k +0.9 / +3.6%; from 4k
  // -0.3..+3.4% (where the lengths leave none: within the noise, as the dynamic d128 kernel's
  // -0.8..+0.6%); outputs bit-identical (false: the harness's `_computerowless`). With GQA packing
  // since session 63 (MainloopMma::rowless counts packed rows): a decode step's tile holds
  // seqlen_q x G rows, 4 at (1, 32 / 8), so the second warpgroup computed 64 rows never stored.
  static constexpr bool kSkipRowlessWarpgroups = Consumers_ > 1;  // one warpgroup holds row 0
  // GQA packing: where a warpgroup's threads' second fragment rows (tile rows 8..15 of each warp)
  // hold no query row, as in a decode step's tile of G <= 8 rows, its softmax takes the first
  // rows alone (MainloopMma::second_rows_rowless): half the exp2s. Session 90 (H100, bench_decode,
  // d64 GQA 32 / 8, against a build without it, two processes each): +1..+2% at (2, 32k), (8, 8k),
  // (1, 32k) and (5, 8k); its trace had the softmax at a third of a key block's step, but the
  // untraced kernel is bound elsewhere (the whole softmax left out gained only 4-9%).
  // Head dim 64 only: d96 / d128 take the checked max (another softmax), d192 is untimed, and at
  // d256 the packed kernel spilled with it (4 bytes). FLASHATTN_SM90_PACKED_WHOLE_SOFTMAX leaves
  // it out of a build (the device script's A/B).
#ifdef FLASHATTN_SM90_PACKED_WHOLE_SOFTMAX
  static constexpr bool kSkipRowlessHalves = false;
#else
  static constexpr bool kSkipRowlessHalves = PackGqa_ && HeadDim_ == 64;
#endif
  // The previous block's P V waited for, and its V stage released, right after this block's row
  // max instead of after its exp2s (MainloopMma::block_step, overlapped steps): session 18's
  // trace had the loading thread waiting ~2.2-2.5k cycles a block for a free V stage (d128
  // unmasked 8k, d256 causal 1k), a stage that frees only when the later warpgroup's softmax
  // ends, and the next K queued behind it. With kRescaleAfterMax O is rescaled there too. Outputs
  // bit-identical. Harness only: session 18 measured -2..-7% in the dynamic d128 kernels and
  // at d256, +3-8% in the static d128 kernel (exp2 turns) on unmasked rows up to 2k only.
  static constexpr bool kReleaseVAfterMax = false;
  static constexpr bool kRescaleAfterMax = false;
  // The running max the exp2s subtract is kept until a block's row max passes it by more than
  // this many log2 units (OnlineSoftmax, kMaxSlack; 0: it follows every rise). With it, O's
  // rescale (kHeadDim / 2 multiplies a thread) runs on few blocks after a row's first: when the
  // max follows every rise, some row of a warpgroup's 64 moves on most blocks of the first
  // hundred. Exact: the final 1 / l and L use the same max. Session 19's harness, against the
  // same kernel without it: d256 +2..+8% (static, dynamic and cluster pairs, every protocol row
  // but causal 512), the static d128 kernel (exp2 turns, the API's for causal rows) +1.8..+2.4%
  // from 2k. Session 20's, with the vote (kMaxByVote): the short-rows d128 kernel (GEMM turns)
  // +0..+3.6% at 512 / 1k, the dynamic d128 kernel with the GEMM turns above; d64's three
  // warpgroups +1.6..+3.0% static from 2k (causal 2k / 4k, where the API runs it: +1.7 / +1.6%)
  // and +1.4..+2.8% dynamic from 2k (causal 8k / 16k: +1.4 / +2.1%), -0.7..+2.1% below. Off on
  // the d64 two-warpgroup kernel (the API's for masked rows up to 1k then, 512 since session 21):
  // -1.6% / +0.3% at causal 512 / 1k (session 19 without the vote: -0.9 / -1.3%; session 21 with
  // the vote and the unit rescale: level at 512, +0.9..+3.9% beyond). d192 (d256's loop and
  // output path) not timed; GQA packing not timed, off.
  static constexpr int kMaxSlack = !PackGqa_ && !(HeadDim_ <= 64 && Consumers_ == 2) ? 8 : 0;
  // With a slack: each thread first tests its own maxes of its two rows against the slack, and a
  // warp where none passes keeps every row's max without the two shuffles a row that make the
  // quad's max (one vote instead of four dependent shuffles before the exp2s; the same values).
  // Session 19's harness against the slack alone: d256 +0.1..+4.5%, the static d128 kernel
  // +0.7..+11.7% (causal +1.3..+4.7%), and with a slack given them in the harness the dynamic
  // d128 kernel -0.9..+2.6%, d64 0..+4.8%; outputs bit-identical (false: the harness's _novote).
  static constexpr bool kMaxByVote = true;
  // Where the vote keeps every row's max, O's rescale factor is 1 without its exp2 (two of the 66
  // MUFU ops a thread issues per 128-key block at d128, session 20's SASS inventory; the same
  // values). false: exp2(0) computed, as up to session 20 (the harness's _keptexp2). Session 21's
  // harness: d64 three warpgroups +0..+5.4%, d128 static (exp2 turns) +0.2..+3.6%, d256 static
  // -0.8..+2.8%, the dynamic and cluster kernels level; the static d128 kernel with the GEMM
  // turns (the API's for unmasked d128 rows up to 1k keys until session 21) -2.8 / -3.5% at
  // 512 / 1k (session 22: -1.5 / -0.3%); the static kernel with the exp2 turns runs those rows
  // since.
  static constexpr bool kKeptMaxUnitRescale = true;
  // Where a row's sum of P comes from (OnlineSoftmax): kRowSumByAdds, one FADD a score as in
  // FlashAttention-3; or the tensor cores, P V taking 8 more columns whose B is all ones, so each
  // of those accumulators is its row's sum (of the 16-bit P that P V takes), rescaled with O: one
  // instruction a score fewer in a softmax bound by instruction issue (S scaled first, one more,
  // lost 2-7% at d64 / d128 in session 25). Either in the P V wgmma itself (kRowSumInPv,
  // N = head dim + 8; the ones column sits one LBO past V's start, which is free only where V has
  // one 64-element column: head dim 64), or in an m64n8k16 of its own a 16-key step
  // (kRowSumOwnWgmma; harness only). Session 25's harness against the adds (calls 2 / 3, 4 / 6
  // rounds): d64's three warpgroups static +0.0..+2.8 / -0.1..+3.5%, dynamic +0.4..+3.3 /
  // +0.2..+3.9%; two warpgroups (the short-rows kernel, windows up to 512 keys) +2.0 / +0.5% at
  // 512 / causal 512 and -1.5..+2.0% beyond; the own wgmma lost at d64 (-2.0..+1.1%), d128
  // (-0.4..-27%) and d256 (-0.2..-3.9%). Off in d64's tall tiles (four warpgroups): -2.5 / -3.0% at
  // unmasked 512 and +0.1..+0.8% at causal 512 / 1k, the rows the API runs them for, though
  // +1.8..+5.4% from 2k. Off with GQA packing (not timed), and under the checked max (below),
  // which reads the sums before P V: d64's three warpgroups traded them for it in session 27.
  // Checked max (MainloopMma::checked_probabilities): after a tile's first block the exp2s
  // subtract each row's kept max without the block's row max (one FMNMX a score, the vote and
  // its compares, in a softmax bound by instruction issue). Each thread's row sums then check
  // that no exp2 passed the bound (MainloopMma::kKeptSumBound); a warp where one did computes S
  // again with mma.sync from Q and the block's K (kFallbackKeysFromGlobal, below), and takes the
  // block with its own max. The tile's last block (whose Q is released early) and warps with a row
  // that has seen no key take the block's max as before. Needs the sums by adds (below). Session
  // 27's harness (3 rounds) against the same kernels without it, on the rows the API runs them
  // for: d64's dynamic three warpgroups (unmasked from 1k, causal from 4k) 0.0..+3.0%, its static
  // ones (causal 1k-4k) -0.7..+1.4% (+1.7..+3.0% unmasked from 2k); d128's cluster pairs
  // (unmasked from 4k) 0.0..+0.7%, its dynamic kernel (unmasked 2k-4k) +0.1%, +1.3 / +1.4% at
  // unmasked 8k / 16k (rows the pairs refuse) and -0.6..-1.7% causal (rows it runs only with
  // windows past 2k keys); the tall d128 tiles +0.9 / +1.7% at causal 8k / 16k; GQA packing at
  // d128 +2.3% (causal 2k / 8k). Off where session 26 saw no gain: the static d128 kernel
  // (level), d64's two-warpgroup kernel (-15% unmasked: its exp2 turns lose their stagger, as
  // with the adds of session 25), d64's tall tiles (-2.6% at causal 512), d256 (-1.1..+1.3%).
  // Session 28, with the fallback's K from global memory, against the API's kernels without it:
  // the static d128 kernel -0.4 / -0.1 / +1.3% at unmasked 512 / 1k / 2k and +0.8% at causal
  // 2k-8k, but -3.6% at causal 512; d256 -2.6..+1.8%. Since session 29 the static d128 kernel
  // has it (with Q in registers, below; session 29's first call, the checked max alone against
  // main: +0.9..+2.7% unmasked from 1k, -1.2..0.0% causal from 1k, -3.8% at causal 512), and the
  // API runs rows of at most kSm90ShortRowsMaxKeys keys at d128 on a twin without either
  // (ShortRowsConfig below); d256 stays off.
  // ClusterPairsConfig takes the static d128 kernel's (it derives from the static schedule).
  static constexpr bool kCheckedMax = in_d128_class(HeadDim_) || (HeadDim_ == 64 && Consumers_ == 3);
  static constexpr int kRowSumByTensor =
      HeadDim_ == 64 && !PackGqa_ && Consumers_ != 4 && !kCheckedMax ? kRowSumInPv : kRowSumByAdds;
  // The checked max's fallback reads the block's K from global memory (warp_scores.h), so the
  // K stage is released as soon as S has retired rather than held until the check (false, as in
  // sessions 26-27): the held K kept the producer's next load waiting. Session 28's harness (3
  // rounds) against the held form: d64's three warpgroups +0.9..+3.5% on every row, d128's
  // dynamic kernel +0.3..+3.4% unmasked (-1.3..+0.8% causal), its pairs -0.2..+0.9%, its tall
  // tiles -1.2..+2.7% (+0.6..+2.4% causal).
  static constexpr bool kFallbackKeysFromGlobal = true;
  // Timing only (the harness's `_noheld`): the kept max's rounds are taken as held without the
  // warp's vote on the exp2 sums, wrong where a block's scores pass the kept max by more than
  // the bound allows. Session 52's pipe probe: the vote and its branch cost its kept-max round
  // ~64 cycles of a ~2360-cycle step.
  static constexpr bool kSkipHeldCheck = false;
  // With the checked max, P is packed for the next P V as soon as the previous P V has retired,
  // before the warp's held vote (packed again after a fallback round). Without it the 32 packs
  // came after the held vote's branch, in series on the way from the last exp2 to the next GEMM
  // issue (session 52: the cluster pairs' SASS had all 32 F2FP there; in the pipe probe ptxas
  // interleaves them with the exp2s). Skipping O's rescale vote where a block kept every max as
  // well made the d64 three-warpgroup, cluster-pair and d128 tail kernels spill 4-16 bytes.
  // Session 52's harness (4 rounds each, against the packs after the vote): d64's three
  // warpgroups -3.3% time at unmasked 2k, -3.4% at 8k, -2.5% at causal 2k; d128 mixed within the
  // call's spread (static +0.8% at unmasked 2k, -3.2% at causal 8k; pairs +1.5% at 2k, level at
  // 8k, +1.9% on one pair alone), so d128 keeps its packs after the vote.
  static constexpr bool kPackBeforeHeldCheck = HeadDim_ <= 64;
  // The checked max's bound tested once a tile instead of once a block (MainloopMma::
  // kHeldCheckPerTile): each thread ANDs its blocks' bound tests into a flag (no vote, no branch
  // in the key loop), each warp votes once after the tile's last P V, and a warp where some block
  // passed the bound throws its O and sums away and computes its 16 rows of the tile again with
  // mma.sync from global memory (MainloopMma::recompute_tile). Each block's sums are tested one
  // block later (kHeldCheckOneBlockLate; the last block's at the tile's end): tested in the block
  // that makes them (harness `_tileheld`), the compares made the sums' FADD chains finish inside
  // the exp2 run, and the static d128 kernel took 1.9% more time a clock than with the vote a
  // block (`_blockheld`, the form up to session 52), where a block late it takes 1.7% less
  // (session 53's pair step; leaving the check out, `_noheld`, -2.9%; the cluster pairs +0.5%,
  // -2.7%, -2.6%). bf16 only: its bound (2^24 on a thread's block sum, 16.6 nats past the kept
  // max) is passed by scores built to jump (the tests' early_key_boost), while fp16's 2^15 (10.4
  // nats) can be passed by an attention sink's key block, which the per-block check recomputes
  // alone and the tile form would pay for with the whole tile at mma.sync speed. Two consumer
  // warpgroups only (240 registers a thread): with three (160) the recompute's registers made
  // ptxas spill 6-15 words of the tile loop's state. The static d128 kernel, its tail kernel and
  // the cluster pairs from session 53; the dynamic d128 kernel from session 54 (harness, 6 rounds,
  // against the vote a block: +1.0 / +0.6 / +1.6% at unmasked 4k / 8k / 16k, -1.6% time a clock
  // in the pair step). Not with GQA packing (not timed; its tiles are a few blocks long, where
  // the vote a block costs little).
  static constexpr bool kHeldCheckPerTile =
      std::is_same<Element_, __nv_bfloat16>::value && Consumers_ == 2 && !PackGqa_;
  static constexpr bool kHeldCheckOneBlockLate = true;
  // Timing only (the harness's `_tilenoredo`): with kHeldCheckPerTile a failing warp's O is
  // poisoned (NaN) instead of computed again, so that the kernel carries the flag and its vote but
  // not the recompute's code.
  static constexpr bool kTimingWithoutTileRecompute = false;
  // S = Q K^T with Q's A fragments in registers for the first kQStepsInRegisters 16-column steps
  // of the head dim (wgmma RS with a K-major B, loaded by ldmatrix once a tile, 4 registers a
  // thread a step: 32 at d128), the other steps' read from shared memory by every wgmma (SS): a
  // third fewer of S's shared-memory operand reads at d128, where the kernels run at the card's
  // power cap (clocks 1.6-1.98 GHz under load). Session 29's harness (two calls, 3 rounds each)
  // against the same kernels without it: the static d128 kernel (checked max) +2.0..+3.7%
  // unmasked from 2k and +1.7..+4.8% causal from 2k (-0.9..+1.8% at 512 / 1k), the dynamic one
  // +0.6..+5.5%, the cluster pairs +0.6..+5.4%. Not in the short-rows twin without the checked
  // max (-2.3 / -3.7% at 512, the rows it runs), nor with GQA packing (not timed). With all of Q
  // d128's tall tiles, d64's three warpgroups and d256 spill (96-208 bytes) and serialise their
  // wgmmas; d64 spills with half of it, d256 does not with a quarter or a half but read level
  // (-0.4..+0.8% with a half, -4.2..+0.3% with a quarter). Timed with 128-key blocks only (the
  // harness's other widths have no RS wrapper).
  static constexpr int kQStepsInRegisters =
      in_d128_class(HeadDim_) && Consumers_ == 2 && !PackGqa_ && BlockN_ == 128 ? HeadDim_ / 16 : 0;
  // Per-CTA event records of where a tile's time goes (trace.h): harness only, its `_trace`
  // variants; every trace call compiles to nothing without it, so the library's code is unchanged.
  static constexpr bool kTrace = false;
  // The split tail's timeline (trace.h, timeline_mark): harness only.
  static constexpr bool kTailTimeline = false;
  // Harness only, wrong output on purpose: what a tile boundary's epilogue costs in time
  // (session 39). kTimingWithoutStore: the epilogue is never run (kernel.h, overlapped_tiles;
  // skipped by a run-time test, params.h harness_leaves_out, so the normalisation it would read
  // is still computed).
  static constexpr bool kTimingWithoutStore = false;
  // Inside the epilogue (epilogue.h): O not converted and staged (the fence, barriers and TMA
  // stores kept, of whatever the tile holds), or staged but not sent (no TMA store issued).
  static constexpr bool kTimingWithoutStaging = false;
  static constexpr bool kTimingWithoutSend = false;
  // Harness only, wrong output on purpose: every key block's softmax left out (S goes into P as it
  // is; no max, exp2, row sum or rescale), its waits, turns and releases kept (mainloop_mma.h,
  // block_step): what the GEMMs and the pipeline around them reach without it (session 43).
  static constexpr bool kTimingWithoutSoftmax = false;
  // Harness only, wrong output on purpose: every exp2 of the key loop left out (the value it would
  // take stays), the rest of the softmax kept: what the MUFU pipe's share of it costs. (Session 43
  // computed some exp2s by a polynomial on the FMA pipe instead, FlashAttention-4's move: -6..-22%,
  // the exp2 pass being bound by issue; removed, docs/perf.md.)
  static constexpr bool kTimingWithoutExp2 = false;
  // (Session 51 compiled the softmax's run-time soft-cap and mask tests out, kSkipScoreTransforms,
  // removed: level at d128 / d256 unmasked 2k and 8k but for the pairs at 2k, +2.4%; ptxas keeps
  // the tests off the step's chain.)
  // (Session 51 timed the key loop's steps without their K / V waits, kTimingWithoutKvWaits,
  // removed: d128 8k +1.4% in the pairs and +3.5% in the static kernel by the medians, nothing
  // without the softmax, d256 -2.7%; docs/perf.md. Such a variant can crash at short rows: a
  // stage released before its copy lands gets the next copy's bytes on an unexpected phase.)
  using Element = Element_;
  static constexpr int kHeadDim = HeadDim_;
  static constexpr int kBlockN = BlockN_;
  static constexpr int kStages = Stages_;
  // One depth for the K and V rings. Session 50 (kKStages, removed) gave d128's static kernel three
  // K stages beside two V stages and the output tile (224 KB), with Q / K and V loaded by two
  // threads: +1.8% at unmasked 512, a loss from 2k (medians -1..-2.6%) and -7.5% at causal 512.
  // Columns of 64 elements a tile row spans: the last one partly used at head dim 96.
  static constexpr int kColumns = (kHeadDim + kColumnElems - 1) / kColumnElems;
  static_assert(kHeadDim % 16 == 0, "S = Q K^T steps 16 columns of the head dim at a time");
  static_assert(kBlockN % 16 == 0, "P V consumes keys 16 at a time");
  static_assert(sizeof(Element) == 2, "16-bit elements only");

  // Bytes of one column of a tile, and of whole tiles.
  static constexpr int kQColumnBytes = kBlockM * kLineBytes;
  static constexpr int kKVColumnBytes = kBlockN * kLineBytes;
  static constexpr int kQBytes = kQColumnBytes * kColumns;
  static constexpr int kKVStageBytes = kKVColumnBytes * kColumns;

  // Two CTAs an SM: each gets half of the SM's 228 KB less the 1 KB the SM reserves a CTA.
  static constexpr int kSmemLimit = kCtasPerSm == 2 ? 113 * 1024 : 227 * 1024;
  // Q full/empty, K and V full/empty per stage, full/empty per tile mailbox slot, the V-tail
  // zeroing job's full/empty (mainloop_load.h) (+ 8 spare bytes).
  static constexpr int kBarrierCount = 2 + 4 * kStages + 2 * kMailboxSlots + 2;
  static constexpr int kFixedBytes = 8 * kBarrierCount + 8 + kSwizzleAtomBytes;  // + alignment slack
  // The output goes through its own shared-memory tile and a TMA store when that tile fits
  // beside Q and the K/V ring (head dims up to 128); larger head dims store O from registers.
  // Either way Q is free once the tile's last S = Q K^T has retired, so the producer loads the
  // next tile's Q while this tile's last P V and epilogue still run.
  // The tile of ones P V's ones column reads (kRowSumByTensor): 16 keys of one swizzled column.
  static constexpr int kOnesBytes = kRowSumByTensor != kRowSumByAdds ? 2 * kSwizzleAtomBytes : 0;
  static constexpr bool kStagedOutput =
      2 * kQBytes + 2 * kStages * kKVStageBytes + kOnesBytes + kFixedBytes <= kSmemLimit;
  // Without room for an output tile, at head dims 192 / 256 with two consumer warpgroups, O is
  // staged in the K / V stage of the tile's last key block, warpgroup 0's rows in K and warpgroup
  // 1's in V (a stage has kBlockN rows of shared memory, so at least the 64 a warpgroup needs
  // whatever the block's valid keys): Q is then free after the
  // last S = Q K^T as with an output tile, and the next tile's Q loads under this tile's last
  // P V and epilogue (staged in Q the consumers waited for it at every tile start: 10.9% of the
  // samples at d256 512, docs/perf.md session 8). The stage's release waits for the store
  // instead, which delays only the next tile's second key block.
  static constexpr bool kOutputInKV = !kStagedOutput && Output_ == kOutputAuto && HeadDim_ >= 192 &&
                                      Consumers_ == 2 && BlockN_ >= kRowsPerConsumer && !PackGqa_;
  // Otherwise O is staged in the warpgroup's own rows of the Q tile (as v1 did: 16-byte stores or
  // one TMA store instead of 4-byte stores from registers), and Q is then released after the
  // epilogue instead of after the last S = Q K^T. Output_ may force either.
  static constexpr bool kOutputInQ = !kStagedOutput && Output_ != kOutputDirect && !kOutputInKV;
  // The next tile's first S = Q K^T issued before this tile's epilogue (kernel.h,
  // overlapped_tiles): needs Q free by then, i.e. the output in a tile of its own. (Session 37
  // sent the staged tile, its fence, barrier and TMA stores, only once the next tile's first
  // P V was out, from a copy of the first step or from the loop's step: every kernel lost 1-17%,
  // the key loop's code rescheduled for a boundary that gained ~100-250 traced cycles;
  // docs/perf.md.) Session 40 ran the whole epilogue later still, between the next tile's second
  // S and its first P V (O kept across the first softmax): d64's tall tiles -0.4..-4.4%, and the
  // static d128 kernel's descriptors left the uniform registers (-8..-26%); the epilogue costs its
  // length on a warpgroup's chain wherever it sits there.
  static constexpr bool kOverlapEpilogue = kStagedOutput;
  static_assert(!(kStagedOutput && Output_ != kOutputAuto), "the output tile fits: no other output path");
  // A consumer warpgroup whose rows see none of the last key block's keys past its first half
  // (the causal diagonal of warpgroup 0's rows, a short last block) runs that block's softmax and
  // P V over only those columns (mainloop_mma.h, kNarrowN). Not with GQA packing, whose tile rows
  // are not consecutive query rows, and not without an output tile of its own (head dims 192 / 256,
  // 176-key blocks): there the narrowed step's code left ptxas short of registers for the wgmma
  // pipeline and it serialised every wgmma (C7511). false: the harness's reference.
  static constexpr bool kNarrowLastBlock = !PackGqa_ && kStagedOutput;
  // Q's tile released as soon as the tile's first S = Q K^T has been issued, where every step of
  // S takes Q's fragments from registers (kQStepsInRegisters, all of the head dim): the producer
  // loads the next tile's Q under this whole tile rather than under its last block, and the
  // tile's last block may keep its max too (the checked max's fallback reads Q from global
  // memory, warp_scores.h). MainloopMma::kQReleasedAtLoad checks that all of Q is in registers
  // (a config that derives fewer steps keeps Q's tile). Session 30's harness (3 rounds, two
  // calls) against main's static d128 kernel (turns around the exp2s): +0.3..+2.1% unmasked,
  // +2.5..+4.4% causal up to 8k, +0.4..+1.6% GQA; against the short-rows twin at 512 keys +1.5% /
  // +1.5% causal. Most of it is the tile's last block keeping its max (a short tile has few
  // blocks). The kernels with turns around the GEMMs lost with it (dynamic -0.9..-1.9% from 4k,
  // cluster pairs -1.4..-3.0% from 2k; not understood), so they keep Q's tile until their last
  // S, as before.
  // d96's static kernel keeps it with the GEMM turns (kStaticD96Class above; its turns were timed
  // with Q released at load).
  static constexpr bool kQReleasedAtLoad = kTurns == kTurnsAtExp || (kStaticD96Class && Turns_ == kTurnsByRule);
  // The tile's last P V issued together with the next tile's first S = Q K^T (kernel.h,
  // overlapped_tiles), and O normalised while that S runs: a tile's boundary cost about 0.9 key
  // blocks of time a tile in session 30's traces of the static d128 kernel (2k-8k keys), and its
  // serial start (Q's and K's waits, the first S alone, the wait for the last P V) is part of
  // that. Needs Q's tile released at load (the next Q has landed by then) and the overlapped
  // epilogue; MainloopMma::kLastPvWithNextScores checks the rest. Harness only (`n128_s2_lastpv`):
  // correct (session 31: every sm90 test and the sanitizers with it on in the library), but
  // slower where the boundary weighs most (-5.4% at 512 keys, -2.3% at 1k, -3.5..-3.9% causal
  // 512 / 1k; +2..+3% only at 8k / 16k; session 48: -7.2% at 512; session 49: -8.9 / -4.1 /
  // -2.4% at 512 / 1k / 2k). Traced it is the faster one (session 48: 7% fewer cycles a tile at
  // 512), but the trace's records cost the library's form 23-26% and this one 12-22% (session 49),
  // so traces cannot rank the two. Moving the next tile's classification and Q's fragments ahead
  // of the last P V (session 48, kNextTileAhead, removed) lost more.
  static constexpr bool kLastPvWithNextScores = false;
  // Sessions 49-50 (kClaimedLastWave, removed): the static schedule's last partial wave claimed
  // on an atomic counter by the CTAs that begin their last whole tile first, instead of the
  // snake's fixed half. The claim's own steps cost 1-3% up to 2k, and its order gained nothing
  // net of them unmasked (the first to start are not the first to finish) and broke the snake's
  // pairing of long and short tiles causal (-5..-11% at d256 causal).
  // Session 38 (kWorkUnderLastPv, removed): each row's 1 / l and LSE and the next tile's
  // classification placed between the last P V's issue and its wait. Every kernel within
  // -4..+1% (static d128 unmasked 512 / 1k -0.7 / -0.6%); the traces had the P V hidden but the
  // work itself ~1120-1280 cycles under it against ~880 after the wait, so the boundary kept its length.
  // The static schedule's last, partial wave cut by keys and shared out evenly over the CTAs
  // (split_tail.h), for problems whose tiles are all alike (unmasked, one length; the launch's
  // rule, launch.h): at the protocol's shapes 68 of 132 CTAs (d128) or 100 (d256) otherwise run
  // one tile more than the rest. The tail runs as a kernel of its own (TailKernelConfig, launched
  // after this one's whole waves), so that this kernel's code stays what it was without it: the
  // split compiled into it (session 31) left the key loop's instructions in another order and
  // lost 2-3% on rows it did not split. kHasTailKernel: the static d128 and d256 kernels of two
  // consumer warpgroups have one (not d96's: the tail's merge moves O in batches of 8 float4s a
  // thread, split_tail.h, and d96 has 12); kSplitTail: this is the tail kernel.
  static constexpr bool kHasTailKernel = !Dynamic_ && !PackGqa_ && Consumers_ == 2 &&
                                         (HeadDim_ == 128 || HeadDim_ == 256) && BlockN_ == TileShape<HeadDim_>::kBlockN;
  static constexpr bool kSplitTail = false;
  // The fewest keys at which the launch splits the tail. A tail CTA pays about 10 us besides its
  // share of the work (its start and first Q, a second piece's start, a partial O written, the
  // merge; session 32's timeline), and the tail ends as spread as the whole waves did (4-14 us),
  // so the split loses below 4k keys and gains from 8k: harness against main's kernel, two calls,
  // d256 -4.0 / -5.1% at 1k, -1.1 / -2.6% at 2k, -1.3 / -0.1% at 4k, +0.6 / +1.4% at 8k,
  // +0.7 / +1.6% at 16k (d128 -5.7% at 1k, +0.4 / +0.5% at 8k; the API runs cluster pairs there).
  static constexpr int kSplitTailMinKeys = 8192;
  // The CTA's next tile's Q brought into the L2 by the loading thread (mainloop_load.h,
  // prefetch_next_q). Q is read once, so a tile's Q load otherwise comes from DRAM, every CTA's at
  // about the same time at a wave's boundary (132 x 32-64 KB); where Q's tile is held until the
  // tile's last S (d256) the next tile's first S waited for it (the traces' "Q wait", 1-5% of a
  // tile at 2k in sessions 18-19). Where the static walk ends and a tail kernel follows, each CTA
  // prefetches one of the tail's tiles instead. When (session 33's harness, 3 rounds each, % over
  // the same kernel without it):
  // - kQPrefetchBeforeLoads, as the tile's loads begin (a tile ahead): -3.7 / -4.8% at d256 512
  //   unmasked / causal, -2% at 1k, +0.5..+1.6% at 8k / 16k; the static d128 kernel -0.7..-2.5%
  //   causal. About 0.4 us a tile, as if the tile's own first K and Q had queued behind it.
  // - kQPrefetchAfterLoads, once the tile's loads are all out (about two key blocks before the
  //   consumers finish it, and before the next Q's own load where Q is held): d256 -0.8 / -0.7% at
  //   512 / 1k, +0.5% at 2k, +0.7 / +1.8 / +1.0% at 4k / 8k / 16k, causal -2.0 / -1.2 / 0.0 /
  //   +1.1 / +1.8 / +2.6% (512-16k); the static d128 kernel +1.5 / +1.3% at unmasked 512 / 1k,
  //   -0.5..-0.7% at 2k / 4k, causal -0.1..-0.6%; d128's cluster pairs -0.6..+1.6%, d64's static
  //   three warpgroups and tall tiles -0.7..+1.7% (+3.8% at unmasked 512, a row they do not run).
  // So the two-warpgroup static kernels prefetch after the loads, d256 from kQPrefetchMinKeys
  // keys and d128 up to kQPrefetchMaxKeys (the longest sequence's keys, p.seqlen_k); the others
  // not (kQPrefetchOff). The static schedules only: the dynamic one's next index is not the
  // loading thread's until the tile's loads are out.
  static constexpr int kPrefetchNextQ =
      !Dynamic_ && !PackGqa_ && Consumers_ == 2 && (in_d128_class(HeadDim_) || HeadDim_ == 256) ? kQPrefetchAfterLoads
                                                                                        : kQPrefetchOff;
  static constexpr int kQPrefetchMinKeys = HeadDim_ == 256 ? 4096 : 0;
  static constexpr int kQPrefetchMaxKeys = in_d128_class(HeadDim_) ? 1024 : 1 << 30;

  // Layout: Q | K ring | V ring | O (when staged) | ones (kRowSumByTensor) | LSE (kLseTile) |
  // mbarriers. Every tile
  // starts on a swizzle atom; the ones lie past every V stage, as kRowSumInPv's LBO needs.
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKVStageBytes;
  static constexpr int kOOffset = kVOffset + kStages * kKVStageBytes;
  static constexpr int kOnesOffset = kOOffset + (kStagedOutput ? kQBytes : 0);
  // The LSE's rows of the tile (kLseThroughTma with the output tile), one float each.
  static constexpr bool kLseTile = kLseThroughTma && kStagedOutput && !PackGqa_;
  static constexpr int kLseOffset = kOnesOffset + kOnesBytes;
  static constexpr int kBarrierOffset = kLseOffset + (kLseTile ? kBlockM * 4 : 0);
  static constexpr int kSmemBytes = kBarrierOffset + kFixedBytes;
  static_assert(kSmemBytes <= kSmemLimit, "shared memory over the sm90 limit");
  static_assert(kKVColumnBytes % kSwizzleAtomBytes == 0 && kQColumnBytes % kSwizzleAtomBytes == 0, "");
};

// The default tile shape with the static schedule, which sm90_forward picks where the default is
// the dynamic one for the problems sm90_picks_static_schedule names (kernel_choice.h: causal rows
// at most lengths, short local windows, unmasked rows at d128 up to 2k and at d256).
template <int HeadDim_, typename Element_>
using StaticScheduleConfig =
    KernelConfig<HeadDim_, Element_, TileShape<HeadDim_>::kBlockN, TileShape<HeadDim_>::kStages, false>;

// The static d128 kernel without the checked max (KernelConfig::kCheckedMax) nor Q in registers:
// a tile of at most 4 key blocks has at most two that take the kept max, and at causal 512 the
// checked form lost 3.5% (session 28, two calls).
template <int HeadDim_, typename Element_>
struct UncheckedStaticConfig : StaticScheduleConfig<HeadDim_, Element_> {
  static constexpr bool kCheckedMax = false;
  static constexpr int kQStepsInRegisters = 0;  // -2.3% at 512 there (KernelConfig::kQStepsInRegisters)
  static constexpr bool kHasTailKernel = false;  // short rows: below the split's fewest keys
};

// Base for problems whose head dim is smaller than Base's (a multiple of 8): sm90_forward runs a
// head dim between the instantiations on the next larger one, as FlashAttention-3 rounds its head
// dims up. The tensor maps span the problem's head dim (KernelParams::head_dim), so TMA
// zero-fills the columns past it on loads and leaves them out of stores; the accesses that go
// around TMA test it under this flag: the predicated epilogue's 16-byte chunks, the zero stores
// of tiles without keys, the checked max's fallback and tile recompute reading Q, K and V from
// global memory. Its own instantiation so that those tests stay out of Base's machine code: put
// into the default kernels they cost 1-2.5% on most rows (ptxas scheduled the whole kernel anew;
// docs/perf.md, session 55).
template <class Base>
struct NarrowHeadDimConfig : Base {
  static constexpr bool kNarrowHeadDim = true;
};

// The tail kernel of Base (KernelConfig::kHasTailKernel): the pieces of the last, partial wave
// that Base's launch leaves (split_tail.h), nothing else.
template <class Base>
struct TailKernelConfig : Base {
  static constexpr bool kSplitTail = true;
  static constexpr bool kHasTailKernel = false;
  static constexpr int kPrefetchNextQ = kQPrefetchOff;  // a piece's next piece is found from its step (not timed)
};

// The static schedule for short rows where it differs from StaticScheduleConfig
// (sm90_picks_short_rows, kernel_choice.h):
// - at head dim 64, local windows (causal rows too until session 23, when tall tiles took them):
//   128-row tiles (two consumer warpgroups) where the default has three: a 192-row tile over 512
//   causal rows computes 9 key blocks of 192 rows where 128-row tiles compute 10 of 128 (1.35x
//   the work; ncu, docs/perf.md v8; about 1.15x since rowless warpgroups pass over their tiles,
//   kSkipRowlessWarpgroups), and 512 rows are 2.67 tiles of 192;
// - at head dim 128 (since session 29), every mask: the static kernel without the checked max
//   (UncheckedStaticConfig). From session 17 to 21 it was the static kernel with the GEMM turns
//   for unmasked rows (kernel_choice.h says why no longer).
// At the other head dims it is StaticScheduleConfig itself.
template <int HeadDim_, typename Element_>
using ShortRowsConfig = std::conditional_t<
    HeadDim_ == 64,
    KernelConfig<HeadDim_, Element_, TileShape<HeadDim_>::kBlockN, TileShape<HeadDim_>::kStages, false, kOutputAuto,
                 false, kDefaultConsumers>,
    std::conditional_t<HeadDim_ == 128, UncheckedStaticConfig<HeadDim_, Element_>,
                       StaticScheduleConfig<HeadDim_, Element_>>>;

// Tall tiles: one consumer warpgroup more than TileShape gives the head dim, with 64-key blocks
// (what fits the smaller register budget), static schedule. Built at head dims 64 and 128, where
// sm90_forward picks them by sm90_picks_tall_tiles (kernel_choice.h) and
// FLASHATTN_SM90_VARIANT=tall reaches them.
// - Head dim 128: three warpgroups (192-row tiles), so that while one warpgroup runs its softmax
//   two can issue GEMMs. At 160 registers a consumer only 64- or 80-key blocks fit (O 64 + S 32 +
//   P 16 at 64 keys; 112 and 128 keys spill and serialise every wgmma); turns around the GEMMs
//   (the exp2 turns lost 2-4% here).
// - Head dim 64: four warpgroups (256-row tiles) at 112 registers a consumer (O 32 + S 32 + P 16),
//   for short causal rows: a 64-key block ends on every 64-row boundary of the diagonal, so each
//   warpgroup passes over the key blocks its rows miss (kSkipMaskedLastBlock, on with four
//   warpgroups) and a head's K and V are read by half as many tiles as with 128-row tiles; turns
//   around the exp2s (d64's two-warpgroup kernel's), an 8-block K/V ring.
// Other head dims name the default shape here (never built).
template <int HeadDim>
struct TallTileShape {
  static constexpr int kBlockN = TileShape<HeadDim>::kBlockN, kStages = TileShape<HeadDim>::kStages;
  static constexpr int kConsumers = ConsumersOf<TileShape<HeadDim>>::value, kTurns = kTurnsByRule;
};
template <>
struct TallTileShape<64> {
  static constexpr int kBlockN = 64, kStages = 8, kConsumers = 4, kTurns = kTurnsAtExp;
};
template <>
struct TallTileShape<128> {
  static constexpr int kBlockN = 64, kStages = 2, kConsumers = 3, kTurns = kTurnsAtGemms;
};
template <int HeadDim_, typename Element_>
using TallTilesConfig = KernelConfig<HeadDim_, Element_, TallTileShape<HeadDim_>::kBlockN, TallTileShape<HeadDim_>::kStages,
                                     false, kOutputAuto, false, TallTileShape<HeadDim_>::kConsumers,
                                     TallTileShape<HeadDim_>::kTurns>;

// Cluster pairs: the two CTAs of a cluster take query tiles 2i and 2i + 1 of one head, which read
// the same K/V blocks; each CTA loads half of every block's rows with a multicast TMA into both,
// so each block leaves the L2 once per pair instead of once per CTA (FlashAttention-3 does this
// for unmasked rows at head dims from 128). Unmasked fixed-length problems with an even number of
// query tiles, static schedule only (launch.h refuses the rest). A consumer warp releases a K/V
// stage in both CTAs, so a stage is refilled only once both have finished with it. Built at head
// dim 128, where sm90_forward picks it by sm90_picks_cluster_pairs (kernel_choice.h) and
// FLASHATTN_SM90_VARIANT=cluster reaches it; the harness times head dim 256 too (it lost to the
// static kernel there from session 20). The running max's slack comes from
// KernelConfig (session 19 at d256: +2.0..+6.2%; session 20 at d128: +0.2..+7.3%).
template <int HeadDim_, typename Element_, int BlockN_ = TileShape<HeadDim_>::kBlockN>
struct ClusterPairsConfig : KernelConfig<HeadDim_, Element_, BlockN_, TileShape<HeadDim_>::kStages, false> {
  static constexpr bool kClusterPairs = true;
  // A stage held for the output would hold the peer's loads too: O goes out through Q.
  static constexpr bool kOutputInKV = false;
  // Turns around both the GEMMs and the exp2s at head dim 256 (session 17's harness: +2.6% at 4k,
  // +3.5% at 8k, +4.5% at 16k, rows the API ran it for until session 21; exp2 turns alone, session 16:
  // -6..-10%); around the GEMMs at head dim 128 (other placements not timed with clusters).
  static constexpr int kTurns = HeadDim_ == 256 ? kTurnsAtBoth : kTurnsAtGemms;
  // Q's tile held until the tile's last S, as in the base's kernels with turns around the GEMMs
  // (KernelConfig::kQReleasedAtLoad: -1.4..-3.0% from 2k keys here).
  static constexpr bool kQReleasedAtLoad = false;
  // The last, partial wave of pairs split by keys in the static kernel's tail kernel (launch.h,
  // TailBaseOf): its CTAs take the SMs as the pairs leave them.
  static constexpr bool kHasTailKernel = StaticScheduleConfig<HeadDim_, Element_>::kHasTailKernel;
  static constexpr int kPrefetchNextQ = kQPrefetchOff;  // -0.6..+1.6% (KernelConfig::kPrefetchNextQ)
  static constexpr bool kOutputInQ =
      !KernelConfig<HeadDim_, Element_, BlockN_, TileShape<HeadDim_>::kStages, false>::kStagedOutput;
  static_assert(BlockN_ % 16 == 0, "each CTA loads half a key block, a whole number of 8-row swizzle atoms");
};

// The default tile shape and schedule with GQA head packing on (sm90_forward_pack_gqa only).
template <int HeadDim_, typename Element_>
using PackGqaConfig = KernelConfig<HeadDim_, Element_, TileShape<HeadDim_>::kBlockN, TileShape<HeadDim_>::kStages,
                                   kDefaultDynamicSchedule, kOutputAuto, true, kDefaultConsumers>;

// The packed kernel of one consumer warpgroup (64-row tiles, room for two CTAs an SM), built at
// head dim 64 (sm90_has_pack_gqa_one_wg) and picked for GQA packed problems of at most 64 rows and
// 16 tiles (sm90_picks_pack_gqa_one_wg: small-batch decode). It was written for session 91's
// reading that two CTAs an SM would hide the decode consumer's long step; session 93 found they do
// not (256 CTAs two an SM lost 8% to 128 one an SM), but with no rowless warpgroup taking turns
// the kernel is 2-3.5% ahead at equal key pieces, and the split rule's grids for it stay near one
// CTA an SM. Three K / V stages (the output through Q's tile);
// FLASHATTN_SM90_PACK_GQA_ONE_WG_STAGES=2 builds two (its own O tile).
#ifdef FLASHATTN_SM90_PACK_GQA_ONE_WG
#error "FLASHATTN_SM90_PACK_GQA_ONE_WG (session 91's experiment) is now the variant PackGqaOneWgConfig, in every build: FLASHATTN_SM90_PACK_GQA_ONE_WG=1 / 0 in the environment picks it or not (kernel_choice.h), FLASHATTN_SM90_PACK_GQA_ONE_WG_STAGES sets its stages"
#endif
#ifdef FLASHATTN_SM90_PACK_GQA_ONE_WG_STAGES
constexpr int kPackGqaOneWgStages = FLASHATTN_SM90_PACK_GQA_ONE_WG_STAGES;
#else
constexpr int kPackGqaOneWgStages = 3;
#endif
static_assert(kPackGqaOneWgStages == 2 || kPackGqaOneWgStages == 3, "FLASHATTN_SM90_PACK_GQA_ONE_WG_STAGES: 2 or 3");
template <int HeadDim_, typename Element_>
using PackGqaOneWgConfig = KernelConfig<HeadDim_, Element_, TileShape<HeadDim_>::kBlockN, kPackGqaOneWgStages,
                                        kDefaultDynamicSchedule, kOutputAuto, true, 1>;

// CTAs of Cfg resident at once on `sms` SMs: Cfg::kCtasPerSm an SM, and with two an SM at most
// the mailbox's and the V-tail zeroing's per-CTA slots (kMailboxCtas), whichever the schedule.
// The grid and the key-split rule count these (launch.h; sm90_forward.cu for MHA decode).
template <class Cfg>
int cta_slots(int sms) {
  return Cfg::kCtasPerSm > 1 ? std::min(sms * Cfg::kCtasPerSm, kMailboxCtas) : sms;
}

}  // namespace sm90
}  // namespace flashattn
