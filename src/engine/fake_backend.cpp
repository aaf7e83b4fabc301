// The weightless backend's handlers: validation shared with the real engine, then records
// instead of tensors. See fake_backend.h for what an output depends on.
#include "engine/fake_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <thread>

#include "backend/batch_validation.h"
#include "common/error.h"
#include "engine/kv_pool.h"
#include "engine/token_distribution.h"

namespace pith {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kTokenSalt = 0x746F6B656E000000ull;     // "token"
constexpr uint64_t kPositionSalt = 0x706F730000000000ull;  // "pos"
constexpr uint64_t kUnwrittenState = 0x756E7772697474ull;  // "unwritt"
// Default logits are spread uniformly over [0, kSpread): distinct states give distinct argmaxes
// and a distribution with a clear but not certain top entry.
constexpr float kSpread = 8.0f;
// The logit of a token a script gave no mass: exp() of it is ~1e-35, far below any real mass.
constexpr float kNoMassLogit = -80.0f;

// splitmix64's finaliser: a bijective 64-bit mix.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// [0, 1) from the top 24 bits.
float unit(uint64_t h) {
  return float(h >> 40) * (1.0f / 16777216.0f);
}

FakeEntry token_entry(int32_t token, uint32_t position) {
  return FakeEntry{token, mix(kTokenSalt ^ (uint64_t(uint32_t(token)) * kGolden)), position, true};
}

// One visible slot's contribution; slots combine by addition, so the view is a multiset (like
// attention, blind to slot order and to which page holds a slot).
uint64_t slot_term(const FakeEntry& e) {
  return mix(e.state ^ mix(kPositionSalt + e.position));
}

uint64_t view_state(uint64_t slot_sum, uint64_t n_visible, const FakeEntry& input) {
  uint64_t h = mix(slot_sum ^ mix(n_visible * kGolden));
  h = mix(h ^ input.state);
  return mix(h ^ mix(kPositionSalt ^ (uint64_t{input.position} << 1) ^ 1));
}

const char* handler_name(FakeHandler h) {
  switch (h) {
    case FakeHandler::Forward:
      return "forward";
    case FakeHandler::EmbedTokens:
      return "embed_tokens";
    case FakeHandler::CopyKv:
      return "copy_kv";
    case FakeHandler::NextDist:
      return "next_dist";
    case FakeHandler::SaveKv:
      return "save_kv_pages";
    case FakeHandler::LoadKv:
      return "load_kv_pages";
  }
  return "?";
}

uint32_t checked_size(uint32_t value, const char* what) {
  if (value == 0) fail("fake backend: {} must be at least 1", what);
  return value;
}

// The CPU engine's rule (engine/kv_pool.h): whole pages of the f32 K/V layout in the budget.
uint32_t pages_in_budget(const ModelConfig& c, const BackendOptions& o) {
  const KvShape shape{c.n_layers, c.n_kv_heads, c.head_dim, o.kv_page_size, {}};
  if (shape.n_layers == 0 || shape.n_kv_heads == 0 || shape.head_dim == 0 || shape.page_size == 0)
    fail("KV pool: empty shape (layers {}, kv heads {}, head_dim {}, page size {})", shape.n_layers,
         shape.n_kv_heads, shape.head_dim, shape.page_size);
  const size_t n = o.kv_memory_bytes / shape.page_bytes();
  if (n == 0)
    fail("KV pool: a budget of {} bytes does not hold one page of {} bytes ({} tokens)",
         o.kv_memory_bytes, shape.page_bytes(), shape.page_size);
  return static_cast<uint32_t>(std::min<size_t>(n, UINT32_MAX - 1));
}

const ModelConfig& checked_config(const ModelConfig& c) {
  if (c.vocab_size == 0 || c.d_model == 0)
    fail("fake backend: the config needs a vocabulary and d_model (got {} and {})", c.vocab_size,
         c.d_model);
  return c;
}

}  // namespace

FakeBackend::FakeBackend(const ModelConfig& config, const FakeBackendOptions& options)
    : config_(checked_config(config)),
      page_size_(checked_size(options.page_size, "page size")),
      pages_(checked_size(options.n_pages, "the number of KV pages"), "KV pages"),
      embeds_(checked_size(options.n_embeds, "the number of Embed slots"), "Embed slots"),
      embed_records_(options.n_embeds) {}

