// Times tile-shape variants of the sm90 forward against the built-in configuration on a few
// protocol shapes, in one process, to choose TileShape (src/cuda/sm90/config.h) from measurements.
// Calls the launch template directly with a fixed-length, contiguous problem.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/sm90/launch.h"

using namespace flashattn;

namespace {

struct Shape {
  int hdim, seqlen;
  bool causal;
};

using Launch = Status (*)(const AttentionProblem&);
struct Variant {
  int hdim;
  const char* name;
  Launch launch;
};

template <int D, int N, int S>
Status run(const AttentionProblem& p) {
  return sm90::launch_forward<sm90::KernelConfig<D, __nv_bfloat16, N, S>>(p);
}

const Variant kVariants[] = {
    {64, "n128_s4(default)", run<64, 128, 4>}, {64, "n176_s3", run<64, 176, 3>}, {64, "n192_s3", run<64, 192, 3>},
    {128, "n128_s2(default)", run<128, 128, 2>}, {128, "n144_s2", run<128, 144, 2>}, {128, "n160_s2", run<128, 160, 2>},
    {256, "n80_s2(default)", run<256, 80, 2>},
};

}  // namespace

int main() {
  const int64_t tokens = 16384, width = 2048;
  void *q, *k, *v, *o;
  float* lse;
  for (void** b : {&q, &k, &v, &o}) cudaMalloc(b, tokens * width * 2);
  cudaMalloc(&lse, tokens * 32 * 4);
  {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    std::vector<__nv_bfloat16> h(tokens * width);
    for (void* b : {q, k, v}) {
      for (auto& x : h) x = __float2bfloat16(nd(rng));
      cudaMemcpy(b, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
    }
  }
  const Shape shapes[] = {{64, 2048, true}, {64, 8192, false}, {128, 1024, true}, {128, 2048, true},
                          {128, 8192, true}, {128, 8192, false}, {256, 2048, true}, {256, 8192, false}};
  const int reps = 20;
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) cudaEventCreate(&e);
  for (const Shape& sh : shapes) {
    AttentionProblem p;
    p.dtype = DType::kBFloat16, p.device = Device::kCUDA, p.batch = int(tokens / sh.seqlen);
    p.nheads_q = p.nheads_kv = int(width / sh.hdim), p.headdim = sh.hdim;
    p.seqlen_q = p.seqlen_k = sh.seqlen, p.total_q = p.total_k = tokens;
    for (auto [op, data] : {std::pair{&p.q, q}, {&p.k, k}, {&p.v, v}, {&p.out, o}}) {
      *op = Operand{data, int64_t(sh.seqlen) * width, width, sh.hdim};
    }
    p.lse = lse, p.lse_batch_stride = int64_t(p.nheads_q) * sh.seqlen, p.lse_head_stride = sh.seqlen, p.lse_row_stride = 1;
    p.score.scale = 1.0f / std::sqrt(float(sh.hdim));
    p.mask.window_right = sh.causal ? 0 : -1;
    const double flops = 4.0 * p.batch * p.nheads_q * double(sh.seqlen) * sh.seqlen * sh.hdim / (sh.causal ? 2 : 1);
    for (const Variant& var : kVariants) {
      if (var.hdim != sh.hdim) continue;
      Status s;
      for (int w = 0; w < 3; ++w) s = var.launch(p);
      if (!s.ok()) {
        std::printf("%s\n", s.message.c_str());
        continue;
      }
      for (int r = 0; r < reps; ++r) {
        cudaEventRecord(ev[2 * r]);
        var.launch(p);
        cudaEventRecord(ev[2 * r + 1]);
      }
      cudaDeviceSynchronize();
      std::vector<float> ms(reps);
      for (int r = 0; r < reps; ++r) cudaEventElapsedTime(&ms[r], ev[2 * r], ev[2 * r + 1]);
      std::sort(ms.begin(), ms.end());
      std::printf("variant hdim %3d seqlen %5d causal %d %-18s %7.1f TFLOP/s\n", sh.hdim, sh.seqlen, int(sh.causal),
                  var.name, flops / ms[reps / 2] / 1e9);
    }
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(err));
  return 0;
}
