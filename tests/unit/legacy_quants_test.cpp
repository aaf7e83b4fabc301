// The codec of Q4_1, Q5_0 and Q5_1 (formats/legacy_quants.h): block layouts and ggml codes,
// hand-built blocks dequantised element by element from ggml's documented layout, the
// quantisers byte for byte against gguf-py's ports of llama.cpp's reference quantisers
// (committed tests/data/kquant/quantized.gguf; the dequantisation is checked against gguf-py in
// kquants_test), and round-trip error bounds.
#include "formats/legacy_quants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/fp16.h"
#include "formats/gguf.h"
#include "quant_error.h"

namespace pith {

namespace {

using test::rel_rms_error;

std::vector<uint8_t> quantize(DType dt, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(dt, x.size()));
  if (dt == DType::Q4_1) quantize_q4_1(x.data(), reinterpret_cast<BlockQ4_1*>(q.data()), x.size());
  if (dt == DType::Q5_0) quantize_q5_0(x.data(), reinterpret_cast<BlockQ5_0*>(q.data()), x.size());
  if (dt == DType::Q5_1) quantize_q5_1(x.data(), reinterpret_cast<BlockQ5_1*>(q.data()), x.size());
  return q;
}

std::vector<float> dequantize(DType dt, const std::vector<uint8_t>& q, size_t n) {
  std::vector<float> y(n);
  if (dt == DType::Q4_1) dequantize_q4_1(reinterpret_cast<const BlockQ4_1*>(q.data()), y.data(), n);
  if (dt == DType::Q5_0) dequantize_q5_0(reinterpret_cast<const BlockQ5_0*>(q.data()), y.data(), n);
  if (dt == DType::Q5_1) dequantize_q5_1(reinterpret_cast<const BlockQ5_1*>(q.data()), y.data(), n);
  return y;
}

}  // namespace

TEST(LegacyQuants, BlockLayoutsAndNames) {
  EXPECT_EQ(dtype_info(3)->type, DType::Q4_1);
  EXPECT_EQ(dtype_info(6)->type, DType::Q5_0);
  EXPECT_EQ(dtype_info(7)->type, DType::Q5_1);
  EXPECT_EQ(dtype_from_name("q4_1"), DType::Q4_1);
  EXPECT_EQ(dtype_from_name("q5_0"), DType::Q5_0);
  EXPECT_EQ(dtype_from_name("q5_1"), DType::Q5_1);
  EXPECT_EQ(dtype_info(DType::Q5_0).block_size, 32u);
  EXPECT_EQ(row_bytes(DType::Q4_1, 64), 40u);
  EXPECT_EQ(row_bytes(DType::Q5_0, 64), 44u);
  EXPECT_EQ(row_bytes(DType::Q5_1, 64), 48u);
  EXPECT_EQ(offsetof(BlockQ4_1, qs), 4u);
  EXPECT_EQ(offsetof(BlockQ5_0, qh), 2u);
  EXPECT_EQ(offsetof(BlockQ5_0, qs), 6u);
  EXPECT_EQ(offsetof(BlockQ5_1, qh), 4u);
  EXPECT_EQ(offsetof(BlockQ5_1, qs), 8u);
  EXPECT_NE(supported_dtype_names().find("q5_0"), std::string::npos);
}