FakeBackend::FakeBackend(const ModelConfig& config, const BackendOptions& options)
    : FakeBackend(config, FakeBackendOptions{options.kv_page_size, pages_in_budget(config, options),
                                             options.max_embeds}) {}

BackendInfo FakeBackend::info() const {
  BackendInfo i;
  i.name = "fake";
  i.device = "no device (deterministic fake, no weights)";
  i.kv_bytes = size_t{pages_.capacity()} * page_size_ * sizeof(FakeEntry);
  i.workspace_bytes = embed_records_.size() * sizeof(EmbedRecord);
  return i;
}

// ---- handlers ----

std::vector<SequenceResult> FakeBackend::forward(const std::vector<SequenceInput>& batch) {
  enter(FakeHandler::Forward, [&] {
    validate_batch(batch, config_, page_size_, pages_, embeds_);
    for (size_t si = 0; si < batch.size(); ++si)  // load_adapter refuses, so no id is loaded
      if (batch[si].adapter != 0)
        fail("forward: sequence {}: adapter {} is not loaded", si, batch[si].adapter);
  });
  size_t n_inputs = 0, n_outputs = 0;
  for (const SequenceInput& s : batch) {
    n_inputs += s.n_inputs();
    n_outputs += s.outputs.size();
  }
  std::chrono::microseconds delay;
  FakeScript script;
  {
    std::lock_guard lock(knob_mu_);
    FakeCounters& c = counters_;
    c.batches++;
    c.sequences += batch.size();
    c.tokens += n_inputs;
    c.outputs += n_outputs;
    c.max_batch_sequences = std::max<uint64_t>(c.max_batch_sequences, batch.size());
    c.max_batch_tokens = std::max<uint64_t>(c.max_batch_tokens, n_inputs);
    delay = delay_per_call_ + delay_per_input_ * static_cast<int64_t>(n_inputs);
    script = script_;
  }
  if (delay.count() > 0) std::this_thread::sleep_for(delay);

  std::lock_guard lock(state_mu_);
  // Every input's entry first (Embed inputs are read before any output Embed is written), then
  // every KV write, then every read: in the real engine a layer's K/V of all inputs is written
  // before that layer's attention, so sequences sharing a page see each other's writes.
  std::vector<std::vector<FakeEntry>> inputs(batch.size());
  for (size_t si = 0; si < batch.size(); ++si) {
    const SequenceInput& s = batch[si];
    for (size_t i = 0; i < s.n_inputs(); ++i) {
      FakeEntry e =
          s.tokens.empty() ? embed_records_[s.embed_slots[i]].entry : token_entry(s.tokens[i], 0);
      if (!e.written) e.state = kUnwrittenState;  // an allocated Embed nothing wrote yet
      e.position = s.positions[i];
      e.written = true;
      inputs[si].push_back(e);
    }
  }
  for (size_t si = 0; si < batch.size(); ++si) {
    const SequenceInput& s = batch[si];
    const uint32_t n = static_cast<uint32_t>(s.n_inputs());
    const uint32_t ctx =
        static_cast<uint32_t>((s.kv_pages.size() - 1) * page_size_ + s.last_page_len);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t slot = ctx - n + i;
      kv_slot(s.kv_pages[slot / page_size_], slot % page_size_) = inputs[si][i];
    }
  }
  std::vector<SequenceResult> results(batch.size());
  for (size_t si = 0; si < batch.size(); ++si) {
    const SequenceInput& s = batch[si];
    const uint32_t ctx =
        static_cast<uint32_t>((s.kv_pages.size() - 1) * page_size_ + s.last_page_len);
    results[si].outputs.resize(s.outputs.size());
    for (size_t oi = 0; oi < s.outputs.size(); ++oi) {
      const OutputSpec& o = s.outputs[oi];
      FakeView view = view_of(s, o.input_index, ctx, inputs[si][o.input_index]);
      OutputResult& r = results[si].outputs[oi];
      switch (o.kind) {
        case OutputKind::TopK: {
          const std::vector<float> l = logits_for(view, script);
          r.dist = top_k_distribution(l.data(), l.size(), o.top_k,
                                      o.allowed ? o.allowed->data() : nullptr, o.adjust.get());
          break;
        }
        case OutputKind::Logits:
          r.logits = logits_for(view, script);
          break;
        case OutputKind::Hidden:  // the fake's state is its logits row
          r.hidden = logits_for(view, script);
          break;
        case OutputKind::Embed: {
          EmbedRecord& rec = embed_records_[o.embed_slot];
          rec.entry = FakeEntry{-1, view.state, view.position, true};
          rec.view = std::make_shared<const FakeView>(std::move(view));
          break;
        }
      }
    }
  }
  return results;
}

