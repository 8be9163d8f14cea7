#include "random_normal.h"

#include <cmath>

namespace flashattn {
namespace cli {
namespace {

// splitmix64: a full-period generator cheap enough to fill the GPU sweep's 33M-element tensors
// in well under a second, where std::normal_distribution over mt19937 takes several.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: never 0, so log() below stays finite.
  double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53; }
};

}  // namespace

std::vector<float> random_normal(int64_t count, uint64_t seed, float stddev) {
  std::vector<float> out(static_cast<size_t>(count));
  SplitMix64 rng{seed * 0x2545f4914f6cdd1dull + 1};
  constexpr double kTwoPi = 6.283185307179586;
  for (int64_t i = 0; i < count; i += 2) {  // Box-Muller gives two normals per pair of uniforms
    const double r = std::sqrt(-2.0 * std::log(rng.uniform())) * stddev;
    const double theta = kTwoPi * rng.uniform();
    out[static_cast<size_t>(i)] = static_cast<float>(r * std::cos(theta));
    if (i + 1 < count) out[static_cast<size_t>(i + 1)] = static_cast<float>(r * std::sin(theta));
  }
  return out;
}

}  // namespace cli
}  // namespace flashattn
