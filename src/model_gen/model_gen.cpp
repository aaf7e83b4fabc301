// Random-weight model generation (see model_gen.h). Tensors are described once in pith's
// canonical layout (GenTensor); the GGUF and HF writers differ only in names, the dtype of the
// norm vectors, the order of Q/K rows and the container.
#include "model_gen/model_gen.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fp16.h"
#include "engine/hf_loader.h"
#include "engine/model_loader.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/iquants.h"
#include "formats/kquants.h"
#include "formats/legacy_quants.h"
#include "formats/mxfp4.h"
#include "formats/safetensors.h"
#include "model_gen/normal_rng.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/vocab.h"

namespace pith {

namespace fs = std::filesystem;

namespace {

constexpr float kWeightStd = 0.02f;
constexpr size_t kBatchBytes = size_t{32} << 20;  // f32 rows generated per batch

struct GenTensor {
  // Conv: a DeltaNet convolution kernel (f32 in GGUF, [rows][1][cols] in HF); DtBias and
  // DecayRate: its decay bias and rate, drawn as real checkpoints initialise them.
  enum class Kind { Matrix, Norm, Bias, RopeFreqs, Conv, DtBias, DecayRate };
  std::string gguf_name, hf_name;
  size_t rows, cols;
  Kind kind;
  bool rotary = false;         // Q/K: HF stores rows in split-half order
  bool hf_offset = false;      // gemma norms: HF stores w - 1
  uint64_t stream = 0;         // RNG stream id (from the GGUF name: identical in both formats)
  uint32_t experts = 0;        // > 0: `experts` stacked matrices (one GGUF tensor, HF: one each)
  bool hf_row_vector = false;  // HF stores this vector as [1][cols]
  bool hf_stacked = false;     // HF also stacks the experts: one [experts][rows][cols] tensor
  size_t row_offset = 0;       // first canonical row (one expert's HF tensor)
  size_t v_first = 0, v_block = 0;  // value-head blocks (LayerTensor::v_block): HF order differs
  bool v_cols = false;
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// Scales drawn like norm weights (1 + noise): a layer's output scalar, gemma4's router input
// and expert output scales.
bool near_one(LayerTensor::Role role) {
  using R = LayerTensor::Role;
  return role == R::LayerScale || role == R::RouterScale || role == R::ExpertScale;
}

std::vector<GenTensor> plan_tensors(const ModelConfig& c) {
  using K = GenTensor::Kind;
  const Architecture& arch = *find_architecture(c.architecture);
  std::vector<GenTensor> t;
  auto add = [&](std::string g, std::string h, size_t rows, size_t cols, K kind,
                 bool rotary = false, bool offset = false) {
    uint64_t id = fnv1a(g);
    t.push_back({std::move(g), std::move(h), rows, cols, kind, rotary, offset, id});
    return &t.back();
  };
  add("token_embd.weight", "model.embed_tokens.weight", c.vocab_size, c.d_model, K::Matrix);
  if (c.d_per_layer_input > 0) {  // gemma4 E2B/E4B
    const size_t all = size_t{c.n_layers} * c.d_per_layer_input;
    add("per_layer_token_embd.weight", "model.embed_tokens_per_layer.weight", c.vocab_size, all,
        K::Matrix);
    add("per_layer_model_proj.weight", "model.per_layer_model_projection.weight", all, c.d_model,
        K::Matrix);
    add("per_layer_proj_norm.weight", "model.per_layer_projection_norm.weight", 1,
        c.d_per_layer_input, K::Norm, false, arch.hf_norm_offset);
  }
  if (c.longrope.enabled()) {  // both sets, as llama.cpp's converter writes them (no rope_freqs)
    add("rope_factors_long.weight", "", 1, c.rotary_dim() / 2, K::RopeFreqs);
    add("rope_factors_short.weight", "", 1, c.rotary_dim() / 2, K::RopeFreqs);
  } else if (!c.rope_freq_factors.empty()) {
    add("rope_freqs.weight", "", 1, c.rotary_dim() / 2, K::RopeFreqs);
  }
  for (uint32_t i = 0; i < c.n_layers; ++i)
    for (const LayerTensor& l : layer_tensors(arch, c, i)) {
      const bool matrix = l.rows > 1 || l.experts > 0;
      const K kind = l.conv                                   ? K::Conv
                     : l.f32_table                            ? K::Bias
                     : near_one(l.role)                       ? K::Norm
                     : l.hf_log_decay                         ? K::DecayRate
                     : l.role == LayerTensor::Role::SsmDtBias ? K::DtBias
                     : matrix                                 ? K::Matrix
                     : l.is_norm                              ? K::Norm
                                                              : K::Bias;
      GenTensor* g = add(l.gguf, l.hf, l.rows * std::max<size_t>(l.experts, 1), l.cols, kind,
                         l.rotary, l.is_norm && arch.hf_norm_offset && !l.hf_plain);
      g->experts = l.experts;
      g->hf_row_vector = l.hf_row_vector;
      g->hf_stacked = l.hf_stacked;
      g->v_first = l.v_first, g->v_block = l.v_block, g->v_cols = l.v_cols;
    }
  add("output_norm.weight", "model.norm.weight", 1, c.d_model, K::Norm, false, arch.hf_norm_offset);
  if (!c.tied_output) add("output.weight", "lm_head.weight", c.vocab_size, c.d_model, K::Matrix);
  return t;
}

float round_through(DType dt, float x) {
  switch (dt) {
    case DType::F16:
      return f16_to_f32(f32_to_f16(x));
    case DType::BF16:
      return bf16_to_f32(f32_to_bf16(x));
    default:
      return x;
  }
}

// roundf() semantics (halves away from zero) without a libm call; exact for |x| < 2^23.
inline int round_half_away(float x) {
  int t = static_cast<int>(x);
  float frac = x - static_cast<float>(t);
  return frac >= 0.5f ? t + 1 : frac <= -0.5f ? t - 1 : t;
}

void encode_row(DType dt, const float* x, size_t n, uint8_t* out) {
  switch (dt) {
    case DType::F32:
      std::memcpy(out, x, n * 4);
      return;
    case DType::F16: {
      for (size_t i = 0; i < n; ++i) {
        uint16_t h = f32_to_f16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    }
    case DType::BF16: {
      for (size_t i = 0; i < n; ++i) {
        uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    }
    case DType::Q8_0: {
      for (size_t b = 0; b < n / 32; ++b) {
        const float* xb = x + b * 32;
        float amax = 0;
        for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        BlockQ8_0 blk;
        blk.d = f32_to_f16(d);
        for (size_t j = 0; j < 32; ++j)
          blk.qs[j] = static_cast<int8_t>(round_half_away(xb[j] * id));
        std::memcpy(out + b * sizeof blk, &blk, sizeof blk);
      }
      return;
    }
    case DType::Q4_0: {
      for (size_t b = 0; b < n / 32; ++b) {
        const float* xb = x + b * 32;
        float amax = 0, max = 0;  // the signed value of largest magnitude maps to -8
        for (size_t j = 0; j < 32; ++j)
          if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), max = xb[j];
        float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
        BlockQ4_0 blk;
        blk.d = f32_to_f16(d);
        auto q = [&](float v) {
          return static_cast<uint8_t>(std::min(15, static_cast<int>(v * id + 8.5f)));
        };
        for (size_t j = 0; j < 16; ++j)
          blk.qs[j] = static_cast<uint8_t>(q(xb[j]) | (q(xb[j + 16]) << 4));
        std::memcpy(out + b * sizeof blk, &blk, sizeof blk);
      }
      return;
    }
    case DType::Q4_1:
      return quantize_q4_1(x, reinterpret_cast<BlockQ4_1*>(out), n);
    case DType::Q5_0:
      return quantize_q5_0(x, reinterpret_cast<BlockQ5_0*>(out), n);
    case DType::Q5_1:
      return quantize_q5_1(x, reinterpret_cast<BlockQ5_1*>(out), n);
    case DType::Q2_K:
      return quantize_q2_k(x, reinterpret_cast<BlockQ2_K*>(out), n);
    case DType::Q3_K:
      return quantize_q3_k(x, reinterpret_cast<BlockQ3_K*>(out), n);
    case DType::Q4_K:
      return quantize_q4_k(x, reinterpret_cast<BlockQ4_K*>(out), n);
    case DType::Q5_K:
      return quantize_q5_k(x, reinterpret_cast<BlockQ5_K*>(out), n);
    case DType::Q6_K:
      return quantize_q6_k(x, reinterpret_cast<BlockQ6_K*>(out), n);
    case DType::IQ4_NL:
      return quantize_iq4_nl(x, reinterpret_cast<BlockIQ4_NL*>(out), n);
    case DType::IQ4_XS:
      return quantize_iq4_xs(x, reinterpret_cast<BlockIQ4_XS*>(out), n);
    case DType::MXFP4:
      return quantize_mxfp4(x, reinterpret_cast<BlockMXFP4*>(out), n);
  }
  fail("cannot encode dtype {}", static_cast<uint32_t>(dt));
}

// State shared by the writers of one generation run.
struct GenContext {
  const ModelGenOptions& opt;
  const ModelConfig& config;
  ThreadPool& pool;
  NormalZiggurat normal;
  DType norm_round;  // dtype the norm values are rounded through (the HF norm dtype)
  std::vector<std::vector<float>> scratch;  // per worker: one f32 row
  std::vector<uint8_t>
      buffers[2];  // batches of encoded rows: one filled while the other is written
};

// Canonical row `row` of tensor `t` in f32 (as HF stores it when hf_values: gemma's norms
// hold w - 1 there; pith's loader adds the 1 back in f32, as this does for GGUF).
void fill_row(GenContext& ctx, const GenTensor& t, size_t row, float* out, bool hf_values) {
  if (t.kind == GenTensor::Kind::RopeFreqs) {
    const ModelConfig& c = ctx.config;
    const std::vector<float>& v =
        t.gguf_name == "rope_factors_long.weight"    ? c.longrope.long_factors
        : t.gguf_name == "rope_factors_short.weight" ? c.longrope.short_factors
                                                     : c.rope_freq_factors;
    std::copy(v.begin(), v.end(), out);
    return;
  }
  Xoshiro256 rng(splitmix64(ctx.opt.seed ^ t.stream) ^ (row * 0xd1b54a32d192ed03ull));
  auto uniform = [&] { return static_cast<float>(rng.uniform()); };
  if (t.kind == GenTensor::Kind::Conv) {
    for (size_t i = 0; i < t.cols; ++i)
      out[i] = round_through(ctx.norm_round, 0.3f * static_cast<float>(ctx.normal(rng)));
  } else if (t.kind == GenTensor::Kind::DecayRate) {
    // A_log uniform in [0, log 16] (HF); GGUF and pith keep -exp(A_log).
    for (size_t i = 0; i < t.cols; ++i) {
      const float a_log = round_through(ctx.norm_round, std::log(16.0f) * uniform());
      out[i] = hf_values ? a_log : -std::exp(a_log);
    }
  } else if (t.kind == GenTensor::Kind::DtBias) {
    // softplus(dt_bias) = dt, log-uniform in [0.001, 0.1]: decays from 0.9 to near 1 per token.
    for (size_t i = 0; i < t.cols; ++i) {
      const float dt = std::exp(std::log(0.001f) + std::log(100.0f) * uniform());
      out[i] = round_through(ctx.norm_round, std::log(std::expm1(dt)));
    }
  } else if (t.kind == GenTensor::Kind::Norm && t.hf_offset) {
    for (size_t i = 0; i < t.cols; ++i) {
      float delta = round_through(ctx.norm_round, kWeightStd * static_cast<float>(ctx.normal(rng)));
      out[i] = hf_values ? delta : 1.0f + delta;
    }
  } else if (t.kind == GenTensor::Kind::Norm || t.kind == GenTensor::Kind::Bias) {
    const float base = t.kind == GenTensor::Kind::Norm ? 1.0f : 0.0f;
    for (size_t i = 0; i < t.cols; ++i)
      out[i] =
          round_through(ctx.norm_round, base + kWeightStd * static_cast<float>(ctx.normal(rng)));
  } else {
    for (size_t i = 0; i < t.cols; ++i) out[i] = kWeightStd * static_cast<float>(ctx.normal(rng));
  }
}

// Generates tensor `t` in `dtype` (rows in HF order when hf_rows) and passes it to `write` in
// batches of at most kBatchBytes. The write of one batch overlaps the generation of the next.
template <typename Write>
void emit_tensor(GenContext& ctx, const GenTensor& t, DType dtype, bool hf_rows, Write&& write) {
  const size_t rb = row_bytes(dtype, t.cols);
  const size_t rows_per_batch = std::max<size_t>(1, kBatchBytes / (t.cols * 4));
  for (auto& b : ctx.buffers) b.resize(std::min(rows_per_batch, t.rows) * rb);
  for (auto& s : ctx.scratch) s.resize(std::max(s.size(), t.cols));
  std::future<void> pending;
  int cur = 0;
  for (size_t start = 0; start < t.rows; start += rows_per_batch, cur ^= 1) {
    const size_t n = std::min(rows_per_batch, t.rows - start);
    const size_t per_task = std::max<size_t>(1, n / (ctx.pool.size() * 8));
    uint8_t* out = ctx.buffers[cur].data();
    ctx.pool.parallel_for((n + per_task - 1) / per_task, [&](size_t task, size_t worker) {
      float* row = ctx.scratch[worker].data();
      for (size_t r = task * per_task; r < std::min(n, (task + 1) * per_task); ++r) {
        size_t file_row = start + r + (hf_rows ? t.row_offset : 0);
        size_t canon =
            hf_rows && t.rotary ? pith_row_for_hf_row(file_row, ctx.config.head_dim) : file_row;
        const DeltaNetConfig& dn = ctx.config.delta_net;
        const bool regroup = hf_rows && t.v_block > 0 && dn.v_heads != dn.k_heads;
        if (regroup && !t.v_cols) canon = hf_to_tiled_index(file_row, t.v_first, t.v_block, dn);
        fill_row(ctx, t, canon, row, hf_rows);
        if (regroup && t.v_cols) {
          std::vector<float> canonical(row, row + t.cols);
          for (size_t i = 0; i < t.cols; ++i)
            row[i] = canonical[hf_to_tiled_index(i, t.v_first, t.v_block, dn)];
        }
        encode_row(dtype, row, t.cols, out + r * rb);
      }
    });
    if (pending.valid()) pending.get();  // rethrows a write error
    pending = std::async(std::launch::async, [&write, out, bytes = n * rb] { write(out, bytes); });
  }
  if (pending.valid()) pending.get();
}

uint32_t file_type_code(DType dt) {
  switch (dt) {
    case DType::Q2_K:
      return 10;  // Q2_K (mostly)
    case DType::Q3_K:
      return 12;  // Q3_K_M
    case DType::Q4_K:
      return 15;  // llama.cpp has no all-Q4_K type; its mostly-Q4_K one is Q4_K_M
    case DType::Q5_K:
      return 17;  // Q5_K_M
    case DType::Q6_K:
      return 18;
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q4_1:
      return 3;
    case DType::Q8_0:
      return 7;
    case DType::Q5_0:
      return 8;
    case DType::Q5_1:
      return 9;
    case DType::BF16:
      return 32;
    case DType::IQ4_NL:
      return 25;
    case DType::IQ4_XS:
      return 30;
    case DType::MXFP4:
      return 38;  // llama.cpp's MXFP4 file type is MXFP4_MOE (other matrices Q8_0)
  }
  return 0;
}

void log_progress(const GenContext& ctx, const GenTensor& t) {
  if (ctx.opt.quiet) return;
  if (t.gguf_name.ends_with("ffn_down.weight") || t.gguf_name == "token_embd.weight")
    spdlog::info("gen {}: {} written", ctx.opt.output, t.gguf_name);
}

void write_gguf(GenContext& ctx, const std::vector<GenTensor>& plan, const GGUFFile& vocab,
                const std::string& preset_name) {
  const ModelConfig& c = ctx.config;
  const std::string tmp = ctx.opt.output + ".partial";
  {
    GGUFWriter w(tmp);
    const Architecture& arch = *find_architecture(c.architecture);
    const std::string a = std::string(arch.gguf_name) + ".";
    w.set_string("general.architecture", std::string(arch.gguf_name));
    w.set_string("general.name", fmt::format("pith-random-{}", preset_name));
    w.set_u32("general.file_type",
              ctx.opt.mix ? quant_mix_file_type(*ctx.opt.mix) : file_type_code(ctx.opt.dtype));
    w.set_u32(a + "block_count", c.n_layers);
    w.set_u32(a + "context_length", c.context_length);
    w.set_u32(a + "embedding_length", c.d_model);
    if (!c.pooling.empty())  // llama.cpp's enum: 1 mean, 2 cls, 3 last
      w.set_u32(a + "pooling_type", c.pooling == "mean" ? 1 : c.pooling == "cls" ? 2 : 3);
    // Per-layer sizes, as llama.cpp's converter writes them for gemma4 (global layers' head size
    // as key_length, the sliding ones' as key_length_swa; KV heads and FFN widths per layer;
    // the sliding layers as a bool array).
    const bool per_layer = arch.per_layer_attention;
    std::vector<int32_t> kv_heads, ff_widths;
    std::vector<uint8_t> sliding;
    for (uint32_t l = 0; l < c.n_layers; ++l) {
      kv_heads.push_back(static_cast<int32_t>(c.kv_heads_of(l)));
      ff_widths.push_back(static_cast<int32_t>(c.d_ff_of(l)));
      sliding.push_back(c.layer_slides(l) ? 1 : 0);
    }
    auto i32_array = [&](const std::string& key, const std::vector<int32_t>& v) {
      w.set(key,
            {GGUFType::ARRAY,
             GGUFArray{GGUFType::I32, v.size(), reinterpret_cast<const uint8_t*>(v.data()), {}}});
    };
    if (per_layer && c.double_wide_shared_ffn)
      i32_array(a + "feed_forward_length", ff_widths);
    else
      w.set_u32(a + "feed_forward_length", c.d_ff);
    w.set_u32(a + "attention.head_count", c.n_heads);
    if (per_layer && c.global_kv_heads > 0)
      i32_array(a + "attention.head_count_kv", kv_heads);
    else
      w.set_u32(a + "attention.head_count_kv", c.n_kv_heads);
    w.set_f32(a + "rope.freq_base", c.rope_theta);
    if (c.yarn.factor > 0) {  // as llama.cpp's converter writes it (gguf_loader.cpp reads it)
      w.set_string(a + "rope.scaling.type", "yarn");
      w.set_f32(a + "rope.scaling.factor", c.yarn.factor);
      w.set_u32(a + "rope.scaling.original_context_length", c.yarn.original_context);
      w.set_f32(a + "rope.scaling.yarn_beta_fast", c.yarn.beta_fast);
      w.set_f32(a + "rope.scaling.yarn_beta_slow", c.yarn.beta_slow);
      const float attn = c.yarn.mscale / yarn_default_mscale(c.yarn.factor);
      if (attn != 1.0f) w.set_f32(a + "rope.scaling.attn_factor", attn);
    } else {
      if (c.longrope.enabled())  // as llama.cpp's Phi-3 converter writes it
        w.set_u32(a + "rope.scaling.original_context_length", c.longrope.original_context);
      if (c.rope_attn_factor != 1.0f) w.set_f32(a + "rope.scaling.attn_factor", c.rope_attn_factor);
    }
    w.set_f32(a + "attention.layer_norm_rms_epsilon", c.rms_eps);
    w.set_u32(a + "rope.dimension_count", c.rotary_dim());
    w.set_u32(a + "vocab_size", c.vocab_size);
    if (per_layer) {
      const uint32_t global_hd = c.global_head_dim > 0 ? c.global_head_dim : c.head_dim;
      w.set_u32(a + "attention.key_length", global_hd);
      w.set_u32(a + "attention.value_length", global_hd);
      w.set_u32(a + "attention.key_length_swa", c.head_dim);
      w.set_u32(a + "attention.value_length_swa", c.head_dim);
      w.set_u32(a + "rope.dimension_count_swa",
                c.rope_dim_local > 0 ? c.rope_dim_local : c.head_dim);
      w.set(a + "attention.sliding_window_pattern",
            {GGUFType::ARRAY, GGUFArray{GGUFType::BOOL, sliding.size(), sliding.data(), {}}});
      w.set_u32(a + "embedding_length_per_layer_input", c.d_per_layer_input);
    } else if (c.head_dim != c.d_model / c.n_heads) {
      w.set_u32(a + "attention.key_length", c.head_dim);
      w.set_u32(a + "attention.value_length", c.head_dim);
    }
    // Hybrid models: which layers are recurrent (as llama.cpp's converter records them), and
    // the multimodal RoPE sections llama.cpp requires of qwen35 (text positions make them
    // plain RoPE): the rotary pairs split 11/11/10-style over three position streams.
    std::vector<uint8_t> recurrent(c.recurrent_layers.begin(), c.recurrent_layers.end());
    std::vector<int32_t> sections;
    if (c.hybrid()) {
      w.set(a + "attention.recurrent_layers",
            {GGUFType::ARRAY, GGUFArray{GGUFType::BOOL, recurrent.size(), recurrent.data(), {}}});
      uint32_t interval = 1;
      while (interval < c.n_layers && c.layer_recurrent(interval - 1)) ++interval;
      w.set_u32(a + "full_attention_interval", interval);
      const int32_t pairs = static_cast<int32_t>(c.rotary_dim() / 2);
      const int32_t s2 = pairs / 3, s1 = (pairs - s2) / 2;
      sections = {pairs - s1 - s2, s1, s2, 0};
      w.set(a + "rope.dimension_sections",
            {GGUFType::ARRAY, GGUFArray{GGUFType::I32,
                                        sections.size(),
                                        reinterpret_cast<const uint8_t*>(sections.data()),
                                        {}}});
    }
    for (const ArchValue& v : arch.describe(c)) {  // 0 means unset: no key
      if (v.key.gguf.empty() || v.number == 0) continue;
      if (v.is_integer)
        w.set_u32(a + std::string(v.key.gguf), static_cast<uint32_t>(v.number));
      else
        w.set_f32(a + std::string(v.key.gguf), static_cast<float>(v.number));
    }
    for (const auto& [key, value] : vocab.metadata())
      if (key.starts_with("tokenizer.")) w.set(key, value);
    auto tensor_dtype = [&](const GenTensor& t) {
      if (t.kind != GenTensor::Kind::Matrix) return DType::F32;
      if (ctx.opt.mix)
        return quant_mix_tensor_dtype(*ctx.opt.mix, t.gguf_name, t.cols, c.n_layers, c.tied_output,
                                      c.n_kv_heads > 0 ? c.n_heads / c.n_kv_heads : 1);
      return ctx.opt.dtype;
    };
    for (const auto& t : plan) {
      DType dt = tensor_dtype(t);
      w.add_tensor(t.gguf_name,
                   t.experts > 0 ? std::vector<uint64_t>{t.cols, t.rows / t.experts, t.experts}
                   : t.rows == 1 ? std::vector<uint64_t>{t.cols}
                                 : std::vector<uint64_t>{t.cols, t.rows},
                   dt);
    }
    for (const auto& t : plan) {
      DType dt = tensor_dtype(t);
      emit_tensor(ctx, t, dt, false, [&](const void* p, size_t n) { w.write(p, n); });
      log_progress(ctx, t);
    }
    w.finish();
  }
  std::error_code ec;
  fs::rename(tmp, ctx.opt.output, ec);
  if (ec) fail("{}: cannot rename {}: {}", ctx.opt.output, tmp, ec.message());
}

const char* torch_dtype(DType dt) {
  switch (dt) {
    case DType::F16:
      return "float16";
    case DType::BF16:
      return "bfloat16";
    default:
      return "float32";
  }
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) fail("{}: cannot write", path.string());
}

std::vector<std::string> write_hf(GenContext& ctx, const std::vector<GenTensor>& plan,
                                  const GGUFFile& vocab_file, const ModelPreset& preset) {
  const ModelConfig& c = ctx.config;
  const fs::path dir(ctx.opt.output);
  std::vector<std::string> files;
  // Shards: consecutive tensors, a new shard once the next tensor would overflow this one.
  // HF stores each expert of a stacked tensor alone: same stream, its slice of the rows.
  std::vector<GenTensor> hf_plan;
  for (const auto& t : plan) {
    if (t.experts == 0 || t.hf_stacked) {
      hf_plan.push_back(t);
      continue;
    }
    const size_t rows = t.rows / t.experts;
    for (uint32_t e = 0; e < t.experts; ++e) {
      GenTensor one = t;
      one.hf_name = fmt::format(fmt::runtime(t.hf_name), e);
      one.rows = rows;
      one.row_offset = e * rows;
      one.experts = 0;
      hf_plan.push_back(std::move(one));
    }
  }
  std::vector<std::vector<const GenTensor*>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (const auto& t : hf_plan) {
    if (t.kind == GenTensor::Kind::RopeFreqs) continue;
    uint64_t bytes = uint64_t{t.rows} * row_bytes(ctx.opt.dtype, t.cols);
    if (!shards.back().empty() && in_shard + bytes > ctx.opt.shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += bytes;
    total += bytes;
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string name = shards.size() == 1 ? "model.safetensors"
                                          : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1,
                                                        shards.size());
    SafetensorsWriter w((dir / name).string(), {{"format", "pt"}});
    for (const GenTensor* t : shards[s]) {
      w.add_tensor(t->hf_name, ctx.opt.dtype,
                   t->kind == GenTensor::Kind::Conv ? std::vector<uint64_t>{t->rows, 1, t->cols}
                   : t->hf_stacked
                       ? std::vector<uint64_t>{t->experts, t->rows / t->experts, t->cols}
                   : t->rows == 1 && !t->hf_row_vector ? std::vector<uint64_t>{t->cols}
                                                       : std::vector<uint64_t>{t->rows, t->cols});
      weight_map[t->hf_name] = name;
    }
    for (const GenTensor* t : shards[s]) {
      emit_tensor(ctx, *t, ctx.opt.dtype, true, [&](const void* p, size_t n) { w.write(p, n); });
      log_progress(ctx, *t);
    }
    w.finish();
    files.push_back((dir / name).string());
  }
  if (shards.size() > 1) {
    nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}},
                                    {"weight_map", weight_map}};
    write_text(dir / "model.safetensors.index.json", index.dump(2) + "\n");
    files.push_back((dir / "model.safetensors.index.json").string());
  }

