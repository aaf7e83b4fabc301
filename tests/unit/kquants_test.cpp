// The K-quant codec (formats/kquants.h): dequantisation of hand-built blocks element by element
// against values derived from ggml's documented bit layout (so a wrong layout cannot pass), and
// of random blocks against ggml's own Python implementation (committed reference data),
// the 6-bit scale packing, quantise -> dequantise error bounds on random data and edge cases,
// and GGUF reading of K-quant tensors (and the error for a type pith does not implement).
#include "formats/kquants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "common/error.h"
#include "common/fp16.h"
#include "engine/kernels/matmul.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "quant_error.h"
#include "random_floats.h"

namespace pith {

namespace {

using test::rel_rms_error;

// Sub-block scales and mins of the hand-built Q4_K/Q5_K blocks: values ≥ 16 exercise the
// bytes' top two bits, 63 the largest.
constexpr uint8_t kSc[8] = {1, 2, 3, 4, 17, 33, 49, 63};
constexpr uint8_t kM[8] = {5, 6, 7, 8, 18, 34, 50, 62};
// ... packed by hand: bytes 0-3 sc[0..3] | top bits of sc[4..7] << 6; bytes 4-7 the same for m;
// bytes 8-11 low nibbles of sc[4..7] | low nibbles of m[4..7] << 4.
constexpr uint8_t kPacked[12] = {0x41, 0x82, 0xC3, 0xC4, 0x45, 0x86,
                                 0xC7, 0xC8, 0x21, 0x21, 0x21, 0xEF};

BlockQ4_K hand_q4k() {
  BlockQ4_K b;
  b.d = f32_to_f16(0.5f);
  b.dmin = f32_to_f16(0.25f);
  std::memcpy(b.scales, kPacked, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i);
  return b;
}

BlockQ5_K hand_q5k() {
  BlockQ5_K b;
  b.d = f32_to_f16(0.5f);
  b.dmin = f32_to_f16(0.25f);
  std::memcpy(b.scales, kPacked, 12);
  for (int i = 0; i < 32; ++i) b.qh[i] = static_cast<uint8_t>(7 * i);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i);
  return b;
}

BlockQ6_K hand_q6k() {
  BlockQ6_K b;
  b.d = f32_to_f16(0.5f);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(j % 2 ? j + 1 : -(j + 1));
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>(3 * i + 1);
  return b;
}

// The layouts, restated element by element: element e of a Q4_K/Q5_K block is in sub-block
// e / 32; for e = 64c + r its low 4 bits are the low nibble of qs[32c + r] (r < 32) or the high
// nibble of qs[32c + r - 32]; Q5_K's bit 4 is bit 2c (r < 32) or 2c + 1 of qh[r % 32].
float expect_q4k(const BlockQ4_K& b, int e) {
  const int c = e / 64, r = e % 64, j = e / 32;
  const int q = r < 32 ? b.qs[32 * c + r] & 15 : b.qs[32 * c + r - 32] >> 4;
  return 0.5f * kSc[j] * q - 0.25f * kM[j];
}

float expect_q5k(const BlockQ5_K& b, int e) {
  const int c = e / 64, r = e % 64, j = e / 32;
  int q = r < 32 ? b.qs[32 * c + r] & 15 : b.qs[32 * c + r - 32] >> 4;
  q |= ((b.qh[r % 32] >> (r < 32 ? 2 * c : 2 * c + 1)) & 1) << 4;
  return 0.5f * kSc[j] * q - 0.25f * kM[j];
}

// Q6_K: e = 128h + 32g + l; low 4 bits from ql[64h + l] (g = 0: low nibble, g = 2: high) or
// ql[64h + 32 + l] (g = 1: low, g = 3: high); top 2 bits are bits 2g, 2g + 1 of qh[32h + l];
// sub-block e / 16; value d * scale * (q - 32).
float expect_q6k(const BlockQ6_K& b, int e) {
  const int h = e / 128, g = (e % 128) / 32, l = e % 32;
  const uint8_t ql = b.ql[64 * h + (g % 2) * 32 + l];
  const int q = (g < 2 ? ql & 15 : ql >> 4) | (((b.qh[32 * h + l] >> (2 * g)) & 3) << 4);
  return 0.5f * b.scales[e / 16] * (q - 32);
}

// Quantises and dequantises through `dt`.
std::vector<float> round_trip(DType dt, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(dt, x.size()));
  std::vector<float> y(x.size());
  switch (dt) {
    case DType::Q2_K:
      quantize_q2_k(x.data(), reinterpret_cast<BlockQ2_K*>(q.data()), x.size());
      dequantize_q2_k(reinterpret_cast<const BlockQ2_K*>(q.data()), y.data(), x.size());
      break;
    case DType::Q3_K:
      quantize_q3_k(x.data(), reinterpret_cast<BlockQ3_K*>(q.data()), x.size());
      dequantize_q3_k(reinterpret_cast<const BlockQ3_K*>(q.data()), y.data(), x.size());
      break;
    case DType::Q4_K:
      quantize_q4_k(x.data(), reinterpret_cast<BlockQ4_K*>(q.data()), x.size());
      dequantize_q4_k(reinterpret_cast<const BlockQ4_K*>(q.data()), y.data(), x.size());
      break;
    case DType::Q5_K:
      quantize_q5_k(x.data(), reinterpret_cast<BlockQ5_K*>(q.data()), x.size());
      dequantize_q5_k(reinterpret_cast<const BlockQ5_K*>(q.data()), y.data(), x.size());
      break;
    default:
      quantize_q6_k(x.data(), reinterpret_cast<BlockQ6_K*>(q.data()), x.size());
      dequantize_q6_k(reinterpret_cast<const BlockQ6_K*>(q.data()), y.data(), x.size());
      break;
  }
  return y;
}

}  // namespace

