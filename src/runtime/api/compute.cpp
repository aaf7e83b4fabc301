// Host side of abi.h "compute": embed, forward (plain, with adapter, fused token-level) and
// next_dist. Argument structs are read field by field from guest memory (wasm32 layout: 4-byte
// fields), every array bounds-checked, then routed to the instance's ModelSession.
#include "runtime/api/model_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

namespace {

ForwardArgs read_forward_args(const GuestMemory& mem, u32 args, u32 adapter) {
  auto field = [&](int i) { return mem.load<uint32_t>(args + 4 * i); };
  mem.bytes(args, sizeof(pith_forward_args_t));
  ForwardArgs a;
  uint32_t kv_n = field(1), in_n = field(4), out_n = field(6);
  check_count(kv_n);
  check_count(in_n);
  if (out_n > in_n) throw GuestError{PITH_ERR_BAD_ARGUMENT};
  a.kv_pages = mem.u32s(field(0), kv_n);
  a.last_page_len = field(2);
  a.input_embs = mem.u32s(field(3), in_n);
  a.output_embs = mem.u32s(field(5), out_n);
  a.adapter = adapter;
  return a;
}

}  // namespace

extern "C" {

u32 Z_pithZ_embed_txt(Z_pith_instance_t* c, u32 queue, u32 tokens, u32 positions, u32 n, u32 embs) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    GuestMemory mem(inst);
    return session_of(inst).embed_txt(queue, mem.u32s(tokens, n), mem.u32s(positions, n),
                                      mem.u32s(embs, n));
  });
}

u32 Z_pithZ_embed_img(Z_pith_instance_t* c, u32 queue, u32 image, u32 image_len, u32 embs, u32 n) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    GuestMemory mem(inst);
    const uint8_t* img = mem.bytes(image, image_len);
    return session_of(inst).embed_img(queue, std::span<const uint8_t>(img, image_len),
                                      mem.u32s(embs, n));
  });
}

u32 Z_pithZ_forward(Z_pith_instance_t* c, u32 queue, u32 args) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    return session_of(inst).forward(queue, read_forward_args(GuestMemory(inst), args, 0));
  });
}

u32 Z_pithZ_forward_with_adapter(Z_pith_instance_t* c, u32 queue, u32 adapter, u32 args) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    if (adapter == 0) return PITH_ERR_BAD_HANDLE;
    return session_of(inst).forward(queue, read_forward_args(GuestMemory(inst), args, adapter));
  });
}

u32 Z_pithZ_next_dist(Z_pith_instance_t* c, u32 queue, u32 emb, u32 top_k, u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    ModelSession& s = session_of(inst);
    return start_future(inst, future_out, [&](Completion done) {
      return s.next_dist(queue, emb, top_k, std::move(done));
    });
  });
}

namespace {

ForwardTokensArgs read_forward_tokens_args(const GuestMemory& mem, u32 args) {
  mem.bytes(args, sizeof(pith_forward_tokens_args_t));
  auto field = [&](int i) { return mem.load<uint32_t>(args + 4 * i); };
  ForwardTokensArgs a;
  uint32_t n = field(2), kv_n = field(4), mask_len = field(7), out_n = field(9);
  check_count(n);
  check_count(kv_n);
  if (out_n > n) throw GuestError{PITH_ERR_BAD_ARGUMENT};
  a.tokens = mem.u32s(field(0), n);
  a.positions = mem.u32s(field(1), n);
  a.kv_pages = mem.u32s(field(3), kv_n);
  a.last_page_len = field(5);
  if (uint32_t mask = field(6)) {  // the session checks mask_len against the context length
    const uint8_t* m = mem.bytes(mask, mask_len);
    a.attn_mask.assign(m, m + mask_len);
  }
  a.output_indices = mem.u32s(field(8), out_n);
  for (uint32_t i : a.output_indices)
    if (i >= n) throw GuestError{PITH_ERR_BAD_ARGUMENT};
  a.top_k = field(10);
  a.adapter = field(11);
  return a;
}

// forward_tokens_allowed / _adjusted: the token masks' words (the session checks their count
// against the vocabulary and the outputs).
void read_token_masks(const GuestMemory& mem, u32 allowed, u32 allowed_words,
                      ForwardTokensArgs& a) {
  const uint8_t* words = mem.bytes(allowed, uint64_t{allowed_words} * 8);
  a.allowed.resize(allowed_words);
  if (allowed_words) std::memcpy(a.allowed.data(), words, size_t{allowed_words} * 8);
}

}  // namespace

u32 Z_pithZ_forward_tokens(Z_pith_instance_t* c, u32 queue, u32 args, u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    ForwardTokensArgs a = read_forward_tokens_args(GuestMemory(inst), args);
    ModelSession& s = session_of(inst);
    return start_future(inst, future_out, [&](Completion done) {
      return s.forward_tokens(queue, a, std::move(done));
    });
  });
}

u32 Z_pithZ_forward_tokens_allowed(Z_pith_instance_t* c, u32 queue, u32 args, u32 allowed,
                                   u32 allowed_words, u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    ForwardTokensArgs a = read_forward_tokens_args(mem, args);
    read_token_masks(mem, allowed, allowed_words, a);
    ModelSession& s = session_of(inst);
    return start_future(inst, future_out, [&](Completion done) {
      return s.forward_tokens(queue, a, std::move(done));
    });
  });
}

u32 Z_pithZ_forward_tokens_adjusted(Z_pith_instance_t* c, u32 queue, u32 args, u32 allowed,
                                    u32 allowed_words, u32 adjusts, u32 adjust_count,
                                    u32 future_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    ForwardTokensArgs a = read_forward_tokens_args(mem, args);
    read_token_masks(mem, allowed, allowed_words, a);
    check_count(adjust_count);
    static_assert(sizeof(pith_logit_adjust_t) == 20);  // the wasm32 layout: five 4-byte fields
    const uint8_t* bytes = mem.bytes(adjusts, uint64_t{adjust_count} * 20);
    a.adjust.resize(adjust_count);
    if (adjust_count) std::memcpy(a.adjust.data(), bytes, size_t{adjust_count} * 20);
    ModelSession& s = session_of(inst);
    return start_future(inst, future_out, [&](Completion done) {
      return s.forward_tokens(queue, a, std::move(done));
    });
  });
}

}  // extern "C"
