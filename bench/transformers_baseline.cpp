#include "bench/transformers_baseline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>

#include "common/error.h"

namespace pith::bench {

std::string_view transformers_bench_script();  // bench/transformers_bench.py (EmbedFile.cmake)

namespace {

// A file under the temporary directory, removed with this object.
class TempFile {
 public:
  explicit TempFile(const std::string& pattern) {
    std::string path = (std::filesystem::temp_directory_path() / pattern).string();
    const int fd = mkstemps(path.data(), static_cast<int>(pattern.size() - pattern.find('.')));
    if (fd < 0) fail("cannot create a temporary file {}", path);
    close(fd);
    path_ = path;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string quoted(const std::string& s) {  // for the shell: single quotes, ' as '\''
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string tail_of(const std::string& path, size_t bytes) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  return all.size() > bytes ? "..." + all.substr(all.size() - bytes) : all;
}

}  // namespace

TransformersResult run_transformers_bench(const TransformersRun& run) {
  TempFile script("pith-transformers-bench-XXXXXX.py"),
      errors("pith-transformers-bench-XXXXXX.log");
  {
    std::ofstream out(script.path(), std::ios::binary);
    const std::string_view text = transformers_bench_script();
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) fail("cannot write {}", script.path());
  }
  const std::string cmd = fmt::format(
      "{} {} --model {} --device {} --threads {} --n-prompt {} --n-gen {} --batch={} "
      "--batch-steps {} --reps {} 2>{}",
      quoted(run.python), quoted(script.path()), quoted(run.model), quoted(run.device), run.threads,
      run.n_prompt, run.n_gen, fmt::join(run.batch_sizes, ","), run.batch_steps, run.reps,
      quoted(errors.path()));
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) fail("cannot run {}", run.python);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p.get())) > 0) out.append(buf, n);
  const int status = pclose(p.release());
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  const size_t line = out.find_last_of('\n');  // the JSON is the last line
  nlohmann::json j =
      nlohmann::json::parse(line == std::string::npos ? out : out.substr(line + 1), nullptr, false);
  if (status != 0 || !j.is_object())
    fail("the transformers baseline failed (exit status {}; command: {}):\n{}", status, cmd,
         tail_of(errors.path(), 2000));
  TransformersResult r;
  r.pp_tok_s = j.value("pp_tok_s", 0.0);
  r.tg_tok_s = j.value("tg_tok_s", 0.0);
  if (j.contains("batch_tg_tok_s"))
    for (const auto& [b, v] : j["batch_tg_tok_s"].items()) r.batch_tg_tok_s[std::stoul(b)] = v;
  r.report = j;
  return r;
}

nlohmann::json compare_with_transformers(const TransformersRun& run, double pp, double tg,
                                         const nlohmann::json& batch) {
  TransformersResult t;
  try {
    t = run_transformers_bench(run);
  } catch (const Error& e) {
    fmt::print("transformers baseline: {}\n", e.what());
    return {{"transformers_error", e.what()}};
  }
  const nlohmann::json& r = t.report;
  fmt::print("transformers {} (torch {}, {}, {}, {} attention):", r.value("transformers", "?"),
             r.value("torch", "?"), run.device, r.value("dtype", "?"),
             r.value("attn_implementation", "?"));
  if (t.pp_tok_s > 0) fmt::print(" pp{} {:.2f} tok/s", run.n_prompt, t.pp_tok_s);
  if (t.tg_tok_s > 0) fmt::print(", tg{} {:.2f} tok/s", run.n_gen, t.tg_tok_s);
  fmt::print("\npith / transformers:");
  nlohmann::json out = {{"transformers", r},
                        {"pp_vs_transformers", t.pp_tok_s > 0 ? pp / t.pp_tok_s : 0.0},
                        {"tg_vs_transformers", t.tg_tok_s > 0 ? tg / t.tg_tok_s : 0.0},
                        {"batch_vs_transformers", nlohmann::json::object()}};
  if (t.pp_tok_s > 0 && pp > 0) fmt::print(" prefill {:.2f}x", pp / t.pp_tok_s);
  if (t.tg_tok_s > 0 && tg > 0) fmt::print(", decode {:.2f}x", tg / t.tg_tok_s);
  for (const auto& [b, v] : t.batch_tg_tok_s) {
    const std::string key = std::to_string(b);
    if (v <= 0 || !batch.contains(key)) continue;
    const double ratio = batch[key].get<double>() / v;
    out["batch_vs_transformers"][key] = ratio;
    fmt::print(", batch {} {:.2f}x", b, ratio);
  }
  fmt::print("\n");
  return out;
}

}  // namespace pith::bench