void FakeBackend::embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> positions,
                               std::span<const uint32_t> slots) {
  enter(FakeHandler::EmbedTokens,
        [&] { validate_embed_tokens(tokens, positions, slots, config_, embeds_); });
  std::lock_guard lock(state_mu_);
  for (size_t i = 0; i < tokens.size(); ++i) {
    EmbedRecord& rec = embed_records_[slots[i]];
    rec.entry = token_entry(tokens[i], positions[i]);
    auto view = std::make_shared<FakeView>();
    view->token = tokens[i];
    view->position = positions[i];
    view->state = view_state(0, 0, rec.entry);
    rec.view = std::move(view);
  }
}

void FakeBackend::copy_kv(uint32_t src_page, uint32_t dst_page, uint32_t src_offset,
                          uint32_t dst_offset, uint32_t n) {
  enter(FakeHandler::CopyKv, [&] {
    validate_copy_kv(src_page, dst_page, src_offset, dst_offset, n, page_size_, pages_);
  });
  std::lock_guard lock(state_mu_);
  std::vector<FakeEntry> moved(n);  // through a copy: overlapping ranges behave like memmove
  for (uint32_t i = 0; i < n; ++i) moved[i] = kv_slot_or_empty(src_page, src_offset + i);
  for (uint32_t i = 0; i < n; ++i) kv_slot(dst_page, dst_offset + i) = moved[i];
}

void FakeBackend::save_kv_pages(std::span<const uint32_t> pages, std::span<std::byte> out) {
  enter(FakeHandler::SaveKv,
        [&] { validate_kv_images("save_kv_pages", pages, out.size(), kv_page_bytes(), pages_); });
  {
    std::lock_guard knobs(knob_mu_);
    counters_.pages_saved += pages.size();
  }
  std::lock_guard lock(state_mu_);
  std::byte* at = out.data();
  for (uint32_t page : pages)
    for (uint32_t s = 0; s < page_size_; ++s) {
      const FakeEntry e = kv_slot_or_empty(page, s);
      const uint8_t written = e.written ? 1 : 0;
      std::memcpy(at, &e.token, 4);
      std::memcpy(at + 4, &e.state, 8);
      std::memcpy(at + 12, &e.position, 4);
      std::memcpy(at + 16, &written, 1);
      at += kEntryBytes;
    }
}

void FakeBackend::load_kv_pages(std::span<const uint32_t> pages, std::span<const std::byte> in) {
  enter(FakeHandler::LoadKv,
        [&] { validate_kv_images("load_kv_pages", pages, in.size(), kv_page_bytes(), pages_); });
  {
    std::lock_guard knobs(knob_mu_);
    counters_.pages_loaded += pages.size();
  }
  std::lock_guard lock(state_mu_);
  const std::byte* at = in.data();
  for (uint32_t page : pages)
    for (uint32_t s = 0; s < page_size_; ++s) {
      FakeEntry& e = kv_slot(page, s);
      uint8_t written = 0;
      std::memcpy(&e.token, at, 4);
      std::memcpy(&e.state, at + 4, 8);
      std::memcpy(&e.position, at + 12, 4);
      std::memcpy(&written, at + 16, 1);
      e.written = written != 0;
      at += kEntryBytes;
    }
}

TokenDistribution FakeBackend::next_dist(uint32_t embed_slot, uint32_t top_k) {
  enter(FakeHandler::NextDist, [&] { validate_next_dist(embed_slot, top_k, embeds_); });
  const FakeScript script = this->script();
  std::lock_guard lock(state_mu_);
  const EmbedRecord& rec = embed_records_[embed_slot];
  FakeView unwritten;
  unwritten.state = kUnwrittenState;
  const std::vector<float> l = logits_for(rec.view ? *rec.view : unwritten, script);
  return top_k_distribution(l.data(), l.size(), top_k);
}

