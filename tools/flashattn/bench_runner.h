// Times one shape, forward and backward, on one backend: warm-up, then the median of
// repetitions, each on freshly poisoned outputs; then checks a sample against the reference.
#pragma once

#include <string>
#include <vector>

#include "bench_shapes.h"
#include "flashattn/flashattn.h"

namespace flashattn {
namespace cli {

struct TimingPolicy {
  int warmup = 1;
  int min_reps = 3;
  int max_reps = 20;
  double budget_ms = 1000.0;  // stop adding repetitions past this much timed work
};

struct BenchRow {
  BenchShape shape;
  Backend backend = Backend::kCPU;
  DType dtype = DType::kFloat32;
  std::string direction;  // "fwd" or "bwd"
  double time_ms = 0.0;   // median
  int reps = 0;
  double flops = 0.0;     // of one call
  double rel_error = 0.0; // O (fwd) or dQ (bwd) on the sample vs the fp64 reference
  std::string error;      // non-empty when the backend refused or failed
  bool unsupported = false;  // refused: an option or shape this backend lacks, not a failure
  double flops_per_s() const { return time_ms > 0.0 ? flops / (time_ms * 1e-3) : 0.0; }
};

struct BenchOptions {
  Backend backend = Backend::kCPU;
  DType dtype = DType::kFloat32;
  int threads = 0;
  bool backward = true;
  int sample_rows = 64;
  TimingPolicy timing;
};

// One row for forward, and one for backward when asked for.
std::vector<BenchRow> bench_shape(const BenchShape& shape, const BenchOptions& options);

}  // namespace cli
}  // namespace flashattn
