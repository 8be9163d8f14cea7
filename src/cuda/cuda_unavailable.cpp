// Linked instead of the CUDA backend when flashattn is built without CUDA.
#include "backends.h"

namespace flashattn {
namespace {
Status missing() { return Status::Unsupported("this build of flashattn has no CUDA backend"); }
}  // namespace

bool cuda_backend_compiled() { return false; }
bool cuda_device_present() { return false; }
Status cuda_pointer_device(const void*, Device* device, int* index) {
  *device = Device::kCPU;
  *index = 0;
  return Status::Ok();
}
Status cuda_copy_to_host(const void*, void*, size_t, void*) { return missing(); }
bool cuda_stream_capturing(void*) { return false; }
Status cuda_supports_forward(const AttentionProblem&) { return missing(); }
Status cuda_supports_backward(const AttentionProblem&) { return missing(); }
Status cuda_forward(const AttentionProblem&) { return missing(); }
Status cuda_backward(const AttentionProblem&) { return missing(); }

}  // namespace flashattn
