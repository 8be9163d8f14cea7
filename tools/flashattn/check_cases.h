// The cases of `flashattn check`: small random problems across dtypes and every option, each run
// forward and backward on the chosen backend and compared with the fp64 reference.
#pragma once

#include <string>
#include <vector>

#include "flashattn/flashattn.h"

namespace flashattn {
namespace cli {

struct CheckCase {
  std::string name;
  DType dtype = DType::kFloat32;
  int batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 1, seqlen_k = 1, headdim = 64;
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;
  float softmax_scale = 0.0f;
  bool alibi = false;
  bool varlen = false;
  bool deterministic = false;
  std::string label() const;
};

// One compared tensor of one case.
struct CheckOutcome {
  std::string tensor;  // out, lse, dq, dk, dv
  double error = 0.0;  // relative L2 (lse: largest absolute difference)
  double tolerance = 0.0;
  bool passed = false;
  std::string note;    // why it failed or was skipped
  bool skipped = false;
};

std::vector<CheckCase> check_cases(const std::vector<DType>& dtypes);
std::vector<CheckOutcome> run_check_case(const CheckCase& c, Backend backend, int threads);

}  // namespace cli
}  // namespace flashattn
