// Call building: pure functions from an instance's request (handles, tokens, masks) to a
// validated call over physical ids. Everything a bad request can get wrong is caught here, with
// a message that names it, so a bad call fails alone and never reaches a batch. No backend and
// no lock: the controller passes the model's limits and the instance's handle tables.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "control/calls.h"
#include "control/handle_table.h"

namespace pith {

// What validation needs to know about the model.
struct CallLimits {
  uint32_t page_size = 0;
  uint32_t vocab_size = 0;
  bool recurrent = false;  // hybrid model: every forward names its sequence's state
};

// A validated call, ready to queue: the call over physical ids, what the batch scheduler needs to
// know about it, and the references it holds until it completes.
struct BuiltCall {
  Call call;
  CallInfo info;
  std::vector<uint32_t> held_pages, held_embeds, held_states;
};

// `seq` names pages and Embeds by handle (kv_pages, embed_slots, Embed outputs' embed_slot), and
// on a hybrid model its recurrent state (state_slot, a handle in `states`).
Result<BuiltCall> build_forward(const CallLimits& limits, const HandleTable& pages,
                                const HandleTable& embeds, const HandleTable& states,
                                SequenceInput seq);
Result<BuiltCall> build_embed_tokens(const CallLimits& limits, const HandleTable& embeds,
                                     std::vector<int32_t> tokens, std::vector<uint32_t> positions,
                                     std::span<const uint32_t> embed_handles);
Result<BuiltCall> build_next_dist(const CallLimits& limits, const HandleTable& embeds,
                                  uint32_t embed_handle, uint32_t top_k);
Result<BuiltCall> build_copy_kv(const CallLimits& limits, const HandleTable& pages,
                                uint32_t src_handle, uint32_t dst_handle, uint32_t src_offset,
                                uint32_t dst_offset, uint32_t n);

Result<BuiltCall> build_copy_state(const HandleTable& states, uint32_t src_handle,
                                   uint32_t dst_handle);

// Slots a forward's context covers: every page but the last is full.
inline size_t context_slots(const SequenceInput& seq, uint32_t page_size) {
  return seq.kv_pages.empty() ? 0
                              : (seq.kv_pages.size() - 1) * size_t{page_size} + seq.last_page_len;
}

}  // namespace pith