  Vocab vocab = vocab_from_gguf(vocab_file);
  nlohmann::ordered_json cfg;
  const Architecture& arch = *find_architecture(c.architecture);
  cfg["architectures"] = {std::string(arch.hf_class)};
  cfg["model_type"] = std::string(arch.hf_model_type);
  cfg["hidden_size"] = c.d_model;
  cfg["intermediate_size"] = c.d_ff;
  cfg["num_attention_heads"] = c.n_heads;
  cfg["num_key_value_heads"] = c.n_kv_heads;
  cfg["num_hidden_layers"] = c.n_layers;
  cfg["head_dim"] = c.head_dim;
  const char* act = c.ffn_activation == FfnActivation::GeluTanh ? "gelu_pytorch_tanh" : "silu";
  cfg["hidden_act"] = act;
  cfg["hidden_activation"] = act;
  cfg["rms_norm_eps"] = static_cast<double>(c.rms_eps);
  cfg["rope_theta"] = static_cast<double>(c.rope_theta);
  if (preset.rope_scaling) {
    const Llama3RopeScaling& s = *preset.rope_scaling;
    cfg["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", s.factor},
                           {"low_freq_factor", s.low_freq_factor},
                           {"high_freq_factor", s.high_freq_factor},
                           {"original_max_position_embeddings", s.original_context}};
  } else if (c.yarn.factor > 0) {
    cfg["rope_scaling"] = {{"rope_type", "yarn"},
                           {"factor", c.yarn.factor},
                           {"original_max_position_embeddings", c.yarn.original_context},
                           {"beta_fast", c.yarn.beta_fast},
                           {"beta_slow", c.yarn.beta_slow}};
    if (c.yarn.mscale != yarn_default_mscale(c.yarn.factor))
      cfg["rope_scaling"]["attention_factor"] = c.yarn.mscale;
  } else if (c.longrope.enabled()) {  // Phi-3's layout: the original context at the top level
    cfg["rope_scaling"] = {{"type", "longrope"},
                           {"long_factor", c.longrope.long_factors},
                           {"short_factor", c.longrope.short_factors}};
    cfg["original_max_position_embeddings"] = c.longrope.original_context;
    const double scale = double(c.context_length) / c.longrope.original_context;
    if (c.rope_attn_factor != longrope_default_attn_factor(scale, c.longrope.original_context))
      cfg["rope_scaling"]["attention_factor"] = c.rope_attn_factor;
  } else {
    cfg["rope_scaling"] = nullptr;
  }
  cfg["max_position_embeddings"] = c.context_length;
  cfg["tie_word_embeddings"] = c.tied_output;
  cfg["vocab_size"] = c.vocab_size;
  cfg["torch_dtype"] = torch_dtype(ctx.opt.dtype);
  cfg["attention_bias"] = c.qkv_bias;
  cfg["mlp_bias"] = false;
  cfg["use_sliding_window"] = c.sliding_window > 0;
  if (c.n_experts > 0) cfg["norm_topk_prob"] = c.moe_norm_top_k;
  for (const ArchValue& v : arch.describe(c)) {  // 0 means unset: null
    if (v.key.hf.empty()) continue;
    if (v.number == 0)
      cfg[std::string(v.key.hf)] = nullptr;
    else if (v.is_integer)
      cfg[std::string(v.key.hf)] = static_cast<uint64_t>(v.number);
    else
      cfg[std::string(v.key.hf)] = v.number;
  }
  if (c.rope_dim > 0 && c.rope_dim != c.head_dim)
    cfg["partial_rotary_factor"] = double(c.rope_dim) / c.head_dim;
  if (c.attn_output_gate) cfg["attn_output_gate"] = true;
  if (c.hybrid()) {
    nlohmann::ordered_json types = nlohmann::ordered_json::array();
    for (uint32_t l = 0; l < c.n_layers; ++l)
      types.push_back(c.layer_recurrent(l) ? "linear_attention" : "full_attention");
    cfg["layer_types"] = types;
  }
  if (arch.per_layer_attention) {  // gemma4's keys (configure reads them); RoPE per layer kind
    cfg.erase("rope_theta");
    cfg.erase("rope_scaling");
    cfg["global_head_dim"] = c.global_head_dim > 0 ? c.global_head_dim : c.head_dim;
    cfg["attention_k_eq_v"] = c.global_v_from_k;
    cfg["num_global_key_value_heads"] =
        c.global_v_from_k ? nlohmann::ordered_json(c.kv_heads_of(c.n_layers - 1)) : nullptr;
    cfg["num_kv_shared_layers"] = c.n_kv_shared_layers;
    cfg["use_double_wide_mlp"] = c.double_wide_shared_ffn;
    cfg["hidden_size_per_layer_input"] = c.d_per_layer_input;
    cfg["vocab_size_per_layer_input"] = c.vocab_size;
    cfg["enable_moe_block"] = c.moe_beside_dense;
    uint32_t turning = 0;
    for (float f : c.rope_freq_factors) turning += f == 1.0f ? 1 : 0;
    const double partial =
        c.rope_freq_factors.empty() ? 1.0 : double(turning) / c.rope_freq_factors.size();
    cfg["rope_parameters"] = {
        {"sliding_attention",
         {{"rope_type", "default"},
          {"rope_theta", double(c.rope_theta_local)},
          {"partial_rotary_factor", double(c.rotary_dim_of(0)) / c.head_dim_of(0)}}},
        {"full_attention",
         {{"rope_type", "proportional"},
          {"partial_rotary_factor", partial},
          {"rope_theta", double(c.rope_theta)}}}};
  }
  if (c.sliding_window > 0) {
    cfg["max_window_layers"] = 0;
    nlohmann::ordered_json types = nlohmann::ordered_json::array();
    for (uint32_t l = 0; l < c.n_layers; ++l)
      types.push_back(c.layer_slides(l) ? "sliding_attention" : "full_attention");
    cfg["layer_types"] = types;
  }
  if (vocab.bos_id >= 0) cfg["bos_token_id"] = vocab.bos_id;
  if (vocab.eos_id >= 0) cfg["eos_token_id"] = vocab.eos_id, cfg["pad_token_id"] = vocab.eos_id;
  write_text(dir / "config.json", cfg.dump(2) + "\n");
  files.push_back((dir / "config.json").string());
  if (!c.pooling.empty()) {  // as sentence-transformers saves an embedding model's pooling
    fs::create_directories(dir / "1_Pooling");
    const nlohmann::json pooling = {{"word_embedding_dimension", c.d_model},
                                    {"pooling_mode_cls_token", c.pooling == "cls"},
                                    {"pooling_mode_mean_tokens", c.pooling == "mean"},
                                    {"pooling_mode_lasttoken", c.pooling == "last"}};
    write_text(dir / "1_Pooling" / "config.json", pooling.dump(2) + "\n");
    files.push_back((dir / "1_Pooling" / "config.json").string());
  }

  write_hf_tokenizer_folder(vocab, dir.string());
  files.push_back((dir / "tokenizer.json").string());
  files.push_back((dir / "tokenizer_config.json").string());
  return files;
}

}  // namespace

