// The tensor-type rules of llama.cpp's K-quant mixes, for the llama architecture (see
// quant_mix.h). Implemented (llama.cpp's llama_tensor_get_type, as of ggml 0.25):
//   - every matrix gets the mix's base type: Q2_K (q2_k), Q3_K (q3_k_s/m/l), Q4_K (q4_k_s,
//     q4_k_m), Q5_K (q5_k_m), Q6_K (q6_k), IQ4_NL (iq4_nl), IQ4_XS (iq4_xs);
//   - the output matrix, or token_embd when the output is tied to it, gets Q6_K;
//   - attn_v: q2_k uses Q4_K where the model has 4 or more query heads per KV head, else Q3_K;
//     q3_k_m Q5_K in its first two layers, then Q4_K; q3_k_l Q5_K; q4_k_m and q5_k_m Q6_K in
//     the layers where use_more_bits(layer) holds; q4_k_s Q5_K in layers 0-3; iq4_nl and
//     iq4_xs Q5_K where the model has 4 or more query heads per KV head;
//   - attn_output: q2_k Q3_K, q3_k_m Q4_K, q3_k_l Q5_K;
//   - ffn_down: q2_k Q3_K; q3_k_m Q5_K in the first n_layers / 16 layers, then Q4_K; q3_k_l Q5_K;
//     q4_k_m and q5_k_m Q6_K where use_more_bits(layer) holds; q4_k_s Q5_K in the first
//     n_layers / 8 layers; iq4_nl and iq4_xs Q5_K in the first n_layers / 8 layers (llama.cpp's
//     rule without an importance matrix);
//   - use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2 (integer division);
//   - a matrix whose rows are not a multiple of 256 (Qwen2.5-0.5B's 896, Gemma 3 1B's 1152)
//     falls back to a 32-block type: Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1,
//     Q6_K -> Q8_0, IQ4_XS -> IQ4_NL (an IQ4_NL mix's own matrices need no fallback);
//   - 1-D tensors (norms, rope factors) are not matrices and stay F32 (model_gen's choice);
//   - mxfp4_moe (gpt-oss's file type): the expert stacks MXFP4, every other matrix (the output
//     and token embedding included) Q8_0.
// Differences from llama.cpp:
//   - the 70B rule (attn_v Q3_K/Q4_K -> Q5_K), the 8-expert rules and Falcon's are not
//     implemented: the presets are dense Llama models of at most 8B;
//   - no importance matrix: llama.cpp's choices that depend on one do not arise for these mixes
//     (its Q2_K_S, which wants one, is not offered).
#include "model_gen/quant_mix.h"

#include <cstdio>

namespace pith {

namespace {

struct MixInfo {
  QuantMix mix;
  std::string_view name;
  DType base;
  uint32_t file_type;  // LLAMA_FTYPE_MOSTLY_*
};

constexpr MixInfo kMixes[] = {
    {QuantMix::Q2_K, "q2_k", DType::Q2_K, 10},
    {QuantMix::Q3_K_S, "q3_k_s", DType::Q3_K, 11},
    {QuantMix::Q3_K_M, "q3_k_m", DType::Q3_K, 12},
    {QuantMix::Q3_K_L, "q3_k_l", DType::Q3_K, 13},
    {QuantMix::Q4_K_S, "q4_k_s", DType::Q4_K, 14},
    {QuantMix::Q4_K_M, "q4_k_m", DType::Q4_K, 15},
    {QuantMix::Q5_K_M, "q5_k_m", DType::Q5_K, 17},
    {QuantMix::Q6_K, "q6_k", DType::Q6_K, 18},
    {QuantMix::IQ4_NL, "iq4_nl", DType::IQ4_NL, 25},
    {QuantMix::IQ4_XS, "iq4_xs", DType::IQ4_XS, 30},
    {QuantMix::MXFP4_MOE, "mxfp4_moe", DType::MXFP4, 38},
};

const MixInfo& info(QuantMix mix) {
  for (const auto& m : kMixes)
    if (m.mix == mix) return m;
  return kMixes[0];
}

bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

}  // namespace

std::optional<QuantMix> quant_mix_from_name(std::string_view name) {
  for (const auto& m : kMixes)
    if (m.name == name) return m.mix;
  return std::nullopt;
}

std::string_view quant_mix_name(QuantMix mix) {
  return info(mix).name;
}

uint32_t quant_mix_file_type(QuantMix mix) {
  return info(mix).file_type;
}

DType quant_mix_tensor_dtype(QuantMix mix, const std::string& name, size_t cols, uint32_t n_layers,
                             bool tied_output, uint32_t n_gqa) {
  DType t = info(mix).base;
  int layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  const int n = static_cast<int>(n_layers);
  const bool m_mix = mix == QuantMix::Q4_K_M || mix == QuantMix::Q5_K_M;
  const bool iq4_mix = mix == QuantMix::IQ4_NL || mix == QuantMix::IQ4_XS;
  if (mix == QuantMix::MXFP4_MOE)  // expert stacks MXFP4, every other matrix Q8_0
    return name.find("_exps.") != std::string::npos ? DType::MXFP4 : DType::Q8_0;
  if (name == "output.weight" || (tied_output && name == "token_embd.weight")) {
    t = DType::Q6_K;
  } else if (name.ends_with(".attn_v.weight")) {
    if (mix == QuantMix::Q2_K) t = n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
    if (mix == QuantMix::Q3_K_M) t = layer < 2 ? DType::Q5_K : DType::Q4_K;
    if (mix == QuantMix::Q3_K_L) t = DType::Q5_K;
    if (m_mix && use_more_bits(layer, n)) t = DType::Q6_K;
    if (mix == QuantMix::Q4_K_S && layer < 4) t = DType::Q5_K;
    if (iq4_mix && n_gqa >= 4) t = DType::Q5_K;
  } else if (name.ends_with(".attn_output.weight")) {
    if (mix == QuantMix::Q2_K) t = DType::Q3_K;
    if (mix == QuantMix::Q3_K_M) t = DType::Q4_K;
    if (mix == QuantMix::Q3_K_L) t = DType::Q5_K;
  } else if (name.ends_with(".ffn_down.weight")) {
    if (mix == QuantMix::Q2_K) t = DType::Q3_K;
    if (mix == QuantMix::Q3_K_M) t = layer < n / 16 ? DType::Q5_K : DType::Q4_K;
    if (mix == QuantMix::Q3_K_L) t = DType::Q5_K;
    if (m_mix && use_more_bits(layer, n)) t = DType::Q6_K;
    if (mix == QuantMix::Q4_K_S && layer < n / 8) t = DType::Q5_K;
    if (iq4_mix && layer < n / 8) t = DType::Q5_K;
  }
  if (cols % kQK != 0) {
    switch (t) {
      case DType::Q2_K:
      case DType::Q3_K:
        return DType::Q4_0;
      case DType::Q4_K:
        return DType::Q5_0;
      case DType::Q5_K:
        return DType::Q5_1;
      case DType::IQ4_XS:
      case DType::IQ4_NL:
        return DType::IQ4_NL;
      default:
        return DType::Q8_0;
    }
  }
  return t;
}

}  // namespace pith
