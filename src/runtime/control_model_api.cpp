#include "runtime/control_model_api.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "runtime/distribution_bytes.h"
#include "runtime/logit_adjustments.h"

namespace pith::runtime {

pith_status_t to_abi_status(Status s) {
  switch (s) {
    case Status::Ok:
      return PITH_OK;
    case Status::BadHandle:
      return PITH_ERR_BAD_HANDLE;
    case Status::OutOfKvPages:
      return PITH_ERR_OUT_OF_KV_PAGES;
    case Status::QuotaExceeded:
      return PITH_ERR_OUT_OF_KV_PAGES;
    case Status::OutOfEmbeds:
      return PITH_ERR_OUT_OF_EMBEDS;
    case Status::BadArgument:
      return PITH_ERR_BAD_ARGUMENT;
    case Status::NotFound:
      return PITH_ERR_NOT_FOUND;
    case Status::AlreadyExists:
      return PITH_ERR_ALREADY_EXISTS;
    case Status::Terminated:
      return PITH_ERR_CANCELLED;
    case Status::Unsupported:
      return PITH_ERR_UNSUPPORTED;
    case Status::BackendFailure:
      return PITH_ERR_BACKEND;
    case Status::OutOfStates:
      return PITH_ERR_OUT_OF_STATES;
    case Status::Waiting:  // parked on before it gets here; an unparkable caller sees this
      return PITH_ERR_OUT_OF_KV_PAGES;
  }
  return PITH_ERR_INTERNAL;
}

namespace {

std::vector<uint32_t> bools_to_runs(const std::vector<uint8_t>& visible) {
  std::vector<uint32_t> runs;
  uint8_t want = 1;  // runs start with a visible run
  uint32_t len = 0;
  for (uint8_t v : visible) {
    if ((v != 0) == (want != 0)) {
      ++len;
    } else {
      runs.push_back(len);
      want = !want;
      len = 1;
    }
  }
  runs.push_back(len);
  return runs;
}

std::vector<uint8_t> runs_to_bools(const std::vector<uint32_t>& runs, size_t n) {
  std::vector<uint8_t> v;
  v.reserve(n);
  uint8_t vis = 1;
  for (uint32_t r : runs) {
    v.insert(v.end(), r, vis);
    vis = !vis;
  }
  v.resize(n, 0);
  return v;
}

// Logs why a control-layer call failed (Terminated is not logged: the instance is ending or
// destroyed the queue itself) and returns the guest's code.
pith_status_t log_failure(const ErrorLog& log, const char* call, const Failure& f) {
  if (log && f.code != Status::Terminated)
    log(fmt::format("{}: {} ({})", call, f.message, status_name(f.code)));
  return to_abi_status(f.code);
}

constexpr uint32_t kModelHandle = 1;
constexpr uint32_t kMaxPriority = 7;
constexpr uint32_t kDefaultTopK = 256;

}  // namespace

std::vector<std::vector<uint32_t>> bitmask_to_runs(std::span<const uint8_t> mask, size_t rows,
                                                   size_t context_len) {
  const size_t row_bytes = (context_len + 7) / 8;
  std::vector<std::vector<uint32_t>> out;
  out.reserve(rows);
  std::vector<uint8_t> visible(context_len);
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* row = mask.data() + r * row_bytes;
    for (size_t j = 0; j < context_len; ++j) visible[j] = (row[j >> 3] >> (j & 7)) & 1;
    out.push_back(bools_to_runs(visible));
  }
  return out;
}

// One instance's view of the model (see the header comment for what it tracks).
class ControlSession final : public ModelSession {
 public:
  ControlSession(ControlModelApi& api, uint64_t instance_id)
      : api_(api), ctl_(api.controller()), id_(instance_id) {
    ContentionKillFn kill = api.on_kill();
    ctl_.register_instance(id_, [kill, id = id_](const std::string& reason) {
      if (kill) kill(id, reason);
    });
  }
  ~ControlSession() override { ctl_.release_instance(id_); }

