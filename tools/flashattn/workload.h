// One fixed-length attention problem with every tensor it needs on the benchmarked device:
// inputs q, k, v, dout drawn from N(0, 1), outputs out, lse, dq, dk, dv.
#pragma once

#include "bench_shapes.h"
#include "flashattn/flashattn.h"
#include "tensor.h"

namespace flashattn {
namespace cli {

class Workload {
 public:
  Workload(const BenchShape& shape, DType dtype, Device device, bool with_backward);

  const BenchShape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }

  Status forward(const AttentionParams& params);
  Status backward(const AttentionParams& params);  // needs out and lse from forward()
  void poison_forward_outputs();
  void poison_backward_outputs();

  Tensor q, k, v, out, lse, dout, dq, dk, dv;

 private:
  BenchShape shape_;
  DType dtype_;
};

}  // namespace cli
}  // namespace flashattn
