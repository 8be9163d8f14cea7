#include "machine_info.h"

#include <fstream>

#include "cpu/simd/kernels.h"
#include "cpu/threads.h"
#include "device_buffer.h"

namespace flashattn {
namespace cli {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "unknown";
}

}  // namespace

MachineInfo machine_info(int requested_threads) {
  MachineInfo m;
  m.cpu_model = cpu_model();
  m.threads = resolve_threads(requested_threads);
  m.simd = cpu::kernels().name;
  if (cuda_available()) m.gpu = gpu_name();
#if defined(FLASHATTN_VERSION)
  m.version = FLASHATTN_VERSION;
#endif
  return m;
}

}  // namespace cli
}  // namespace flashattn