  // ---- models and traits
  pith_status_t open_model(std::string_view name, uint32_t* model) override {
    if (!name.empty() && name != api_.model_name()) return PITH_ERR_NOT_FOUND;
    *model = kModelHandle;
    return PITH_OK;
  }
  pith_status_t model_traits(uint32_t model, std::vector<std::string>* traits) override {
    if (model != kModelHandle) return PITH_ERR_BAD_HANDLE;
    *traits = {"allocate", "forward", "input_text", "tokenize", "output_text", "prefix_cache"};
    // What the model is, for inferlets whose policy depends on it (a KV policy may drop pages
    // a sliding window no longer reads; a sampler may expect soft-capped logits).
    const auto& cfg = ctl_.model_config();
    traits->push_back("architecture=" + cfg.architecture);
    if (cfg.sliding_window > 0)
      traits->push_back("sliding_window=" + std::to_string(cfg.sliding_window));
    if (cfg.final_softcap > 0) traits->push_back("logit_softcap");
    if (cfg.hybrid()) {
      traits->push_back("recurrent_state");
      traits->push_back("state_bytes=" + std::to_string(ctl_.state_bytes()));
    }
    if (cfg.n_experts > 0)
      traits->push_back("experts=" + std::to_string(cfg.n_experts_used) + "/" +
                        std::to_string(cfg.n_experts));
    // The loaded LoRA adapters, each openable with adapter_open.
    const auto adapters = ctl_.adapters().list();
    if (!adapters.empty()) traits->push_back("forward_with_adapter");
    for (const auto& a : adapters) traits->push_back("adapter=" + a.name);
    // Every end-of-generation token, the EOS first (the SDK stops on all of them).
    const Tokenizer& tok = api_.tokenizer();
    std::string eos;
    if (tok.eos_id() >= 0) eos = std::to_string(tok.eos_id());
    for (int32_t id : tok.eos_ids())
      if (id != tok.eos_id()) eos += (eos.empty() ? "" : ",") + std::to_string(id);
    if (!eos.empty()) traits->push_back("eos_tokens=" + eos);
    return PITH_OK;
  }
  pith_status_t model_info(uint32_t model, pith_model_info_t* info) override {
    if (model != kModelHandle) return PITH_ERR_BAD_HANDLE;
    const auto& cfg = ctl_.model_config();
    info->tokens_per_page = ctl_.page_size();
    info->vocab_size = cfg.vocab_size;
    info->max_positions = cfg.context_length;
    int32_t eos = api_.tokenizer().eos_id();
    info->eos_token = eos < 0 ? UINT32_MAX : static_cast<uint32_t>(eos);
    int32_t bos = api_.tokenizer().bos_id();
    info->bos_token = bos < 0 ? UINT32_MAX : static_cast<uint32_t>(bos);
    info->add_bos = api_.tokenizer().add_bos() && bos >= 0 ? 1 : 0;
    return PITH_OK;
  }

  // ---- tokenizer: special tokens in the text are recognised (inferlets build chat prompts
  // with them); no BOS is added (the caller decides).
  pith_status_t tokenize(uint32_t model, std::string_view text,
                         std::vector<uint32_t>* tokens) override {
    if (model != kModelHandle) return PITH_ERR_BAD_HANDLE;
    auto ids = api_.tokenizer().encode(text, /*add_special=*/false, /*parse_special=*/true);
    tokens->assign(ids.begin(), ids.end());
    return PITH_OK;
  }
  pith_status_t detokenize(uint32_t model, std::span<const uint32_t> tokens,
                           std::string* text) override {
    if (model != kModelHandle) return PITH_ERR_BAD_HANDLE;
    const auto n = api_.tokenizer().vocab_size();
    std::vector<int32_t> ids;
    ids.reserve(tokens.size());
    for (uint32_t t : tokens) {
      if (t >= n) return PITH_ERR_BAD_ARGUMENT;
      ids.push_back(static_cast<int32_t>(t));
    }
    *text = api_.tokenizer().decode(ids);
    return PITH_OK;
  }
  pith_status_t vocab(uint32_t model, std::string* serialized) override {
    if (model != kModelHandle) return PITH_ERR_BAD_HANDLE;
    const Tokenizer& tok = api_.tokenizer();
    serialized->clear();
    for (size_t i = 0; i < tok.vocab_size(); ++i) {
      const std::string& b = tok.token_bytes(static_cast<int32_t>(i));
      uint32_t len = static_cast<uint32_t>(b.size());
      serialized->append(reinterpret_cast<const char*>(&len), 4);
      serialized->append(b);
    }
    return PITH_OK;
  }

  pith_status_t vocab_special(uint32_t model, std::vector<uint32_t>* ids) override {
    if (model != kModelHandle) return PITH_ERR_BAD_HANDLE;
    const Tokenizer& tok = api_.tokenizer();
    ids->clear();
    for (size_t i = 0; i < tok.vocab_size(); ++i)
      if (tok.is_special(static_cast<int32_t>(i))) ids->push_back(static_cast<uint32_t>(i));
    return PITH_OK;
  }

  pith_status_t vocab_trie(uint32_t model, std::shared_ptr<const TokenTrie>* trie) override {
    if (model != kModelHandle) return PITH_ERR_BAD_HANDLE;
    *trie = api_.vocab_trie();
    return PITH_OK;
  }

