// What the numbers were measured on, for the bench header.
#pragma once

#include <string>

#include "flashattn/flashattn.h"

namespace flashattn {
namespace cli {

struct MachineInfo {
  std::string cpu_model;
  int threads = 0;        // what the CPU backend will use
  std::string simd;       // the CPU kernel set chosen at run time
  std::string gpu;        // empty without a usable GPU
  std::string version;
};

MachineInfo machine_info(int requested_threads);

}  // namespace cli
}  // namespace flashattn
