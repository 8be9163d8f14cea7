// wgmma shared-memory matrix descriptors for tiles stored as 64-element columns with the 128-byte
// swizzle TMA writes (see config.h). Two operand orientations occur:
//   K-major (Q and K for S = Q K^T): rows of the operand are 128-byte lines, 8-line groups sit
//     kSwizzleAtomBytes apart; stepping 16 elements along K adds 32 bytes to the start address.
//   MN-major (V for O += P V, transposed B): N runs along the lines, the next 64 N sit one column
//     (kBlockN lines) further, K (keys) runs down the lines in 8-line groups.
#pragma once

#include <cstdint>

#include "cuda/sm90/config.h"

namespace flashattn {
namespace sm90 {

constexpr uint64_t kSwizzle128BLayout = uint64_t(1) << 62;

// Fields are in 16-byte units: start address bits 0-13, leading byte offset 16-29, stride
// byte offset 32-45. Tiles are 1024-byte aligned, so the base-offset field stays 0.
__device__ __forceinline__ uint64_t make_smem_descriptor(uint32_t address, uint32_t leading_bytes,
                                                         uint32_t stride_bytes) {
  return uint64_t((address & 0x3FFFF) >> 4) | (uint64_t((leading_bytes >> 4) & 0x3FFF) << 16) |
         (uint64_t((stride_bytes >> 4) & 0x3FFF) << 32) | kSwizzle128BLayout;
}

// The leading byte offset is unused for swizzled K-major operands; 16 bytes is the conventional value.
__device__ __forceinline__ uint64_t k_major_descriptor(uint32_t address) {
  return make_smem_descriptor(address, 16, kSwizzleAtomBytes);
}

__device__ __forceinline__ uint64_t mn_major_descriptor(uint32_t address, uint32_t column_bytes) {
  return make_smem_descriptor(address, column_bytes, kSwizzleAtomBytes);
}

// The start address lives in the low bits in 16-byte units and never carries out of its 14
// bits (shared memory is below 256 KB), so advancing a descriptor is a 32-bit addition to the low
// word. Written as such, the compiler sees that the high word (stride and swizzle) stays the
// same constant and needs no 64-bit add per wgmma (at hdim 256 it kept some of those sums in
// vector registers, an R2UR before the wgmma).
__device__ __forceinline__ uint64_t advance_descriptor(uint64_t desc, uint32_t bytes) {
  return (desc & ~uint64_t(0xFFFFFFFFu)) | uint32_t(uint32_t(desc) + (bytes >> 4));
}

// advance_descriptor that also takes `bytes` off the leading byte offset, so the column one LBO
// past the start stays where it is: P V's ones column (Cfg::kRowSumInPv) reads the same 16 keys of
// the ones tile at every 16-key step of V. The offset never goes below 0 (the ones tile lies past
// every V stage), so no borrow crosses from its field into the start address's.
__device__ __forceinline__ uint64_t advance_descriptor_fixed_lbo_target(uint64_t desc, uint32_t bytes) {
  return (desc & ~uint64_t(0xFFFFFFFFu)) | uint32_t(uint32_t(desc) + (bytes >> 4) - ((bytes >> 4) << 16));
}

}  // namespace sm90
}  // namespace flashattn
