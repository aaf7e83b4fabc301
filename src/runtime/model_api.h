// ModelApi: the abstract interface through which the runtime reaches the control layer for every
// model-facing inferlet call (paper Table 1). The runtime decodes guest arguments (pointers,
// lengths, handle arrays) into plain host values and calls these; it never sees physical pages.
//
// Ownership and isolation: the runtime opens one ModelSession per instance, lazily, at its first
// model call. Every handle (model, queue, KV page, embedding) is issued by the session and is only
// meaningful inside it, so an instance cannot name another instance's resources. Destroying the
// session (when the instance ends, for any reason) releases everything it still holds, except
// pages published with export_kvpages, which the control layer keeps until unexported.
//
// Threading: session methods are called on the instance's scheduler thread (on its fiber) and
// block only through Parking (KV pressure: an allocation waiting for pages, a suspended instance
// waiting to be resumed); long work is queued and completed later through a Completion, which may
// be called from any thread (exactly once; the runtime ignores completions of futures the guest
// already dropped).
//
// Errors: a call returns (or completes with) a pith_status_t; why it failed ("mask runs cover 40
// slots, context has 48") goes to the instance's log through the session's ErrorLog, so the
// guest branches on the code and its author reads the reason.
#pragma once

#include <pith/abi.h>
#include <pith/token_trie.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pith::runtime {

// Completes a guest future: status (PITH_OK or an error code) and result bytes laid out as
// documented in abi.h for the call that created it.
using Completion = std::function<void(pith_status_t status, std::string result)>;

// Writes one line to the instance's log stream (any thread; a no-op once the instance is gone).
using ErrorLog = std::function<void(std::string message)>;

// How a session blocks its instance: park() suspends the calling fiber until wake() (any thread)
// or a kill, and returns false when the instance is being killed. A session without it never
// waits: calls that would wait fail at once.
struct Parking {
  std::function<bool()> park;
  std::function<void()> wake;
};

struct ForwardArgs {
  std::vector<uint32_t> kv_pages;
  uint32_t last_page_len = 0;
  std::vector<uint32_t> input_embs;
  std::vector<uint32_t> output_embs;
  uint32_t adapter = 0;  // 0 = none
};

struct ForwardTokensArgs {
  std::vector<uint32_t> tokens, positions;
  std::vector<uint32_t> kv_pages;
  uint32_t last_page_len = 0;
  std::vector<uint8_t> attn_mask;  // empty = causal
  std::vector<uint32_t> output_indices;
  uint32_t top_k = 0;
  uint32_t adapter = 0;
  // forward_tokens_allowed: one token mask per output, back to back; empty = every token.
  std::vector<uint64_t> allowed;
  // forward_tokens_adjusted: logit adjustments as the guest sent them (the session checks them).
  std::vector<pith_logit_adjust_t> adjust;
};

class ModelSession {
 public:
  virtual ~ModelSession() = default;

  // Set once by the Instance right after open_session, before any call.
  void set_error_log(ErrorLog log) { error_log_ = std::move(log); }
  virtual void set_parking(Parking parking) { (void)parking; }

  // Models and traits.
  virtual pith_status_t open_model(std::string_view name, uint32_t* model) = 0;
  virtual pith_status_t model_traits(uint32_t model, std::vector<std::string>* traits) = 0;
  virtual pith_status_t model_info(uint32_t model, pith_model_info_t* info) = 0;

  // Tokenizer (synchronous, cheap).
  virtual pith_status_t tokenize(uint32_t model, std::string_view text,
                                 std::vector<uint32_t>* tokens) = 0;
  virtual pith_status_t detokenize(uint32_t model, std::span<const uint32_t> tokens,
                                   std::string* text) = 0;
  virtual pith_status_t vocab(uint32_t model, std::string* serialized) = 0;
  // Ids of control/unknown tokens; sessions without a tokenizer keep this default.
  virtual pith_status_t vocab_special(uint32_t model, std::vector<uint32_t>* ids) {
    (void)model;
    (void)ids;
    return PITH_ERR_UNSUPPORTED;
  }
  // The vocabulary trie, special tokens left out (abi.h vocab_trie), shared by every session of
  // the model; sessions without a tokenizer keep this default.
  virtual pith_status_t vocab_trie(uint32_t model, std::shared_ptr<const TokenTrie>* trie) {
    (void)model;
    (void)trie;
    return PITH_ERR_UNSUPPORTED;
  }

  // Queues.
  virtual pith_status_t create_queue(uint32_t model, uint32_t* queue) = 0;
  virtual pith_status_t destroy_queue(uint32_t queue) = 0;
  virtual pith_status_t synchronize(uint32_t queue, Completion done) = 0;
  virtual pith_status_t set_queue_priority(uint32_t queue, uint32_t priority) = 0;

  // LoRA adapters (abi.h adapter_open / queue_set_adapter): a handle for a loaded adapter by
  // name, and a queue's default adapter (its forwards and its part of the prefix cache).
  virtual pith_status_t open_adapter(uint32_t model, std::string_view name, uint32_t* adapter) {
    (void)model, (void)name, (void)adapter;
    return PITH_ERR_NOT_FOUND;
  }
  virtual pith_status_t set_queue_adapter(uint32_t queue, uint32_t adapter) {
    (void)queue;
    return adapter == 0 ? PITH_OK : PITH_ERR_BAD_HANDLE;
  }