TEST(KQuants, BlockSizesAndNames) {
  EXPECT_EQ(dtype_info(DType::Q4_K).block_bytes, 144u);
  EXPECT_EQ(dtype_info(DType::Q5_K).block_bytes, 176u);
  EXPECT_EQ(dtype_info(DType::Q6_K).block_bytes, 210u);
  EXPECT_EQ(row_bytes(DType::Q6_K, 512), 420u);
  EXPECT_EQ(dtype_info(12)->type, DType::Q4_K);
  EXPECT_EQ(dtype_info(14)->type, DType::Q6_K);
  EXPECT_EQ(ggml_type_name(14), "q6_K");
  EXPECT_EQ(ggml_type_name(11), "q3_K");
  EXPECT_EQ(ggml_type_name(999), "type 999");
  EXPECT_EQ(dtype_info(DType::Q2_K).block_bytes, 84u);
  EXPECT_EQ(dtype_info(DType::Q3_K).block_bytes, 110u);
  EXPECT_EQ(dtype_info(10)->type, DType::Q2_K);
  EXPECT_EQ(dtype_info(11)->type, DType::Q3_K);
  EXPECT_FALSE(dtype_info(16).has_value());  // iq2_xxs
  EXPECT_EQ(offsetof(BlockQ2_K, qs), 16u);
  EXPECT_EQ(offsetof(BlockQ2_K, d), 80u);
  EXPECT_EQ(offsetof(BlockQ3_K, qs), 32u);
  EXPECT_EQ(offsetof(BlockQ3_K, scales), 96u);
  EXPECT_EQ(offsetof(BlockQ3_K, d), 108u);
  // Q3_K's 16 six-bit scales: every value survives pack + unpack, and a worked byte layout.
  int8_t sc[16], back[16];
  for (int k = 0; k < 16; ++k) sc[k] = static_cast<int8_t>(k * 4 - 32 + (k % 3));
  uint8_t packed[12];
  pack_q3k_scales(sc, packed);
  unpack_q3k_scales(packed, back);
  for (int k = 0; k < 16; ++k) EXPECT_EQ(back[k], sc[k]) << k;
  int8_t one[16] = {};
  for (auto& v : one) v = -32;  // stored 0
  one[13] = 31;  // stored 63: low nibble in byte 5's high nibble, top bits 6-7 of byte 9
  pack_q3k_scales(one, packed);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(packed[i], i == 5 ? 0xf0 : i == 9 ? 0xc0 : 0) << i;
  EXPECT_EQ(dtype_from_name("q5_k"), DType::Q5_K);
  // Placement of the fields inside the blocks (ggml's struct order).
  EXPECT_EQ(offsetof(BlockQ4_K, scales), 4u);
  EXPECT_EQ(offsetof(BlockQ4_K, qs), 16u);
  EXPECT_EQ(offsetof(BlockQ5_K, qh), 16u);
  EXPECT_EQ(offsetof(BlockQ5_K, qs), 48u);
  EXPECT_EQ(offsetof(BlockQ6_K, qh), 128u);
  EXPECT_EQ(offsetof(BlockQ6_K, scales), 192u);
  EXPECT_EQ(offsetof(BlockQ6_K, d), 208u);
}

