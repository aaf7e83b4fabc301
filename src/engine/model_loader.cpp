// load_model: picks the loader by what the path is (a GGUF file or a Hugging Face folder),
// times it and logs the summary line.
#include "engine/model_loader.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "common/error.h"
#include "engine/gguf_loader.h"
#include "engine/hf_loader.h"

namespace pith {

std::shared_ptr<const ModelWeights> load_model(const std::string& path) {
  return load_model(path, LoadOptions{});
}

std::shared_ptr<const ModelWeights> load_model(const std::string& path,
                                               const LoadOptions& options) {
  namespace fs = std::filesystem;
  auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) fail("{}: no such file or folder", path);
  std::shared_ptr<ModelWeights> w;
  if (fs::is_directory(status)) {
    w = load_hf_model(path, options);
  } else {
    w = load_gguf_model(path, options);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!options.quiet) spdlog::info("{}", load_summary(*w, seconds));
  return w;
}

std::string dtype_summary(const ModelWeights& w) {
  std::set<std::string_view> names;
  auto add = [&](const WeightMatrix& m) { names.insert(dtype_info(m.dtype).name); };
  add(w.output);
  for_each_weight_matrix(w, add);
  if (names.size() == 1) return std::string(*names.begin());
  return fmt::format("mixed ({})", fmt::join(names, ", "));
}

size_t peak_rss_bytes() {
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string load_summary(const ModelWeights& w, double load_seconds) {
  const ModelConfig& c = w.config;
  const std::string moe =
      c.n_experts == 0
          ? ""
          : fmt::format(" ({:.1f} MiB per token: {} of {} experts)",
                        double(w.active_weight_bytes()) / (1 << 20), c.n_experts_used, c.n_experts);
  return fmt::format(
      "loaded {} ({}, {}): {} layers, d_model {}, {} params, {}, {:.1f} MiB weights{}, {} output, "
      "{:.2f} s, peak RSS {:.1f} MiB",
      w.source, w.format, c.architecture, c.n_layers, c.d_model, w.n_params(), dtype_summary(w),
      double(w.weight_bytes()) / (1 << 20), moe, c.tied_output ? "tied" : "untied", load_seconds,
      double(peak_rss_bytes()) / (1 << 20));
}

void log_layer_progress(const LoadOptions& options, const std::string& source, uint32_t layer,
                        uint32_t n_layers) {
  if (!options.quiet) spdlog::info("loading {}: layer {}/{}", source, layer + 1, n_layers);
}

}  // namespace pith