  // ---- queues
  pith_status_t create_queue(uint32_t model, uint32_t* queue) override {
    if (model != kModelHandle) return PITH_ERR_BAD_HANDLE;
    auto q = ctl_.create_queue(id_);
    if (!q) return fail("create_queue", q.failure());
    queues_.push_back({*q, std::make_shared<std::atomic<int32_t>>(PITH_OK)});
    *queue = static_cast<uint32_t>(queues_.size());
    return PITH_OK;
  }
  pith_status_t destroy_queue(uint32_t queue) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    auto st = ctl_.destroy_queue(id_, q->id);
    q->id = 0;
    return check("destroy_queue", st);
  }
  pith_status_t synchronize(uint32_t queue, Completion done) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    auto err = q->deferred_error;
    return check("synchronize", ctl_.synchronize(id_, q->id, [err, done = std::move(done)] {
      done(err->exchange(PITH_OK), {});
    }));
  }
  pith_status_t set_queue_priority(uint32_t queue, uint32_t priority) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    if (priority > kMaxPriority)
      return reject("set_queue_priority", PITH_ERR_BAD_ARGUMENT,
                    fmt::format("priority {} above the maximum {}", priority, kMaxPriority));
    return check("set_queue_priority",
                 ctl_.set_queue_priority(id_, q->id, static_cast<int32_t>(priority)));
  }

  // ---- LoRA adapters
  pith_status_t open_adapter(uint32_t model, std::string_view name, uint32_t* adapter) override {
    if (model != kModelHandle) return PITH_ERR_BAD_HANDLE;
    for (size_t i = 0; i < adapters_.size(); ++i)
      if (adapters_[i]->info().name == name) {
        *adapter = static_cast<uint32_t>(i + 1);
        return PITH_OK;
      }
    auto lease = ctl_.adapters().open(name);
    if (!lease)
      return reject("adapter_open", PITH_ERR_NOT_FOUND,
                    fmt::format("no adapter named '{}' is loaded", name));
    adapters_.push_back(std::move(lease));
    *adapter = static_cast<uint32_t>(adapters_.size());
    return PITH_OK;
  }
  pith_status_t set_queue_adapter(uint32_t queue, uint32_t adapter) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    if (adapter > adapters_.size())
      return reject("queue_set_adapter", PITH_ERR_BAD_HANDLE,
                    fmt::format("adapter handle {} was not opened (adapter_open)", adapter));
    q->adapter = adapter;
    return PITH_OK;
  }

  // ---- KV pressure: the instance parks while the controller answers Waiting
  void set_parking(Parking parking) override {
    parking_ = std::move(parking);
    if (parking_.park && parking_.wake) ctl_.set_waker(id_, parking_.wake);
  }
  pith_status_t kv_policy(uint32_t model, uint32_t policy) override {
    if (model != kModelHandle) return PITH_ERR_BAD_HANDLE;
    if (policy != PITH_KV_WAIT && policy != PITH_KV_FAIL_FAST)
      return reject("kvpage_policy", PITH_ERR_BAD_ARGUMENT, fmt::format("policy {}", policy));
    ctl_.set_fail_fast(id_, policy == PITH_KV_FAIL_FAST);
    return PITH_OK;
  }

  // ---- resources
  pith_status_t alloc_kvpages(uint32_t queue, uint32_t n, std::vector<uint32_t>* out) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    return check("alloc_kvpages", parked([&] { return ctl_.alloc_pages(id_, n, *out); }));
  }
  pith_status_t dealloc_kvpages(uint32_t queue, std::span<const uint32_t> pages) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    auto st = parked([&] { return ctl_.dealloc_pages(id_, pages); });
    if (st)
      for (uint32_t p : pages) page_masks_.erase(p);
    return check("dealloc_kvpages", st);
  }
  pith_status_t alloc_embs(uint32_t queue, uint32_t n, std::vector<uint32_t>* out) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    return check("alloc_embs", ctl_.alloc_embeds(id_, n, *out));
  }
  pith_status_t dealloc_embs(uint32_t queue, std::span<const uint32_t> embs) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    auto st = ctl_.dealloc_embeds(id_, embs);
    if (st)
      for (uint32_t e : embs) emb_pos_.erase(e);
    return check("dealloc_embs", st);
  }
  pith_status_t copy_kvpage(uint32_t queue, uint32_t src, uint32_t dst, uint32_t src_offset,
                            uint32_t dst_offset, uint32_t count) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    return check("copy_kvpage", parked([&] {
                   return ctl_.copy_kv(id_, q->id, src, dst, src_offset, dst_offset, count,
                                       record(*q, "copy_kvpage"));
                 }));
  }
  pith_status_t mask_kvpage(uint32_t queue, uint32_t page, std::span<const uint8_t> mask) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    if (!ctl_.has_page(id_, page))
      return reject("mask_kvpage", PITH_ERR_BAD_HANDLE, fmt::format("page handle {}", page));
    if (mask.size() > ctl_.page_size())
      return reject(
          "mask_kvpage", PITH_ERR_BAD_ARGUMENT,
          fmt::format("mask of {} slots for a page of {}", mask.size(), ctl_.page_size()));
    std::vector<uint8_t> hidden(ctl_.page_size(), 0);
    bool any = false;
    for (size_t i = 0; i < mask.size(); ++i) any |= (hidden[i] = mask[i] != 0);
    if (any)
      page_masks_[page] = std::move(hidden);
    else
      page_masks_.erase(page);
    return PITH_OK;
  }
  pith_status_t export_kvpages(uint32_t queue, std::span<const uint32_t> pages,
                               std::string_view name) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    return check("export_kvpages", parked([&] {
                   return ctl_.export_pages(id_, std::string(name), pages, /*persistent=*/true);
                 }));
  }
  pith_status_t unexport_kvpages(uint32_t queue, std::string_view name) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    return check("unexport_kvpages", ctl_.remove_export(std::string(name)));
  }
  pith_status_t import_kvpages(uint32_t queue, std::string_view name,
                               std::vector<uint32_t>* pages) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    return take("import_kvpages", parked([&] { return ctl_.import_pages(id_, std::string(name)); }),
                *pages);
  }

  // ---- prefix cache
  pith_status_t prefix_match(uint32_t queue, std::span<const uint32_t> tokens,
                             std::vector<uint32_t>* pages, uint32_t* matched) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    if (ctl_.recurrent()) {  // pages alone do not resume a hybrid sequence
      pages->clear();
      *matched = 0;
      return PITH_OK;
    }
    uint32_t state = 0, shared = 0;
    return match_prefix("prefix_match", *q, tokens, pages, matched, &state, &shared);
  }
  pith_status_t prefix_match_state(uint32_t queue, std::span<const uint32_t> tokens,
                                   std::vector<uint32_t>* pages, uint32_t* matched, uint32_t* state,
                                   uint32_t* shared) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    if (!ctl_.recurrent()) return no_states("prefix_match_state", PITH_ERR_BAD_ARGUMENT);
    return match_prefix("prefix_match_state", *q, tokens, pages, matched, state, shared);
  }
  pith_status_t prefix_insert_state(uint32_t queue, std::span<const uint32_t> tokens,
                                    std::span<const uint32_t> pages, uint32_t state) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    if (!ctl_.recurrent()) return no_states("prefix_insert_state", PITH_ERR_BAD_ARGUMENT);
    std::vector<int32_t> ids(tokens.begin(), tokens.end());
    const uint32_t adapter = adapter_id(*q);
    return check("prefix_insert_state",
                 parked([&] { return ctl_.prefix_insert(id_, ids, pages, adapter, state); }));
  }

  // ---- recurrent states (hybrid models)
  pith_status_t alloc_states(uint32_t queue, uint32_t n, std::vector<uint32_t>* out) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    if (!ctl_.recurrent()) return no_states("state_alloc", PITH_ERR_UNSUPPORTED);
    return check("state_alloc", parked([&] { return ctl_.alloc_states(id_, n, *out); }));
  }
  pith_status_t dealloc_states(uint32_t queue, std::span<const uint32_t> states) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    if (!ctl_.recurrent()) return no_states("state_dealloc", PITH_ERR_UNSUPPORTED);
    auto st = parked([&] { return ctl_.dealloc_states(id_, states); });
    if (st)  // a queue bound to a freed state is unbound: a forward on it fails clearly
      for (auto& qs : queues_)
        if (std::find(states.begin(), states.end(), qs.state) != states.end()) qs.state = 0;
    return check("state_dealloc", st);
  }
  pith_status_t copy_state(uint32_t queue, uint32_t src, uint32_t dst) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    if (!ctl_.recurrent()) return no_states("state_copy", PITH_ERR_UNSUPPORTED);
    return check("state_copy", parked([&] {
                   return ctl_.copy_state(id_, q->id, src, dst, record(*q, "state_copy"));
                 }));
  }
  pith_status_t set_queue_state(uint32_t queue, uint32_t state) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    if (!ctl_.recurrent()) return no_states("queue_set_state", PITH_ERR_UNSUPPORTED);
    q->state = state;  // checked by each forward (the handle may be freed meanwhile)
    return PITH_OK;
  }
  pith_status_t export_state(uint32_t queue, uint32_t state, std::string_view name) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    if (!ctl_.recurrent()) return no_states("state_export", PITH_ERR_UNSUPPORTED);
    return check("state_export",
                 parked([&] { return ctl_.export_state(id_, std::string(name), state, true); }));
  }
  pith_status_t unexport_state(uint32_t queue, std::string_view name) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    if (!ctl_.recurrent()) return no_states("state_unexport", PITH_ERR_UNSUPPORTED);
    return check("state_unexport", ctl_.remove_state_export(std::string(name)));
  }
  pith_status_t import_state(uint32_t queue, std::string_view name, uint32_t* state) override {
    if (!find(queue)) return PITH_ERR_BAD_HANDLE;
    if (!ctl_.recurrent()) return no_states("state_import", PITH_ERR_UNSUPPORTED);
    return take("state_import", ctl_.import_state(id_, std::string(name)), *state);
  }
  pith_status_t prefix_insert(uint32_t queue, std::span<const uint32_t> tokens,
                              std::span<const uint32_t> pages) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    std::vector<int32_t> ids(tokens.begin(), tokens.end());
    const uint32_t adapter = adapter_id(*q);
    return check("prefix_insert",
                 parked([&] { return ctl_.prefix_insert(id_, ids, pages, adapter); }));
  }

  // ---- compute
  pith_status_t embed_txt(uint32_t queue, std::span<const uint32_t> tokens,
                          std::span<const uint32_t> positions,
                          std::span<const uint32_t> embs) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    std::vector<int32_t> ids(tokens.begin(), tokens.end());
    auto st = ctl_.embed_tokens(id_, q->id, std::move(ids), {positions.begin(), positions.end()},
                                {embs.begin(), embs.end()}, record(*q, "embed_txt"));
    if (st)
      for (size_t i = 0; i < embs.size(); ++i) emb_pos_[embs[i]] = positions[i];
    return check("embed_txt", st);
  }
  pith_status_t embed_img(uint32_t, std::span<const uint8_t>, std::span<const uint32_t>) override {
    return PITH_ERR_UNSUPPORTED;  // text-only models
  }
  pith_status_t forward(uint32_t queue, const ForwardArgs& args) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    std::shared_ptr<const AdapterLease> lease;
    pith_status_t bad = PITH_OK;
    if (!adapter_for("forward", *q, args.adapter, &lease, &bad)) return bad;
    if (args.output_embs.size() > args.input_embs.size())
      return reject("forward", PITH_ERR_BAD_ARGUMENT,
                    fmt::format("{} output embeds for {} inputs", args.output_embs.size(),
                                args.input_embs.size()));
    SequenceInput seq;
    seq.embed_slots = args.input_embs;
    for (uint32_t e : args.input_embs) {
      auto it = emb_pos_.find(e);
      if (it == emb_pos_.end())
        return reject("forward", PITH_ERR_BAD_ARGUMENT,
                      fmt::format("input embed {} holds no content yet", e));
      seq.positions.push_back(it->second);
    }
    seq.kv_pages = args.kv_pages;
    seq.last_page_len = args.last_page_len;
    seq.state_slot = state_of(*q);
    const size_t first_out = args.input_embs.size() - args.output_embs.size();
    for (size_t j = 0; j < args.output_embs.size(); ++j)
      seq.outputs.push_back(
          {static_cast<uint32_t>(first_out + j), OutputKind::Embed, 0, args.output_embs[j]});
    pith_status_t ms = apply_page_masks("forward", seq);
    if (ms != PITH_OK) return ms;
    std::vector<std::pair<uint32_t, uint32_t>> out_pos;
    for (size_t j = 0; j < args.output_embs.size(); ++j)
      out_pos.emplace_back(args.output_embs[j], seq.positions[first_out + j]);
    auto st = parked(
        [&] { return ctl_.forward(id_, q->id, std::move(seq), record(*q, "forward"), lease); });
    if (st)
      for (auto [e, p] : out_pos) emb_pos_[e] = p;
    return check("forward", st);
  }
  pith_status_t next_dist(uint32_t queue, uint32_t emb, uint32_t top_k, Completion done) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    const bool all = top_k == PITH_TOP_K_ALL;
    if (top_k == PITH_TOP_K_LOGITS || top_k == PITH_TOP_K_HIDDEN)
      return reject(
          "next_dist", PITH_ERR_UNSUPPORTED,
          fmt::format("{} is answered by forward_tokens only; next_dist gives "
                      "probabilities (PITH_TOP_K_ALL)",
                      top_k == PITH_TOP_K_LOGITS ? "PITH_TOP_K_LOGITS" : "PITH_TOP_K_HIDDEN"));
    top_k = clamp_top_k(top_k);
    auto err = q->deferred_error;
    return check(
        "next_dist",
        ctl_.next_dist(id_, q->id, emb, top_k,
                       [err, all, log = error_log(), done = std::move(done)](CallOutcome&& o) {
                         if (!o) return done(log_failure(log, "next_dist", o.failure()), {});
                         if (int32_t e = err->exchange(PITH_OK)) return done(e, {});
                         std::string bytes;
                         if (all)
                           append_dist_by_id(bytes, o->dist);
                         else
                           append_dist(bytes, o->dist);
                         done(PITH_OK, std::move(bytes));
                       }));
  }
  pith_status_t forward_tokens(uint32_t queue, const ForwardTokensArgs& args,
                               Completion done) override {
    QueueState* q = find(queue);
    if (!q) return PITH_ERR_BAD_HANDLE;
    std::shared_ptr<const AdapterLease> lease;
    pith_status_t bad = PITH_OK;
    if (!adapter_for("forward_tokens", *q, args.adapter, &lease, &bad)) return bad;
    if (args.positions.size() != args.tokens.size())
      return reject(
          "forward_tokens", PITH_ERR_BAD_ARGUMENT,
          fmt::format("{} tokens but {} positions", args.tokens.size(), args.positions.size()));
    if (args.kv_pages.empty())
      return reject("forward_tokens", PITH_ERR_BAD_ARGUMENT, "forward needs at least one KV page");
    SequenceInput seq;
    seq.tokens.assign(args.tokens.begin(), args.tokens.end());
    for (uint32_t t : args.tokens)
      if (t >= ctl_.model_config().vocab_size)
        return reject(
            "forward_tokens", PITH_ERR_BAD_ARGUMENT,
            fmt::format("token id {} outside vocabulary of {}", t, ctl_.model_config().vocab_size));
    seq.positions = args.positions;
    seq.kv_pages = args.kv_pages;
    seq.last_page_len = args.last_page_len;
    seq.state_slot = state_of(*q);
    const size_t ctx = context_len(seq);
    if (!args.attn_mask.empty()) {
      if (args.attn_mask.size() != seq.tokens.size() * ((ctx + 7) / 8))
        return reject(
            "forward_tokens", PITH_ERR_BAD_ARGUMENT,
            fmt::format("attention mask of {} bytes; {} rows over a context of {} slots need {}",
                        args.attn_mask.size(), seq.tokens.size(), ctx,
                        seq.tokens.size() * ((ctx + 7) / 8)));
      seq.mask = bitmask_to_runs(args.attn_mask, seq.tokens.size(), ctx);
    }
    const uint32_t k = clamp_top_k(args.top_k);
    const bool raw_logits = args.top_k == PITH_TOP_K_LOGITS;
    const bool hidden = args.top_k == PITH_TOP_K_HIDDEN;
    const OutputKind kind = hidden                                       ? OutputKind::Hidden
                            : args.top_k == PITH_TOP_K_ALL || raw_logits ? OutputKind::Logits
                                                                         : OutputKind::TopK;
    for (uint32_t i : args.output_indices) seq.outputs.push_back({i, kind, k, 0});
    if (!args.allowed.empty()) {
      const size_t words = (size_t{ctl_.model_config().vocab_size} + 63) / 64;
      if (kind != OutputKind::TopK)
        return reject("forward_tokens", PITH_ERR_BAD_ARGUMENT,
                      "token masks need an ordinary top_k (PITH_TOP_K_ALL and PITH_TOP_K_LOGITS "
                      "already return every token; PITH_TOP_K_HIDDEN returns no token)");
      if (args.allowed.size() != args.output_indices.size() * words)
        return reject(
            "forward_tokens", PITH_ERR_BAD_ARGUMENT,
            fmt::format("{} mask words; {} outputs over a vocabulary of {} need {}",
                        args.allowed.size(), args.output_indices.size(),
                        ctl_.model_config().vocab_size, args.output_indices.size() * words));
      for (size_t o = 0; o < seq.outputs.size(); ++o)
        seq.outputs[o].allowed = std::make_shared<const TokenMask>(
            args.allowed.begin() + o * words, args.allowed.begin() + (o + 1) * words);
    }
    if (!args.adjust.empty()) {
      if (kind != OutputKind::TopK)
        return reject("forward_tokens", PITH_ERR_BAD_ARGUMENT,
                      "logit adjustments need an ordinary top_k (PITH_TOP_K_ALL and "
                      "PITH_TOP_K_LOGITS return the model's own logits)");
      std::string why = adjustments_by_output(args.adjust, ctl_.model_config().vocab_size, seq);
      if (!why.empty()) return reject("forward_tokens", PITH_ERR_BAD_ARGUMENT, why);
    }
    pith_status_t ms = apply_page_masks("forward_tokens", seq);
    if (ms != PITH_OK) return ms;
    auto err = q->deferred_error;
    CallCompletion completion = [err, raw_logits, log = error_log(),
                                 done = std::move(done)](CallOutcome&& o) {
      if (!o) return done(log_failure(log, "forward_tokens", o.failure()), {});
      if (int32_t e = err->exchange(PITH_OK)) return done(e, {});
      std::string bytes;
      for (const auto& out : o->forward.outputs) {
        if (!out.hidden.empty())
          append_hidden(bytes, out.hidden);
        else if (out.logits.empty())
          append_dist(bytes, out.dist);
        else if (raw_logits)
          append_raw_logits(bytes, out.logits);
        else
          append_full_dist(bytes, out.logits);
      }
      done(PITH_OK, std::move(bytes));
    };
    return check("forward_tokens", parked([&] {
                   return ctl_.forward(id_, q->id, std::move(seq), std::move(completion), lease);
                 }));
  }

 private:
  struct QueueState {
    QueueId id = 0;  // 0: destroyed
    std::shared_ptr<std::atomic<int32_t>> deferred_error;
    uint32_t adapter = 0;  // queue_set_adapter's handle, 0: the base model
    uint32_t state = 0;    // queue_set_state's handle (hybrid models), 0: none
  };

  pith_status_t match_prefix(const char* call, const QueueState& q,
                             std::span<const uint32_t> tokens, std::vector<uint32_t>* pages,
                             uint32_t* matched, uint32_t* state, uint32_t* shared) {
    std::vector<int32_t> ids(tokens.begin(), tokens.end());
    const uint32_t adapter = adapter_id(q);
    auto m = parked([&] { return ctl_.prefix_match(id_, ids, adapter); });
    if (!m) return fail(call, m.failure());
    *pages = std::move(m->handles);
    *matched = static_cast<uint32_t>(m->matched);
    *state = m->state;
    *shared = static_cast<uint32_t>(m->shared);
    return PITH_OK;
  }
  pith_status_t no_states(const char* call, pith_status_t code) const {
    return reject(call, code, "the model has no recurrent layers (no \"recurrent_state\" trait)");
  }
  uint32_t state_of(const QueueState& q) const {
    return q.state ? q.state : SequenceInput::kNoState;
  }

  // The lease behind an adapter handle, or why the handle is bad. `handle` 0 falls back to the
  // queue's adapter (which may be 0: the base model, a null lease).
  bool adapter_for(const char* call, const QueueState& q, uint32_t handle,
                   std::shared_ptr<const AdapterLease>* lease, pith_status_t* st) const {
    if (handle == 0) handle = q.adapter;
    if (handle == 0) return true;
    if (handle > adapters_.size()) {
      *st = reject(call, PITH_ERR_BAD_HANDLE,
                   fmt::format("adapter handle {} was not opened (adapter_open)", handle));
      return false;
    }
    *lease = adapters_[handle - 1];
    return true;
  }

  // Calls `call` until the controller stops answering Waiting, parking the instance in between
  // (its allocation waits for pages, or it is suspended). Without parking, Waiting is the answer.
  template <typename Call>
  auto parked(Call&& call) -> decltype(call()) {
    for (;;) {
      auto r = call();
      if (r.code() != Status::Waiting || !parking_.park) return r;
      if (!parking_.park())
        return Failure{Status::Terminated, "killed while waiting for KV memory"};
    }
  }

  // The backend id of a queue's adapter (0: base), for the prefix cache.
  uint32_t adapter_id(const QueueState& q) const {
    return q.adapter == 0 ? 0 : adapters_[q.adapter - 1]->id();
  }

  QueueState* find(uint32_t handle) {
    if (handle == 0 || handle > queues_.size() || queues_[handle - 1].id == 0) return nullptr;
    return &queues_[handle - 1];
  }

  // Completion for a fire-and-forget command: log its failure and remember the code for the
  // queue's next future.
  pith::CallCompletion record(QueueState& q, const char* call) {
    auto err = q.deferred_error;
    return [err, call, log = error_log()](CallOutcome&& o) {
      if (!o) err->store(log_failure(log, call, o.failure()));
    };
  }

  // The one way a control-layer failure leaves the session: the message to the instance's log,
  // the code to the guest.
  pith_status_t fail(const char* call, const Failure& f) const {
    return log_failure(error_log(), call, f);
  }
  pith_status_t check(const char* call, const Result<void>& r) const {
    return r ? PITH_OK : fail(call, r.failure());
  }
  template <typename T>
  pith_status_t take(const char* call, Result<T> r, T& out) const {
    if (!r) return fail(call, r.failure());
    out = std::move(*r);
    return PITH_OK;
  }
  // A request this session refuses before it reaches the controller.
  pith_status_t reject(const char* call, pith_status_t code, const std::string& why) const {
    if (error_log()) error_log()(fmt::format("{}: {}", call, why));
    return code;
  }

  uint32_t clamp_top_k(uint32_t k) const {
    uint32_t vocab = ctl_.model_config().vocab_size;
    if (k == 0) k = kDefaultTopK;
    return std::min(k, vocab);
  }

  size_t context_len(const SequenceInput& seq) const {
    return seq.kv_pages.empty() ? 0
                                : (seq.kv_pages.size() - 1) * ctl_.page_size() + seq.last_page_len;
  }

  // Hides the slots mask_kvpage hid in any page of the table, on top of the given (or causal)
  // mask.
  pith_status_t apply_page_masks(const char* call, SequenceInput& seq) const {
    if (page_masks_.empty()) return PITH_OK;
    const uint32_t ps = ctl_.page_size();
    const size_t ctx = context_len(seq), n = seq.n_inputs();
    if (n > ctx || seq.last_page_len == 0 || seq.last_page_len > ps)
      return reject(call, PITH_ERR_BAD_ARGUMENT,
                    fmt::format("{} inputs, last_page_len {}: not a valid context of {} slots", n,
                                seq.last_page_len, ctx));
    std::vector<size_t> hidden;
    for (size_t i = 0; i < seq.kv_pages.size(); ++i) {
      auto it = page_masks_.find(seq.kv_pages[i]);
      if (it == page_masks_.end()) continue;
      for (size_t s = 0; s < ps && i * ps + s < ctx; ++s)
        if (it->second[s]) hidden.push_back(i * ps + s);
    }
    if (hidden.empty()) return PITH_OK;
    if (seq.mask.empty()) {
      for (size_t r = 0; r < n; ++r)
        seq.mask.push_back(
            {static_cast<uint32_t>(ctx - n + r + 1), static_cast<uint32_t>(n - r - 1)});
    } else if (seq.mask.size() != n) {
      return reject(call, PITH_ERR_BAD_ARGUMENT,
                    fmt::format("mask has {} rows for {} inputs", seq.mask.size(), n));
    }
    for (auto& row : seq.mask) {
      auto visible = runs_to_bools(row, ctx);
      for (size_t s : hidden) visible[s] = 0;
      row = bools_to_runs(visible);
    }
    return PITH_OK;
  }

  ControlModelApi& api_;
  Controller& ctl_;
  uint64_t id_;
  std::vector<QueueState> queues_;
  std::vector<std::shared_ptr<const AdapterLease>> adapters_;      // handle i+1: the i-th opened
  std::unordered_map<uint32_t, uint32_t> emb_pos_;                 // Embed handle -> position
  std::unordered_map<uint32_t, std::vector<uint8_t>> page_masks_;  // page handle -> hidden slots
  Parking parking_;
};

ControlModelApi::ControlModelApi(Controller& controller, const Tokenizer& tokenizer,
                                 std::string model_name, ContentionKillFn on_kill)
    : controller_(controller),
      tokenizer_(tokenizer),
      model_name_(std::move(model_name)),
      on_kill_(std::move(on_kill)) {}

std::shared_ptr<const TokenTrie> ControlModelApi::vocab_trie() {
  std::lock_guard lock(trie_mutex_);
  if (!trie_) {
    const size_t n = tokenizer_.vocab_size();
    std::vector<std::string> bytes(n);
    std::vector<bool> special(n, false);
    for (size_t i = 0; i < n; ++i) {
      bytes[i] = tokenizer_.token_bytes(static_cast<int32_t>(i));
      special[i] = tokenizer_.is_special(static_cast<int32_t>(i));
    }
    trie_ = std::make_shared<const TokenTrie>(bytes, special);
  }
  return trie_;
}

std::unique_ptr<ModelSession> ControlModelApi::open_session(uint64_t instance_id) {
  return std::make_unique<ControlSession>(*this, instance_id);
}

}  // namespace pith::runtime
