#include "error_metrics.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace flashattn {
namespace cli {

void RelativeL2::add(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) throw std::invalid_argument("relative_l2: sizes differ");
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) && std::isfinite(want[i])) saw_nan = true;
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    diff2 += d * d;
    ref2 += static_cast<double>(want[i]) * want[i];
  }
}

double RelativeL2::value() const {
  if (saw_nan) return std::numeric_limits<double>::quiet_NaN();
  if (ref2 == 0.0) return diff2 == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff2 / ref2);
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  RelativeL2 r;
  r.add(got, want);
  return r.value();
}

}  // namespace cli
}  // namespace flashattn