  // Resources. kv_policy: PITH_KV_WAIT (default) or PITH_KV_FAIL_FAST (abi.h).
  virtual pith_status_t kv_policy(uint32_t model, uint32_t policy) {
    (void)model;
    (void)policy;
    return PITH_ERR_UNSUPPORTED;
  }
  virtual pith_status_t alloc_kvpages(uint32_t queue, uint32_t n, std::vector<uint32_t>* out) = 0;
  virtual pith_status_t dealloc_kvpages(uint32_t queue, std::span<const uint32_t> pages) = 0;
  virtual pith_status_t alloc_embs(uint32_t queue, uint32_t n, std::vector<uint32_t>* out) = 0;
  virtual pith_status_t dealloc_embs(uint32_t queue, std::span<const uint32_t> embs) = 0;
  virtual pith_status_t copy_kvpage(uint32_t queue, uint32_t src, uint32_t dst, uint32_t src_offset,
                                    uint32_t dst_offset, uint32_t count) = 0;
  virtual pith_status_t mask_kvpage(uint32_t queue, uint32_t page,
                                    std::span<const uint8_t> mask) = 0;
  virtual pith_status_t export_kvpages(uint32_t queue, std::span<const uint32_t> pages,
                                       std::string_view name) = 0;
  virtual pith_status_t unexport_kvpages(uint32_t queue, std::string_view name) = 0;
  virtual pith_status_t import_kvpages(uint32_t queue, std::string_view name,
                                       std::vector<uint32_t>* pages) = 0;
  // The server's radix prefix cache (abi.h prefix_match / prefix_insert).
  virtual pith_status_t prefix_match(uint32_t queue, std::span<const uint32_t> tokens,
                                     std::vector<uint32_t>* pages, uint32_t* matched) = 0;
  virtual pith_status_t prefix_insert(uint32_t queue, std::span<const uint32_t> tokens,
                                      std::span<const uint32_t> pages) = 0;

  // Recurrent states of hybrid models (abi.h "recurrent states"): handles issued by the
  // session like pages; a queue's forwards advance the state bound to it. Sessions over models
  // without recurrent layers keep these defaults.
  virtual pith_status_t alloc_states(uint32_t queue, uint32_t n, std::vector<uint32_t>* out) {
    (void)queue, (void)n, (void)out;
    return PITH_ERR_UNSUPPORTED;
  }
  virtual pith_status_t dealloc_states(uint32_t queue, std::span<const uint32_t> states) {
    (void)queue, (void)states;
    return PITH_ERR_UNSUPPORTED;
  }
  virtual pith_status_t copy_state(uint32_t queue, uint32_t src, uint32_t dst) {
    (void)queue, (void)src, (void)dst;
    return PITH_ERR_UNSUPPORTED;
  }
  virtual pith_status_t set_queue_state(uint32_t queue, uint32_t state) {
    (void)queue, (void)state;
    return PITH_ERR_UNSUPPORTED;
  }
  virtual pith_status_t export_state(uint32_t queue, uint32_t state, std::string_view name) {
    (void)queue, (void)state, (void)name;
    return PITH_ERR_UNSUPPORTED;
  }
  virtual pith_status_t unexport_state(uint32_t queue, std::string_view name) {
    (void)queue, (void)name;
    return PITH_ERR_UNSUPPORTED;
  }
  virtual pith_status_t import_state(uint32_t queue, std::string_view name, uint32_t* state) {
    (void)queue, (void)name, (void)state;
    return PITH_ERR_UNSUPPORTED;
  }
  // The prefix cache with state checkpoints (hybrid models).
  virtual pith_status_t prefix_match_state(uint32_t queue, std::span<const uint32_t> tokens,
                                           std::vector<uint32_t>* pages, uint32_t* matched,
                                           uint32_t* state, uint32_t* shared) {
    (void)queue, (void)tokens, (void)pages, (void)matched, (void)state, (void)shared;
    return PITH_ERR_BAD_ARGUMENT;
  }
  virtual pith_status_t prefix_insert_state(uint32_t queue, std::span<const uint32_t> tokens,
                                            std::span<const uint32_t> pages, uint32_t state) {
    (void)queue, (void)tokens, (void)pages, (void)state;
    return PITH_ERR_BAD_ARGUMENT;
  }

  // Compute.
  virtual pith_status_t embed_txt(uint32_t queue, std::span<const uint32_t> tokens,
                                  std::span<const uint32_t> positions,
                                  std::span<const uint32_t> embs) = 0;
  virtual pith_status_t embed_img(uint32_t queue, std::span<const uint8_t> image,
                                  std::span<const uint32_t> embs) = 0;
  virtual pith_status_t forward(uint32_t queue, const ForwardArgs& args) = 0;
  virtual pith_status_t next_dist(uint32_t queue, uint32_t emb, uint32_t top_k,
                                  Completion done) = 0;
  virtual pith_status_t forward_tokens(uint32_t queue, const ForwardTokensArgs& args,
                                       Completion done) = 0;

 protected:
  // A copy may be kept by completions that outlive the session.
  const ErrorLog& error_log() const { return error_log_; }

 private:
  ErrorLog error_log_;
};

class ModelApi {
 public:
  virtual ~ModelApi() = default;
  virtual std::vector<std::string> model_names() = 0;
  // One session per instance; instance_id is for accounting and logs only.
  virtual std::unique_ptr<ModelSession> open_session(uint64_t instance_id) = 0;
};

}  // namespace pith::runtime
