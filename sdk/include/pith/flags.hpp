// pith/flags.hpp: `--name value` launch arguments, each read once by name with a default and a
// line of help; done() then rejects what nobody read and answers --help.
//
//   pith::Status run(pith::Flags& flags) {                  // PITH_INFERLET(run) passes them in
//     std::string prompt = flags.str("--prompt", "Hello", "the text to complete");
//     uint32_t n = flags.u32("--max-tokens", 32, "tokens to generate at most");
//     PITH_TRY(flags.done());   // "unknown argument --x", "--max-tokens: 'x' is not a number"
//     ...
//
// A value that does not parse leaves the default in place and makes done() fail, so an
// inferlet never runs with a number it did not mean.
#pragma once

#include <stdlib.h>

#include <pith/pith.hpp>
#include <pith/result.hpp>
#include <string>
#include <vector>

namespace pith {

class Flags {
 public:
  Flags() : Flags(args()) {}
  explicit Flags(std::vector<std::string> argv)
      : argv_(static_cast<std::vector<std::string>&&>(argv)), used_(argv_.size(), false) {
    if (!used_.empty()) used_[0] = true;  // the program name
  }

  // One line about the program, the first line of the usage text.
  void about(std::string text) { about_ = static_cast<std::string&&>(text); }

  // The value after `name` (the last occurrence wins), or `def`.
  std::string str(const std::string& name, const std::string& def, const std::string& help) {
    describe(name, "TEXT", def.empty() ? "" : "\"" + def + "\"", help);
    return find(name, true) ? argv_[at_ + 1] : def;
  }
  uint32_t u32(const std::string& name, uint32_t def, const std::string& help) {
    describe(name, "N", std::to_string(def), help);
    uint64_t v = def;
    if (find(name, true) && parse_unsigned(name, argv_[at_ + 1], UINT32_MAX, &v))
      return static_cast<uint32_t>(v);
    return def;
  }
  uint64_t u64(const std::string& name, uint64_t def, const std::string& help) {
    describe(name, "N", std::to_string(def), help);
    uint64_t v = def;
    if (find(name, true) && parse_unsigned(name, argv_[at_ + 1], UINT64_MAX, &v)) return v;
    return def;
  }
  double real(const std::string& name, double def, const std::string& help) {
    describe(name, "X", shortest(def), help);
    if (!find(name, true)) return def;
    const std::string& s = argv_[at_ + 1];
    char* end = nullptr;
    double v = strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || v != v) {
      bad(name, s, "a number");
      return def;
    }
    return v;
  }
  float f32(const std::string& name, float def, const std::string& help) {
    return static_cast<float>(real(name, def, help));
  }
  // True if the bare flag `name` is present.
  bool flag(const std::string& name, const std::string& help) {
    describe(name, "", "", help);
    return find(name, false);
  }
  // Every value of a repeated `name value` pair, in order.
  std::vector<std::string> all(const std::string& name, const std::string& help) {
    describe(name, "TEXT", "", help + " (repeatable)");
    std::vector<std::string> out;
    for (size_t i = 1; i + 1 < argv_.size(); ++i)
      if (argv_[i] == name) {
        used_[i] = used_[i + 1] = true;
        out.push_back(argv_[++i]);
      }
    return out;
  }

  // Call after reading every flag. --help (or -h): sends the usage text and ends the inferlet
  // with exit code 0. A value that did not parse or an argument nobody read: an error (exit 2).
  Status done() {
    for (size_t i = 1; i < argv_.size(); ++i)
      if (!used_[i] && (argv_[i] == "--help" || argv_[i] == "-h")) {
        PITH_TRY(send(usage()));
        return Error(PITH_ERR_CANCELLED, "--help answered", 0);
      }
    if (!bad_.empty()) return Error(PITH_ERR_BAD_ARGUMENT, bad_, 2);
    if (std::string u = unknown(); !u.empty())
      return Error(PITH_ERR_BAD_ARGUMENT, "unknown argument " + u, 2);
    checked_ = true;
    return {};
  }
  bool checked() const { return checked_; }

  // The first argument no accessor has consumed so far ("" if none).
  std::string unknown() const {
    for (size_t i = 0; i < argv_.size(); ++i)
      if (!used_[i]) return argv_[i];
    return "";
  }
  // "usage: PROGRAM [flags]", the about line, then one line per flag read so far.
  std::string usage() const {
    std::string out =
        "usage: " + (argv_.empty() ? std::string("inferlet") : argv_[0]) + " [flags]\n";
    if (!about_.empty()) out += about_ + "\n";
    for (const std::string& line : help_) out += line + "\n";
    return out;
  }

 private:
  bool find(const std::string& name, bool with_value) {
    bool found = false;
    for (size_t i = 1; i < argv_.size(); ++i) {
      if (argv_[i] != name) continue;
      if (with_value && i + 1 >= argv_.size()) {
        if (bad_.empty()) bad_ = name + " needs a value";
        used_[i] = true;
        continue;
      }
      used_[i] = true;
      if (with_value) used_[i + 1] = true;
      at_ = i;
      found = true;
      if (with_value) ++i;
    }
    return found;
  }
  bool parse_unsigned(const std::string& name, const std::string& s, uint64_t max, uint64_t* out) {
    char* end = nullptr;
    unsigned long long v = strtoull(s.c_str(), &end, 10);
    if (s.empty() || s[0] == '-' || *end != '\0' || v > max) {
      bad(name, s, "a non-negative integer" + std::string(max == UINT32_MAX ? " below 2^32" : ""));
      return false;
    }
    *out = v;
    return true;
  }
  void bad(const std::string& name, const std::string& value, const std::string& want) {
    if (bad_.empty()) bad_ = name + ": '" + value + "' is not " + want;
  }
  void describe(const std::string& name, const char* metavar, const std::string& def,
                const std::string& help) {
    std::string line = "  " + name + (*metavar ? std::string(" ") + metavar : std::string());
    if (line.size() < 26) line.resize(26, ' ');
    line += " " + help;
    if (!def.empty()) line += " (default " + def + ")";
    help_.push_back(line);
  }
  // A default for the usage text, without printf's floating-point formatting (tens of KB of
  // code in a wasm module): up to six decimals, trailing zeros dropped.
  static std::string shortest(double v) {
    std::string s = v < 0 ? "-" : "";
    if (v < 0) v = -v;
    uint64_t whole = static_cast<uint64_t>(v);
    uint64_t frac = static_cast<uint64_t>((v - static_cast<double>(whole)) * 1e6 + 0.5);
    if (frac >= 1000000) ++whole, frac -= 1000000;
    s += std::to_string(whole);
    if (frac == 0) return s;
    std::string f = std::to_string(frac);
    f.insert(0, 6 - f.size(), '0');
    while (f.back() == '0') f.pop_back();
    return s + "." + f;
  }

  std::vector<std::string> argv_;
  std::vector<bool> used_;
  size_t at_ = 0;
  std::string about_;
  std::vector<std::string> help_;
  std::string bad_;  // the first value that did not parse
  bool checked_ = false;
};

}  // namespace pith
