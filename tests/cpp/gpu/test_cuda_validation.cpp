// The argument checks only the CUDA backend makes (the CPU ones are tests/cpp/test_validation.cpp):
// 16-byte pointers and strides, views whose memory is not on the device their tag names, length
// vectors on another device than q, strided or past the sequence, an output on an input. Each
// bad call returns a status naming the argument and writes nothing: out keeps its poison.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "flashattn/flashattn.h"

namespace {

using namespace flashattn;

constexpr int64_t B = 2, S = 64, Hq = 4, Hk = 2, D = 64;

// A valid bf16 problem on device 0 (inputs 0x3C00-ish bf16 values, out poisoned with 0xFF bytes),
// plus spare device memory for views that need more room than their shape.
struct DeviceProblem {
  std::vector<void*> allocations;
  ForwardArgs fwd;
  AttentionParams params;
  void* out = nullptr;
  size_t out_bytes = 0;
  void* spare = nullptr;

  void* alloc(size_t bytes, int byte) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
    cudaMemset(p, byte, bytes);
    allocations.push_back(p);
    return p;
  }
  DeviceProblem() {
    const size_t q_bytes = size_t(B * S * Hq * D) * 2, kv_bytes = size_t(B * S * Hk * D) * 2;
    out_bytes = q_bytes;
    fwd.q = make_tensor(alloc(q_bytes, 0x3C), DType::kBFloat16, {B, S, Hq, D}, Device::kCUDA);
    fwd.k = make_tensor(alloc(kv_bytes, 0x3D), DType::kBFloat16, {B, S, Hk, D}, Device::kCUDA);
    fwd.v = make_tensor(alloc(kv_bytes, 0x3E), DType::kBFloat16, {B, S, Hk, D}, Device::kCUDA);
    out = alloc(out_bytes, 0xFF);
    fwd.out = make_tensor(out, DType::kBFloat16, {B, S, Hq, D}, Device::kCUDA);
    spare = alloc(4 * q_bytes, 0x3C);
    params.backend = Backend::kCUDA;
  }
  ~DeviceProblem() {
    for (void* p : allocations) cudaFree(p);
  }
  bool out_untouched() const {
    std::vector<unsigned char> host(out_bytes);
    if (cudaMemcpy(host.data(), out, out_bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    for (unsigned char b : host) {
      if (b != 0xFF) return false;
    }
    return true;
  }
};

::testing::AssertionResult rejected(const Status& s, const std::string& arg, const DeviceProblem& p,
                                    const std::string& also) {
  if (s.ok()) return ::testing::AssertionFailure() << "accepted; expected an error naming '" << arg << "'";
  if (s.code != StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "code " << static_cast<int>(s.code) << ": " << s.message;
  }
  if (s.message.find("'" + arg + "'") == std::string::npos || s.message.find(also) == std::string::npos) {
    return ::testing::AssertionFailure() << "message does not name '" << arg << "' with '" << also << "': " << s.message;
  }
  if (!p.out_untouched()) return ::testing::AssertionFailure() << "out was written despite the error";
  return ::testing::AssertionSuccess() << s.message;
}

#define SKIP_WITHOUT_CUDA()                                          \
  do {                                                               \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device present"; \
  } while (0)

TEST(CudaValidation, BaselineRuns) {
  SKIP_WITHOUT_CUDA();
  DeviceProblem p;
  const Status s = forward(p.fwd, p.params);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_FALSE(p.out_untouched());
}

TEST(CudaValidation, SixteenBytePointersAndStrides) {
  SKIP_WITHOUT_CUDA();
  {
    DeviceProblem p;
    p.fwd.q.data = static_cast<char*>(p.spare) + 2;  // bf16-aligned, not 16-byte aligned
    EXPECT_TRUE(rejected(forward(p.fwd, p.params), "q", p, "16 bytes"));
  }
  {
    DeviceProblem p;  // k's rows 4 elements (8 bytes) apart from a multiple of 16 bytes
    p.fwd.k.data = p.spare;
    p.fwd.k.stride[1] = Hk * D + 4;
    p.fwd.k.stride[0] = S * p.fwd.k.stride[1];
    EXPECT_TRUE(rejected(forward(p.fwd, p.params), "k", p, "multiple of 16 bytes"));
  }
}

TEST(CudaValidation, MemoryNotWhereItsTagSays) {
  SKIP_WITHOUT_CUDA();
  {
    DeviceProblem p;  // host memory tagged as device memory
    std::vector<uint16_t> host(size_t(B * S * Hk * D), 0x3C00);
    p.fwd.v.data = host.data();
    EXPECT_TRUE(rejected(forward(p.fwd, p.params), "v", p, "belongs to cpu"));
  }
  {
    DeviceProblem p;  // cu_seqlens tagged as host memory beside device q: refused, not read
    int32_t* cu = static_cast<int32_t*>(p.alloc(3 * 4, 0));
    p.fwd.q = make_tensor(p.fwd.q.data, DType::kBFloat16, {B * S, Hq, D}, Device::kCUDA);
    p.fwd.k = make_tensor(p.fwd.k.data, DType::kBFloat16, {B * S, Hk, D}, Device::kCUDA);
    p.fwd.v = make_tensor(p.fwd.v.data, DType::kBFloat16, {B * S, Hk, D}, Device::kCUDA);
    p.fwd.out = make_tensor(p.out, DType::kBFloat16, {B * S, Hq, D}, Device::kCUDA);
    p.params.cu_seqlens_q = make_tensor(cu, DType::kInt32, {B + 1}, Device::kCPU);
    p.params.cu_seqlens_k = make_tensor(cu, DType::kInt32, {B + 1}, Device::kCPU);
    EXPECT_TRUE(rejected(forward(p.fwd, p.params), "cu_seqlens_q", p, "is on cpu"));
  }
}

TEST(CudaValidation, LengthVectorsOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  const std::vector<int32_t> cu_every_other = {0, -1, 64, -1, 128, -1};  // 0, 64, 128 at stride 2
  {
    DeviceProblem p;
    int32_t* cu = static_cast<int32_t*>(p.alloc(cu_every_other.size() * 4, 0));
    ASSERT_EQ(cudaMemcpy(cu, cu_every_other.data(), cu_every_other.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    p.fwd.q = make_tensor(p.fwd.q.data, DType::kBFloat16, {B * S, Hq, D}, Device::kCUDA);
    p.fwd.k = make_tensor(p.fwd.k.data, DType::kBFloat16, {B * S, Hk, D}, Device::kCUDA);
    p.fwd.v = make_tensor(p.fwd.v.data, DType::kBFloat16, {B * S, Hk, D}, Device::kCUDA);
    p.fwd.out = make_tensor(p.out, DType::kBFloat16, {B * S, Hq, D}, Device::kCUDA);
    TensorView strided = make_tensor(cu, DType::kInt32, {B + 1}, Device::kCUDA);
    strided.stride[0] = 2;
    p.params.cu_seqlens_q = strided;
    p.params.cu_seqlens_k = strided;
    EXPECT_TRUE(rejected(forward(p.fwd, p.params), "cu_seqlens_q", p, "contiguous"));
  }
  {
    DeviceProblem p;  // seqused_k past the 64 keys of sequence 1
    const std::vector<int32_t> used = {64, 65};
    int32_t* d_used = static_cast<int32_t*>(p.alloc(used.size() * 4, 0));
    ASSERT_EQ(cudaMemcpy(d_used, used.data(), used.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    p.params.seqused_k = make_tensor(d_used, DType::kInt32, {B}, Device::kCUDA);
    EXPECT_TRUE(rejected(forward(p.fwd, p.params), "seqused_k", p, "65"));
  }
}

TEST(CudaValidation, OutputOnAnInput) {
  SKIP_WITHOUT_CUDA();
  DeviceProblem p;
  p.fwd.out = p.fwd.q;
  // out_untouched reads p.out, which this call must not reach either.
  EXPECT_TRUE(rejected(forward(p.fwd, p.params), "out", p, "input 'q'"));
}

}  // namespace
