// What the API layer may call in each backend. Declarations only: api.cpp never sees a kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "problem.h"

namespace flashattn {

Status cpu_reference_forward(const AttentionProblem& p);
Status cpu_reference_backward(const AttentionProblem& p);
Status cpu_flash_forward(const AttentionProblem& p);
Status cpu_flash_backward(const AttentionProblem& p);

// CUDA backend (src/cuda/); a build without CUDA links stubs that report it missing.
bool cuda_backend_compiled();
bool cuda_device_present();
// Which device owns `ptr`: kCUDA with its index, or kCPU for host memory. Never fails on a
// host pointer the driver does not know.
Status cuda_pointer_device(const void* ptr, Device* device, int* device_index);
Status cuda_copy_to_host(const void* device_ptr, void* host_ptr, size_t bytes, void* stream);
// True while `stream` (a cudaStream_t) is capturing a CUDA graph.
bool cuda_stream_capturing(void* stream);
// Returns Ok when the CUDA kernels can run the problem, else a message naming the missing option.
Status cuda_supports_forward(const AttentionProblem& p);
Status cuda_supports_backward(const AttentionProblem& p);
Status cuda_forward(const AttentionProblem& p);
Status cuda_backward(const AttentionProblem& p);

}  // namespace flashattn
