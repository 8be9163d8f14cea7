// Times experimental layouts of the sm80 backward main kernel side by side (BackwardConfig's
// kVariant, see src/cuda/sm80/backward_kernel.cuh) on one protocol shape, bf16: tokens 16384,
// nheads * headdim = 2048. The forward (public API) supplies O and lse; each variant runs the
// whole backward (prepare, main, dQ conversion) and its dq/dk/dv are compared with the first one's.
//
// Usage: flashattn_sm80_bwd_variants headdim seqlen causal [reps]
//   SM80_VARIANT=11,0 runs only those, in that order (comma-separated; the first one's gradients are
//   the reference).
// Prints one line per variant: variant, ms (median), TFLOP/s (2.5x the forward's FLOPs), max |diff|.
// Variants 1-5 (experiments of v4/v5) are compiled only with -DSM80_BWD_ALL_VARIANTS.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cuda/sm80/backward_launch.cuh"
#include "flashattn/flashattn.h"
#include "problem.h"

namespace {

using namespace flashattn;
using Element = __nv_bfloat16;

std::vector<float> download(const uint16_t* dev, size_t n) {
  std::vector<uint16_t> h(n);
  CHECK_CUDA(cudaMemcpy(h.data(), dev, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = static_cast<uint32_t>(h[i]) << 16;
    std::memcpy(&f[i], &bits, 4);
  }
  return f;
}

template <int kHeadDim, int kVariant>
cudaError_t run_variant(sm80::KernelParams kp, float* workspace) {
  kp.dq_accum = workspace;
  kp.dsum = workspace + static_cast<size_t>(kp.nheads_q) * kp.total_q * kp.headdim;
  return sm80::launch_backward_variant<Element, kHeadDim, kVariant>(kp, nullptr);
}

template <int kHeadDim>
cudaError_t run(int variant, const sm80::KernelParams& kp, float* workspace) {
  switch (variant) {
    case 0: return run_variant<kHeadDim, 0>(kp, workspace);
#ifdef SM80_BWD_ALL_VARIANTS
    case 1: return run_variant<kHeadDim, 1>(kp, workspace);
    case 2: return run_variant<kHeadDim, 2>(kp, workspace);
    case 3: return run_variant<kHeadDim, 3>(kp, workspace);
    case 4: return run_variant<kHeadDim, 4>(kp, workspace);
    case 5: return run_variant<kHeadDim, 5>(kp, workspace);
#endif
    case 6: return run_variant<kHeadDim, 6>(kp, workspace);
    case 7: return run_variant<kHeadDim, 7>(kp, workspace);
    case 8: return run_variant<kHeadDim, 8>(kp, workspace);
    case 9: return run_variant<kHeadDim, 9>(kp, workspace);
    case 11: return run_variant<kHeadDim, 11>(kp, workspace);
    case 12: return run_variant<kHeadDim, 12>(kp, workspace);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s headdim seqlen causal [reps]\n", argv[0]);
    return 2;
  }
  const int d = std::atoi(argv[1]), seqlen = std::atoi(argv[2]), causal = std::atoi(argv[3]);
  const int reps = argc > 4 ? std::atoi(argv[4]) : 10;
  const int64_t tokens = 16384, width = 2048;
  const int64_t batch = tokens / seqlen, heads = width / d;
  const size_t elems = static_cast<size_t>(tokens * width);
  uint16_t *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float *lse, *workspace;
  for (uint16_t** p : {&q, &k, &v, &o, &dout, &dq, &dk, &dv}) CHECK_CUDA(cudaMalloc(p, elems * 2));
  CHECK_CUDA(cudaMalloc(&lse, static_cast<size_t>(tokens) * heads * 4));
  CHECK_CUDA(cudaMalloc(&workspace, static_cast<size_t>(tokens) * heads * (d + 1) * 4));
  bench::fill_random_bf16(q, elems, 1);
  bench::fill_random_bf16(k, elems, 2);
  bench::fill_random_bf16(v, elems, 3);
  bench::fill_random_bf16(dout, elems, 4);

  ForwardArgs fa = bench::bshd_forward_args(q, k, v, o, lse, batch, seqlen, heads, d);
  AttentionParams params;
  params.causal = causal;
  params.backend = Backend::kCUDA;
  Status s = forward(fa, params);
  if (!s.ok()) {
    std::fprintf(stderr, "forward: %s\n", s.message.c_str());
    return 1;
  }
  CHECK_CUDA(cudaDeviceSynchronize());

  AttentionProblem p;
  p.dtype = DType::kBFloat16;
  p.device = Device::kCUDA;
  p.batch = static_cast<int>(batch);
  p.nheads_q = p.nheads_kv = static_cast<int>(heads);
  p.headdim = d;
  p.seqlen_q = p.seqlen_k = seqlen;
  p.total_q = p.total_k = batch * seqlen;
  auto op = [&](void* data) {
    Operand x;
    x.data = data;
    x.batch_stride = seqlen * heads * d;
    x.row_stride = heads * d;
    x.head_stride = d;
    return x;
  };
  p.q = op(q);
  p.k = op(k);
  p.v = op(v);
  p.out = op(o);
  p.dout = op(dout);
  p.dq = op(dq);
  p.dk = op(dk);
  p.dv = op(dv);
  p.lse = lse;
  p.lse_batch_stride = heads * seqlen;
  p.lse_head_stride = seqlen;
  p.lse_row_stride = 1;
  p.score.scale = 1.0f / std::sqrt(static_cast<float>(d));
  if (causal) p.mask.window_right = 0;
  const sm80::KernelParams kp = sm80::make_params(p);

  auto launch = [&](int variant) {
    switch (d) {
      case 64: return run<64>(variant, kp, workspace);
      case 128: return run<128>(variant, kp, workspace);
      case 256: return run<256>(variant, kp, workspace);
      default: return cudaErrorInvalidValue;
    }
  };
  const double flops = 2.5 * 4.0 * batch * heads * double(seqlen) * seqlen * d / (causal ? 2.0 : 1.0);
  std::vector<float> ref[3];  // the first variant's gradients
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<int> order;
  if (const char* only = std::getenv("SM80_VARIANT")) {
    for (const char* c = only; *c != 0;) {  // comma-separated numbers
      char* end = nullptr;
      const long v = std::strtol(c, &end, 10);
      if (end == c) {
        ++c;
        continue;
      }
      order.push_back(static_cast<int>(v));
      c = end;
    }
  } else {
    order = {0, 11};
  }
  for (int variant : order) {
    for (uint16_t* g : {dq, dk, dv}) CHECK_CUDA(cudaMemset(g, 0xff, elems * 2));  // poison (NaN)
    CHECK_CUDA(launch(variant));
    CHECK_CUDA(cudaDeviceSynchronize());
    float diff = 0.0f;
    uint16_t* grads[3] = {dq, dk, dv};
    for (int g = 0; g < 3; ++g) {
      std::vector<float> x = download(grads[g], elems);
      if (ref[g].empty()) {
        ref[g] = x;
      }
      for (size_t i = 0; i < elems; ++i) {
        const float e = std::fabs(x[i] - ref[g][i]);
        diff = std::isnan(e) || e > diff ? (std::isnan(e) ? INFINITY : e) : diff;
      }
    }
    std::vector<float> times;
    for (int i = 0; i < reps + 2; ++i) {
      CHECK_CUDA(cudaEventRecord(start));
      CHECK_CUDA(launch(variant));
      CHECK_CUDA(cudaEventRecord(stop));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      if (i >= 2) times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    const double ms = times[times.size() / 2];
    std::printf("variant %d d%d s%d causal %d: %.4f ms %.1f TFLOP/s max|diff vs first| %.3g\n", variant, d, seqlen,
                causal, ms, flops / ms * 1e-9, diff);
    std::fflush(stdout);
  }
  return 0;
}
