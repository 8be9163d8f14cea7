// GQA head packing in the sm90 forward (pack_gqa.h), reachable only through these two calls: the
// public API (forward()) does not select it yet. NOT YET RUN ON A GPU: compiled and SASS-checked
// only; tests/cpp/gpu/test_sm90_gqa_packing.cpp calls it directly.
#pragma once

#include "problem.h"

namespace flashattn {

// Ok when sm90_supports_forward(p) is and nheads_q / nheads_kv is a power of two in 2..64.
Status sm90_supports_forward_pack_gqa(const AttentionProblem& p);
// The sm90 forward with the query heads of each KV head packed into shared 128-row tiles.
Status sm90_forward_pack_gqa(const AttentionProblem& p);

}  // namespace flashattn
