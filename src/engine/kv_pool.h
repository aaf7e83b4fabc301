// The paged KV cache: a pool of fixed-size pages preallocated once from a memory budget, each
// page holding the keys and values of `page_size` token slots for every layer (paper §5.3,
// PagedAttention-style). The pool only hands out physical page ids through a free list; the
// control layer keeps reference counts and virtual handles above it. The forward pass never
// assumes that a sequence's pages are contiguous or ordered by id: it follows the page table.
//
// Page layout (elements of the pool's KvDType: f32, f16 or bf16; one contiguous block of
// page_elems() elements per page):
//
//   page[layer][k|v][kv_head][slot < page_size][head_dim]
//
// so the K (or V) rows that one attention head reads from a page are one contiguous
// [page_size][head_dim] tile: the inner loop of attention streams it linearly. Writing one
// token scatters its kv_dim values into n_kv_heads rows of head_dim (cheap: one token, once).
//
// Layers may differ in KV heads and head size (gemma4's global layers): each layer's block then
// has its own [k|v][kv_head][slot][head_dim] shape, at its own offset in the page.
//
// Cost: page_bytes = n_layers * 2 * page_size * kv_dim * element bytes. Llama-3.2-1B (16
// layers, kv_dim 512, 16-token pages): 1 MiB per page in f32, i.e. 64 KiB per token; 32 KiB in
// f16/bf16. Writes round the forward's f32 rows to the element type (nearest even); attention
// widens them back while it reads.
//
// Memory is reserved uninitialised (the OS commits it on first touch); a freshly allocated
// page holds garbage until the forward writes its slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/kv_dtype.h"
#include "backend/model_config.h"
#include "backend/slot_pool.h"

namespace pith {

struct KvLayerShape {
  uint32_t n_kv_heads = 0;
  uint32_t head_dim = 0;
};

struct KvShape {
  uint32_t n_layers = 0;
  uint32_t n_kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t page_size = 16;  // token slots per page
  // [n_layers] where layers differ; empty: every layer is n_kv_heads x head_dim.
  std::vector<KvLayerShape> layers;
  KvDType dtype = KvDType::F32;  // a concrete type (not Auto)

  uint32_t kv_dim() const { return n_kv_heads * head_dim; }
  uint32_t heads_of(uint32_t layer) const {
    return layers.empty() ? n_kv_heads : layers[layer].n_kv_heads;
  }
  uint32_t head_dim_of(uint32_t layer) const {
    return layers.empty() ? head_dim : layers[layer].head_dim;
  }
  uint32_t kv_dim_of(uint32_t layer) const { return heads_of(layer) * head_dim_of(layer); }
  // Elements in one page (all layers, K and V); 0 when the per-layer shapes do not cover
  // n_layers (KvPool refuses that shape).
  size_t page_elems() const {
    if (layers.empty()) return size_t{n_layers} * 2 * page_size * kv_dim();
    if (layers.size() != n_layers) return 0;
    size_t n = 0;
    for (uint32_t l = 0; l < n_layers; ++l) n += size_t{2} * page_size * kv_dim_of(l);
    return n;
  }
  size_t elem_bytes() const { return kv_dtype_bytes(dtype); }
  size_t page_bytes() const { return page_elems() * elem_bytes(); }
};

// The KV shape of a model: its KV-storing layers (not recurrent or KV-sharing ones), per-layer
// shapes where they differ, elements of `dtype` (Auto: F32, the CPU engine's choice).
KvShape kv_shape_for(const ModelConfig& config, uint32_t page_size, KvDType dtype = KvDType::Auto);

class KvPool {
 public:
  // Preallocates floor(memory_bytes / page_bytes) pages. Throws pith::Error when the shape is
  // empty, its dtype is Auto, or the budget does not hold a single page.
  KvPool(const KvShape& shape, size_t memory_bytes);
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  const KvShape& shape() const { return shape_; }
  uint32_t page_size() const { return shape_.page_size; }
  uint32_t n_pages() const { return n_pages_; }
  uint32_t n_free() const { return slots_.n_free(); }

  // The free list of page ids (SlotPool rules: all-or-nothing allocation, validated frees).
  SlotPool& slots() { return slots_; }
  const SlotPool& slots() const { return slots_; }
  std::vector<uint32_t> allocate(size_t n) { return slots_.allocate(n); }
  void free(std::span<const uint32_t> pages) { slots_.free(pages); }
  bool valid(uint32_t page) const { return slots_.valid(page); }
  bool allocated(uint32_t page) const { return slots_.allocated(page); }

  // The [page_size][head_dim] K or V tile of one (page, layer, kv_head), elements of
  // shape().dtype. No bounds checks: callers validate page ids first (the forward validates its
  // whole batch up front).
  std::byte* k(uint32_t page, uint32_t layer, uint32_t kv_head) {
    return data_.get() + offset(page, layer, 0, kv_head) * elem_bytes_;
  }
  std::byte* v(uint32_t page, uint32_t layer, uint32_t kv_head) {
    return data_.get() + offset(page, layer, 1, kv_head) * elem_bytes_;
  }
  const std::byte* k(uint32_t page, uint32_t layer, uint32_t kv_head) const {
    return data_.get() + offset(page, layer, 0, kv_head) * elem_bytes_;
  }
  const std::byte* v(uint32_t page, uint32_t layer, uint32_t kv_head) const {
    return data_.get() + offset(page, layer, 1, kv_head) * elem_bytes_;
  }

  // The whole page (page_bytes() bytes, every layer's K and V): swap images.
  std::byte* page(uint32_t page) { return data_.get() + size_t{page} * page_bytes_; }
  const std::byte* page(uint32_t page) const { return data_.get() + size_t{page} * page_bytes_; }

  // Writes one token's K and V rows ([kv_dim] f32 each, heads concatenated) of one layer into
  // (page, slot), rounded to the pool's dtype.
  void write(uint32_t page, uint32_t slot, uint32_t layer, const float* k_row, const float* v_row);

  // Reads back one (page, layer, k|v = 0|1, kv_head, slot) row of head_dim values as f32.
  void read(uint32_t page, uint32_t layer, uint32_t kv, uint32_t kv_head, uint32_t slot,
            float* out) const;

  // Copies n slots of K/V (all layers) from src_page[src_slot..] to dst_page[dst_slot..].
  // Overlapping ranges of the same page are handled (memmove). Throws pith::Error on bad ids
  // or ranges past the page end.
  void copy(uint32_t src_page, uint32_t dst_page, uint32_t src_slot, uint32_t dst_slot, uint32_t n);

 private:
  // In elements from the pool's start.
  size_t offset(uint32_t page, uint32_t layer, uint32_t kv, uint32_t kv_head) const {
    const LayerBlock& b = blocks_[layer];
    return size_t{page} * page_elems_ + b.offset + (size_t{kv} * b.n_kv_heads + kv_head) * b.tile;
  }

  struct LayerBlock {
    size_t offset = 0;  // elements from the page start
    size_t tile = 0;    // page_size * head_dim
    uint32_t n_kv_heads = 0;
  };
  std::vector<LayerBlock> blocks_;  // [n_layers]

  KvShape shape_;
  size_t elem_bytes_ = 0;
  size_t page_elems_ = 0;
  size_t page_bytes_ = 0;
  uint32_t n_pages_ = 0;
  std::unique_ptr<std::byte[]> data_;  // [n_pages][page_elems] elements of shape_.dtype
  SlotPool slots_;
};

}  // namespace pith
