// The error measure of the quantiser tests (legacy, K- and IQ quants): the relative RMS
// difference of a round trip, ||x - y|| / ||x||.
#pragma once

#include <cmath>
#include <vector>

namespace pith::test {

inline double rel_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) e += double(x[i] - y[i]) * (x[i] - y[i]), s += x[i] * x[i];
  return std::sqrt(e / s);
}

}  // namespace pith::test
