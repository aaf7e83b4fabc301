// big: a deliberately library-heavy inferlet (~150 KB of code: containers, algorithms,
// formatted floating point, strtod) standing in for a realistic application module in the
// cold-start benchmark. It sends "ready" first thing, then does a little text processing.
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <pith/pith.hpp>
#include <set>
#include <unordered_map>
#include <utility>

// Many distinct small functions reached through a table (so none is inlined or merged), as a
// large application has: brings the module to ~150 KB like a real inferlet with its helpers.
template <unsigned K>
__attribute__((noinline)) unsigned mix(unsigned x) {
  for (unsigned i = 0; i < (K % 7) + 2; ++i)
    x = (x ^ (K * 2654435761u + i)) * (K | 1u) + (x >> (K % 13 + 1));
  return x % (K + 3) == 0 ? x / 3 + K : x + (K << 3);
}
template <unsigned... Ks>
constexpr auto make_table(std::integer_sequence<unsigned, Ks...>) {
  return std::array<unsigned (*)(unsigned), sizeof...(Ks)>{&mix<Ks>...};
}
static const auto kMixers = make_table(std::make_integer_sequence<unsigned, 450>{});

int main() {
  if (!pith::send("ready")) return 1;
  std::vector<std::string> args = pith::args();
  std::map<std::string, int> counts;
  std::unordered_map<std::string, double> values;
  std::set<std::string> seen;
  for (const std::string& a : args) {
    counts[a]++;
    values[a] = strtod(a.c_str(), nullptr);
    seen.insert(a);
  }
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::function<bool(const std::pair<std::string, int>&, const std::pair<std::string, int>&)> by =
      [](const auto& x, const auto& y) { return x.second > y.second; };
  std::stable_sort(sorted.begin(), sorted.end(), by);
  std::string out;
  char buf[96];
  for (const auto& [w, n] : sorted) {
    snprintf(buf, sizeof buf, "%s=%d (%.3g, %e) ", w.c_str(), n, values[w],
             double(n) / args.size());
    out += buf;
  }
  unsigned h = static_cast<unsigned>(args.size());
  for (const auto& f : kMixers) h = f(h);
  out += std::to_string(seen.size()) + " " + std::to_string(h);
  return pith::send(out) ? 0 : 1;
}