ModelGenResult generate_model(const ModelGenOptions& opt, ThreadPool& pool) {
  auto start = std::chrono::steady_clock::now();
  ModelPreset preset = model_preset(opt.preset, opt.arch, opt.options);
  if (opt.format != "gguf" && opt.format != "hf")
    fail("unknown model format '{}' (gguf, hf)", opt.format);
  if (opt.format == "hf" && opt.mix)
    fail("dtype {} cannot be written to a Hugging Face folder; use --format gguf",
         quant_mix_name(*opt.mix));
  if (opt.format == "hf" && dtype_info(opt.dtype).block_size != 1)
    fail(
        "dtype {} cannot be written to a Hugging Face folder (safetensors holds f32, f16, bf16); "
        "use --format gguf",
        dtype_info(opt.dtype).name);
  if (const Architecture* arch = find_architecture(preset.config.architecture);
      opt.format == "hf" && arch && !arch->hf_unsupported.empty())
    fail("{} models cannot be written as a Hugging Face folder ({}); use --format gguf", arch->name,
         arch->hf_unsupported);
  if (opt.output.empty()) fail("model gen: no output path");
  if (opt.vocab_path.empty()) fail("model gen: no vocabulary file (--vocab)");
  if (opt.shard_bytes == 0) fail("model gen: shard size must be positive");

  GGUFFile vocab(opt.vocab_path);
  if (!vocab.has("tokenizer.ggml.tokens"))
    fail("{}: not a vocabulary file (no tokenizer.ggml.tokens)", vocab.path());
  size_t n_vocab = vocab.get_string_array("tokenizer.ggml.tokens").size();
  if (n_vocab == 0 || n_vocab > (1u << 24))
    fail("{}: vocabulary has {} tokens", vocab.path(), n_vocab);
  ModelConfig& c = preset.config;
  c.vocab_size = static_cast<uint32_t>(n_vocab);
  c.name = "pith-random-" + preset.name;
  validate_config(c, "preset " + preset.name);
  // (A mix falls back to 32-block types for rows that are not whole K-quant blocks.)
  const size_t block = opt.mix ? 32 : dtype_info(opt.dtype).block_size;
  if (c.d_model % block != 0 || c.d_ff % block != 0 || c.q_dim() % block != 0)
    fail("preset {}: row lengths are not multiples of the {} block", preset.name,
         dtype_info(opt.dtype).name);

  std::error_code ec;
  fs::path out(opt.output);
  if (opt.format == "hf") {
    if (fs::exists(out) && !fs::is_directory(out))
      fail("{}: exists and is not a folder", opt.output);
    fs::create_directories(out, ec);
    // Weights from an earlier run (another shard count) would shadow or mix with the new ones.
    for (auto it = fs::directory_iterator(out, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (name == "model.safetensors.index.json" ||
          (name.starts_with("model") && name.ends_with(".safetensors")))
        fs::remove(it->path(), ec);
    }
  } else {
    if (fs::is_directory(out)) fail("{}: is a folder; GGUF output is a file", opt.output);
    if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  }
  if (ec) fail("{}: cannot create folder: {}", opt.output, ec.message());

  GenContext ctx{opt, c, pool, NormalZiggurat{}, opt.format == "hf" ? opt.dtype : DType::F32,
                 {},  {}};
  if (opt.format == "gguf" && !opt.mix && block == 1)
    ctx.norm_round = opt.dtype;  // same values as the HF output
  ctx.scratch.resize(pool.size());
  const auto plan = plan_tensors(c);

  ModelGenResult result;
  for (const auto& t : plan)
    if (t.kind != GenTensor::Kind::RopeFreqs) result.n_params += uint64_t{t.rows} * t.cols;
  if (opt.format == "gguf") {
    write_gguf(ctx, plan, vocab, preset.name);
    result.files.push_back(opt.output);
  } else {
    result.files = write_hf(ctx, plan, vocab, preset);
  }
  for (const auto& f : result.files) result.bytes += fs::file_size(f, ec);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace pith
