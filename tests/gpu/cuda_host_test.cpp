// Host-side parts of the CUDA backend that run without a GPU: the compute mode a model gets, the
// device weight layout's size (what the startup memory check adds up; with experts too), and
// the clear error when the requested GPU does not exist.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "common/error.h"
#include "common/thread_pool.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_weights.h"
#include "engine/model_loader.h"
#include "model_gen/model_gen.h"

namespace pith::cuda {
namespace {

std::shared_ptr<const ModelWeights> load(const std::string& name) {
  LoadOptions opt;
  opt.quiet = true;
  return load_model(std::string(PITH_TEST_DATA) + "/models/" + name + ".gguf", opt);
}

size_t aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// The layout device_weights.cpp allocates, written out independently.
size_t expected_bytes(const ModelWeights& w, size_t elem) {
  const ModelConfig& c = w.config;
  auto matrix = [&](size_t rows, size_t cols) { return aligned(rows * cols * elem); };
  size_t n = matrix(c.vocab_size, c.d_model);
  if (w.output.data != w.token_embd.data) n += matrix(c.vocab_size, c.d_model);
  n += aligned(c.d_model * 4);
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    n += 2 * aligned(c.d_model * 4);
    n += matrix(c.q_dim(), c.d_model) + 2 * matrix(c.kv_dim(), c.d_model) +
         matrix(c.d_model, c.q_dim());
    n += matrix(2 * size_t{c.d_ff}, c.d_model) + matrix(c.d_model, c.d_ff);
  }
  return n;
}

TEST(CudaHost, ComputeModeFollowsTheWeights) {
  EXPECT_EQ(compute_mode(*load("tiny-f32")), DType::F32);
  EXPECT_EQ(compute_mode(*load("tiny-untied-f32")), DType::F32);
  EXPECT_EQ(compute_mode(*load("tiny-bf16")), DType::BF16);
  EXPECT_EQ(compute_mode(*load("tiny-q8_0")), DType::BF16);  // dequantised to BF16 at load
}

TEST(CudaHost, DeviceWeightBytesCountATiedHeadOnce) {
  auto tied = load("tiny-f32");
  auto untied = load("tiny-untied-f32");
  ASSERT_EQ(tied->output.data, tied->token_embd.data);
  ASSERT_NE(untied->output.data, untied->token_embd.data);
  EXPECT_EQ(device_weight_bytes(*tied, DType::F32), expected_bytes(*tied, 4));
  EXPECT_EQ(device_weight_bytes(*untied, DType::F32), expected_bytes(*untied, 4));
  EXPECT_EQ(device_weight_bytes(*untied, DType::BF16), expected_bytes(*untied, 2));
  auto q8 = load("tiny-q8_0");
  EXPECT_EQ(device_weight_bytes(*q8, DType::BF16), expected_bytes(*q8, 2));
}

// A mixture-of-experts layer: the router, every expert's gate/up and down stacked, the shared
// expert and its gate (qwen2moe, which also has Q/K/V biases), and no dense FFN.
TEST(CudaHost, DeviceWeightBytesCountEveryExpert) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("pith-cuda-host-" + std::to_string(getpid()) + "-qwen2moe.gguf"))
                               .string();
  ModelGenOptions o;
  o.arch = "qwen2moe";
  o.dtype = pith::DType::BF16;
  o.vocab_path = std::string(PITH_TEST_DATA) + "/models/tiny-f32.gguf";
  o.output = path;
  o.quiet = true;
  ThreadPool pool(2);
  generate_model(o, pool);
  LoadOptions lo;
  lo.quiet = true;
  auto w = load_model(path, lo);
  std::filesystem::remove(path);
  const ModelConfig& c = w->config;
  ASSERT_GT(c.n_experts, 0u);
  ASSERT_GT(c.d_ff_shared_expert, 0u);
  ASSERT_TRUE(c.qkv_bias);
  const size_t e = 2, d = c.d_model, E = c.n_experts, ff = c.d_ff_expert, fs = c.d_ff_shared_expert;
  auto matrix = [&](size_t rows, size_t cols) { return aligned(rows * cols * e); };
  size_t want = matrix(c.vocab_size, d);
  if (w->output.data != w->token_embd.data) want += matrix(c.vocab_size, d);
  want += aligned(d * 4);
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    want += 2 * aligned(d * 4) + aligned(c.q_dim() * 4) + 2 * aligned(c.kv_dim() * 4);
    want += matrix(c.q_dim(), d) + 2 * matrix(c.kv_dim(), d) + matrix(d, c.q_dim());
    want += matrix(E, d) + matrix(E * 2 * ff, d) + matrix(E * d, ff);
    want += matrix(2 * fs, d) + matrix(d, fs) + matrix(1, d);
  }
  EXPECT_EQ(device_weight_bytes(*w, DType::BF16), want);
  EXPECT_EQ(compute_mode(*w), DType::BF16);
}

TEST(CudaHost, MissingGpuIsAClearError) {
  auto w = load("tiny-f32");
  const int n = cuda_device_count();
  EXPECT_GE(n, 0);
  try {
    make_cuda_backend(w, BackendOptions{}, n);  // one past the last device
    FAIL() << "a backend on a missing GPU was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no such GPU"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_cuda_backend(w, BackendOptions{}, -1), Error);
}

}  // namespace
}  // namespace pith::cuda
