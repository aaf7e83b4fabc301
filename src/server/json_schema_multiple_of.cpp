// `multipleOf` as grammar (see json_schema_scalars.h): a finite automaton over the decimal digits
// whose state is the remainder mod M of the digits read so far, one GBNF rule per live state:
//   NAME        the entry: the sign, then NAME-nat (any) or NAME-pos (nonzero)
//   NAME-iR     in the integer part (not a lone "0") with remainder R
//   NAME-fK-R   K fraction digits read with remainder R (K = 0: just after the point)
//   NAME-zK     "0." and K zeros read: NAME-pos still owes a nonzero digit
// x = N / 10^d (N the digits read, K of them after the point) is a multiple of M / 10^d when
// N * 10^(d - K) is divisible by M.
#include <fmt/format.h>

#include <map>
#include <set>
#include <vector>

#include "server/json_schema_scalars.h"

namespace pith::server {

namespace {

constexpr uint32_t kMaxModulus = 1000;

std::string alternatives(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

class MultipleOf {
 public:
  // Step M / 10^scale; fraction digits allowed up to `scale` when `fraction`, else none.
  MultipleOf(uint32_t m, uint32_t scale, bool fraction, std::string name)
      : m_(m), scale_(scale), d_(fraction ? scale : 0), name_(std::move(name)) {
    live_.assign(d_ + 1, std::vector<bool>(m_, false));
    for (uint32_t k = d_ + 1; k-- > 0;)
      for (uint32_t r = 0; r < m_; ++r) live_[k][r] = accepts(r, k) || has_moves(r, k);
  }

  std::vector<std::pair<std::string, std::string>> rules(int sign, bool zero) {
    const std::string nat = name_ + "-nat", pos = name_ + "-pos";
    std::string entry;
    if (sign == 0) entry = "\"-\"? " + ref(zero ? nat : pos);
    if (sign > 0) entry = ref(zero ? nat : pos);
    if (sign < 0) entry = (zero ? "\"0\" | " : "") + std::string("\"-\" ") + ref(pos);
    out_.emplace_back(name_, entry);
    for (size_t i = 0; i < pending_.size(); ++i) out_.emplace_back(pending_[i], body(pending_[i]));
    return std::move(out_);
  }

 private:
  uint32_t next(uint32_t r, uint32_t digit) const { return (r * 10 + digit) % m_; }
  // An end after k fraction digits with remainder r: r * 10^(scale - k) divisible by M.
  bool accepts(uint32_t r, uint32_t k) const {
    uint64_t v = r;
    for (uint32_t i = k; i < scale_; ++i) v = v * 10 % m_;
    return v == 0;
  }
  bool has_moves(uint32_t r, uint32_t k) const {
    for (uint32_t digit = 0; digit < 10 && k < d_; ++digit)
      if (live_[k + 1][next(r, digit)]) return true;
    return false;
  }
  // A rule is written once, after the entry, when first referenced.
  std::string ref(const std::string& rule) {
    if (named_.insert(rule).second) pending_.push_back(rule);
    return rule;
  }

  // The digits from `first` up, grouped by the state they lead to. In the integer part every
  // state is live (appending digits reaches any remainder); in the fraction, a digit into a
  // state with no moves left must end there, and one into an accepting state may.
  std::vector<std::string> moves(uint32_t r, uint32_t first, bool integer, uint32_t k = 0) {
    std::map<uint32_t, std::string> by_next;
    for (uint32_t digit = first; digit < 10; ++digit) by_next[next(r, digit)] += char('0' + digit);
    std::vector<std::string> alts;
    for (const auto& [n, ds] : by_next) {
      const std::string cls = ds.size() == 1 ? "\"" + ds + "\"" : "[" + ds + "]";
      if (integer) {
        alts.push_back(cls + " " + ref(fmt::format("{}-i{}", name_, n)));
      } else if (live_[k + 1][n]) {
        if (!has_moves(n, k + 1))
          alts.push_back(cls);
        else
          alts.push_back(cls + " " + ref(fmt::format("{}-f{}-{}", name_, k + 1, n)) +
                         (accepts(n, k + 1) ? "?" : ""));
      }
    }
    return alts;
  }
  // "." and fraction digits after an integer part with remainder r ("" when none can follow).
  std::string point(uint32_t r) {
    if (!has_moves(r, 0)) return "";
    return "\".\" " + ref(fmt::format("{}-f0-{}", name_, r));
  }
  // An integer part's continuation: more digits or a point; optional where it may end.
  std::string integer_tail(uint32_t r, std::vector<std::string> alts) {
    if (const std::string p = point(r); !p.empty()) alts.push_back(p);
    if (alts.empty()) return "";
    return accepts(r, 0) ? "( " + alternatives(alts) + " )?" : alternatives(alts);
  }

  std::string body(const std::string& rule) {
    const std::string tail = rule.substr(name_.size() + 1);
    if (tail == "nat") {  // "0" (remainder 0, so it may end) or a nonzero first digit
      const std::string zero_tail = integer_tail(0, {});
      return "\"0\"" + (zero_tail.empty() ? "" : " " + zero_tail) + " | " +
             alternatives(moves(0, 1, true));
    }
    if (tail == "pos") {
      std::vector<std::string> alts = moves(0, 1, true);
      if (zero_run_live(0)) alts.push_back("\"0.\" " + ref(name_ + "-z0"));
      return alternatives(alts);
    }
    if (tail[0] == 'i') {
      const uint32_t r = static_cast<uint32_t>(std::stoul(tail.substr(1)));
      return integer_tail(r, moves(r, 0, true));
    }
    if (tail[0] == 'f') {
      const size_t dash = tail.find('-');
      const uint32_t k = static_cast<uint32_t>(std::stoul(tail.substr(1, dash - 1)));
      return alternatives(
          moves(static_cast<uint32_t>(std::stoul(tail.substr(dash + 1))), 0, false, k));
    }
    const uint32_t k = static_cast<uint32_t>(std::stoul(tail.substr(1)));  // "zK"
    std::vector<std::string> alts = moves(0, 1, false, k);
    if (zero_run_live(k + 1)) alts.push_back("\"0\" " + ref(fmt::format("{}-z{}", name_, k + 1)));
    return alternatives(alts);
  }
  // After "0." and k zeros: a nonzero digit can still come and lead to an end.
  bool zero_run_live(uint32_t k) const {
    for (uint32_t j = k; j < d_; ++j)
      for (uint32_t digit = 1; digit < 10; ++digit)
        if (live_[j + 1][next(0, digit)]) return true;
    return false;
  }

  uint32_t m_, scale_, d_;
  std::string name_;
  std::vector<std::vector<bool>> live_;  // [k][r]: an end is reachable from there
  std::vector<std::pair<std::string, std::string>> out_;
  std::vector<std::string> pending_;
  std::set<std::string> named_;
};

}  // namespace

std::vector<std::pair<std::string, std::string>> multiple_of_gbnf(const DecimalBound& step,
                                                                  const std::string& name,
                                                                  bool fraction, int sign,
                                                                  bool zero) {
  const std::string digits = step.whole + step.fraction;
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos || digits.size() - first > 4) return {};
  const uint32_t m = static_cast<uint32_t>(std::stoul(digits.substr(first)));
  if (m > kMaxModulus) return {};
  return MultipleOf(m, static_cast<uint32_t>(step.fraction.size()), fraction, name)
      .rules(sign, zero);
}

}  // namespace pith::server
