// Argument and shape validation shared by every backend. See batch_validation.h.
#include "backend/batch_validation.h"

#include <algorithm>

#include "common/error.h"

namespace pith {

namespace {

// Sorted, unique, in the vocabulary, values adjustment_values_ok.
void check_adjustments(const LogitAdjustments& adjust, OutputKind kind, uint32_t vocab, size_t si,
                       size_t o) {
  if (kind != OutputKind::TopK)
    fail("forward: sequence {}: output {} has logit adjustments but is not a top-K output", si, o);
  for (size_t i = 0; i < adjust.size(); ++i) {
    const LogitAdjustment& a = adjust[i];
    if (a.token >= vocab)
      fail("forward: sequence {}: output {}: adjusted token {} outside the vocabulary of {}", si, o,
           a.token, vocab);
    if (i > 0 && a.token <= adjust[i - 1].token)
      fail(
          "forward: sequence {}: output {}: logit adjustments must be sorted by token, each "
          "token once ({} after {})",
          si, o, a.token, adjust[i - 1].token);
    if (!adjustment_values_ok(a))
      fail(
          "forward: sequence {}: output {}: token {}'s adjustment (bias {}, repetition {}, "
          "penalty {}) needs finite values and a repetition penalty above 0",
          si, o, a.token, a.bias, a.repetition, a.penalty);
  }
}

}  // namespace

void validate_batch(const std::vector<SequenceInput>& batch, const ModelConfig& c, uint32_t ps,
                    const SlotPool& pages, const SlotPool& embeds) {
  // Reused across calls so a steady-state forward does not allocate here.
  thread_local std::vector<uint64_t> keys;
  thread_local std::vector<uint32_t> out_slots;
  keys.clear();
  out_slots.clear();
  for (size_t si = 0; si < batch.size(); ++si) {
    const SequenceInput& s = batch[si];
    const size_t n = s.n_inputs();
    if (!s.tokens.empty() && !s.embed_slots.empty())
      fail("forward: sequence {}: has both tokens ({}) and embed_slots ({}); give one", si,
           s.tokens.size(), s.embed_slots.size());
    if (n == 0) fail("forward: sequence {}: no inputs", si);
    if (s.positions.size() != n)
      fail("forward: sequence {}: {} positions for {} inputs", si, s.positions.size(), n);
    for (size_t i = 0; i < s.tokens.size(); ++i)
      if (s.tokens[i] < 0 || uint32_t(s.tokens[i]) >= c.vocab_size)
        fail("forward: sequence {}: token {} at input {} out of range (vocab {})", si, s.tokens[i],
             i, c.vocab_size);
    for (size_t i = 0; i < s.embed_slots.size(); ++i)
      if (!embeds.allocated(s.embed_slots[i]))
        fail("forward: sequence {}: input Embed slot {} at input {} is not allocated", si,
             s.embed_slots[i], i);
    if (s.kv_pages.empty()) fail("forward: sequence {}: empty KV page table", si);
    for (size_t p = 0; p < s.kv_pages.size(); ++p)
      if (!pages.allocated(s.kv_pages[p]))
        fail("forward: sequence {}: KV page {} (entry {}) is {}", si, s.kv_pages[p], p,
             pages.valid(s.kv_pages[p]) ? "not allocated" : "out of range");
    if (s.last_page_len == 0 || s.last_page_len > ps)
      fail("forward: sequence {}: last_page_len {} must be in [1, {}]", si, s.last_page_len, ps);
    const uint64_t ctx = (uint64_t(s.kv_pages.size()) - 1) * ps + s.last_page_len;
    if (n > ctx)
      fail("forward: sequence {}: {} inputs do not fit a context of {} slots", si, n, ctx);
    if (ctx > UINT32_MAX) fail("forward: sequence {}: context of {} slots is too long", si, ctx);
    if (!s.mask.empty()) {
      if (s.mask.size() != n)
        fail("forward: sequence {}: mask has {} rows for {} inputs", si, s.mask.size(), n);
      for (size_t i = 0; i < n; ++i) {
        uint64_t total = 0, visible = 0;
        for (size_t r = 0; r < s.mask[i].size(); ++r) {
          total += s.mask[i][r];
          if (r % 2 == 0) visible += s.mask[i][r];
        }
        if (total != ctx)
          fail("forward: sequence {}: mask runs of input {} sum to {}, context is {} slots", si, i,
               total, ctx);
        if (visible == 0) fail("forward: sequence {}: mask of input {} hides every slot", si, i);
      }
    }
    for (size_t o = 0; o < s.outputs.size(); ++o) {
      const OutputSpec& spec = s.outputs[o];
      if (spec.input_index >= n)
        fail("forward: sequence {}: output {} reads input {} of {}", si, o, spec.input_index, n);
      if (spec.kind == OutputKind::TopK && spec.top_k == 0)
        fail("forward: sequence {}: output {} asks for top-0", si, o);
      if (spec.allowed && spec.kind != OutputKind::TopK)
        fail("forward: sequence {}: output {} has a token mask but is not a top-K output", si, o);
      if (spec.allowed && spec.allowed->size() != (uint64_t{c.vocab_size} + 63) / 64)
        fail(
            "forward: sequence {}: output {}'s token mask has {} words; a vocabulary of {} "
            "needs {}",
            si, o, spec.allowed->size(), c.vocab_size, (uint64_t{c.vocab_size} + 63) / 64);
      if (spec.adjust) check_adjustments(*spec.adjust, spec.kind, c.vocab_size, si, o);
      if (spec.kind == OutputKind::Embed) {
        if (!embeds.allocated(spec.embed_slot))
          fail("forward: sequence {}: output Embed slot {} is not allocated", si, spec.embed_slot);
        out_slots.push_back(spec.embed_slot);
      }
    }
    for (uint64_t slot = ctx - n; slot < ctx; ++slot)
      keys.push_back(uint64_t(s.kv_pages[slot / ps]) * ps + slot % ps);
  }
  std::sort(keys.begin(), keys.end());
  auto dup = std::adjacent_find(keys.begin(), keys.end());
  if (dup != keys.end())
    fail("forward: KV slot {} of page {} is written twice in one batch", *dup % ps, *dup / ps);
  std::sort(out_slots.begin(), out_slots.end());
  auto dup_slot = std::adjacent_find(out_slots.begin(), out_slots.end());
  if (dup_slot != out_slots.end())
    fail("forward: output Embed slot {} is written twice in one batch", *dup_slot);
}

void validate_batch_states(const std::vector<SequenceInput>& batch, const ModelConfig& c,
                           const SlotPool& states) {
  const bool hybrid = c.hybrid();
  thread_local std::vector<uint32_t> used;
  used.clear();
  for (size_t si = 0; si < batch.size(); ++si) {
    const SequenceInput& s = batch[si];
    if (!hybrid) {
      if (s.state_slot != SequenceInput::kNoState)
        fail("forward: sequence {}: state slot {} given, but the model has no recurrent layers", si,
             s.state_slot);
      continue;
    }
    if (s.state_slot == SequenceInput::kNoState)
      fail("forward: sequence {}: the model has recurrent layers; give a state slot", si);
    if (!states.allocated(s.state_slot))
      fail("forward: sequence {}: state slot {} is {}", si, s.state_slot,
           states.valid(s.state_slot) ? "not allocated" : "out of range");
    if (!s.mask.empty())
      fail(
          "forward: sequence {}: custom attention masks are not supported on a model with "
          "recurrent layers (its state advances over the inputs in order)",
          si);
    used.push_back(s.state_slot);
  }
  std::sort(used.begin(), used.end());
  if (auto it = std::adjacent_find(used.begin(), used.end()); it != used.end())
    fail("forward: state slot {} is used by two sequences of the batch", *it);
}

void validate_state_slots(const char* handler, std::span<const uint32_t> slots,
                          const SlotPool& states) {
  for (uint32_t id : slots)
    if (!states.allocated(id))
      fail("{}: state slot {} is {}", handler, id,
           states.valid(id) ? "not allocated" : "out of range");
}

void validate_embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> positions,
                           std::span<const uint32_t> slots, const ModelConfig& c,
                           const SlotPool& embeds) {
  if (tokens.size() != positions.size() || tokens.size() != slots.size())
    fail("embed_tokens: {} tokens, {} positions, {} slots: lengths must match", tokens.size(),
         positions.size(), slots.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= c.vocab_size)
      fail("embed_tokens: token {} at index {} out of range (vocab {})", tokens[i], i,
           c.vocab_size);
    if (!embeds.allocated(slots[i]))
      fail("embed_tokens: Embed slot {} at index {} is not allocated", slots[i], i);
  }
}

