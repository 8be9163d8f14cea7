// Checks a benchmarked result against the fp64 reference on a sample small enough to be cheap:
// batch 0, the first and last query head, and two blocks of query rows (the first and the last,
// which between them see the fewest and the most keys under a causal mask).
//
// A block of query rows [r0, r0 + R) with keys [0, r0 + R) (causal) or all keys (non-causal) is a
// problem of its own whose bottom-right aligned mask is the original's, so the reference runs on
// exactly that block. Its O and dQ equal the full problem's rows; dK and dV need every query
// row and are not sampled (`flashattn check` covers them on small shapes).
#pragma once

#include "workload.h"

namespace flashattn {
namespace cli {

struct SampleError {
  double out = 0.0;  // relative L2 of O over the sample
  double dq = 0.0;   // relative L2 of dQ (backward only)
};

// Requires the workload's out (and, with backward, dq) to hold the results to check.
SampleError reference_sample_error(const Workload& w, bool backward, int rows_per_block);

}  // namespace cli
}  // namespace flashattn
