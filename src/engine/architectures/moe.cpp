// The mixture-of-experts options shared by the MoE families (qwen2moe.cpp, qwen3moe.cpp).
#include "engine/architectures/architecture.h"

#include "common/error.h"

namespace pith {

void read_moe_options(ModelConfig& c, const ArchitectureKeys& keys, bool shared_expert) {
  auto count = [&](ArchKey key, bool required) -> uint32_t {
    std::optional<double> v = keys.number(key);
    if (!v) {
      if (required) fail("{}: missing '{}'", keys.source(), keys.is_gguf() ? key.gguf : key.hf);
      return 0;
    }
    if (*v < 0 || *v > 65536 || *v != static_cast<uint32_t>(*v))
      fail("{}: '{}' = {} is out of range", keys.source(), keys.is_gguf() ? key.gguf : key.hf, *v);
    return static_cast<uint32_t>(*v);
  };
  // transformers v5 saves qwen3moe's expert count as num_local_experts.
  const bool local_key = !keys.is_gguf() && !keys.number({"", "num_experts"}) &&
                         keys.number({"", "num_local_experts"});
  c.n_experts = count(
      local_key ? ArchKey{"", "num_local_experts"} : ArchKey{"expert_count", "num_experts"}, true);
  c.n_experts_used = count({"expert_used_count", "num_experts_per_tok"}, true);
  c.d_ff_expert = count({"expert_feed_forward_length", "moe_intermediate_size"}, true);
  if (shared_expert)
    c.d_ff_shared_expert =
        count({"expert_shared_feed_forward_length", "shared_expert_intermediate_size"}, false);
  if (c.n_experts == 0 || c.n_experts_used == 0 || c.n_experts_used > c.n_experts ||
      c.d_ff_expert == 0)
    fail("{}: {} experts with {} used per token and width {} is not a mixture of experts",
         keys.source(), c.n_experts, c.n_experts_used, c.d_ff_expert);
  // Dense layers interleaved with sparse ones are not implemented; real checkpoints of these
  // families have every layer sparse.
  if (keys.number({"", "decoder_sparse_step"}).value_or(1) != 1)
    fail("{}: decoder_sparse_step other than 1 is not supported", keys.source());
}

std::vector<ArchValue> describe_moe(const ModelConfig& c) {
  return {{{"expert_count", "num_experts"}, double(c.n_experts), true},
          {{"expert_used_count", "num_experts_per_tok"}, double(c.n_experts_used), true},
          {{"expert_feed_forward_length", "moe_intermediate_size"}, double(c.d_ff_expert), true},
          {{"expert_shared_feed_forward_length", "shared_expert_intermediate_size"},
           double(c.d_ff_shared_expert),
           true},
          {{"", "decoder_sparse_step"}, 1, true}};
}

}  // namespace pith
