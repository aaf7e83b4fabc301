// Host side of abi.h "models and traits" and "tokenizer": decoded and routed to the instance's
// ModelSession (model_api.h). model_list needs no session.
#include "runtime/api/model_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

namespace {
std::string join_lines(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "\n" : "") + v[i];
  return out;
}
}  // namespace

extern "C" {

u32 Z_pithZ_model_list(Z_pith_instance_t* c, u32 buf, u32 cap, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    ModelApi* api = inst.services().model;
    if (!api) return PITH_ERR_NO_MODEL;
    return GuestMemory(inst).output(buf, cap, len, join_lines(api->model_names()));
  });
}

u32 Z_pithZ_model_open(Z_pith_instance_t* c, u32 name, u32 name_len, u32 model_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(model_out, 4);
    uint32_t model = 0;
    pith_status_t st = session_of(inst).open_model(mem.string(name, name_len), &model);
    if (st == PITH_OK) mem.store<uint32_t>(model_out, model);
    return st;
  });
}

u32 Z_pithZ_adapter_open(Z_pith_instance_t* c, u32 model, u32 name, u32 name_len, u32 out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(out, 4);
    uint32_t adapter = 0;
    pith_status_t st = session_of(inst).open_adapter(model, mem.string(name, name_len), &adapter);
    if (st == PITH_OK) mem.store<uint32_t>(out, adapter);
    return st;
  });
}

u32 Z_pithZ_model_traits(Z_pith_instance_t* c, u32 model, u32 buf, u32 cap, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    std::vector<std::string> traits;
    pith_status_t st = session_of(inst).model_traits(model, &traits);
    if (st != PITH_OK) return st;
    return GuestMemory(inst).output(buf, cap, len, join_lines(traits));
  });
}

u32 Z_pithZ_model_info(Z_pith_instance_t* c, u32 model, u32 info_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(info_out, sizeof(pith_model_info_t));
    pith_model_info_t info{};
    pith_status_t st = session_of(inst).model_info(model, &info);
    if (st == PITH_OK) mem.store(info_out, info);
    return st;
  });
}

u32 Z_pithZ_tokenize(Z_pith_instance_t* c, u32 model, u32 text, u32 text_len, u32 tokens, u32 cap,
                     u32 n_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(n_out, 4);
    std::vector<uint32_t> ids;
    pith_status_t st = session_of(inst).tokenize(model, mem.string(text, text_len), &ids);
    if (st != PITH_OK) return st;
    uint32_t n = static_cast<uint32_t>(ids.size());
    uint32_t w = n < cap ? n : cap;
    mem.store_u32s(tokens, std::span<const uint32_t>(ids.data(), w));
    mem.store<uint32_t>(n_out, n);
    return n > cap ? PITH_ERR_BUFFER_TOO_SMALL : PITH_OK;
  });
}

u32 Z_pithZ_detokenize(Z_pith_instance_t* c, u32 model, u32 tokens, u32 n, u32 buf, u32 cap,
                       u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    check_count(n);
    GuestMemory mem(inst);
    std::vector<uint32_t> ids = mem.u32s(tokens, n);
    std::string text;
    pith_status_t st = session_of(inst).detokenize(model, ids, &text);
    if (st != PITH_OK) return st;
    return mem.output(buf, cap, len, text);
  });
}

u32 Z_pithZ_vocab_special(Z_pith_instance_t* c, u32 model, u32 ids, u32 cap, u32 n_out) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    GuestMemory mem(inst);
    mem.bytes(n_out, 4);
    std::vector<uint32_t> special;
    pith_status_t st = session_of(inst).vocab_special(model, &special);
    if (st != PITH_OK) return st;
    uint32_t n = static_cast<uint32_t>(special.size());
    uint32_t w = n < cap ? n : cap;
    mem.store_u32s(ids, std::span<const uint32_t>(special.data(), w));
    mem.store<uint32_t>(n_out, n);
    return n > cap ? PITH_ERR_BUFFER_TOO_SMALL : PITH_OK;
  });
}

u32 Z_pithZ_vocab_trie(Z_pith_instance_t* c, u32 model, u32 buf, u32 cap, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    std::shared_ptr<const pith::TokenTrie> trie;
    pith_status_t st = session_of(inst).vocab_trie(model, &trie);
    if (st != PITH_OK) return st;
    if (buf % 4 != 0 && cap > 0) return PITH_ERR_BAD_ARGUMENT;  // words: the guest reads them so
    return GuestMemory(inst).output(
        buf, cap, len,
        std::string_view(reinterpret_cast<const char*>(trie->flat_data()), trie->flat_words() * 4));
  });
}

u32 Z_pithZ_vocab_get(Z_pith_instance_t* c, u32 model, u32 buf, u32 cap, u32 len) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    std::string vocab;
    pith_status_t st = session_of(inst).vocab(model, &vocab);
    if (st != PITH_OK) return st;
    return GuestMemory(inst).output(buf, cap, len, vocab);
  });
}

}  // extern "C"
