// make_backend: the one place that knows which backends exist. The CPU engine and the
// weightless fake (device "fake", for tests above the seam) are always built; the CUDA backend
// only when CMake found nvcc (PITH_HAVE_CUDA), so a CPU-only build still parses `--device cuda`
// and answers with a clear error instead of an unknown flag. `auto` picks the GPU when there is
// one and the CUDA backend runs the model's family (engine/cuda/family_support.h), else the CPU
// with a warning that says why; an explicit `cuda` refuses such a model with the same reason.
#include <charconv>

#include "backend/backend.h"
#include "common/error.h"
#include "engine/engine.h"
#include "engine/fake_backend.h"
#include "engine/model_weights.h"

#if PITH_HAVE_CUDA
#include <spdlog/spdlog.h>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/family_support.h"
#endif

namespace pith {

namespace {

// -1 for "cpu", the device index for "cuda" / "cuda:N"; throws on anything else.
int parse_cuda_index(const std::string& device) {
  if (device == "cpu") return -1;
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) == 0) {
    const char* first = device.data() + 5;
    const char* last = device.data() + device.size();
    int index = -1;
    auto [end, ec] = std::from_chars(first, last, index);
    if (ec == std::errc() && end == last && first != last && index >= 0) return index;
  }
  fail("unknown device '{}' (expected cpu, cuda, cuda:N, auto or fake)", device);
}

int gpu_count() {
#if PITH_HAVE_CUDA
  return cuda_device_count();
#else
  return 0;
#endif
}

}  // namespace

bool device_is_cuda(const std::string& device) {
  if (device == "auto" || device.empty()) return gpu_count() > 0;
  if (device == "fake") return false;
  return parse_cuda_index(device) >= 0;
}

std::unique_ptr<Backend> make_backend(std::shared_ptr<const ModelWeights> weights,
                                      const BackendOptions& options) {
  // The fake reads only the config, so `weights` may hold no tensors (ServingStack loads just
  // the config for it).
  if (options.device == "fake") return std::make_unique<FakeBackend>(weights->config, options);
  const bool is_auto = options.device == "auto" || options.device.empty();
  int index = is_auto ? (gpu_count() > 0 ? 0 : -1) : parse_cuda_index(options.device);
#if PITH_HAVE_CUDA
  if (is_auto && index >= 0) {
    const std::string missing = cuda::unsupported_family_options(weights->config);
    if (missing != "none") {
      spdlog::warn(
          "'{}' uses {}, which the CUDA backend does not run yet: serving it on the CPU "
          "(--device cpu to say so, --device cuda to refuse)",
          weights->config.architecture, missing);
      index = -1;
    }
  }
#endif
  if (index < 0) {
    // On the CPU `auto` stores K/V in f16, as llama.cpp does: twice the tokens per --kv-memory
    // and fewer bytes for attention to read, top token unchanged at 400 of 401 positions
    // (docs/benchmarks.md). `pith logits` asks for f32 explicitly; f32 stays one flag away.
    BackendOptions cpu = options;
    if (cpu.kv_dtype == KvDType::Auto) cpu.kv_dtype = KvDType::F16;
    return std::make_unique<Engine>(std::move(weights), cpu);
  }
#if PITH_HAVE_CUDA
  const int n = cuda_device_count();
  if (index >= n)
    fail("device '{}': this machine has {} CUDA device{}", options.device, n, n == 1 ? "" : "s");
  return make_cuda_backend(std::move(weights), options, index);
#else
  fail(
      "device '{}': this pith was built without CUDA (configure with nvcc on the PATH or "
      "-DPITH_CUDA=ON)",
      options.device);
#endif
}

}  // namespace pith
