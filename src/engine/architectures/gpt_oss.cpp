// gpt-oss (OpenAI's open-weight MoE, 20B and 120B): every layer is attention with biases on
// Q/K/V and the output projection and a learned sink logit per head, sliding windows (128) on
// every other layer from layer 0, YaRN RoPE on split halves, then a mixture of experts whose
// router and experts have biases, four of 32 (128) experts per token weighted by a softmax
// over the chosen router logits, and a clamped SwiGLU: min(g, 7) * sigmoid(1.702 min(g, 7)) *
// (clamp(u, -7, 7) + 1). Its norm before the FFN is GGUF's post_attention_norm.
//
// The experts ship as MXFP4 (formats/mxfp4.h), which the GGUF files keep. The HF checkpoints'
// experts are MXFP4 blocks in a transposed, gate/up-interleaved layout that pith's HF loader
// does not read, so gpt-oss loads from GGUF (llama.cpp's converter writes it).
#include "engine/architectures/architecture.h"

#include "common/error.h"

namespace pith {

namespace {

void configure(ModelConfig& c, const ArchitectureKeys& keys) {
  c.rope_style = RopeStyle::SplitHalf;
  c.qkv_bias = true;
  c.attn_out_bias = true;
  c.attn_sinks = true;
  c.moe_bias = true;
  c.ffn_activation = FfnActivation::SwigluOai;
  c.moe_norm_top_k = true;  // softmax over the chosen logits = renormalised top-k probabilities
  c.n_experts = required_size(keys, {"expert_count", "num_local_experts"});
  c.n_experts_used = required_size(keys, {"expert_used_count", "num_experts_per_tok"});
  // HF's intermediate_size is the experts' width (the model has no dense FFN).
  c.d_ff_expert = required_size(keys, {"expert_feed_forward_length", "intermediate_size"});
  if (c.n_experts_used > c.n_experts)
    fail("{}: {} experts used per token of {}", keys.source(), c.n_experts_used, c.n_experts);
  if (auto limit = keys.number({"", "swiglu_limit"}); limit && *limit != 7.0)
    fail("{}: swiglu_limit {} is not supported (gpt-oss uses 7)", keys.source(), *limit);
  if (keys.number({"attention.sliding_window_pattern", ""}))
    fail(
        "{}: attention.sliding_window_pattern is not supported for gpt-oss (every other layer "
        "slides)",
        keys.source());
  read_sliding_window(c, keys, {"attention.sliding_window", "sliding_window"}, 2);
  // llama.cpp reads an optional base of the sliding layers' own; gpt-oss's share the global one.
  if (auto swa = keys.number({"rope.freq_base_swa", ""}); swa && float(*swa) != c.rope_theta)
    fail(
        "{}: rope.freq_base_swa {} differs from rope.freq_base {}: a base of the sliding layers' "
        "own is not supported for gpt-oss",
        keys.source(), *swa, c.rope_theta);
}

std::vector<ArchValue> describe(const ModelConfig& c) {
  return {{{"expert_count", "num_local_experts"}, double(c.n_experts), true},
          {{"expert_used_count", "num_experts_per_tok"}, double(c.n_experts_used), true},
          {{"expert_feed_forward_length", "intermediate_size"}, double(c.d_ff_expert), true},
          {{"attention.sliding_window", "sliding_window"}, double(c.sliding_window), true}};
}

}  // namespace

extern const Architecture kGptOssArchitecture{
    .name = "gpt-oss",
    .gguf_name = "gpt-oss",
    .hf_class = "GptOssForCausalLM",
    .hf_model_type = "gpt_oss",
    .gguf_ffn_norm = "post_attention_norm",
    .configure = configure,
    .describe = describe,
    .hf_unsupported =
        "their experts are MXFP4 blocks in a layout pith reads only from GGUF; "
        "convert with llama.cpp's convert_hf_to_gguf.py",
};

}  // namespace pith
