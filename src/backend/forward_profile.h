// Where the time of a backend's forward goes, per operation (`pith bench model --profile`,
// Backend::set_profile). The CPU engine ends every op with its thread pool's join, so a timestamp
// between two ops (OpClock) measures the one that just finished; the CUDA backend records an
// event after each op and charges the time between consecutive events once the step is done.
// Off (a null pointer) it costs one branch per op.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace pith {

struct ForwardProfile {
  enum Op {
    Embed,       // input rows: embedding lookups and Embed slots, RoPE angles, KV destinations
    Norms,       // RMSNorms before attention and FFN (and post-norms)
    QkvProj,     // Q, K, V matmuls
    QkRopeKv,    // biases, Q/K norms, RoPE, K/V into the pages
    Attention,   // paged attention
    OProj,       // attention output matmul
    GateUpProj,  // gate and up matmuls (or the MoE FFN, all of it)
    Activation,  // SwiGLU / GELU
    DownProj,    // down matmul
    Residual,    // residual adds
    Lora,        // LoRA deltas
    Output,      // output norm, LM head, top-K / logits
    kCount
  };
  static constexpr std::array<const char*, kCount> kNames = {
      "embed",       "norms",      "qkv_proj",  "qk_rope_kv", "attention", "o_proj",
      "ffn_gate_up", "activation", "down_proj", "residual",   "lora",      "output"};

  std::array<int64_t, kCount> ns{};
  uint64_t forwards = 0;
  void clear() {
    ns.fill(0);
    forwards = 0;
  }
  int64_t total_ns() const {
    int64_t t = 0;
    for (int64_t v : ns) t += v;
    return t;
  }
};

// Charges the time since the previous mark to an op.
class OpClock {
 public:
  explicit OpClock(ForwardProfile* p) : p_(p) {
    if (p_) {
      ++p_->forwards;
      last_ = std::chrono::steady_clock::now();
    }
  }
  void operator()(ForwardProfile::Op op) {
    if (!p_) return;
    const auto now = std::chrono::steady_clock::now();
    p_->ns[op] += std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
    last_ = now;
  }

 private:
  ForwardProfile* p_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace pith
