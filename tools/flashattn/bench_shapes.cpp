#include "bench_shapes.h"

#include <algorithm>
#include <sstream>

#include "args.h"

namespace flashattn {
namespace cli {
namespace {

struct SweepScale {
  int tokens, width;
  std::vector<int> seqlens, headdims;
  std::vector<int> gqa_seqlens;
};

// Two CPU cores run ~1/2000 of an H200's rate, so the CPU sweep keeps the protocol's structure
// (fixed tokens and width, every head dim, causal and not, GQA) at 1/8 of its tokens with
// sequences to 2k: about a minute on 2 idle cores. Quick mode is for smoke runs.
SweepScale scale_of(SweepSize size) {
  switch (size) {
    case SweepSize::kGPU: return {16384, 2048, {512, 1024, 2048, 4096, 8192, 16384}, {64, 128, 256}, {2048, 8192}};
    case SweepSize::kCPU: return {2048, 2048, {512, 1024, 2048}, {64, 128, 256}, {2048}};
    case SweepSize::kQuick: return {1024, 512, {256, 512}, {64, 128}, {}};
  }
  return {};
}

}  // namespace

std::string BenchShape::label() const {
  std::ostringstream os;
  os << "b" << batch << " h" << heads_q;
  if (heads_kv != heads_q) os << "/" << heads_kv;
  os << " n" << seqlen << " d" << headdim << (causal ? " causal" : "");
  return os.str();
}

std::vector<BenchShape> protocol_sweep(SweepSize size) {
  const SweepScale sc = scale_of(size);
  std::vector<BenchShape> shapes;
  for (int d : sc.headdims) {
    for (int causal = 0; causal < 2; ++causal) {
      for (int n : sc.seqlens) {
        BenchShape s;
        s.batch = sc.tokens / n;
        s.heads_q = s.heads_kv = sc.width / d;
        s.seqlen = n;
        s.headdim = d;
        s.causal = causal;
        shapes.push_back(s);
      }
    }
  }
  for (int n : sc.gqa_seqlens) {
    BenchShape s;
    s.batch = std::max(1, sc.tokens / n);
    s.heads_q = 32;
    s.heads_kv = 8;
    s.seqlen = n;
    s.headdim = 128;
    s.causal = true;
    shapes.push_back(s);
  }
  return shapes;
}

std::vector<BenchShape> parse_shapes(const std::string& text) {
  std::vector<BenchShape> shapes;
  std::stringstream list(text);
  std::string entry;
  while (std::getline(list, entry, ',')) {
    std::vector<int64_t> dims;
    std::stringstream parts(entry);
    std::string part;
    while (std::getline(parts, part, 'x')) dims.push_back(parse_integer("--shapes entry '" + entry + "'", part, 1, 1 << 24));
    if (dims.size() != 4 && dims.size() != 5) {
      throw UsageError("--shapes entry '" + entry + "' is not BxHxNxD or BxHqxHkvxNxD");
    }
    BenchShape s;
    s.batch = static_cast<int>(dims[0]);
    s.heads_q = static_cast<int>(dims[1]);
    s.heads_kv = static_cast<int>(dims.size() == 5 ? dims[2] : dims[1]);
    s.seqlen = static_cast<int>(dims[dims.size() - 2]);
    s.headdim = static_cast<int>(dims.back());
    if (s.heads_q % s.heads_kv != 0) {
      throw UsageError("--shapes entry '" + entry + "': " + std::to_string(s.heads_q) + " query heads are not a multiple of " +
                       std::to_string(s.heads_kv) + " KV heads");
    }
    if (s.headdim % 8 != 0 || s.headdim > 256) {
      throw UsageError("--shapes entry '" + entry + "': head dim " + std::to_string(s.headdim) +
                       " is not a multiple of 8 in [8, 256]");
    }
    shapes.push_back(s);
    s.causal = true;
    shapes.push_back(s);
  }
  if (shapes.empty()) throw UsageError("--shapes is empty");
  return shapes;
}

std::vector<BenchShape> filter_causal(const std::vector<BenchShape>& shapes, const std::string& causal) {
  if (causal == "both") return shapes;
  std::vector<BenchShape> kept;
  for (const BenchShape& s : shapes) {
    if (s.causal == (causal == "yes")) kept.push_back(s);
  }
  return kept;
}

double forward_flops(const BenchShape& s) {
  const double full = 4.0 * s.batch * s.heads_q * static_cast<double>(s.seqlen) * s.seqlen * s.headdim;
  return s.causal ? full / 2.0 : full;
}

}  // namespace cli
}  // namespace flashattn