TEST(KQuants, ScalePackingMatchesHandPackedBytes) {
  uint8_t sc[8], m[8], packed[12];
  unpack_q4k_scales(kPacked, sc, m);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(sc[j], kSc[j]) << j;
    EXPECT_EQ(m[j], kM[j]) << j;
  }
  pack_q4k_scales(kSc, kM, packed);
  EXPECT_EQ(0, std::memcmp(packed, kPacked, 12));
}

TEST(KQuants, Q4KDequantisesHandBuiltBlock) {
  const BlockQ4_K b = hand_q4k();
  float y[256];
  dequantize_q4_k(&b, y, 256);
  for (int e = 0; e < 256; ++e) ASSERT_EQ(y[e], expect_q4k(b, e)) << "element " << e;
  // A few worked by hand: e = 17 -> qs[17] & 15 = 1, sub-block 0: 0.5 * 1 * 1 - 0.25 * 5.
  EXPECT_EQ(y[0], -1.25f);
  EXPECT_EQ(y[17], -0.75f);
  EXPECT_EQ(y[33], -1.5f);    // qs[1] >> 4 = 0, sub-block 1
  EXPECT_EQ(y[150], 46.5f);   // qs[86] & 15 = 6, sub-block 4: 0.5 * 17 * 6 - 0.25 * 18
  EXPECT_EQ(y[200], 183.5f);  // qs[104] & 15 = 8, sub-block 6: 0.5 * 49 * 8 - 0.25 * 50
  EXPECT_EQ(y[255], 205.0f);  // qs[127] >> 4 = 7, sub-block 7: 0.5 * 63 * 7 - 0.25 * 62
}

TEST(KQuants, Q5KDequantisesHandBuiltBlock) {
  const BlockQ5_K b = hand_q5k();
  float y[256];
  dequantize_q5_k(&b, y, 256);
  for (int e = 0; e < 256; ++e) ASSERT_EQ(y[e], expect_q5k(b, e)) << "element " << e;
  EXPECT_EQ(y[0], -1.25f);
  EXPECT_EQ(y[1], 7.25f);     // qs[1] & 15 = 1, bit 0 of qh[1] = 7 set: q = 17
  EXPECT_EQ(y[255], 709.0f);  // qs[127] >> 4 = 7, bit 7 of qh[31] = 217 set: q = 23
}

TEST(KQuants, Q6KDequantisesHandBuiltBlock) {
  const BlockQ6_K b = hand_q6k();
  float y[256];
  dequantize_q6_k(&b, y, 256);
  for (int e = 0; e < 256; ++e) ASSERT_EQ(y[e], expect_q6k(b, e)) << "element " << e;
  EXPECT_EQ(y[0], 8.0f);       // ql[0] = 0, qh[0] = 1: q = 16; scale -1: 0.5 * -1 * -16
  EXPECT_EQ(y[100], 105.0f);   // ql[36] >> 4 = 2, qh[4] bits 6-7 = 0: q = 2; scale[6] = -7
  EXPECT_EQ(y[170], -143.0f);  // ql[106] & 15 = 10, qh[42] bits 2-3 = 3: q = 58; scale[10] = -11
  EXPECT_EQ(y[255], 56.0f);    // ql[127] >> 4 = 7, qh[63] bits 6-7 = 2: q = 39; scale[15] = 16
}

// Relative RMS error measured on these N(0, 1) values (64 K of them): Q4_K 0.0714, Q5_K 0.0359,
// Q6_K 0.0165 with pith's quantiser (0.0722, 0.0363, 0.0166 at sigma 0.02); the bounds leave
// ~15 % margin. A layout or scale bug gives errors near 1.
TEST(KQuants, RoundTripErrorOnRandomData) {
  const auto x = cuda::random_floats(64 * 1024, 3, 1.0f);
  EXPECT_LT(rel_rms_error(x, round_trip(DType::Q4_K, x)), 0.082);
  EXPECT_LT(rel_rms_error(x, round_trip(DType::Q5_K, x)), 0.042);
  EXPECT_LT(rel_rms_error(x, round_trip(DType::Q6_K, x)), 0.019);
  // Scale-free: the same relative error at weight-like magnitudes.
  const auto w = cuda::random_floats(16 * 1024, 4, 0.02f);
  EXPECT_LT(rel_rms_error(w, round_trip(DType::Q4_K, w)), 0.083);
  EXPECT_LT(rel_rms_error(w, round_trip(DType::Q6_K, w)), 0.019);
}

