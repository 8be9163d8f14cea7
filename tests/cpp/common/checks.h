// GoogleTest assertions over whole attention results, shared by the CPU and GPU suites. Each
// returns an AssertionResult whose message carries the measured errors; callers add the case's
// describe() so that a failure names the seed and shape.
#pragma once

#include <gtest/gtest.h>

#include "common/attn_case.h"

namespace fa_test {

struct Tolerance {
  double out = 1e-5;   // relative L2 of O (and of dQ, dK, dV in backward)
  double lse = 1e-5;   // max |a - b| / (1 + |b|) of the logsumexp
};

// The call succeeded, every output element inside a sequence was written (no NaN poison left; lse
// may be -inf only on rows that see no key) and nothing outside the views changed.
::testing::AssertionResult forward_written(const AttnCase& c, const ForwardResult& r);
::testing::AssertionResult backward_written(const AttnCase& c, const BackwardResult& r);

// Written, and within `tol` of `ref` (usually the fp64 reference).
::testing::AssertionResult forward_close(const AttnCase& c, const ForwardResult& got, const ForwardResult& ref,
                                         Tolerance tol = {});
// The CPU flash forward of c against the fp64 reference's (itself checked as written), at the
// default tolerance; the flash result goes to *got where given.
::testing::AssertionResult cpu_forward_matches_reference(const AttnCase& c, ForwardResult* got = nullptr);

// Relative L2 per gradient. Where the exact gradient cancels to almost nothing (dQ and dK when
// every query sees a single key: dP - D = 0), its own norm says nothing about rounding, so the
// error is then measured against the norm of the same sums over absolute terms
// (naive_attention's magnitudes), computed only when the plain relative error fails.
::testing::AssertionResult backward_close(const AttnCase& c, const BackwardResult& got, const BackwardResult& ref,
                                          double tol = 1e-5);

// The fp16 / bf16 bar: the CPU flash forward (and, with `with_backward`, its backward from that
// forward's O and L) no further from the fp64 reference on the same rounded values than twice a
// naive implementation in c's dtype (naive_attention), plus a float32-level floor. Gradients are
// measured as backward_close measures them where they cancel.
::testing::AssertionResult within_twice_naive(const AttnCase& c, bool with_backward);

// ||a - ref|| / ||ref||, or / ||magnitude|| where ||ref|| < 1e-3 ||magnitude|| (a cancelled sum).
double rel_l2_or_magnitude(const HostTensor& a, const HostTensor& ref, const HostTensor& magnitude);

}  // namespace fa_test
