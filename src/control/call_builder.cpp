#include "control/call_builder.h"

#include <fmt/format.h>

namespace pith {

namespace {

Failure bad_argument(std::string why) {
  return {Status::BadArgument, std::move(why)};
}
Failure bad_handle(std::string why) {
  return {Status::BadHandle, std::move(why)};
}

}  // namespace

CallType call_type(const Call& call) {
  struct {
    CallType operator()(const ForwardCall&) const { return CallType::Forward; }
    CallType operator()(const EmbedTokensCall&) const { return CallType::EmbedTokens; }
    CallType operator()(const NextDistCall&) const { return CallType::NextDist; }
    CallType operator()(const CopyKvCall&) const { return CallType::CopyKv; }
    CallType operator()(const CopyStateCall&) const { return CallType::CopyState; }
  } visitor;
  return std::visit(visitor, call);
}

Result<BuiltCall> build_forward(const CallLimits& limits, const HandleTable& pages,
                                const HandleTable& embeds, const HandleTable& states,
                                SequenceInput seq) {
  const uint32_t ps = limits.page_size;
  const bool by_tokens = !seq.tokens.empty();
  if (by_tokens == !seq.embed_slots.empty())
    return bad_argument("forward needs either input tokens or input embeds");
  const size_t n = seq.n_inputs();
  if (seq.positions.size() != n)
    return bad_argument(fmt::format("{} inputs but {} positions", n, seq.positions.size()));
  if (seq.kv_pages.empty()) return bad_argument("forward needs at least one KV page");
  if (seq.last_page_len == 0 || seq.last_page_len > ps)
    return bad_argument(fmt::format("last_page_len {} not in [1, {}]", seq.last_page_len, ps));
  const size_t ctx = context_slots(seq, ps);
  if (n > ctx)
    return bad_argument(fmt::format("{} inputs do not fit a context of {} slots", n, ctx));
  for (int32_t t : seq.tokens)
    if (t < 0 || static_cast<uint32_t>(t) >= limits.vocab_size)
      return bad_argument(
          fmt::format("token id {} outside vocabulary of {}", t, limits.vocab_size));
  if (!seq.mask.empty()) {
    if (seq.mask.size() != n)
      return bad_argument(fmt::format("mask has {} rows for {} inputs", seq.mask.size(), n));
    if (limits.recurrent)
      return bad_argument(
          "attention masks are not supported on a model with recurrent layers (its state "
          "advances over every input in order)");
    for (const auto& runs : seq.mask) {
      uint64_t sum = 0;
      for (uint32_t r : runs) sum += r;
      if (sum != ctx)
        return bad_argument(fmt::format("mask runs cover {} slots, context has {}", sum, ctx));
    }
  }

  BuiltCall built;
  CallInfo& info = built.info;
  info.type = CallType::Forward;
  info.n_tokens = static_cast<uint32_t>(n);
  info.splittable = n > 1;
  // The inputs write slots [ctx - n, ctx): pages from there on are written, earlier ones read.
  const size_t first_write_page = (ctx - n) / ps;
  for (size_t i = 0; i < seq.kv_pages.size(); ++i) {
    auto p = pages.lookup(seq.kv_pages[i]);
    if (!p) return bad_handle(fmt::format("page handle {}", seq.kv_pages[i]));
    seq.kv_pages[i] = *p;
    built.held_pages.push_back(*p);
    (i >= first_write_page ? info.writes : info.reads).push_back(*p);
  }
  for (auto& e : seq.embed_slots) {
    auto p = embeds.lookup(e);
    if (!p) return bad_handle(fmt::format("embed handle {}", e));
    e = *p;
    built.held_embeds.push_back(*p);
    info.reads.push_back(*p | kEmbedTag);
  }
  for (auto& o : seq.outputs) {
    if (o.input_index >= n)
      return bad_argument(fmt::format("output for input {} of {}", o.input_index, n));
    if (o.kind == OutputKind::TopK && (o.top_k == 0 || o.top_k > limits.vocab_size))
      return bad_argument(fmt::format("top_k {} not in [1, {}]", o.top_k, limits.vocab_size));
    if (o.kind == OutputKind::Embed) {
      auto p = embeds.lookup(o.embed_slot);
      if (!p) return bad_handle(fmt::format("output embed handle {}", o.embed_slot));
      o.embed_slot = *p;
      built.held_embeds.push_back(*p);
      info.writes.push_back(*p | kEmbedTag);
    }
  }
  if (limits.recurrent) {
    if (seq.state_slot == SequenceInput::kNoState)
      return bad_argument(
          "the model has recurrent layers: bind a state to the queue first (state_alloc, "
          "queue_set_state)");
    auto s = states.lookup(seq.state_slot);
    if (!s) return bad_handle(fmt::format("state handle {}", seq.state_slot));
    seq.state_slot = *s;
    built.held_states.push_back(*s);
    info.writes.push_back(*s | kStateTag);
  } else if (seq.state_slot != SequenceInput::kNoState) {
    return bad_argument("the model has no recurrent layers: a forward names no state");
  }
  built.call = ForwardCall{std::move(seq), nullptr};
  return built;
}

Result<BuiltCall> build_embed_tokens(const CallLimits& limits, const HandleTable& embeds,
                                     std::vector<int32_t> tokens, std::vector<uint32_t> positions,
                                     std::span<const uint32_t> embed_handles) {
  if (tokens.size() != positions.size() || tokens.size() != embed_handles.size())
    return bad_argument(
        fmt::format("embed_tokens needs one position and one embed per token ({} tokens, "
                    "{} positions, {} embeds)",
                    tokens.size(), positions.size(), embed_handles.size()));
  for (int32_t t : tokens)
    if (t < 0 || static_cast<uint32_t>(t) >= limits.vocab_size)
      return bad_argument(
          fmt::format("token id {} outside vocabulary of {}", t, limits.vocab_size));
  BuiltCall built;
  built.info.type = CallType::EmbedTokens;
  built.info.n_tokens = static_cast<uint32_t>(tokens.size());
  EmbedTokensCall call;
  for (uint32_t h : embed_handles) {
    auto p = embeds.lookup(h);
    if (!p) return bad_handle(fmt::format("embed handle {}", h));
    call.slots.push_back(*p);
    built.held_embeds.push_back(*p);
    built.info.writes.push_back(*p | kEmbedTag);
  }
  call.tokens = std::move(tokens);
  call.positions = std::move(positions);
  built.call = std::move(call);
  return built;
}

Result<BuiltCall> build_next_dist(const CallLimits& limits, const HandleTable& embeds,
                                  uint32_t embed_handle, uint32_t top_k) {
  auto p = embeds.lookup(embed_handle);
  if (!p) return bad_handle(fmt::format("embed handle {}", embed_handle));
  if (top_k == 0 || top_k > limits.vocab_size)
    return bad_argument(fmt::format("top_k {} not in [1, {}]", top_k, limits.vocab_size));
  BuiltCall built;
  built.call = NextDistCall{*p, top_k};
  built.held_embeds.push_back(*p);
  built.info.type = CallType::NextDist;
  built.info.n_tokens = 1;
  built.info.reads.push_back(*p | kEmbedTag);
  return built;
}

Result<BuiltCall> build_copy_kv(const CallLimits& limits, const HandleTable& pages,
                                uint32_t src_handle, uint32_t dst_handle, uint32_t src_offset,
                                uint32_t dst_offset, uint32_t n) {
  const uint32_t ps = limits.page_size;
  auto src = pages.lookup(src_handle);
  if (!src) return bad_handle(fmt::format("copy_kv source page handle {}", src_handle));
  auto dst = pages.lookup(dst_handle);
  if (!dst) return bad_handle(fmt::format("copy_kv destination page handle {}", dst_handle));
  if (n == 0 || uint64_t{src_offset} + n > ps || uint64_t{dst_offset} + n > ps)
    return bad_argument(fmt::format("copy of {} slots from {} to {} exceeds page size {}", n,
                                    src_offset, dst_offset, ps));
  BuiltCall built;
  built.call = CopyKvCall{*src, *dst, src_offset, dst_offset, n};
  built.held_pages = {*src, *dst};
  built.info.type = CallType::CopyKv;
  built.info.n_tokens = 0;
  built.info.n_seqs = 0;
  built.info.reads.push_back(*src);
  built.info.writes.push_back(*dst);
  return built;
}

Result<BuiltCall> build_copy_state(const HandleTable& states, uint32_t src_handle,
                                   uint32_t dst_handle) {
  auto src = states.lookup(src_handle);
  if (!src) return bad_handle(fmt::format("copy_state source state handle {}", src_handle));
  auto dst = states.lookup(dst_handle);
  if (!dst) return bad_handle(fmt::format("copy_state destination state handle {}", dst_handle));
  BuiltCall built;
  built.call = CopyStateCall{*src, *dst};
  built.held_states = {*src, *dst};
  built.info.type = CallType::CopyState;
  built.info.n_tokens = 0;
  built.info.n_seqs = 0;
  built.info.reads.push_back(*src | kStateTag);
  built.info.writes.push_back(*dst | kStateTag);
  return built;
}

}  // namespace pith
