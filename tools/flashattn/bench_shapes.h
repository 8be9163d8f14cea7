// The shapes `flashattn bench` sweeps: the benchmark protocol's (tokens batch * seqlen = 16384,
// width nheads * headdim = 2048) on a GPU, scaled down on the CPU so the sweep takes a minute or two.
#pragma once

#include <string>
#include <vector>

namespace flashattn {
namespace cli {

struct BenchShape {
  int batch = 1;
  int heads_q = 16;
  int heads_kv = 16;
  int seqlen = 1024;
  int headdim = 128;
  bool causal = false;
  std::string label() const;  // "b2 h16 n1024 d128 causal"
};

enum class SweepSize { kQuick, kCPU, kGPU };

// Every protocol head dim and sequence length that fits the size, causal and non-causal, plus
// the protocol's GQA shapes (hq 32, hkv 8, headdim 128, causal).
std::vector<BenchShape> protocol_sweep(SweepSize size);

// "BxHxNxD" or "BxHqxHkvxNxD", comma separated; each in both causal and non-causal form unless
// `causal` says otherwise ("both", "yes", "no"). Throws UsageError on a malformed entry.
std::vector<BenchShape> parse_shapes(const std::string& text);
std::vector<BenchShape> filter_causal(const std::vector<BenchShape>& shapes, const std::string& causal);

// FLOPs of the forward pass: 4 * b * h * sq * sk * d, halved for causal (protocol's convention).
double forward_flops(const BenchShape& s);

}  // namespace cli
}  // namespace flashattn
