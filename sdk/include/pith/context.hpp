// pith/context.hpp: a token context over KV pages the inferlet owns, and the generate loop.
//
//   pith::Model model = PITH_TRY(pith::Model::open(""));
//   pith::Context ctx = PITH_TRY(pith::Context::create(model));
//   PITH_TRY(ctx.fill("Hello,"));
//   pith::Generation out = ctx.generate(pith::Sampler::greedy(), pith::Stop{.max_tokens = 10});
//
// A Context keeps, for every slot of its KV pages, the token and its position (positions are
// explicit, so pages can be dropped from the middle of a context). Tokens are appended as
// *pending* and computed by the next flush/decode_step, one fused forward each.
//
// Sharing: fork() shares the full pages with the child and copies the partial last page;
// pages that came from the prefix cache or an import are read-only and are copied before
// being written (copy-on-write). A per-instance reference count keeps a page shared by
// several contexts of this inferlet alive until the last one lets go.
//
// The server's prefix cache is used by default: the first flush looks up the longest cached
// prefix of the prompt and computes only the rest, then offers its full pages to the cache.
//
// Hybrid models (Model::recurrent(): recurrent layers beside attention) keep a recurrent state
// per context beside its pages, bound to the context's queue. fork() copies it; truncate()
// into computed tokens cannot rewind it, so the context recomputes itself into a fresh state
// at the next step (prefix cache checkpoints shorten that). The first flush computes the
// prompt up to where it leaves the prompts the cache holds (a shared system prompt) and up to
// its last page boundary, saving the state at each as a prefix-cache checkpoint, then computes
// the rest; a later prompt with either prefix resumes from its checkpoint. Attention masks
// (mask(), flush(mask)) and import_append are not available.
#pragma once

#include <algorithm>
#include <map>
#include <new>
#include <optional>
#include <pith/attention_mask.hpp>
#include <pith/hidden_state.hpp>
#include <pith/pith.hpp>
#include <pith/sampling.hpp>
#include <string>
#include <vector>

namespace pith {

namespace detail {
// Contexts of this instance that hold each page (fork shares pages inside one inferlet).
inline std::map<pith_kvpage_t, int>& page_refs() {
  static std::map<pith_kvpage_t, int> refs;
  return refs;
}
}  // namespace detail

struct Generation {
  std::string text;
  std::vector<uint32_t> tokens;
  std::string finish_reason;   // "length", "eos", "stop", or an error status name
  std::optional<Error> error;  // why generation ended early (finish_reason is its code's name)
};

class Context {
 public:
  static Result<Context> create(const Model& model) { return create(model, nullptr); }

