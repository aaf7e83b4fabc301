// The CUDA backend's KV pool layout and the per-sequence view attention reads it through.
// Plain C++ (no CUDA headers) so host-side planning and its unit tests build without nvcc;
// engine/cuda/paged_attention.h includes it, and that is the header the rest of the backend uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pith::cuda {

// Activation / KV element type on the device: F32 mode (F32 weights) or BF16 mode.
enum class DType : uint8_t { F32, BF16 };

// Bytes of one element of `t`.
inline size_t elem_bytes(DType t) {
  return t == DType::F32 ? 4 : 2;
}

// Device KV pool: pool[page][layer][k|v][slot < page_size][kv_head][head_dim] elements of dtype.
// One (page, layer) K or V block is an NHD page [page_size][n_kv_heads][head_dim]; consecutive
// pages of one layer are page_elems() apart. Layers may differ in KV heads and head size
// (gemma4's global layers): `layers` then gives every layer's shape, and each layer's blocks sit
// at its own offset in the page (the CPU pool's layout, engine/kv_pool.h).
struct KvLayerDims {
  uint32_t n_kv_heads = 0, head_dim = 0;
};

struct KvPoolLayout {
  DType dtype = DType::BF16;
  uint32_t n_layers = 0, n_kv_heads = 0, head_dim = 0, page_size = 16;
  std::vector<KvLayerDims> layers;  // [n_layers] where layers differ; empty: all uniform

  bool uniform() const { return layers.empty(); }
  uint32_t heads_of(uint32_t layer) const {
    return layers.empty() ? n_kv_heads : layers[layer].n_kv_heads;
  }
  uint32_t head_dim_of(uint32_t layer) const {
    return layers.empty() ? head_dim : layers[layer].head_dim;
  }
  size_t kv_dim() const { return size_t{n_kv_heads} * head_dim; }
  size_t kv_dim_of(uint32_t layer) const { return size_t{heads_of(layer)} * head_dim_of(layer); }
  // Elements of one page before `layer`'s K block.
  size_t layer_offset(uint32_t layer) const {
    if (layers.empty()) return size_t{layer} * 2 * page_size * kv_dim();
    size_t n = 0;
    for (uint32_t l = 0; l < layer; ++l) n += size_t{2} * page_size * kv_dim_of(l);
    return n;
  }
  size_t page_elems() const { return layer_offset(n_layers); }
  // Element offset of (page, layer)'s K (kv = 0) or V (kv = 1) block.
  size_t block_offset(uint32_t page, uint32_t layer, uint32_t kv) const {
    return size_t{page} * page_elems() + layer_offset(layer) + kv * page_size * kv_dim_of(layer);
  }
  size_t elem_bytes() const { return cuda::elem_bytes(dtype); }
};

// A layer's score options, as the CPU engine's AttentionParams (engine/attention.h): the query
// scale (0: 1/sqrt(head_dim)), the tanh soft-cap of the scores (0: off) and the sliding window
// (0: none).
struct AttentionOptions {
  float scale = 0;
  float softcap = 0;
  uint32_t window = 0;
};

// One sequence of a forward batch as attention sees it (host memory, valid during plan()).
struct AttentionSequence {
  uint32_t q_begin = 0;             // first query row in the batch's [n_tokens] matrix
  uint32_t n_q = 0;                 // the sequence's inputs = its last n_q context slots
  std::span<const uint32_t> pages;  // page table in context order (physical ids)
  uint32_t context_len = 0;         // (pages - 1) * page_size + last_page_len
  // BRLE rows (engine/forward_batch.h): per input, run lengths alternating visible/hidden,
  // starting visible, summing to context_len. Null (or empty) = causal.
  const std::vector<std::vector<uint32_t>>* mask = nullptr;
};

}  // namespace pith::cuda
