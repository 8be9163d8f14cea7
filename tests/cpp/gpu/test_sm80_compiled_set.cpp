// The sm80 kernel set knows which (dtype, head dim) instantiations the build holds and refuses the
// others with a message that names the head dimension or dtype and the build option to change.
// Needs no GPU: the check is host code, so CI's reduced build (bf16, head dim 128) exercises the
// refusals and a full build the acceptances.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/kernel_sets.h"
#include "gpu/compiled_set.h"
#include "problem.h"

namespace fa_test {
namespace {

using flashattn::AttentionProblem;
using flashattn::DType;

TEST(Sm80CompiledSet, RefusesWhatTheBuildLeftOut) {
  const std::string hdims = FLASHATTN_TEST_HDIMS, dtypes = FLASHATTN_TEST_DTYPES;
  for (const auto& [dtype, name] : std::vector<std::pair<DType, std::string>>{{DType::kFloat16, "fp16"},
                                                                                {DType::kBFloat16, "bf16"}}) {
    for (int d : {32, 64, 96, 128, 192, 256}) {
      SCOPED_TRACE(name + " head dim " + std::to_string(d));
      AttentionProblem p;
      p.dtype = dtype;
      p.device = flashattn::Device::kCUDA;
      p.batch = 2;
      p.nheads_q = p.nheads_kv = 2;
      p.headdim = d;
      p.seqlen_q = p.seqlen_k = 64;
      p.total_q = p.total_k = 128;
      const flashattn::Status fwd = flashattn::sm80_supports_forward(p);
      const flashattn::Status bwd = flashattn::sm80_supports_backward(p);
      const bool dtype_in = listed(dtypes, name), hdim_in = listed(hdims, std::to_string(d));
      if (dtype_in && hdim_in) {
        EXPECT_TRUE(fwd.ok()) << fwd.message;
        EXPECT_TRUE(bwd.ok()) << bwd.message;
        continue;
      }
      for (const flashattn::Status& s : {fwd, bwd}) {
        ASSERT_FALSE(s.ok());
        EXPECT_EQ(s.code, flashattn::StatusCode::kUnsupported);
        if (!dtype_in) {
          EXPECT_NE(s.message.find("FLASHATTN_DTYPES"), std::string::npos) << s.message;
        } else {
          EXPECT_NE(s.message.find("head dimension " + std::to_string(d)), std::string::npos) << s.message;
          EXPECT_NE(s.message.find("FLASHATTN_HDIMS"), std::string::npos) << s.message;
        }
      }
    }
  }
}

}  // namespace
}  // namespace fa_test