void validate_copy_kv(uint32_t src_page, uint32_t dst_page, uint32_t src_offset,
                      uint32_t dst_offset, uint32_t n, uint32_t page_size, const SlotPool& pages) {
  if (!pages.allocated(src_page) || !pages.allocated(dst_page))
    fail("copy_kv: page {} is not allocated", pages.allocated(src_page) ? dst_page : src_page);
  if (uint64_t{src_offset} + n > page_size || uint64_t{dst_offset} + n > page_size)
    fail("copy_kv: range past the page end (src offset {}, dst offset {}, n {}, page size {})",
         src_offset, dst_offset, n, page_size);
}

void validate_kv_images(const char* handler, std::span<const uint32_t> pages, size_t buffer_bytes,
                        size_t page_bytes, const SlotPool& slots) {
  for (uint32_t p : pages)
    if (!slots.allocated(p)) fail("{}: page {} is not allocated", handler, p);
  if (buffer_bytes != pages.size() * page_bytes)
    fail("{}: buffer of {} bytes for {} pages of {} bytes", handler, buffer_bytes, pages.size(),
         page_bytes);
}

void validate_next_dist(uint32_t embed_slot, uint32_t top_k, const SlotPool& embeds) {
  if (!embeds.allocated(embed_slot)) fail("next_dist: Embed slot {} is not allocated", embed_slot);
  if (top_k == 0) fail("next_dist: top_k must be at least 1");
}

}  // namespace pith
