// What every backend checks before it touches any state: each handler's arguments
// (backend/backend.h); the model's tensor shapes are checked by validate_model_shapes
// (engine/model_weights.h). One implementation, so the CPU engine, the CUDA backend and the fake
// reject exactly the same inputs with the same messages. Every function throws pith::Error naming
// the offending sequence, input or id.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/forward_batch.h"
#include "backend/model_config.h"
#include "backend/slot_pool.h"

namespace pith {

// A forward batch: one kind of input per sequence, positions per input, allocated pages and
// Embed slots, last_page_len in [1, page_size], inputs that fit the context, mask rows that
// cover the context and show at least one slot, outputs that read existing inputs, and no KV
// slot or output Embed written twice in the batch.
void validate_batch(const std::vector<SequenceInput>& batch, const ModelConfig& config,
                    uint32_t page_size, const SlotPool& pages, const SlotPool& embeds);

// Hybrid models: every sequence names an allocated recurrent state slot, no slot twice in the
// batch (a state advances once per forward), and a causal mask. Other models: no state slot.
void validate_batch_states(const std::vector<SequenceInput>& batch, const ModelConfig& config,
                           const SlotPool& states);

// copy_state / save_states / load_states: allocated slots, one image per slot.
void validate_state_slots(const char* handler, std::span<const uint32_t> slots,
                          const SlotPool& states);

void validate_embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> positions,
                           std::span<const uint32_t> slots, const ModelConfig& config,
                           const SlotPool& embeds);

// Both pages allocated and both ranges inside a page.
void validate_copy_kv(uint32_t src_page, uint32_t dst_page, uint32_t src_offset,
                      uint32_t dst_offset, uint32_t n, uint32_t page_size, const SlotPool& pages);

void validate_next_dist(uint32_t embed_slot, uint32_t top_k, const SlotPool& embeds);

// save_kv_pages / load_kv_pages: every page allocated and a buffer of exactly one image per page.
void validate_kv_images(const char* handler, std::span<const uint32_t> pages, size_t buffer_bytes,
                        size_t page_bytes, const SlotPool& slots);

}  // namespace pith