// Element j < 16 is the low nibble of qs[j], element j + 16 the high nibble; its fifth bit is
// bit j of qh (little-endian).
TEST(LegacyQuants, DequantisesHandBuiltBlocks) {
  BlockQ5_0 b0{};
  b0.d = f32_to_f16(0.5f);
  for (int j = 0; j < 16; ++j) b0.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const uint32_t qh = 0x80010003u;  // elements 0, 1, 16 and 31 have bit 4 set
  std::memcpy(b0.qh, &qh, 4);
  float y[32];
  dequantize_q5_0(&b0, y, 32);
  EXPECT_EQ(y[0], 0.5f * (16 + 0 - 16));    // low nibble 0 + 16
  EXPECT_EQ(y[1], 0.5f * (17 - 16));        // 1 + 16
  EXPECT_EQ(y[2], 0.5f * (2 - 16));         // no fifth bit
  EXPECT_EQ(y[15], 0.5f * (15 - 16));       // low nibble of qs[15]
  EXPECT_EQ(y[16], 0.5f * (15 + 16 - 16));  // high nibble of qs[0] = 15, bit 16 set
  EXPECT_EQ(y[17], 0.5f * (14 - 16));       // high nibble of qs[1]
  EXPECT_EQ(y[31], 0.5f * (0 + 16 - 16));   // high nibble of qs[15] = 0, bit 31 set

  BlockQ5_1 b1{};
  b1.d = f32_to_f16(0.25f);
  b1.m = f32_to_f16(-2.0f);
  std::memcpy(b1.qs, b0.qs, 16);
  std::memcpy(b1.qh, &qh, 4);
  dequantize_q5_1(&b1, y, 32);
  EXPECT_EQ(y[0], 0.25f * 16 - 2.0f);
  EXPECT_EQ(y[2], 0.25f * 2 - 2.0f);
  EXPECT_EQ(y[16], 0.25f * 31 - 2.0f);
  EXPECT_EQ(y[31], 0.25f * 16 - 2.0f);

  BlockQ4_1 b4{};
  b4.d = f32_to_f16(0.125f);
  b4.m = f32_to_f16(1.0f);
  std::memcpy(b4.qs, b0.qs, 16);
  dequantize_q4_1(&b4, y, 32);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[5], 0.125f * 5 + 1.0f);
  EXPECT_EQ(y[16], 0.125f * 15 + 1.0f);
  EXPECT_EQ(y[31], 1.0f);
}

// gguf-py's quantisers are numpy ports of llama.cpp's quantize_row_q*_ref; pith's must give the
// same bytes, edge blocks (all zero, constant, all negative) included.
TEST(LegacyQuants, QuantisersMatchLlamaCppReference) {
  GGUFFile f(std::string(PITH_TEST_DATA) + "/kquant/quantized.gguf");
  const GGUFTensorInfo* in = f.find_tensor("input");
  ASSERT_NE(in, nullptr);
  ASSERT_EQ(in->dtype, DType::F32);
  std::vector<float> x(in->n_bytes / 4);
  std::memcpy(x.data(), in->data, in->n_bytes);
  for (DType dt : {DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    const std::string name(dtype_info(dt).name);
    const GGUFTensorInfo* want = f.find_tensor(name);
    ASSERT_NE(want, nullptr) << name;
    ASSERT_EQ(want->dtype, dt);
    const auto got = quantize(dt, x);
    ASSERT_EQ(got.size(), want->n_bytes) << name;
    const size_t bb = dtype_info(dt).block_bytes;
    for (size_t b = 0; b < got.size() / bb; ++b)
      ASSERT_EQ(0, std::memcmp(got.data() + b * bb, want->data + b * bb, bb))
          << name << " block " << b;
  }
}

// Relative RMS error on N(0, 1) (64 K values): measured Q4_1 0.0781, Q5_0 0.0426, Q5_1 0.0376;
// bounds ~15 % above. A layout or scale bug gives errors near 1.
TEST(LegacyQuants, RoundTripErrorOnRandomData) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(64 * 1024);
  for (auto& v : x) v = nd(rng);
  const std::pair<DType, double> bounds[] = {
      {DType::Q4_1, 0.09}, {DType::Q5_0, 0.049}, {DType::Q5_1, 0.043}};
  for (const auto& [dt, bound] : bounds) {
    const double err = rel_rms_error(x, dequantize(dt, quantize(dt, x), x.size()));
    EXPECT_LT(err, bound) << dtype_info(dt).name;
  }
}

}  // namespace pith
