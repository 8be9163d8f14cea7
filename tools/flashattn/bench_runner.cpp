#include "bench_runner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "device_buffer.h"
#include "reference_sample.h"
#include "workload.h"

namespace flashattn {
namespace cli {
namespace {

struct Timing {
  double median_ms = std::numeric_limits<double>::quiet_NaN();
  int reps = 0;
  Status status;
};

// `poison` runs before every call and outside the timed region: a kernel that forgets a store
// then leaves NaN for the sample check to find instead of the previous run's answer.
Timing time_calls(Device device, const TimingPolicy& policy, const std::function<void()>& poison,
                  const std::function<Status()>& call) {
  Timing t;
  for (int i = 0; i < policy.warmup; ++i) {
    poison();
    if (!(t.status = call()).ok()) return t;
  }
  Stopwatch watch(device);
  std::vector<double> ms;
  double spent = 0.0;
  int target = policy.min_reps;
  while (static_cast<int>(ms.size()) < target) {
    poison();
    watch.start();
    t.status = call();
    const double elapsed = watch.stop_ms();
    if (!t.status.ok()) return t;
    ms.push_back(elapsed);
    spent += elapsed;
    if (ms.size() == 1) {  // size the run from the first timing
      const double fit = elapsed > 0.0 ? policy.budget_ms / elapsed : policy.max_reps;
      target = static_cast<int>(std::clamp<double>(fit, policy.min_reps, policy.max_reps));
    }
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  t.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  t.reps = static_cast<int>(n);
  return t;
}

BenchRow make_row(const BenchShape& shape, const BenchOptions& o, const char* direction, double flops,
                  const Timing& t) {
  BenchRow r;
  r.shape = shape;
  r.backend = o.backend;
  r.dtype = o.dtype;
  r.direction = direction;
  r.flops = flops;
  r.time_ms = t.median_ms;
  r.reps = t.reps;
  if (!t.status.ok()) {
    r.error = t.status.message;
    r.unsupported = t.status.code == StatusCode::kUnsupported;
  }
  return r;
}

}  // namespace

std::vector<BenchRow> bench_shape(const BenchShape& shape, const BenchOptions& o) {
  const Device device = o.backend == Backend::kCUDA ? Device::kCUDA : Device::kCPU;
  Workload w(shape, o.dtype, device, o.backward);
  AttentionParams params;
  params.causal = shape.causal;
  params.backend = o.backend;
  params.num_threads = o.threads;

  std::vector<BenchRow> rows;
  const double fwd_flops = forward_flops(shape);
  const Timing fwd = time_calls(
      device, o.timing, [&] { w.poison_forward_outputs(); }, [&] { return w.forward(params); });
  rows.push_back(make_row(shape, o, "fwd", fwd_flops, fwd));
  if (!fwd.status.ok()) return rows;

  Timing bwd;
  if (o.backward) {
    // The last timed forward left valid out and lse behind for backward to read.
    bwd = time_calls(
        device, o.timing, [&] { w.poison_backward_outputs(); }, [&] { return w.backward(params); });
    rows.push_back(make_row(shape, o, "bwd", 2.5 * fwd_flops, bwd));
  }
  const SampleError err = reference_sample_error(w, o.backward && bwd.status.ok(), o.sample_rows);
  rows[0].rel_error = err.out;
  if (rows.size() > 1) rows[1].rel_error = bwd.status.ok() ? err.dq : std::numeric_limits<double>::quiet_NaN();
  return rows;
}

}  // namespace cli
}  // namespace flashattn
