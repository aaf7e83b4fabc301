#include "common/byte_size.h"

#include "common/error.h"

namespace pith {

size_t parse_byte_size(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    fail("'{}' is not a size (e.g. 512M, 2G)", text);
  }
  const std::string unit = text.substr(used);
  const double mul = unit.empty()  ? 1
                     : unit == "K" ? 1024.0
                     : unit == "M" ? 1048576.0
                     : unit == "G" ? 1073741824.0
                                   : -1;
  if (mul < 0 || v <= 0) fail("'{}' is not a size (e.g. 512M, 2G)", text);
  return static_cast<size_t>(v * mul);
}

}  // namespace pith
