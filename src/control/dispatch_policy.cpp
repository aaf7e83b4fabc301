#include "control/dispatch_policy.h"

#include "common/error.h"

namespace pith {

std::unique_ptr<DispatchPolicy> make_dispatch_policy(const std::string& spec) {
  auto colon = spec.find(':');
  std::string name = spec.substr(0, colon);
  std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  auto number = [&](double fallback) {
    if (arg.empty()) return fallback;
    try {
      size_t used = 0;
      double v = std::stod(arg, &used);
      if (used != arg.size() || v <= 0) throw std::invalid_argument(arg);
      return v;
    } catch (const std::exception&) {
      fail("batch policy '{}': '{}' is not a positive number", spec, arg);
    }
  };
  if (name == "adaptive" && arg.empty()) return std::make_unique<AdaptivePolicy>();
  if (name == "eager" && arg.empty()) return std::make_unique<EagerPolicy>();
  // Defaults follow the paper's Table 5 setup: K = 32 calls, T = 10 ms.
  if (name == "k")
    return std::make_unique<CountPolicy>(static_cast<size_t>(number(32)), 50'000'000);
  if (name == "t") return std::make_unique<TimePolicy>(static_cast<int64_t>(number(10) * 1e6));
  fail("unknown batch policy '{}' (expected adaptive, eager, k[:K] or t[:MS])", spec);
}

}  // namespace pith
