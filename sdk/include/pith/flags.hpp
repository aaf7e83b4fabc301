// pith/flags.hpp: `--name value` launch arguments for inferlets, read by name with a default.
//
//   pith::Flags f;                                  // reads pith::args()
//   uint32_t n = f.u32("--branches", 3);
//   std::string p = f.str("--prompt", "Hello");
//   if (!f.unknown().empty()) return pith::send("error: unknown argument " + f.unknown()), 2;
#pragma once

#include <pith/pith.hpp>
#include <stdlib.h>

#include <string>
#include <vector>

namespace pith {

class Flags {
 public:
  Flags() : Flags(args()) {}
  explicit Flags(std::vector<std::string> argv) : argv_(static_cast<std::vector<std::string>&&>(argv)), used_(argv_.size(), false) {
    if (!used_.empty()) used_[0] = true;  // the program name
  }

  // The value after `name` (the last occurrence wins), or `def`.
  std::string str(const std::string& name, const std::string& def = "") { return find(name, true) ? argv_[at_ + 1] : def; }
  uint32_t u32(const std::string& name, uint32_t def) {
    return find(name, true) ? static_cast<uint32_t>(strtoul(argv_[at_ + 1].c_str(), nullptr, 10)) : def;
  }
  uint64_t u64(const std::string& name, uint64_t def) {
    return find(name, true) ? strtoull(argv_[at_ + 1].c_str(), nullptr, 10) : def;
  }
  double real(const std::string& name, double def) { return find(name, true) ? atof(argv_[at_ + 1].c_str()) : def; }
  // True if the bare flag `name` is present.
  bool flag(const std::string& name) { return find(name, false); }
  // Every value of a repeated `name value` pair, in order.
  std::vector<std::string> all(const std::string& name) {
    std::vector<std::string> out;
    for (size_t i = 1; i + 1 < argv_.size(); ++i)
      if (argv_[i] == name) {
        used_[i] = used_[i + 1] = true;
        out.push_back(argv_[++i]);
      }
    return out;
  }
  // The first argument no accessor has consumed so far ("" if none): call after reading all.
  std::string unknown() const {
    for (size_t i = 0; i < argv_.size(); ++i)
      if (!used_[i]) return argv_[i];
    return "";
  }

 private:
  bool find(const std::string& name, bool with_value) {
    bool found = false;
    for (size_t i = 1; i < argv_.size(); ++i) {
      if (argv_[i] != name || (with_value && i + 1 >= argv_.size())) continue;
      used_[i] = true;
      if (with_value) used_[i + 1] = true;
      at_ = i;
      found = true;
      if (with_value) ++i;
    }
    return found;
  }

  std::vector<std::string> argv_;
  std::vector<bool> used_;
  size_t at_ = 0;
};

}  // namespace pith