// Q2_K and Q3_K through pith's quantisers: relative RMS errors measured here (Q2_K: N(0, 1)
// 0.270, weight-sized 0.271, the constant, rising and falling blocks 2.4e-4 / 0.032 / 0.015;
// Q3_K: 0.146, 0.146, exact, 0.013, 0.013); the bounds leave ~15 % margin. The 2- and 3-bit
// levels are the types' own limit (a layout or scale bug gives errors near 1).
TEST(KQuants, LowBitRoundTrip) {
  const auto x = cuda::random_floats(64 * 1024, 3, 1.0f);
  const auto w = cuda::random_floats(16 * 1024, 4, 0.02f);
  std::vector<float> zeros(256, 0.0f), c(256, 0.75f), pos(256), neg(256), outlier(256);
  for (int i = 0; i < 256; ++i) {
    pos[i] = 1.0f + i / 256.0f;
    neg[i] = -1.0f - i / 256.0f;
    outlier[i] = 0.01f * std::sin(float(i));
  }
  outlier[77] = 100.0f;
  struct Bounds {
    DType dt;
    double normal, constant, rising, falling;
  };
  for (const Bounds& b : {Bounds{DType::Q2_K, 0.31, 1e-3, 0.037, 0.017},
                          Bounds{DType::Q3_K, 0.168, 1e-6, 0.016, 0.016}}) {
    const std::string name(dtype_info(b.dt).name);
    EXPECT_LT(rel_rms_error(x, round_trip(b.dt, x)), b.normal) << name;
    EXPECT_LT(rel_rms_error(w, round_trip(b.dt, w)), b.normal) << name;
    EXPECT_LT(rel_rms_error(c, round_trip(b.dt, c)), b.constant) << name;
    EXPECT_LT(rel_rms_error(pos, round_trip(b.dt, pos)), b.rising) << name;
    EXPECT_LT(rel_rms_error(neg, round_trip(b.dt, neg)), b.falling) << name;
    auto yo = round_trip(b.dt, outlier);
    EXPECT_NEAR(yo[77], 100.0f, 1.0f) << name;  // the outlier's sub-block scale carries it
    for (float v : yo) ASSERT_TRUE(std::isfinite(v)) << name;
    for (float v : round_trip(b.dt, zeros)) ASSERT_EQ(v, 0.0f) << name;
  }
}

TEST(KQuants, EdgeBlocks) {
  for (DType dt : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const std::string name(dtype_info(dt).name);
    std::vector<float> zeros(256, 0.0f);
    for (float v : round_trip(dt, zeros)) ASSERT_EQ(v, 0.0f) << name;
    // A constant block, all-positive and all-negative blocks (the affine types' min is ≥ 0, so
    // an all-positive block has no offset) and one outlier among small values.
    std::vector<float> c(256, 0.75f), pos(256), neg(256), outlier(256);
    for (int i = 0; i < 256; ++i) {
      pos[i] = 1.0f + i / 256.0f;
      neg[i] = -1.0f - i / 256.0f;
      outlier[i] = 0.01f * std::sin(float(i));
    }
    outlier[77] = 100.0f;
    auto yc = round_trip(dt, c);
    for (float v : yc) ASSERT_NEAR(v, 0.75f, 0.75f * 0.02f) << name;
    EXPECT_LT(rel_rms_error(pos, round_trip(dt, pos)), 0.02) << name;
    EXPECT_LT(rel_rms_error(neg, round_trip(dt, neg)), 0.05) << name;
    auto yo = round_trip(dt, outlier);
    EXPECT_NEAR(yo[77], 100.0f, 1.0f) << name;  // the outlier's sub-block scale carries it
    for (float v : yo) ASSERT_TRUE(std::isfinite(v)) << name;
  }
}

