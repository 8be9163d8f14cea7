// The sm90 kernel set knows which (dtype, head dim) instantiations the build holds: the forward
// rounds a head dim up to the smallest built one (the default kernel's narrow twin runs it), GQA
// packing and the backward take built head dims alone, and everything else is refused, naming the
// head dim. Needs no GPU: the checks are host code, so CI's reduced build (bf16, head dim 128)
// exercises the rounding to 128 and the refusals, and a full build the rest. The head dims of a
// full build are written here as the specification (README: forward 64, 96, 128, 192 and 256;
// backward 64, 128 and 256), apart from src/cuda/sm90/head_dims.h which the build reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/kernel_sets.h"
#include "cuda/sm90/kernel_choice.h"
#include "gpu/compiled_set.h"
#include "problem.h"

namespace fa_test {
namespace {

using flashattn::AttentionProblem;
using flashattn::DType;
using flashattn::Status;

const std::vector<int> kForwardHeadDims = {64, 96, 128, 192, 256};
const std::vector<int> kBackwardHeadDims = {64, 128, 256};

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// A problem with real (host) memory behind the operands, so that nothing but the head dim and
// dtype can make the checks refuse it: 8 query heads on 2 KV heads, 4 query rows (a shape GQA
// packing takes), 64 keys.
struct Problem {
  std::vector<char> memory;
  AttentionProblem p;
  Problem(DType dtype, int headdim) : memory(size_t(64) * 8 * 264 * 2 + 256) {
    p.dtype = dtype, p.device = flashattn::Device::kCUDA, p.headdim = headdim, p.score.scale = 0.1f;
    p.batch = 1, p.nheads_q = 8, p.nheads_kv = 2, p.seqlen_q = p.total_q = 4, p.seqlen_k = p.total_k = 64;
    void* base = memory.data() + (256 - reinterpret_cast<uintptr_t>(memory.data()) % 256) % 256;
    const flashattn::Operand q{base, 4 * 8 * int64_t(headdim), 8 * int64_t(headdim), headdim};
    const flashattn::Operand kv{base, 64 * 2 * int64_t(headdim), 2 * int64_t(headdim), headdim};
    p.q = p.out = p.dout = p.dq = q;
    p.k = p.v = p.dk = p.dv = kv;
  }
};

TEST(Sm90CompiledSet, RoundsUpToTheBuiltHeadDimsAndRefusesTheRest) {
  for (const auto& [dtype, name] : std::vector<std::pair<DType, std::string>>{{DType::kBFloat16, "bf16"},
                                                                                {DType::kFloat16, "fp16"}}) {
    std::vector<int> built;  // this build's forward instantiations of dtype, ascending
    for (int d : kForwardHeadDims) {
      if (compiled(name, d)) built.push_back(d);
    }
    std::vector<int> headdims = {4, 60, 100, 260, 264, 272};
    for (int d = 8; d <= 256; d += 8) headdims.push_back(d);
    for (int d : headdims) {
      SCOPED_TRACE(name + " head dim " + std::to_string(d));
      int runs_at = 0;  // the instantiation's head dim, 0: none
      for (int b : built) {
        if (d % 8 == 0 && b >= d) {
          runs_at = b;
          break;
        }
      }
      Problem problem(dtype, d);
      const AttentionProblem& p = problem.p;
      const Status fwd = flashattn::sm90_supports_forward(p);
      if (runs_at != 0) {
        EXPECT_TRUE(fwd.ok()) << fwd.message;
        EXPECT_EQ(flashattn::sm90_runs_narrow_twin(p), runs_at != d);
      } else {
        ASSERT_FALSE(fwd.ok());
        EXPECT_EQ(fwd.code, flashattn::StatusCode::kUnsupported);
        EXPECT_NE(fwd.message.find("head dim"), std::string::npos) << fwd.message;
        EXPECT_NE(fwd.message.find(std::to_string(d)), std::string::npos) << fwd.message;
      }
      // GQA packing: built at the instantiated head dims only.
      const Status packed = flashattn::sm90_supports_forward_pack_gqa(p);
      EXPECT_EQ(packed.ok(), runs_at == d) << packed.message;
      if (runs_at != 0 && runs_at != d) {
        EXPECT_NE(packed.message.find(contains(kForwardHeadDims, d) ? "not built" : "only, not " + std::to_string(d)),
                  std::string::npos)
            << packed.message;
      }
      // The backward: its own head dims, where this build compiled them.
      const Status bwd = flashattn::sm90_supports_backward(p);
      const bool bwd_built = contains(kBackwardHeadDims, d) && contains(built, d);
      EXPECT_EQ(bwd.ok(), bwd_built) << bwd.message;
      if (!bwd_built) {
        EXPECT_EQ(bwd.code, flashattn::StatusCode::kUnsupported);
        EXPECT_NE(bwd.message.find("head dim " + std::to_string(d)), std::string::npos) << bwd.message;
      }
    }
  }
}

}  // namespace
}  // namespace fa_test
