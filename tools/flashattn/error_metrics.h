// How far a result is from the fp64 reference, in the one measure the project's tolerances use.
#pragma once

#include <vector>

namespace flashattn {
namespace cli {

// ||got - want||_2 / ||want||_2 over the elements; NaN when got holds a NaN (a missed store
// leaves the poison behind); 0 when both are all zero.
double relative_l2(const std::vector<float>& got, const std::vector<float>& want);

// Accumulates the relative L2 over several pieces (e.g. sampled row blocks).
struct RelativeL2 {
  double diff2 = 0.0, ref2 = 0.0;
  bool saw_nan = false;
  void add(const std::vector<float>& got, const std::vector<float>& want);
  double value() const;
};

}  // namespace cli
}  // namespace flashattn
