// The CUDA backend's activation buffers. See workspace.h.
#include "engine/cuda/workspace.h"

#include <algorithm>

#include "engine/cuda/kernels.h"  // kTopKMax, topk_workspace_bytes

namespace pith::cuda {

size_t Workspace::token_bytes(const ModelConfig& c, DType act) {
  const size_t e = elem_bytes(act), qd = c.max_q_dim(), kvd = c.max_kv_dim(), ff = c.max_d_ff();
  return 3 * size_t{c.d_model} * 4 +
         e * (c.d_model + 2 * qd + 2 * kvd + 3 * ff + (c.attn_output_gate ? 3 * qd : 0));
}

size_t Workspace::lm_row_bytes(const ModelConfig& c, DType act) {
  return size_t{c.d_model} * (4 + elem_bytes(act)) + size_t{kTopKMax} * 8;
}

size_t Workspace::fixed_bytes(const ModelConfig& c) {
  return size_t{kLmChunkRows} * c.vocab_size * 4 +
         topk_workspace_bytes(kLmChunkRows, c.vocab_size, kTopKMax);
}

void Workspace::ensure(const ModelConfig& c, DType act, uint32_t n_tokens, uint32_t n_lm_rows) {
  const size_t e = elem_bytes(act), qd = c.max_q_dim(), kvd = c.max_kv_dim(), width = c.max_d_ff();
  if (logits.bytes() == 0) {
    logits.reserve(size_t{kLmChunkRows} * c.vocab_size * 4);
    topk_scratch.reserve(topk_workspace_bytes(kLmChunkRows, c.vocab_size, kTopKMax));
  }
  if (n_tokens > tokens) {
    const size_t t = std::max(n_tokens, tokens + tokens / 2);  // grow geometrically
    for (DeviceBuffer* b : {&x, &delta, &tmp}) b->reserve(t * c.d_model * 4);
    h.reserve(t * c.d_model * e);
    attn.reserve(t * qd * e);
    q.reserve(t * qd * e);
    k.reserve(t * kvd * e);
    v.reserve(t * kvd * e);
    if (c.attn_output_gate) {
      q_gate.reserve(t * 2 * qd * e);
      gate.reserve(t * qd * e);
    }
    gate_up.reserve(t * 2 * width * e);
    ff.reserve(t * width * e);
    tokens = static_cast<uint32_t>(t);
  }
  if (n_lm_rows > lm_rows) {
    const size_t r = std::max(n_lm_rows, lm_rows + lm_rows / 2);
    out_x.reserve(r * c.d_model * 4);
    out_h.reserve(r * c.d_model * e);
    topk_ids.reserve(r * kTopKMax * 4);
    topk_probs.reserve(r * kTopKMax * 4);
    lm_rows = static_cast<uint32_t>(r);
  }
}

size_t Workspace::bytes() const {
  size_t n = 0;
  for (const DeviceBuffer* b :
       {&x, &delta, &tmp, &h, &attn, &q, &k, &v, &q_gate, &gate, &gate_up, &ff, &out_x, &out_h,
        &logits, &topk_ids, &topk_probs, &topk_scratch})
    n += b->bytes();
  return n;
}

}  // namespace pith::cuda
