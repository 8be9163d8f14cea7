// The backends' on/off overrides from the environment, read at every call so that one
// process can time both sides of an A/B (benchmarks/bench_gpu.py --ours-env): a switch is on
// unless its variable is exactly "0". (In namespace flashattn, not flashattn::cuda: the sm90
// code names CCCL's ::cuda::ptx as cuda::ptx.)
#pragma once

#include <cstdlib>
#include <cstring>

namespace flashattn {

inline bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace flashattn
