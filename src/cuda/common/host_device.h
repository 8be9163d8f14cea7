// Functions that both the kernels and the CPU tests call (the tests check them against the plain
// arithmetic they replace), in headers without CUDA includes.
#pragma once

#if defined(__CUDACC__)
#define FLASHATTN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FLASHATTN_HOST_DEVICE inline
#endif
