// The backends' on/off overrides from the environment, read at every call so that one
// process can time both sides of an A/B (benchmarks/bench_gpu.py --ours-env): unset or empty, a
// switch takes its default (on, or a rule's answer); set, it is off where its variable is exactly
// "0" and on otherwise.
// (In namespace flashattn, not flashattn::cuda: the sm90 code names CCCL's ::cuda::ptx as
// cuda::ptx.)
#pragma once

#include <cstdlib>
#include <cstring>

namespace flashattn {

// A switch whose default is a rule rather than a constant: unset or empty, the rule decides;
// "0" turns it off and any other value on, whatever the rule says (for tests and A/B).
enum class EnvSetting { kByRule, kOff, kOn };
inline EnvSetting env_setting(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return EnvSetting::kByRule;
  return std::strcmp(v, "0") == 0 ? EnvSetting::kOff : EnvSetting::kOn;
}

// A switch that is on by default.
inline bool env_switch_on(const char* name) { return env_setting(name) != EnvSetting::kOff; }

}  // namespace flashattn
