// GQA head packing in the sm90 forward (pack_gqa.h). sm90_forward (the API's path on sm90) picks
// it by sm90_picks_pack_gqa; sm90_forward_pack_gqa forces it (tests, the variant harness).
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

}  // namespace flashattn