// ggml's own Python package wrote tests/data/kquant/blocks.gguf (random blocks of the K-quants
// Q2_K-Q6_K and of Q4_1, Q5_0, Q5_1), iquant_blocks.gguf (IQ4_NL, IQ4_XS) and mxfp4_blocks.gguf,
// and dequantized them into dequantized.gguf, iquant_dequantized.gguf and
// mxfp4_dequantized.gguf (see make_reference.py
// there): pith reads the first and dequantizes it to the second, and its matmul kernels
// multiply it as the second's values do.
TEST(KQuants, MatchesGgmlPythonReference) {
  const std::string dir = std::string(PITH_TEST_DATA) + "/kquant/";
  GGUFFile kquants(dir + "blocks.gguf"), kquants_ref(dir + "dequantized.gguf");
  GGUFFile iquants(dir + "iquant_blocks.gguf"), iquants_ref(dir + "iquant_dequantized.gguf");
  GGUFFile mxfp4(dir + "mxfp4_blocks.gguf"), mxfp4_ref(dir + "mxfp4_dequantized.gguf");
  ThreadPool pool(2);
  for (const char* name : {"q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q4_1", "q5_0", "q5_1", "iq4_nl",
                           "iq4_xs", "mxfp4"}) {
    const bool iq = std::string(name).starts_with("iq"), fp4 = std::string(name) == "mxfp4";
    const GGUFFile& blocks = fp4 ? mxfp4 : iq ? iquants : kquants;
    const GGUFFile& ref = fp4 ? mxfp4_ref : iq ? iquants_ref : kquants_ref;
    const GGUFTensorInfo* q = blocks.find_tensor(name);
    const GGUFTensorInfo* r = ref.find_tensor(name);
    ASSERT_NE(q, nullptr) << name;
    ASSERT_NE(r, nullptr) << name;
    ASSERT_EQ(q->dims, (std::vector<uint64_t>{512, 3})) << name;
    ASSERT_EQ(r->dtype, DType::F32);
    const size_t rows = 3, cols = 512;
    std::vector<uint8_t> wbytes(q->data, q->data + q->n_bytes);  // aligned copy
    std::vector<float> want(rows * cols), got(rows * cols);
    std::memcpy(want.data(), r->data, want.size() * 4);
    WeightMatrix w{q->dtype, rows, cols, wbytes.data()};
    for (size_t row = 0; row < rows; ++row)
      dequantize_row(w.dtype, w.row(row), got.data() + row * cols, cols);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << name << " element " << i;  // bit-identical
    // Every kernel level against the reference values (activation rounding: 1e-2 of |w|·|x|).
    const auto x = cuda::random_floats(4 * cols, 9, 1.0f);
    for (KernelIsa isa : {KernelIsa::Scalar, KernelIsa::Avx2, KernelIsa::Avx512}) {
      if (!isa_supported(isa)) continue;
      for (size_t n_tokens : {size_t{1}, size_t{4}}) {
        std::vector<float> y(n_tokens * rows);
        matmul(pool, w, x.data(), n_tokens, y.data(), isa);
        for (size_t t = 0; t < n_tokens; ++t)
          for (size_t row = 0; row < rows; ++row) {
            double dot = 0, wn = 0, xn = 0;
            for (size_t i = 0; i < cols; ++i) {
              dot += double(want[row * cols + i]) * x[t * cols + i];
              wn += double(want[row * cols + i]) * want[row * cols + i];
              xn += double(x[t * cols + i]) * x[t * cols + i];
            }
            ASSERT_NEAR(y[t * rows + row], dot, 1e-2 * std::sqrt(wn * xn))
                << name << " " << isa_name(isa) << " token " << t << " row " << row;
          }
      }
    }
  }
}

TEST(KQuants, GgufReadsKQuantTensorsAndRejectsUnknownTypesByName) {
  const auto path = (std::filesystem::temp_directory_path() / "pith_kquants_test.gguf").string();
  const BlockQ6_K b6 = hand_q6k();
  const BlockQ4_K b4 = hand_q4k();
  {
    GGUFWriter w(path);
    w.add_tensor("a", {256, 1}, DType::Q6_K);
    w.add_tensor("b", {256}, DType::Q4_K);
    w.write(&b6, sizeof b6);
    w.write(&b4, sizeof b4);
    w.finish();
  }
  {
    GGUFFile f(path);
    const auto* a = f.find_tensor("a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->dtype, DType::Q6_K);
    EXPECT_EQ(a->n_bytes, 210u);
    EXPECT_EQ(0, std::memcmp(a->data, &b6, 210));
    EXPECT_EQ(f.find_tensor("b")->dtype, DType::Q4_K);
  }
  // Patch tensor "a"'s type (after name, n_dims and two dims) to 16, ggml's iq2_xxs.
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
  in.close();
  const std::string key("\x01\0\0\0\0\0\0\0a", 9);  // name length 1, then "a"
  auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(it, bytes.end());
  const size_t type_at = size_t(it - bytes.begin()) + key.size() + 4 + 16;
  uint32_t type;
  std::memcpy(&type, &bytes[type_at], 4);
  ASSERT_EQ(type, 14u);
  type = 16;
  std::memcpy(&bytes[type_at], &type, 4);
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  try {
    GGUFFile f(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("iq2_xxs"), std::string::npos) << msg;
    EXPECT_NE(msg.find("supported: f32, f16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("q2_K"), std::string::npos) << msg;
    EXPECT_NE(msg.find("q6_K"), std::string::npos) << msg;
  }
  std::filesystem::remove(path);
}

}  // namespace pith
