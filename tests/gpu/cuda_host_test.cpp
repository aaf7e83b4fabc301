// Host-side parts of the CUDA backend that run without a GPU: the compute mode a model gets, the
// device weight layout's size (what the startup memory check adds up), and the clear error
// when the requested GPU does not exist.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_weights.h"
#include "engine/model_loader.h"

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