FakeScript script_continuation(std::vector<int32_t> prefix, std::vector<int32_t> continuation) {
  return [prefix = std::move(prefix),
          cont = std::move(continuation)](const FakeView& v) -> std::optional<TokenDistribution> {
    const std::vector<int32_t>& t = v.visible_tokens;
    for (size_t k = 0; k < cont.size() && prefix.size() + k <= t.size(); ++k) {
      const auto start = t.end() - static_cast<ptrdiff_t>(prefix.size() + k);
      if (std::equal(prefix.begin(), prefix.end(), start) &&
          std::equal(cont.begin(), cont.begin() + static_cast<ptrdiff_t>(k),
                     t.end() - static_cast<ptrdiff_t>(k)))
        return FakeBackend::certainly(cont[k]);
    }
    return std::nullopt;
  };
}

// ---- knobs and inspection ----

void FakeBackend::set_script(FakeScript script) {
  std::lock_guard lock(knob_mu_);
  script_ = std::move(script);
}

void FakeBackend::set_forward_delay(std::chrono::microseconds per_call,
                                    std::chrono::microseconds per_input) {
  std::lock_guard lock(knob_mu_);
  delay_per_call_ = per_call;
  delay_per_input_ = per_input;
}

void FakeBackend::fail_call(FakeHandler handler, uint64_t n, FakeFailure kind, uint32_t times) {
  if (n == 0) fail("fake backend: fail_call counts calls from 1 (the next call)");
  std::lock_guard lock(knob_mu_);
  failures_[static_cast<size_t>(handler)] = PendingFailure{n, kind, std::max(times, 1u)};
}

FakeCounters FakeBackend::counters() const {
  std::lock_guard lock(knob_mu_);
  return counters_;
}

FakeEntry FakeBackend::kv_entry(uint32_t page, uint32_t slot) const {
  if (!pages_.valid(page) || slot >= page_size_)
    fail("fake backend: no KV slot {} of page {}", slot, page);
  std::lock_guard lock(state_mu_);
  return kv_slot_or_empty(page, slot);
}

FakeEntry FakeBackend::embed_entry(uint32_t embed_slot) const {
  if (embed_slot >= embed_records_.size()) fail("fake backend: no Embed slot {}", embed_slot);
  std::lock_guard lock(state_mu_);
  return embed_records_[embed_slot].entry;
}

std::vector<float> FakeBackend::embed_vector(uint32_t embed_slot) const {
  const FakeEntry e = embed_entry(embed_slot);
  const uint64_t seed = e.written ? e.state : kUnwrittenState;
  std::vector<float> v(config_.d_model);
  for (uint32_t j = 0; j < v.size(); ++j) v[j] = 2.0f * unit(mix(seed + (j + 1) * kGolden)) - 1.0f;
  return v;
}

std::vector<float> FakeBackend::logits(const FakeView& view) const {
  return logits_for(view, script());
}

TokenDistribution FakeBackend::certainly(int32_t token) {
  return TokenDistribution{{token}, {1.0f}};
}

// ---- helpers ----

void FakeBackend::enter(FakeHandler handler, const std::function<void()>& validate) {
  {
    std::lock_guard lock(knob_mu_);
    switch (handler) {
      case FakeHandler::Forward:
        counters_.forward_calls++;
        break;
      case FakeHandler::EmbedTokens:
        counters_.embed_tokens_calls++;
        break;
      case FakeHandler::CopyKv:
        counters_.copy_kv_calls++;
        break;
      case FakeHandler::NextDist:
        counters_.next_dist_calls++;
        break;
      case FakeHandler::SaveKv:
      case FakeHandler::LoadKv:
        break;  // counted in pages by the handlers
    }
  }
  try {
    validate();
  } catch (...) {
    std::lock_guard lock(knob_mu_);
    counters_.rejected++;
    throw;
  }
  bool failing = false;
  FakeFailure kind = FakeFailure::Error;
  {
    std::lock_guard lock(knob_mu_);
    PendingFailure& f = failures_[static_cast<size_t>(handler)];
    if (f.calls_left > 0 && --f.calls_left == 0) {
      failing = true;
      kind = f.kind;
      counters_.injected_failures++;
      if (f.times > 1) {
        --f.times;
        f.calls_left = 1;  // the next call fails too
      }
    }
  }
  if (!failing) return;
  if (kind == FakeFailure::OutOfMemory) throw std::bad_alloc();
  fail("fake backend: injected failure of this {} call", handler_name(handler));
}