  Context(Context&&) = default;
  // Not defaulted: the pages this context holds must be released before it takes the other's.
  Context& operator=(Context&& other) {
    if (this != &other) {
      this->~Context();
      new (this) Context(std::move(other));
    }
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() {
    release_pages(0);
    release_state();
  }

  const Model& model() const { return model_; }
  const Queue& queue() const { return queue_; }
  const pith_model_info_t& info() const { return info_; }
  // Every token that ends generation, the EOS first (Model::eos_tokens; empty: none).
  const std::vector<uint32_t>& eos_tokens() const { return eos_tokens_; }
  uint32_t page_size() const { return info_.tokens_per_page; }
  // Every token of the context, computed and pending, in slot order.
  const std::vector<uint32_t>& tokens() const { return tokens_; }
  // (On a hybrid model after truncate, tokens waiting to be recomputed count as computed.)
  size_t computed() const { return std::max(computed_, redo_); }
  const std::vector<pith_kvpage_t>& pages() const { return pages_; }
  // Prompt tokens this context computed itself (not served by the prefix cache or an import).
  uint32_t prefilled_tokens() const { return prefilled_; }
  // Every token this context computed itself, prompt and decode steps alike: equal to
  // computed() - cached/imported tokens when nothing was ever recomputed.
  uint32_t forwarded_tokens() const { return forwarded_; }
  // Prompt tokens served by the server's prefix cache at the first flush.
  uint32_t cached_tokens() const { return cached_; }
  void set_prefix_cache(bool on) { use_prefix_cache_ = on; }
  // Runs this context (and its forks) with a LoRA adapter (Model::open_adapter; 0: the base
  // model). Set it before the first flush: K/V already computed belongs to the old one. The
  // prefix cache is looked up and filled under the adapter.
  Status set_adapter(pith_adapter_t adapter) {
    PITH_TRY(check(pith_queue_set_adapter(queue_.handle(), adapter), "set adapter"));
    adapter_ = adapter;
    return {};
  }
  pith_adapter_t adapter() const { return adapter_; }
  // The position the next appended token gets (default: one after the last).
  void set_next_position(uint32_t p) { next_pos_ = p; }
  uint32_t next_position() const { return next_pos_; }

  // Appends text (tokenized by the model, special tokens recognised) or tokens as pending.
  Status fill(std::string_view text) {
    fill_tokens(PITH_TRY(model_.tokenize(text)));
    return {};
  }
  void fill_tokens(const std::vector<uint32_t>& ids) {
    for (uint32_t t : ids) {
      tokens_.push_back(t);
      positions_.push_back(next_pos_++);
    }
  }

  // Computes the K/V of every pending token.
  Status flush() {
    if (computed() == tokens_.size() && !stale_state_) return {};
    PITH_TRY(run(0, 0));
    return {};
  }
  // flush / decode_step with an explicit attention mask: one row per pending token, context_len
  // = tokens().size() (pith/attention_mask.hpp). Such a forward neither uses nor feeds the
  // prefix cache.
  Status flush(const AttentionMask& mask) {
    if (computed() == tokens_.size()) return {};
    PITH_TRY(run(0, 0, false, &mask));
    return {};
  }
  Result<Distribution> decode_step(uint32_t top_k, const AttentionMask& mask) {
    if (computed() == tokens_.size()) return no_pending("decode_step");
    return first_of(run(1, top_k, false, &mask));
  }

  // Computes the pending tokens (at least one) and returns the next-token distribution after
  // the last one, truncated to top_k.
  Result<Distribution> decode_step(uint32_t top_k = 256) {
    if (computed() == tokens_.size()) return no_pending("decode_step");
    return first_of(run(1, top_k));
  }

  // decode_step shaped on the server (step_shaping.hpp), without moving the vocabulary:
  // restricted to the tokens `shaping.allowed` allows (the min(top_k, allowed) most likely, with
  // probabilities over the whole vocabulary; empty when none is: abi.h forward_tokens_allowed),
  // and ranked by the logits `shaping.adjust` adjusts (probabilities those of the adjusted
  // logits: forward_tokens_adjusted; Sampler::shaping and sample_step go with it).
  Result<Distribution> decode_step(uint32_t top_k, const StepShaping& shaping) {
    if (computed() == tokens_.size()) return no_pending("decode_step");
    PITH_TRY(begin_run(1, top_k, false, nullptr, &shaping));
    return first_of(end_run());
  }
  Result<Distribution> decode_step(uint32_t top_k, const std::vector<uint64_t>& allowed) {
    return decode_step(top_k, StepShaping{&allowed, nullptr});
  }

  // decode_step in two halves, so that the forwards of several contexts are in flight together
  // and batch on the server (e.g. the beams of a beam search): start_step queues the forward,
  // finish_step waits for it. Call nothing else on this context in between.
  Status start_step(uint32_t top_k = 256) {
    if (computed() == tokens_.size()) return no_pending("start_step");
    return begin_run(1, top_k);
  }
  Status start_step(uint32_t top_k, const StepShaping& shaping) {
    if (computed() == tokens_.size()) return no_pending("start_step");
    return begin_run(1, top_k, false, nullptr, &shaping);
  }
  Status start_step(uint32_t top_k, const std::vector<uint64_t>& allowed) {
    return start_step(top_k, StepShaping{&allowed, nullptr});
  }
  Result<Distribution> finish_step() { return first_of(end_run()); }

  // Computes the pending tokens and returns the distribution after each of them, in order:
  // one forward with an output per input (speculative verification, Jacobi iterations,
  // likelihood scoring). top_k = PITH_TOP_K_ALL gives full-vocabulary distributions.
  Result<std::vector<Distribution>> decode_all(uint32_t top_k = 1) {
    if (computed() == tokens_.size()) return no_pending("decode_all");
    return run(0, top_k, true);
  }

  // Computes the pending tokens and returns the model's final hidden state (after its output
  // norm) at the last one, or at each computed one (`every`; a prefix-cache hit computes none
  // of its tokens: set_prefix_cache(false) to get them all): what an embedding is pooled from
  // (pith/hidden_state.hpp). In two halves like start_step / finish_step.
  Status start_hidden(bool every = false) {
    if (computed() == tokens_.size()) return no_pending("start_hidden");
    return begin_run(1, PITH_TOP_K_HIDDEN, every);
  }
  Result<std::vector<std::vector<float>>> finish_hidden() {
    if (pending_top_k_ != PITH_TOP_K_HIDDEN)
      return Error(PITH_ERR_BAD_ARGUMENT, "finish_hidden without start_hidden");
    return parse_hidden_states(PITH_TRY(end_run_bytes()));
  }

  // Forgets the tokens from slot n on (computed or pending) and frees the pages past them; the
  // next appended token takes the position of the first forgotten one. Rolls back rejected
  // draft tokens: later writes overwrite their K/V slots (a shared page is copied first).
  void truncate(size_t n) {
    if (n >= tokens_.size()) return;
    next_pos_ = positions_[n];
    tokens_.resize(n);
    positions_.resize(n);
    if (state_ && (computed_ > n || redo_ > 0)) {
      // A recurrent state cannot be rewound: the next step recomputes the context into a fresh
      // one (from a prefix-cache checkpoint where there is one); the first n tokens still count
      // as computed.
      redo_ = std::min(std::max(computed_, redo_), n);
      release_pages(0);
      masks_.clear();
      computed_ = 0;
      cached_ = 0;
      offered_pages_ = 0;
      stale_state_ = true;
      return;
    }
    if (computed_ > n) computed_ = n;
    release_pages((n + page_size() - 1) / page_size());
    if (masks_.size() > pages_.size()) masks_.resize(pages_.size());
    // A page this context offered to the prefix cache must not change under the cache.
    if (n % page_size() != 0 && n / page_size() < offered_pages_) shared_[n / page_size()] = true;
  }

  // The generate loop: decode, sample, append, until a stop condition holds.
  Generation generate(Sampler sampler, Stop stop) {
    Generation g;
    if (stop.eos_ids.empty()) stop.eos_ids = eos_tokens_;
    if (sampler.config().repetition_penalty != 1.0f) sampler.observe_prompt(tokens_);
    if (stop.min_tokens > 0) sampler.suppress_until(stop.min_tokens, stop.ending_ids());
    std::vector<uint32_t> generated;
    // Stop strings are matched against a decoded tail, so a step costs O(longest stop string),
    // not O(tokens so far); the whole text is decoded once, at the end.
    const size_t stop_bytes = stop.max_string_bytes();
    for (;;) {
      Result<Distribution> d = decode_step(sampler.step_top_k(), sampler.shaping());
      if (!d) {
        g.finish_reason = status_name(d.status());
        g.error = std::move(d).take_error();
        break;
      }
      uint32_t tok = sampler.sample_step(*d);
      generated.push_back(tok);
      fill_tokens({tok});
      Result<std::string> tail =
          stop_bytes ? model_.detokenize_tail(generated, stop_bytes) : std::string();
      if (!tail) {
        g.finish_reason = status_name(tail.status());
        g.error = std::move(tail).take_error();
        break;
      }
      const char* why = stop.check(generated, *tail);
      if (*why) {
        g.finish_reason = why;
        break;
      }
    }
    Result<std::string> text = model_.detokenize(generated);
    if (text) {
      g.text = std::move(*text);
    } else if (!g.error) {
      g.finish_reason = status_name(text.status());
      g.error = std::move(text).take_error();
    }
    g.tokens = generated;
    return g;
  }

  // A child context sharing this one's computed pages (prefix sharing): full pages are
  // shared, the partial last page is copied so both can append. Pending tokens are computed
  // first, so the child shares them too.
  Result<Context> fork() {
    PITH_TRY(flush());
    return copy_computed();
  }

  // A fork that leaves the pending tokens pending in both: a point to come back to, where the
  // parent's next forward cannot be undone (a hybrid model's recurrent state after drafts that
  // verification rejects: the child, with the accepted ones appended, takes over).
  Result<Context> snapshot() {
    if (pending_.valid()) return Error(PITH_ERR_BAD_ARGUMENT, "snapshot: a step is started");
    if (redo_ > 0 || stale_state_)
      return Error(PITH_ERR_BAD_ARGUMENT, "snapshot: truncate left the context to recompute");
    Context c = PITH_TRY(copy_computed());
    c.cached_ = cached_;  // the same context: its prompt's prefix-cache hit too
    return c;
  }

 private:
  // The child of fork() and snapshot(): this context's tokens, its computed pages (full ones
  // shared, the partial last one copied) and its recurrent state (copied).
  Result<Context> copy_computed() {
    Context c = PITH_TRY(Context::create(model_, &eos_tokens_));
    c.tokens_ = tokens_;
    c.positions_ = positions_;
    c.computed_ = computed_;
    c.next_pos_ = next_pos_;
    c.use_prefix_cache_ = use_prefix_cache_;
    if (adapter_ != 0) PITH_TRY(c.set_adapter(adapter_));
    c.inserted_ = true;
    c.masks_ = masks_;  // shared pages keep their host-side mask; the copied page gets it below
    bool sync = false;
    if (state_) {
      // The copy runs on the parent's queue, after the parent's forwards.
      PITH_TRY(check(pith_state_copy(queue_.handle(), state_, c.state_), "fork: copy state"));
      sync = true;
    }
    for (size_t i = 0; i < pages_.size(); ++i) {
      bool partial = i + 1 == pages_.size() && computed_ % page_size() != 0;
      if (partial) {
        std::vector<pith_kvpage_t> p = PITH_TRY(c.queue_.alloc_kvpages(1));
        uint32_t filled = static_cast<uint32_t>(computed_ % page_size());
        // The copy runs on the parent's queue, after the parent's writes to the page.
        PITH_TRY(check(pith_kvpage_copy(queue_.handle(), pages_[i], p[0], 0, 0, filled),
                       "fork: copy KV page"));
        c.adopt(p[0], false);
        PITH_TRY(c.remask(i));
        sync = true;
      } else {
        ++detail::page_refs()[pages_[i]];
        c.pages_.push_back(pages_[i]);
        c.shared_.push_back(true);
        shared_[i] = true;
      }
    }
    if (sync) PITH_TRY(queue_.synchronize().wait());
    return c;
  }

 public:
  // Hides slots [begin, end) of the context from attention (mask_kvpage), e.g. a window or a
  // finished sub-task. drop_masked_pages() then frees pages whose every slot is hidden.
  Status mask(size_t begin, size_t end) {
    if (end > computed_ || begin > end)
      return Error(PITH_ERR_BAD_ARGUMENT, "mask [" + std::to_string(begin) + ", " +
                                              std::to_string(end) + ") is not within the " +
                                              std::to_string(computed_) + " computed slots");
    const uint32_t ps = page_size();
    if (masks_.size() < pages_.size()) masks_.resize(pages_.size());
    for (size_t p = begin / ps; p <= (end - 1) / ps && begin < end; ++p) {
      auto& m = masks_[p];
      if (m.empty()) m.assign(ps, 0);
      for (size_t s = 0; s < ps; ++s) {
        size_t slot = p * ps + s;
        if (slot >= begin && slot < end) m[s] = 1;
      }
      PITH_TRY(check(pith_kvpage_mask(queue_.handle(), pages_[p], m.data(), ps), "mask KV page"));
    }
    return {};
  }
  // Frees the pages (other than the last) whose every slot is masked; the context keeps its
  // remaining slots and their positions. Returns the number of pages dropped.
  size_t drop_masked_pages() {
    const uint32_t ps = page_size();
    size_t dropped = 0;
    for (size_t p = 0; p + 1 < pages_.size();) {
      bool all = p < masks_.size() && !masks_[p].empty() &&
                 std::all_of(masks_[p].begin(), masks_[p].end(), [](uint8_t b) { return b != 0; });
      if (!all) {
        ++p;
        continue;
      }
      unref(pages_[p]);
      pages_.erase(pages_.begin() + long(p));
      shared_.erase(shared_.begin() + long(p));
      masks_.erase(masks_.begin() + long(p));
      tokens_.erase(tokens_.begin() + long(p * ps), tokens_.begin() + long((p + 1) * ps));
      positions_.erase(positions_.begin() + long(p * ps), positions_.begin() + long((p + 1) * ps));
      computed_ -= ps;
      ++dropped;
    }
    return dropped;
  }

  // Appends an exported state (export_state) after this context's computed slots, keeping the
  // exporter's positions: modules prefilled once and composed per request (Prompt Cache,
  // inferlets/modular_caching). If the last page is partly filled, its free slots are padded
  // (token 0) and hidden so the import starts on a page boundary. Imported pages are read-only
  // (copied before a write). Nothing may be pending.
  Status import_append(std::string_view name) {
    if (state_)
      return Error(PITH_ERR_UNSUPPORTED,
                   "import_append: a recurrent state summarises its sequence from the start; "
                   "modules cannot be composed on a model with recurrent layers");
    if (computed_ != tokens_.size())
      return Error(PITH_ERR_BAD_ARGUMENT, "import_append: flush the pending tokens first");
    std::vector<uint32_t> toks, pos;
    PITH_TRY(read_state(name, toks, pos));
    const uint32_t ps = page_size();
    if (size_t used = computed_ % ps; used != 0) {
      const size_t pad_begin = computed_;
      tokens_.resize(tokens_.size() + (ps - used), 0);
      positions_.resize(positions_.size() + (ps - used), 0);
      computed_ = tokens_.size();
      PITH_TRY(mask(pad_begin, computed_));
    }
    std::vector<pith_kvpage_t> pages((toks.size() + ps - 1) / ps + 1);
    uint32_t got = 0;
    PITH_TRY(
        check(pith_kvpage_import(queue_.handle(), name.data(), static_cast<uint32_t>(name.size()),
                                 pages.data(), static_cast<uint32_t>(pages.size()), &got),
              "import '" + std::string(name) + "'"));
    for (uint32_t i = 0; i < got; ++i) adopt(pages[i], true);
    tokens_.insert(tokens_.end(), toks.begin(), toks.end());
    positions_.insert(positions_.end(), pos.begin(), pos.end());
    computed_ = tokens_.size();
    if (!pos.empty()) next_pos_ = pos.back() + 1;
    inserted_ = true;  // composed pages are no causal prefix: keep them out of the prefix cache
    return {};
  }

  // Publishes the computed state under `name` (pages + tokens/positions in the store), so
  // another inferlet can continue from it with Context::import_state.
  Status export_state(std::string_view name) {
    PITH_TRY(flush());
    if (state_) {
      // A snapshot: this context's own state moves on with its next step.
      pith_state_t snap = 0;
      PITH_TRY(check(pith_state_alloc(queue_.handle(), 1, &snap), "export: allocate a state"));
      Status st = check(pith_state_copy(queue_.handle(), state_, snap), "export: copy the state");
      if (st)
        st = check(pith_state_export(queue_.handle(), snap, name.data(),
                                     static_cast<uint32_t>(name.size())),
                   "export state '" + std::string(name) + "'");
      pith_state_dealloc(queue_.handle(), &snap, 1);  // the export keeps it
      PITH_TRY(st);
    }
    PITH_TRY(check(
        pith_kvpage_export(queue_.handle(), pages_.data(), static_cast<uint32_t>(pages_.size()),
                           name.data(), static_cast<uint32_t>(name.size())),
        "export '" + std::string(name) + "'"));
    std::string blob;
    uint32_t n = static_cast<uint32_t>(computed_);
    blob.append(reinterpret_cast<const char*>(&n), 4);
    blob.append(reinterpret_cast<const char*>(tokens_.data()), size_t{n} * 4);
    blob.append(reinterpret_cast<const char*>(positions_.data()), size_t{n} * 4);
    return store_set(std::string("pith.ctx.") + std::string(name), blob);
  }
  static Result<Context> import_state(const Model& model, std::string_view name) {
    Context c = PITH_TRY(Context::create(model));
    PITH_TRY(read_state(name, c.tokens_, c.positions_));
    uint32_t n = static_cast<uint32_t>(c.tokens_.size());
    c.computed_ = n;
    c.next_pos_ = n ? c.positions_.back() + 1 : 0;
    c.inserted_ = true;
    if (c.state_) {
      pith_state_t imported = 0;
      PITH_TRY(check(pith_state_import(c.queue_.handle(), name.data(),
                                       static_cast<uint32_t>(name.size()), &imported),
                     "import state '" + std::string(name) + "'"));
      Status st =
          check(pith_state_copy(c.queue_.handle(), imported, c.state_), "import: copy the state");
      pith_state_dealloc(c.queue_.handle(), &imported, 1);  // the queued copy holds it
      PITH_TRY(st);
    }
    std::vector<pith_kvpage_t> pages((n + c.page_size() - 1) / c.page_size() + 1);
    uint32_t got = 0;
    PITH_TRY(
        check(pith_kvpage_import(c.queue_.handle(), name.data(), static_cast<uint32_t>(name.size()),
                                 pages.data(), static_cast<uint32_t>(pages.size()), &got),
              "import '" + std::string(name) + "'"));
    for (uint32_t i = 0; i < got; ++i) c.adopt(pages[i], true);
    return c;
  }
  // Withdraws a state published by export_state; its pages are freed once no importer holds them.
  static Status remove_export(const Model& model, std::string_view name) {
    Queue q = PITH_TRY(Queue::create(model));
    Status unexported =
        check(pith_kvpage_unexport(q.handle(), name.data(), static_cast<uint32_t>(name.size())),
              "unexport '" + std::string(name) + "'");
    if (model.recurrent() && unexported)
      unexported =
          check(pith_state_unexport(q.handle(), name.data(), static_cast<uint32_t>(name.size())),
                "unexport state '" + std::string(name) + "'");
    Status deleted = store_delete(std::string("pith.ctx.") + std::string(name));
    return unexported ? deleted : unexported;
  }

 private:
  // known_eos: the end-of-generation set when the caller has it (fork), else asked of the host.
  static Result<Context> create(const Model& model, const std::vector<uint32_t>* known_eos) {
    pith_model_info_t info{};
    PITH_TRY(check(pith_model_info(model.handle(), &info), "model info"));
    Queue q = PITH_TRY(Queue::create(model));
    Context c(model, static_cast<Queue&&>(q), info);
    c.eos_tokens_ = known_eos ? *known_eos : model.eos_tokens(info.eos_token);
    if (model.recurrent()) PITH_TRY(c.new_state());
    return c;
  }

  // A fresh (empty) recurrent state bound to this context's queue, replacing the old one.
  Status new_state() {
    pith_state_t s = 0;
    PITH_TRY(check(pith_state_alloc(queue_.handle(), 1, &s), "allocate a recurrent state"));
    release_state();
    state_ = s;
    return check(pith_queue_set_state(queue_.handle(), s), "bind the recurrent state");
  }
  void release_state() {
    if (!queue_.handle() || !state_) return;  // moved-from, or a model without states
    pith_state_dealloc(queue_.handle(), &state_, 1);
    state_ = 0;
  }

  Context(const Model& model, Queue&& q, pith_model_info_t info)
      : model_(model), queue_(static_cast<Queue&&>(q)), info_(info) {}

  static Error no_pending(const char* what) {
    return Error(PITH_ERR_BAD_ARGUMENT, std::string(what) + ": no pending token to compute");
  }
  static Result<Distribution> first_of(Result<std::vector<Distribution>> r) {
    std::vector<Distribution> ds = PITH_TRY(std::move(r));
    if (ds.empty()) return Error(PITH_ERR_INTERNAL, "forward returned no distribution");
    return std::move(ds[0]);
  }

  // The tokens and positions export_state stored under `name`.
  static Status read_state(std::string_view name, std::vector<uint32_t>& toks,
                           std::vector<uint32_t>& pos) {
    Result<std::string> blob = store_get(std::string("pith.ctx.") + std::string(name));
    if (!blob || blob->size() < 4)
      return Error(PITH_ERR_NOT_FOUND, "import '" + std::string(name) + "': not found");
    uint32_t n;
    memcpy(&n, blob->data(), 4);
    if (blob->size() != 4 + size_t{n} * 8)
      return Error(PITH_ERR_BAD_ARGUMENT, "import '" + std::string(name) + "': malformed state");
    toks.resize(n);
    pos.resize(n);
    memcpy(toks.data(), blob->data() + 4, size_t{n} * 4);
    memcpy(pos.data(), blob->data() + 4 + size_t{n} * 4, size_t{n} * 4);
    return {};
  }
  // Masks live on the host per page handle: a page replaced by a copy needs its mask again.
  Status remask(size_t p) {
    if (p >= masks_.size() || masks_[p].empty()) return {};
    return check(pith_kvpage_mask(queue_.handle(), pages_[p], masks_[p].data(), page_size()),
                 "mask KV page");
  }
  // True if slots [0, n) hold positions 0, 1, ...: what the prefix cache assumes.
  bool default_positions(size_t n) const {
    for (size_t i = 0; i < n && i < positions_.size(); ++i)
      if (positions_[i] != i) return false;
    return true;
  }

  void adopt(pith_kvpage_t p, bool shared) {
    ++detail::page_refs()[p];
    pages_.push_back(p);
    shared_.push_back(shared);
  }
  void unref(pith_kvpage_t p) {
    auto& refs = detail::page_refs();
    auto it = refs.find(p);
    if (it == refs.end() || --it->second == 0) {
      if (it != refs.end()) refs.erase(it);
      pith_kvpage_dealloc(queue_.handle(), &p, 1);
    }
  }
  void release_pages(size_t from) {
    if (!queue_.handle()) return;  // moved-from
    for (size_t i = from; i < pages_.size(); ++i) unref(pages_[i]);
    pages_.resize(from);
    shared_.resize(from);
  }

  // Looks the prompt up in the server's prefix cache before the first computation.
  void use_prefix_cache_for_prompt() {
    if (!use_prefix_cache_ || computed_ != 0 || !pages_.empty() || tokens_.size() < page_size())
      return;
    if (!default_positions(tokens_.size())) return;
    std::vector<pith_kvpage_t> hit(tokens_.size() / page_size());
    uint32_t n_pages = 0, matched = 0;
    if (state_) {
      // Up to the last token (it produces the next distribution), from a state checkpoint.
      pith_state_t cached = 0;
      uint32_t shared = 0;
      if (pith_prefix_match_state(queue_.handle(), tokens_.data(),
                                  static_cast<uint32_t>(tokens_.size() - 1), hit.data(),
                                  static_cast<uint32_t>(hit.size()), &n_pages, &matched, &cached,
                                  &shared) != PITH_OK)
        return;
      shared_prefix_ = shared;
      if (matched == 0) return;
      // Queued before this step's forward on the same queue.
      Status copied = check(pith_state_copy(queue_.handle(), cached, state_), "cached state");
      pith_state_dealloc(queue_.handle(), &cached, 1);
      if (!copied) {
        pith_kvpage_dealloc(queue_.handle(), hit.data(), n_pages);
        return;
      }
      for (uint32_t i = 0; i < n_pages; ++i) adopt(hit[i], true);
      computed_ = matched;
      cached_ = matched;
      return;
    }
    if (pith_prefix_match(queue_.handle(), tokens_.data(), static_cast<uint32_t>(tokens_.size()),
                          hit.data(), static_cast<uint32_t>(hit.size()), &n_pages,
                          &matched) != PITH_OK)
      return;
    // Keep at least one token to compute: it produces the next distribution.
    if (matched >= tokens_.size() && n_pages > 0) {
      pith_kvpage_dealloc(queue_.handle(), &hit[n_pages - 1], 1);
      --n_pages;
      matched -= page_size();
    }
    for (uint32_t i = 0; i < n_pages; ++i) adopt(hit[i], true);
    computed_ = matched;
    cached_ = matched;
  }

  // Makes sure the page about to receive writes at slot `computed_` is private.
  Status own_last_page() {
    const uint32_t ps = page_size();
    size_t idx = computed_ / ps;
    if (computed_ % ps == 0 || idx >= pages_.size() || !shared_[idx]) return {};
    std::vector<pith_kvpage_t> fresh = PITH_TRY(queue_.alloc_kvpages(1));
    PITH_TRY(check(pith_kvpage_copy(queue_.handle(), pages_[idx], fresh[0], 0, 0,
                                    static_cast<uint32_t>(computed_ % ps)),
                   "copy a shared KV page before writing"));
    unref(pages_[idx]);
    pages_[idx] = fresh[0];
    ++detail::page_refs()[fresh[0]];
    shared_[idx] = false;
    return remask(idx);
  }

  // One fused forward over the pending tokens; n_out = 1 asks for the distribution after the
  // last one. An explicit mask (rows = pending tokens) bypasses the prefix cache.
  Result<std::vector<Distribution>> run(uint32_t n_out, uint32_t top_k, bool every_input = false,
                                        const AttentionMask* mask = nullptr) {
    PITH_TRY(begin_run(n_out, top_k, every_input, mask));
    return end_run();
  }

  // The first half of run(): queues the forward over the pending tokens (the host copies the
  // arguments, so the context may change afterwards) and keeps its future in pending_.
  Status begin_run(uint32_t n_out, uint32_t top_k, bool every_input = false,
                   const AttentionMask* mask = nullptr, const StepShaping* shaping = nullptr) {
    if (pending_.valid())
      return Error(PITH_ERR_BAD_ARGUMENT, "a step is already in flight (finish_step first)");
    if (stale_state_) {
      PITH_TRY(new_state());
      stale_state_ = false;
    }
    const bool first = computed_ == 0;
    if (first && !mask) use_prefix_cache_for_prompt();
    PITH_TRY(own_last_page());
    const uint32_t ps = page_size();
    const size_t total = tokens_.size();
    const size_t need = (total + ps - 1) / ps;
    if (need > pages_.size()) {
      std::vector<pith_kvpage_t> fresh =
          PITH_TRY(queue_.alloc_kvpages(static_cast<uint32_t>(need - pages_.size())));
      for (pith_kvpage_t p : fresh) adopt(p, false);
    }
    size_t from = computed_;  // the first token this forward computes
    if (state_ && first && !mask && !every_input && use_prefix_cache_ && !inserted_ &&
        default_positions(total))
      from = compute_to_checkpoints(total);
    const uint32_t n = static_cast<uint32_t>(total - from);
    if (mask && (mask->rows() != n || mask->context_len() != total))
      return Error(PITH_ERR_BAD_ARGUMENT, "attention mask is " + std::to_string(mask->rows()) +
                                              " rows over " + std::to_string(mask->context_len()) +
                                              " slots; the step has " + std::to_string(n) +
                                              " pending tokens over " + std::to_string(total));
    uint32_t last = n - 1;
    std::vector<uint32_t> every;
    if (every_input) {  // the pending tokens (not those a truncate makes this step redo)
      for (uint32_t i = static_cast<uint32_t>(std::max(from, redo_) - from); i < n; ++i)
        every.push_back(i);
      n_out = static_cast<uint32_t>(every.size());
    }
    pith_forward_tokens_args_t a{};
    a.tokens = tokens_.data() + from;
    a.positions = positions_.data() + from;
    a.token_count = n;
    a.kv_pages = pages_.data();
    a.kv_page_count = static_cast<uint32_t>(need);
    a.last_page_len = static_cast<uint32_t>(total - (need - 1) * ps);
    a.output_indices = every_input ? every.data() : &last;
    a.output_count = n_out;
    a.top_k = top_k;
    if (mask) {
      a.attn_mask = mask->bytes().data();
      a.attn_mask_len = static_cast<uint32_t>(mask->bytes().size());
    }
    pith_future_t f = 0;
    const StepShaping none;
    PITH_TRY(check(
        (shaping ? *shaping : none).forward(queue_.handle(), a, info_.vocab_size, allowed_, &f),
        "forward"));
    pending_ = Future(f);
    pending_total_ = total;
    pending_first_ = first && !mask && default_positions(total);  // may feed the prefix cache
    pending_every_ = every_input;
    pending_top_k_ = top_k;
    return {};
  }

  // Hybrid models, first step: queues forwards (no outputs) up to the places where a checkpoint
  // serves later prompts best, each followed by a copy of the state there (the prefix cache's
  // checkpoints): where this prompt leaves the prompts the cache holds (a shared system prompt:
  // the next prompt with it), and its own last page boundary before the last token (this prompt
  // again). The caller's forward then computes the rest; all run on the queue in order. Returns
  // where the caller's forward starts.
  size_t compute_to_checkpoints(size_t total) {
    const uint32_t ps = page_size();
    size_t stops[kMaxCheckpoints];
    size_t n_stops = 0;
    if (shared_prefix_ > computed_ && shared_prefix_ < total) stops[n_stops++] = shared_prefix_;
    const size_t last = (total - 1) / ps * ps;
    if (last > computed_ && (n_stops == 0 || last > stops[0])) stops[n_stops++] = last;
    size_t from = computed_;
    for (size_t i = 0; i < n_stops; ++i) {
      const size_t at = stops[i];
      pith_forward_tokens_args_t a{};
      a.tokens = tokens_.data() + from;
      a.positions = positions_.data() + from;
      a.token_count = static_cast<uint32_t>(at - from);
      a.kv_pages = pages_.data();
      a.kv_page_count = static_cast<uint32_t>(at / ps);
      a.last_page_len = ps;
      pre_[i] = queue_.forward_tokens(a);
      from = at;
      // A checkpoint is an extra: when states are short it is skipped, never waited for.
      pith_state_t ck = 0;
      const bool waits = !Model::kv_fail_fast();
      if (waits) pith_kvpage_policy(model_.handle(), PITH_KV_FAIL_FAST);
      const pith_status_t got = pith_state_alloc(queue_.handle(), 1, &ck);
      if (waits) pith_kvpage_policy(model_.handle(), PITH_KV_WAIT);
      if (got != PITH_OK) continue;
      if (pith_state_copy(queue_.handle(), state_, ck) != PITH_OK) {
        pith_state_dealloc(queue_.handle(), &ck, 1);
        continue;
      }
      checkpoints_[n_checkpoints_++] = {at, ck};
    }
    return from;
  }
  void drop_checkpoints() {
    for (size_t i = 0; i < n_checkpoints_; ++i)
      pith_state_dealloc(queue_.handle(), &checkpoints_[i].state, 1);
    n_checkpoints_ = 0;
  }

  // The second half: waits for the queued forward and takes its result.
  Result<std::vector<Distribution>> end_run() {
    if (pending_.valid() && pending_top_k_ == PITH_TOP_K_HIDDEN)
      return Error(PITH_ERR_BAD_ARGUMENT, "finish_step after start_hidden (finish_hidden)");
    std::string bytes = PITH_TRY(end_run_bytes());
    return parse_distributions(bytes, pending_top_k_ == PITH_TOP_K_LOGITS);
  }
  Result<std::string> end_run_bytes() {
    if (!pending_.valid()) return Error(PITH_ERR_BAD_ARGUMENT, "finish_step without start_step");
    Result<std::string> bytes = pending_.get();
    pending_.reset();
    for (Future& f : pre_) {
      if (!f.valid()) continue;
      Result<std::string> pre = f.get();
      f.reset();
      if (!pre && bytes) bytes = std::move(pre).take_error();
    }
    if (!bytes) {
      drop_checkpoints();
      return std::move(bytes).take_error();
    }
    const size_t total = pending_total_;
    const uint32_t n = static_cast<uint32_t>(total - computed_);
    if (!pending_every_) prefilled_ += n > 1 ? n : 0;  // decode_all verifies drafts, no prompt
    forwarded_ += n;
    computed_ = total;
    redo_ = 0;
    const uint32_t ps = page_size();
    if (n_checkpoints_ > 0) {
      // Hybrid: the pages up to each checkpoint, with the state there.
      inserted_ = true;
      for (size_t i = 0; i < n_checkpoints_; ++i) {
        const uint32_t full = static_cast<uint32_t>(checkpoints_[i].at / ps);
        pith_prefix_insert_state(queue_.handle(), tokens_.data(), full * ps, pages_.data(), full,
                                 checkpoints_[i].state);
        offered_pages_ = std::max(offered_pages_, full);
      }
      drop_checkpoints();
    } else if (state_) {
      inserted_ = true;  // nothing new to offer (the prompt was cached, or under a page)
    } else if (pending_first_ && use_prefix_cache_ && !inserted_) {
      inserted_ = true;
      uint32_t full = static_cast<uint32_t>(total / ps);
      if (full > 0)
        pith_prefix_insert(queue_.handle(), tokens_.data(), static_cast<uint32_t>(full * ps),
                           pages_.data(), full);
      offered_pages_ = full;
    }
    return bytes;
  }

  Model model_;
  Queue queue_;
  pith_model_info_t info_{};
  std::vector<uint32_t> eos_tokens_;
  std::vector<uint32_t> tokens_, positions_;
  size_t computed_ = 0;
  uint32_t next_pos_ = 0;
  std::vector<pith_kvpage_t> pages_;
  std::vector<bool> shared_;                 // read-only: copy before writing
  std::vector<std::vector<uint8_t>> masks_;  // per page, 1 = hidden (mask())
  bool use_prefix_cache_ = true;
  pith_adapter_t adapter_ = 0;
  bool inserted_ = false;
  uint32_t prefilled_ = 0;
  uint32_t forwarded_ = 0;
  Future pending_;                 // the forward of a started step (begin_run .. end_run)
  std::vector<uint64_t> allowed_;  // a token mask resized to the vocabulary (begin_run)
  size_t pending_total_ = 0;
  bool pending_first_ = false;
  bool pending_every_ = false;  // the started forward has an output per input (decode_all)
  uint32_t pending_top_k_ = 0;
  // Leading pages given to the prefix cache (read-only after truncate).
  uint32_t offered_pages_ = 0;
  uint32_t cached_ = 0;
  // Hybrid models: the context's recurrent state (0: a model without), whether truncate made
  // it stale, and the first step's checkpoints (compute_to_checkpoints) with their forwards.
  pith_state_t state_ = 0;
  bool stale_state_ = false;
  size_t redo_ = 0;  // leading tokens computed before a truncate, recomputed by the next step
  static constexpr size_t kMaxCheckpoints = 2;
  struct Checkpoint {
    size_t at = 0;  // tokens before it (a page boundary)
    pith_state_t state = 0;
  };
  Checkpoint checkpoints_[kMaxCheckpoints];
  size_t n_checkpoints_ = 0;
  size_t shared_prefix_ = 0;     // tokens the prefix cache held pages for at the first lookup
  Future pre_[kMaxCheckpoints];  // the forwards up to the checkpoints
};

}  // namespace pith
