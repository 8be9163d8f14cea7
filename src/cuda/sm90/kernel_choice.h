// Which sm90 instantiation the API path (sm90_forward) runs: GQA head packing (pack_gqa.h), picked
// by sm90_picks_pack_gqa (sm90_forward_pack_gqa forces it), the static schedule, the wide key
// blocks, or the default.
#pragma once

#include <cstdint>

#include "problem.h"

namespace flashattn {

// sm90_forward packs when the group G = nheads_q / nheads_kv is a power of two in 2..64,
// seqlen_q (varlen: the longest) is at most kSm90PackGqaMaxQuery and seqlen_q * G at most
// kSm90PackGqaMaxRows. Measured on the H200 (docs/perf.md, "GQA head packing"), hdim 128, 1k keys:
// packed 1.5-3.0x faster up to 256 packed rows with seqlen_q <= 64 (G = 2, 4, 8), 0.99x at
// seqlen_q 128 (G = 2 and 4: the default tile has no idle rows left there); 4k keys: 1.0x.
constexpr int kSm90PackGqaMaxQuery = 64;
constexpr int64_t kSm90PackGqaMaxRows = 256;

// Ok when sm90_supports_forward(p) is and nheads_q / nheads_kv is a power of two in 2..64.
Status sm90_supports_forward_pack_gqa(const AttentionProblem& p);
// The sm90 forward with the query heads of each KV head packed into shared 128-row tiles.
Status sm90_forward_pack_gqa(const AttentionProblem& p);
// Whether sm90_forward runs a problem it supports with the packed kernel (the rule above).
bool sm90_picks_pack_gqa(const AttentionProblem& p);
// Packed launches so far in this process (tests check that the API path took the packed kernel).
int64_t sm90_pack_gqa_launches();

// The persistent tile schedule: the dynamic one (atomic tile counter) is the default; for masked
// (causal / local) problems with at most kSm90StaticScheduleMaxKeys keys (varlen: the longest)
// sm90_forward runs the static one, whose tiles start without the mailbox hand-over. Measured in
// one process on the H200 (docs/perf.md, v5): static 3-14% faster on causal 512-2k at head dims
// 64, 128 and 256, dynamic 2-4% faster on causal 8k at head dims 64 and 128.
// Since v6, head dims above 128 keep the dynamic schedule up to kSm90L2GroupMaxKeys: with the
// causal tiles in L2 groups (below) it was 5-6% faster than the static one at hdim 256 causal
// 512 / 1k (hdim 192 not measured).
constexpr int kSm90StaticScheduleMaxKeys = 2048;
// Causal tiles go longest first within groups of heads whose K and V fit in half the L2 when the
// keys (varlen: the longest) are at most this many; above, longest first over all heads (v5's
// order). Measured (docs/perf.md, v6): groups +2-11% at 512 / 1k keys, but 7-39% slower from 2k
// (hdim 256) or 4k (hdim 64 / 128) on.
constexpr int kSm90L2GroupMaxKeys = 1024;
bool sm90_picks_static_schedule(const AttentionProblem& p);
// Launches of the static-schedule instantiation through sm90_forward so far in this process.
int64_t sm90_static_schedule_launches();
// Key blocks of 176 instead of 128 (sm90::WideKeyBlockConfig) at head dim 128 without a mask and
// with at least kSm90WideKeyBlocksMinKeys keys (varlen: the longest). Measured in one process on
// the H200 (docs/perf.md, v6): +3% at 4k, +5% at 8k, +2% at 16k; -1% at 2k, -4% at 1k, -14% at 512.
constexpr int kSm90WideKeyBlocksMinKeys = 4096;
bool sm90_picks_wide_key_blocks(const AttentionProblem& p);
// Launches of the wide-key-block instantiation through sm90_forward so far in this process.
int64_t sm90_wide_key_block_launches();
// False in builds whose default is the static schedule (FLASHATTN_SM90_DEFAULT_DYNAMIC=0), which
// then run it everywhere.
bool sm90_dynamic_schedule_by_default();

}  // namespace flashattn
