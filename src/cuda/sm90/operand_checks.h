// What the sm90 kernels need of an operand's strides to reach it through a TMA tensor map (or,
// for the backward's dK and dV, with aligned stores): positive multiples of 16 bytes for every
// dimension of extent above 1.
#pragma once

#include <string>

#include "problem.h"

namespace flashattn {
namespace sm90 {

// `kernel` names the kernel in the message ("the sm90 forward kernel").
inline Status check_strides(const char* kernel, const char* name, const Operand& op, int64_t rows, int heads,
                            int batch, bool varlen, int elem_bytes) {
  const struct {
    const char* what;
    int64_t stride, extent;
  } dims[3] = {{"row", op.row_stride, rows}, {"head", op.head_stride, heads}, {"batch", op.batch_stride, varlen ? 1 : batch}};
  for (const auto& d : dims) {
    if (d.extent > 1 && (d.stride <= 0 || (d.stride * elem_bytes) % 16 != 0)) {
      return Status::Unsupported(std::string(kernel) + " needs positive 16-byte multiple strides; " + name + " has " +
                                 d.what + " stride " + std::to_string(d.stride));
    }
  }
  return Status::Ok();
}

}  // namespace sm90
}  // namespace flashattn
