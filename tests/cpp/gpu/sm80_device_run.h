// Runs an attention test case on the GPU through the public API: every tensor's storage (padding
// included, poison included for outputs) is copied to device memory, the library runs with
// Backend::kCUDA, and the outputs' storage is copied back into host tensors, so the shared
// host-side checks (tests/cpp/common) apply unchanged.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "common/attn_case.h"
#include "common/paged_kv.h"

namespace fa_test {

// Skips the calling test when no CUDA device is usable, saying why.
#define SM80_SKIP_WITHOUT_GPU()                                                        \
  do {                                                                                 \
    if (!flashattn::cuda_available()) GTEST_SKIP() << "no CUDA device is available"; \
  } while (0)

// How the library call runs: directly on the default stream, or (graph_replays > 0) captured into a
// CUDA graph on a stream of its own (global capture mode, as PyTorch's graphs use) and replayed
// that many times, the outputs poisoned again before each replay, so the results come from the
// last replay alone.
//
// indices_checked sets AttentionParams::indices_checked. With returned_while_held, the call runs
// on a stream of its own that a host callback holds (up to 2 s) until the call has returned, and
// whether it returned within the hold (it did not wait for the device) is written there.
struct CallMode {
  int graph_replays = 0;
  bool derive_max_seqlen = false;  // varlen: max_seqlen_q/k passed as 0 (the library derives them)
  bool indices_checked = false;
  bool* returned_while_held = nullptr;
};

ForwardResult gpu_forward(const AttnCase& c, bool with_lse = true, CallMode mode = {});
BackwardResult gpu_backward(const AttnCase& c, const ForwardResult& fwd, CallMode mode = {});
// The forward with k and v read from `pages` (AttentionParams::block_table) on the device.
ForwardResult gpu_paged_forward(const AttnCase& c, const PagedKV& pages, CallMode mode = {});

// The fp64 oracle run on float32 copies of the (already rounded) fp16/bf16 inputs.
struct Reference {
  ForwardResult fwd;
  BackwardResult bwd;
};
Reference reference(const AttnCase& c, bool with_backward);

// Forward (and backward when `bwd` is given) within a fixed relative-L2 bound per dtype, or else
// within twice the error of a naive same-dtype computation (naive_attention), plus a small floor
// for cases where the naive error is ~0.
::testing::AssertionResult within_twice_naive(const AttnCase& c, const Reference& ref, const ForwardResult& fwd,
                                              const BackwardResult* bwd);

// The paged forward of c over `pages` (gpu_paged_forward) against the fp64 oracle: the call
// succeeds and lands within twice the naive error (within_twice_naive); the errors are printed.
void expect_paged_forward_matches(const AttnCase& c, const PagedKV& pages, CallMode mode = {});

// True when the two tensors' storage is byte for byte equal.
bool same_bytes(const HostTensor& a, const HostTensor& b);

// One named change to a CaseSpec, for suites parametrised over (dtype, head dim, option index).
struct CaseOption {
  const char* name;
  void (*apply)(CaseSpec&);
};
using OptionParam = std::tuple<DType, int, int>;
// fp16 then bf16, each head dim of `headdims` in turn, every option index below `count`.
std::vector<OptionParam> option_params(int count, const std::vector<int>& headdims = {64, 128});
// "<option>_<dtype>_d<head dim>".
std::string option_param_name(const CaseOption* options, const OptionParam& param);

}  // namespace fa_test
