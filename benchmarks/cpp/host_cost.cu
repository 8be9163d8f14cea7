// Host time of one flashattn::forward / flashattn::backward call on the CUDA backend, and of each
// CUDA runtime call those make, on the machine that runs it. Why: through the Python package a
// forward + backward at d128 512 causal took 0.88 ms of host time per call against FA2's 0.33 ms
// (benchmarks/profile_backward.py, session 6), more than its kernels' GPU time, so short rows
// were timed on the host. The calls are enqueued back to back without synchronising; at the
// tiny shape the GPU finishes each long before the host issues the next, so the per-call time
// is the host's. A call that synchronises shows up as host time equal to GPU time at the large
// shape.
//
//   flashattn_host_cost [reps]   (scripts/device_session.sh measure, MEASURE_HOST_COST=1)
// JSON lines: {"what": ..., "us_per_call": ...}.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "bench_util.h"

using namespace flashattn;

namespace {

void require(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.message.c_str());
    std::exit(1);
  }
}

// Microseconds of host time per call of fn over reps calls (after 20 untimed), and the wall time
// per call once the device has finished them.
void time_host(const std::string& what, int reps, const std::function<void()>& fn) {
  for (int i = 0; i < 20; ++i) fn();
  CHECK_CUDA(cudaDeviceSynchronize());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) fn();
  const auto t1 = std::chrono::steady_clock::now();
  CHECK_CUDA(cudaDeviceSynchronize());
  const auto t2 = std::chrono::steady_clock::now();
  const double host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
  const double wall_us = std::chrono::duration<double, std::micro>(t2 - t0).count() / reps;
  std::printf("{\"what\": \"%s\", \"us_per_call\": %.2f, \"wall_us_per_call\": %.2f}\n", what.c_str(), host_us,
              wall_us);
  std::fflush(stdout);
}

struct Problem {
  int64_t batch, seqlen, heads, d;
  bool causal;
  ForwardArgs fa;
  BackwardArgs ba;
  AttentionParams params;
};

Problem make_problem(uint16_t* const* bufs, float* lse, int64_t batch, int64_t seqlen, int64_t heads, int64_t d,
                     bool causal) {
  Problem p{batch, seqlen, heads, d, causal, {}, {}, {}};
  p.fa = bench::bshd_forward_args(bufs[0], bufs[1], bufs[2], bufs[3], lse, batch, seqlen, heads, d);
  p.ba = BackwardArgs{p.fa.q,   p.fa.k,   p.fa.v,
                      p.fa.out, bench::bshd(bufs[4], batch, seqlen, heads, d),
                      p.fa.lse, bench::bshd(bufs[5], batch, seqlen, heads, d),
                      bench::bshd(bufs[6], batch, seqlen, heads, d), bench::bshd(bufs[7], batch, seqlen, heads, d)};
  p.params.causal = causal;
  p.params.backend = Backend::kCUDA;
  return p;
}

__global__ void empty_kernel() {}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 300;
  const int64_t tokens = 16384, width = 2048;
  const size_t elems = static_cast<size_t>(tokens * width);
  uint16_t* bufs[8];
  for (uint16_t*& b : bufs) CHECK_CUDA(cudaMalloc(&b, elems * 2));
  float* lse;
  CHECK_CUDA(cudaMalloc(&lse, static_cast<size_t>(tokens) * 64 * 4));
  for (int i = 0; i < 5; ++i) bench::fill_random_bf16(bufs[i], elems, 1 + i);

  // The API: a tiny problem (host-bound) and the protocol's d128 512 causal row.
  const int64_t shapes[2][3] = {{1, 128, 1}, {32, 512, 16}};
  for (const auto& shape_of : shapes) {
    const int64_t batch = shape_of[0], seqlen = shape_of[1], heads = shape_of[2];
    Problem p = make_problem(bufs, lse, batch, seqlen, heads, 128, true);
    require(forward(p.fa, p.params), "forward");
    const std::string shape = "b" + std::to_string(batch) + " s" + std::to_string(seqlen) + " h" +
                              std::to_string(heads) + " d128 causal";
    time_host("forward " + shape, reps, [&] { require(forward(p.fa, p.params), "forward"); });
    time_host("backward " + shape, reps, [&] { require(backward(p.ba, p.params), "backward"); });
  }

  // The runtime calls the API makes per call.
  cudaStream_t stream = nullptr;
  time_host("cudaLaunchKernel (empty kernel)", reps, [&] { empty_kernel<<<1, 32, 0, stream>>>(); });
  time_host("cudaPointerGetAttributes", reps, [&] {
    cudaPointerAttributes a{};
    CHECK_CUDA(cudaPointerGetAttributes(&a, bufs[0]));
  });
  time_host("cudaGetDeviceCount", reps, [&] {
    int n = 0;
    CHECK_CUDA(cudaGetDeviceCount(&n));
  });
  time_host("cudaDeviceGetAttribute", reps, [&] {
    int v = 0;
    CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
  });
  time_host("cudaGetDevice", reps, [&] {
    int v = 0;
    CHECK_CUDA(cudaGetDevice(&v));
  });
  time_host("cudaStreamIsCapturing", reps, [&] {
    cudaStreamCaptureStatus s;
    CHECK_CUDA(cudaStreamIsCapturing(stream, &s));
  });
  time_host("cudaFuncSetAttribute", reps, [&] {
    CHECK_CUDA(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024));
  });
  // The backward's workspace at d128 512 causal (fp32 dQ and D): about 134 MB.
  const size_t workspace = static_cast<size_t>(16) * 16384 * (128 + 1) * 4;
  time_host("cudaMallocAsync + cudaFreeAsync (134 MB, default pool)", reps, [&] {
    void* w = nullptr;
    CHECK_CUDA(cudaMallocAsync(&w, workspace, stream));
    CHECK_CUDA(cudaFreeAsync(w, stream));
  });
  time_host("cudaMallocAsync + cudaFreeAsync + cudaStreamSynchronize (pool trimmed each time)", 30, [&] {
    void* w = nullptr;
    CHECK_CUDA(cudaMallocAsync(&w, workspace, stream));
    CHECK_CUDA(cudaFreeAsync(w, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
  });
  time_host("cudaStreamSynchronize (idle)", reps, [&] { CHECK_CUDA(cudaStreamSynchronize(stream)); });
  for (uint16_t* b : bufs) CHECK_CUDA(cudaFree(b));
  CHECK_CUDA(cudaFree(lse));
  return 0;
}