FakeScript FakeBackend::script() const {
  std::lock_guard lock(knob_mu_);
  return script_;
}

FakeEntry& FakeBackend::kv_slot(uint32_t page, uint32_t slot) {
  std::vector<FakeEntry>& p = kv_[page];
  if (p.empty()) p.resize(page_size_);
  return p[slot];
}

FakeEntry FakeBackend::kv_slot_or_empty(uint32_t page, uint32_t slot) const {
  auto it = kv_.find(page);
  if (it == kv_.end()) return FakeEntry{-1, kUnwrittenState, 0, false};
  const FakeEntry& e = it->second[slot];
  return e.written ? e : FakeEntry{-1, kUnwrittenState, 0, false};
}

FakeView FakeBackend::view_of(const SequenceInput& seq, uint32_t input, uint32_t ctx,
                              const FakeEntry& input_entry) const {
  FakeView view;
  view.token = input_entry.token;
  view.position = input_entry.position;
  uint64_t sum = 0;
  auto see = [&](uint32_t first, uint32_t end) {
    for (uint32_t s = first; s < end; ++s) {
      const FakeEntry e = kv_slot_or_empty(seq.kv_pages[s / page_size_], s % page_size_);
      view.visible_tokens.push_back(e.token);
      view.visible_positions.push_back(e.position);
      sum += slot_term(e);
    }
  };
  if (seq.mask.empty()) {
    see(0, ctx - static_cast<uint32_t>(seq.n_inputs()) + input + 1);
  } else {
    uint32_t at = 0;
    const std::vector<uint32_t>& runs = seq.mask[input];
    for (size_t r = 0; r < runs.size(); ++r) {
      if (r % 2 == 0) see(at, at + runs[r]);
      at += runs[r];
    }
  }
  view.state = view_state(sum, view.visible_tokens.size(), input_entry);
  return view;
}

std::vector<float> FakeBackend::logits_for(const FakeView& view, const FakeScript& script) const {
  const uint32_t V = config_.vocab_size;
  std::optional<TokenDistribution> scripted;
  if (script) scripted = script(view);
  std::vector<float> l(V);
  if (!scripted) {
    for (uint32_t v = 0; v < V; ++v) l[v] = kSpread * unit(mix(view.state ^ ((v + 1) * kGolden)));
    return l;
  }
  const TokenDistribution& d = *scripted;
  if (d.ids.size() != d.probs.size() || d.ids.empty())
    fail("fake backend: script returned {} ids and {} probabilities", d.ids.size(), d.probs.size());
  std::vector<uint8_t> listed(V, 0);
  double total = 0;
  for (size_t i = 0; i < d.ids.size(); ++i) {
    const int32_t id = d.ids[i];
    if (id < 0 || uint32_t(id) >= V)
      fail("fake backend: script token {} out of range (vocab {})", id, V);
    if (listed[id]) fail("fake backend: script lists token {} twice", id);
    if (!(d.probs[i] > 0.0f) || !std::isfinite(d.probs[i]))
      fail("fake backend: script gives token {} probability {}", id, d.probs[i]);
    listed[id] = 1;
    total += d.probs[i];
  }
  if (total > 1.0 + 1e-5) fail("fake backend: script probabilities sum to {}", total);
  const uint32_t others = V - static_cast<uint32_t>(d.ids.size());
  const double left = 1.0 - total;
  const float other_logit =
      others > 0 && left > 1e-30 ? float(std::log(left / others)) : kNoMassLogit;
  std::fill(l.begin(), l.end(), std::max(other_logit, kNoMassLogit));
  for (size_t i = 0; i < d.ids.size(); ++i) l[d.ids[i]] = std::log(d.probs[i]);
  return l;
}

}  // namespace pith
