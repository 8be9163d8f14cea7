// Compile-time constants of the sm90 backward main kernel (bwd_kernel.h): thread roles, tile
// shapes and the shared-memory layout. The layout conventions (64-element columns of 128-byte
// lines, the 128-byte swizzle) are the forward's (config.h).
//
// One CTA per (key block of kBlockN keys, KV head, batch). Warpgroup 0 loads: one thread issues
// TMA for K and V once, then Q and dO of each query block of kBlockM rows into a kStages ring.
// Warpgroups 1 and 2 each own 64 keys of the block (head dim 256: both take its 64 keys, each with
// half of dK's and dV's columns, kSplitKeyGradColumns) and keep their dK and dV in registers across
// the query blocks (and across the query heads of a GQA group); dQ leaves each step through a bulk
// reduction into the sm80 backward's workspace, which the sm80 conversion kernel turns into dQ.
#pragma once

#include "cuda/sm90/config.h"

namespace flashattn {
namespace sm90 {

template <int HeadDim_, typename Element_>
struct BackwardConfig {
  using Element = Element_;
  static constexpr int kHeadDim = HeadDim_;
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256,
                "the sm90 backward covers head dims 64, 128 and 256");
  // Head dim 256: dK and dV of 64 keys x 256 columns would take 256 registers a thread, so both
  // consumer warpgroups take the CTA's same 64 keys and split dK's and dV's columns (128 each),
  // each computing the whole S^T and dP^T (duplicated: 10.5 of the 14.7 MFLOP a step executes
  // are needed); K, V and the 64 x 256 dQ staging leave room for one Q / dO stage only.
  // Elsewhere each warpgroup owns 64 keys of the CTA's 128 and all of dK's and dV's columns.
  static constexpr bool kSplitKeyGradColumns = kHeadDim == 256;
  static constexpr int kBlockN = kSplitKeyGradColumns ? 64 : 128;  // keys of a CTA
  // Query rows of a step. The code takes 128 too (kQueryColumns dS^T columns, two dQ row halves),
  // but at head dim 64 that spills 768 bytes (S^T and dP^T in flight, 128 registers, beside dK
  // and dV; session 6, compiled only), so 64 for now.
  static constexpr int kBlockM = 64;
  static constexpr int kQueryColumns = kBlockM / kColumnElems;  // 64-query columns of dS^T
  static constexpr int kStages = kSplitKeyGradColumns ? 1 : 2;
  static constexpr int kConsumerWarpgroups = 2;
  // dK / dV columns a consumer warpgroup accumulates, and its first key row in the CTA's block
  // (bwd_kernel.h key_row0 / key_grad_col0).
  static constexpr int kKeyGradColumns = kSplitKeyGradColumns ? kHeadDim / kConsumerWarpgroups : kHeadDim;
  static constexpr int kThreads = kWarpgroupThreads * (1 + kConsumerWarpgroups);
  static constexpr int kConsumerRegisters = 240;
  static_assert(kWarpgroupThreads * (kProducerRegisters + kConsumerWarpgroups * kConsumerRegisters) <= 65536,
                "register budget");
  static constexpr int kColumns = kHeadDim / kColumnElems;

  static constexpr int kKVColumnBytes = kBlockN * kLineBytes;
  static constexpr int kQColumnBytes = kBlockM * kLineBytes;
  static constexpr int kKVBytes = kKVColumnBytes * kColumns;
  static constexpr int kQBytes = kQColumnBytes * kColumns;
  // dS^T of a step, bf16/fp16: kBlockN lines (keys; 64 per consumer warpgroup, or the one 64-key
  // block both compute at head dim 256, which warpgroup 0 stores) in kQueryColumns
  // columns of 64 query elements, the A operand of dQ = dS K read transposed.
  static constexpr int kDsColumnBytes = kBlockN * kLineBytes;
  static constexpr int kDsBytes = kDsColumnBytes * kQueryColumns;
  // Per consumer warpgroup: lse * log2(e) and D of the step's query rows (fp32), 16 bytes per
  // pair of queries 2j, 2j + 1: lse(2j), lse(2j + 1), D(2j), D(2j + 1), so that a thread reads
  // the four its fragment column pair needs with one LDS.128 (64 LDS.32 a step before: 512 of
  // the step's ~4200 shared-memory wavefronts, docs/perf.md v5).
  static constexpr int kRowStatsBytes = kConsumerWarpgroups * 2 * kBlockM * 4;
  // dQ of a step: each consumer warpgroup computes half its columns (kDqColumns) over all kBlockN
  // keys, reading all of dS^T, so a step adds one kBlockM x kHeadDim block into the
  // workspace, as FlashAttention-2 does. The block is staged in shared memory as fp32 rows (the
  // workspace's layout) and leaves with one bulk reduction (TMA, add.f32). The workspace's rows
  // hold their 8-float chunks rotated, chunk c of row r at c ^ (r % 4) (sm80 KernelParams::
  // dq_chunks_rotated; the conversion puts them back): rows kHeadDim * 4 bytes apart fall on the
  // same banks, so the four consecutive rows a half-warp's STS.64 writes would conflict 4-way
  // (1024 wavefronts a step at d128 instead of 256); rotated they cover all 32 banks.
  static constexpr int kDqColumns = kHeadDim / kConsumerWarpgroups;
  // A warpgroup's dQ columns leave in parts of at most 64 (head dim 256: two products and
  // stagings in turn, so that 64 dQ accumulators do not sit beside dK and dV).
  static constexpr int kDqPartColumns = kDqColumns < kColumnElems ? kDqColumns : kColumnElems;
  static constexpr int kDqParts = kDqColumns / kDqPartColumns;
  static_assert(kHeadDim % 32 == 0, "rotation within groups of four 8-float chunks");
  static constexpr int kDqStageBytes = kBlockM * kHeadDim * 4;

  static constexpr int kKOffset = 0;
  static constexpr int kVOffset = kKOffset + kKVBytes;
  static constexpr int kQOffset = kVOffset + kKVBytes;
  static constexpr int kDoOffset = kQOffset + kStages * kQBytes;
  static constexpr int kDsOffset = kDoOffset + kStages * kQBytes;
  static constexpr int kRowStatsOffset = kDsOffset + kDsBytes;
  static constexpr int kDqOffset = kRowStatsOffset + kRowStatsBytes;
  static constexpr int kBarrierOffset = kDqOffset + kDqStageBytes;
  // kv_full, then full and empty per stage.
  static constexpr int kBarrierCount = 1 + 2 * kStages;
  static constexpr int kSmemBytes = kBarrierOffset + 8 * kBarrierCount + kSwizzleAtomBytes;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "shared memory over the sm90 limit");

  // Named barriers: one per consumer warpgroup (kWarpgroupBarrier0 + wg, 128 threads) for its row
  // statistics; one for both consumer warpgroups (kDqBarrier) for dS^T and the dQ staging.
  static constexpr int kWarpgroupBarrier0 = 1;
  static constexpr int kDqBarrier = kWarpgroupBarrier0 + kConsumerWarpgroups;
  static constexpr int kDqThreads = kConsumerWarpgroups * kWarpgroupThreads;
};

}  // namespace sm90
}  // namespace flashattn
