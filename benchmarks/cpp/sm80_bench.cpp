// Times the sm80 kernels through the public API (Backend::kCUDA) at the benchmark protocol's
// shapes: tokens = batch * seqlen = 16384, nheads * headdim = 2048, bf16, causal and not.
// One JSON object per line on stdout: direction, headdim, seqlen, causal, ms (median), tflops.
// Backward is timed as the backward call alone (the protocol's (fwd + bwd) - fwd); its
// "ms_sync_each" is the same with a host wait after every call (see median_ms).
//
// Usage: flashattn_sm80_bench [reps] [headdims...]   (default 20 reps; head dims 64 128 256)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "bench_util.h"
#include "flashattn/flashattn.h"

namespace {

using namespace flashattn;

// Median of `reps` calls, each between its own pair of events. Back to back (the default) the
// events of all calls are recorded first and read after one synchronisation, as the peers'
// timing (sm80_peers.py) and triton's do_bench do. With sync_each the host waits for every call
// before issuing the next; the backward's workspace (cudaMallocAsync, default pool with release
// threshold 0) is then returned to the driver at each wait and mapped again by the next call.
template <typename Fn>
double median_ms(int reps, Fn&& fn, bool sync_each = false) {
  std::vector<cudaEvent_t> start(reps), stop(reps);
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventCreate(&start[i]));
    CHECK_CUDA(cudaEventCreate(&stop[i]));
  }
  for (int i = 0; i < 3; ++i) fn();  // warm-up: module load, workspace pool
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventRecord(start[i]));
    fn();
    CHECK_CUDA(cudaEventRecord(stop[i]));
    if (sync_each) CHECK_CUDA(cudaEventSynchronize(stop[i]));
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start[i], stop[i]));
    times.push_back(ms);
    CHECK_CUDA(cudaEventDestroy(start[i]));
    CHECK_CUDA(cudaEventDestroy(stop[i]));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void require(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.message.c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  std::vector<int> headdims;
  for (int i = 2; i < argc; ++i) headdims.push_back(std::atoi(argv[i]));
  if (headdims.empty()) headdims = {64, 128, 256};
  const int64_t tokens = 16384, width = 2048;
  const size_t elems = static_cast<size_t>(tokens * width);
  uint16_t *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float* lse;
  for (uint16_t** p : {&q, &k, &v, &o, &dout, &dq, &dk, &dv}) CHECK_CUDA(cudaMalloc(p, elems * 2));
  CHECK_CUDA(cudaMalloc(&lse, static_cast<size_t>(tokens) * 64 * 4));
  bench::fill_random_bf16(q, elems, 1);
  bench::fill_random_bf16(k, elems, 2);
  bench::fill_random_bf16(v, elems, 3);
  bench::fill_random_bf16(dout, elems, 4);

  for (int d : headdims) {
    for (int seqlen : {512, 1024, 2048, 4096, 8192, 16384}) {
      for (int causal = 0; causal < 2; ++causal) {
        const int64_t batch = tokens / seqlen, heads = width / d;
        ForwardArgs fa = bench::bshd_forward_args(q, k, v, o, lse, batch, seqlen, heads, d);
        AttentionParams params;
        params.causal = causal;
        params.backend = Backend::kCUDA;
        require(forward(fa, params), "forward");
        BackwardArgs ba{fa.q,
                        fa.k,
                        fa.v,
                        fa.out,
                        bench::bshd(dout, batch, seqlen, heads, d),
                        fa.lse,
                        bench::bshd(dq, batch, seqlen, heads, d),
                        bench::bshd(dk, batch, seqlen, heads, d),
                        bench::bshd(dv, batch, seqlen, heads, d)};
        const double flops = 4.0 * batch * heads * double(seqlen) * seqlen * d / (causal ? 2.0 : 1.0);
        const double fwd_ms = median_ms(reps, [&] { require(forward(fa, params), "forward"); });
        const double bwd_ms = median_ms(reps, [&] { require(backward(ba, params), "backward"); });
        const double bwd_sync_ms = median_ms(reps, [&] { require(backward(ba, params), "backward"); }, true);
        std::printf("{\"kernel\": \"flashattn-sm80\", \"direction\": \"fwd\", \"dtype\": \"bf16\", \"headdim\": %d, "
                    "\"seqlen\": %d, \"causal\": %s, \"ms\": %.4f, \"tflops\": %.1f}\n",
                    d, seqlen, causal ? "true" : "false", fwd_ms, flops / fwd_ms * 1e-9);
        std::printf("{\"kernel\": \"flashattn-sm80\", \"direction\": \"bwd\", \"dtype\": \"bf16\", \"headdim\": %d, "
                    "\"seqlen\": %d, \"causal\": %s, \"ms\": %.4f, \"tflops\": %.1f, \"ms_sync_each\": %.4f, "
                    "\"tflops_sync_each\": %.1f}\n",
                    d, seqlen, causal ? "true" : "false", bwd_ms, 2.5 * flops / bwd_ms * 1e-9, bwd_sync_ms,
                    2.5 * flops / bwd_sync_ms * 1e-9);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
