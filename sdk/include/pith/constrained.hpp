// pith/constrained.hpp: grammar-constrained generation on a Context (the paper's "EBNF
// decoding"): each step asks for the full-vocabulary distribution (PITH_TOP_K_ALL), masks it
// with the grammar (pith/grammar_matcher.hpp) and samples among the allowed tokens only, so the
// grammar holds for any model and any temperature, not just when the top-K happens to contain a
// valid token.
//
//   auto trie = pith::vocabulary_trie(*model);
//   pith::grammar::Automaton a(grammar, *trie);
//   pith::ConstrainedGeneration g = pith::generate_constrained(*ctx, a, {.max_tokens = 64});
//
// Budget: when the shortest completion of the input (in bytes) no longer fits in the tokens
// left, generation stops sampling and appends that completion (tokenized greedily over the
// vocabulary trie), so the output is always a complete sentence of the grammar. The forced
// tokens are counted in `forced` and may take the output past max_tokens by a few tokens.
#pragma once

#include <math.h>

#include <memory>
#include <optional>
#include <pith/context.hpp>
#include <pith/grammar_matcher.hpp>
#include <pith/masked_sampling.hpp>
#include <pith/rng.hpp>
#include <string>
#include <vector>

namespace pith {

// The model's vocabulary as a token trie, special tokens left out: the host's copy
// (pith_vocab_trie, built once per model), or built here from the vocabulary where the host
// has none to give.
inline Result<TokenTrie> vocabulary_trie(const Model& model) {
  uint32_t bytes = 0;
  pith_status_t st = pith_vocab_trie(model.handle(), nullptr, 0, &bytes);
  if (st == PITH_ERR_BUFFER_TOO_SMALL && bytes % 4 == 0) {
    // Not value-initialised: the host writes every word (4-13 MB for 32k-262k tokens).
    std::shared_ptr<uint32_t[]> words(new uint32_t[bytes / 4]);
    uint32_t got = 0;
    st = pith_vocab_trie(model.handle(), words.get(), bytes, &got);
    TokenTrie trie;
    if (st == PITH_OK && got == bytes && TokenTrie::from_flat(std::move(words), bytes / 4, &trie))
      return trie;
    if (st == PITH_OK) return Error(PITH_ERR_INTERNAL, "vocabulary trie: not a trie of this SDK");
    return Error(st, "vocabulary trie");
  }
  if (st != PITH_ERR_UNSUPPORTED) return Error(st, "vocabulary trie");
  Result<std::vector<std::string>> vocab = model.vocab();
  if (!vocab) return std::move(vocab).take_error();
  std::vector<bool> excluded(vocab->size(), false);
  Result<std::vector<uint32_t>> special = model.special_tokens();
  if (special) {
    for (uint32_t id : *special)
      if (id < excluded.size()) excluded[id] = true;
  } else {  // a host without pith_vocab_special: fall back to the shape of Llama 3's names
    for (size_t i = 0; i < vocab->size(); ++i) excluded[i] = looks_special((*vocab)[i]);
  }
  return TokenTrie(*vocab, excluded);
}

// A grammar constraint for a sampling loop of one's own (e.g. the OpenAI inferlet's choices,
// with Sampler::sample's `allowed`), which also keeps the output within a token budget: a
// sampled token is taken only if a completion of the grammar still fits in the tokens left
// after it; otherwise the constraint switches to a shortest completion (tokenized greedily
// over the vocabulary) and allows only its tokens from then on. So the output is a complete
// sentence within max_tokens whenever the budget can hold one at all.
//
//   const auto& allowed = c.mask(eos);
//   // left: the budget including this step
//   uint32_t tok = c.choose(sampler.sample(d, &allowed), left);
class GrammarConstraint {
 public:
  explicit GrammarConstraint(grammar::Automaton& a) : a_(&a), m_(a) {}

  // The tokens allowed next: the grammar's, or the next token of the completion being forced.
  // `eos` is allowed once the input is complete (UINT32_MAX: never).
  const std::vector<uint64_t>& mask(uint32_t eos) {
    if (forcing()) {
      mask_.assign(a_->mask_words(), 0);
      const uint32_t t = forced_[forced_at_];
      mask_[t >> 6] |= uint64_t{1} << (t & 63);
      return mask_;
    }
    m_.fill_mask(mask_, eos);
    return mask_;
  }

  // The token to take, given the one sampled under mask(): the sampled one, unless its
  // completion would no longer fit in `left` - 1 tokens (then the first token of a shortest
  // completion, and forcing starts). Advances the grammar over the returned token, except for
  // an end token (which is not part of the grammar's text).
  uint32_t choose(uint32_t sampled, size_t left, uint32_t eos = UINT32_MAX) {
    if (forcing()) {
      const uint32_t t = forced_[forced_at_++];
      m_.accept_token(t);
      return t;
    }
    if (sampled == eos && m_.is_complete()) return sampled;
    if (sampled < a_->trie().vocab_size() && a_->trie().usable(sampled)) {
      const uint32_t next = a_->run(m_.state(), a_->trie().bytes(sampled));
      if (next != grammar::Automaton::kDead && completion_tokens(a_->completion(next)) < left) {
        m_.accept_token(sampled);
        return sampled;
      }
    }
    // Force a shortest completion from here (it fits if the budget allowed one before).
    forced_ = tokenize(m_.completion());
    forced_at_ = 0;
    if (forced_.empty()) return sampled;  // complete or not spellable: leave it to the model
    return choose(sampled, left, eos);
  }

  // The input so far is a complete sentence (it may still continue).
  bool complete() const { return m_.is_complete(); }
  bool forcing() const { return forced_at_ < forced_.size(); }

 private:
  // Greedy longest-prefix tokens of `text`; empty if some byte cannot be spelled.
  std::vector<uint32_t> tokenize(const std::string& text) const {
    std::vector<uint32_t> out;
    for (size_t at = 0; at < text.size();) {
      const int32_t t = a_->trie().longest_prefix(std::string_view(text).substr(at));
      if (t < 0) return {};
      out.push_back(static_cast<uint32_t>(t));
      at += a_->trie().bytes(static_cast<uint32_t>(t)).size();
    }
    return out;
  }
  // Tokens needed to spell `text` (a token holds at least one byte, so short texts skip the
  // tokenization).
  size_t completion_tokens(const std::string& text) const {
    if (text.size() <= 1) return text.size();
    const std::vector<uint32_t> t = tokenize(text);
    return t.empty() && !text.empty() ? text.size() : t.size();
  }

  grammar::Automaton* a_;
  grammar::Matcher m_;
  std::vector<uint64_t> mask_;
  std::vector<uint32_t> forced_;
  size_t forced_at_ = 0;
};

struct ConstrainedConfig {
  uint32_t max_tokens = 64;
  float temperature = 0.0f;  // 0: greedy among the allowed tokens
  // temperature > 0: sample among the top_k most likely allowed tokens, which the server ranks
  // under the step's mask; 0: among every allowed token (the whole vocabulary comes up each
  // step). Greedy steps always send the mask and take the best allowed token.
  uint32_t top_k = 0;
  // Every step brings the whole vocabulary up and masks it in the inferlet, greedy ones too
  // (how steps ran before masks went down with them: a baseline for benchmarks).
  bool whole_vocabulary = false;
  uint64_t seed = 0;
  bool stop_at_eos = true;  // the end token is allowed once the input is a complete sentence
};

struct ConstrainedGeneration {
  std::string text;              // the bytes of the generated tokens, as the grammar saw them
  std::vector<uint32_t> tokens;  // sampled, then forced
  uint32_t sampled = 0;          // tokens chosen by the model (one forward each)
  uint32_t forced = 0;           // tokens of the completion appended at the budget's end
  std::string finish_reason;     // "eos", "complete" (nothing else allowed), "budget", or an error
  std::optional<Error> error;    // the error that ended generation, if one did
  uint64_t mask_ns = 0;          // total time spent computing masks
  uint64_t allowed_total = 0;    // sum over steps of the number of allowed tokens
};

// Generates from ctx (its pending tokens are the prompt) under the automaton's grammar.
inline ConstrainedGeneration generate_constrained(Context& ctx, grammar::Automaton& a,
                                                  const ConstrainedConfig& c) {
  ConstrainedGeneration g;
  grammar::Matcher m(a);
  Rng rng(c.seed);
  const uint32_t eos = ctx.info().eos_token;
  std::vector<uint64_t> mask;
  for (;;) {
    const size_t left = c.max_tokens > g.tokens.size() ? c.max_tokens - g.tokens.size() : 0;
    const std::string rest = m.completion();
    if (!m.is_complete() && rest.size() >= left) {  // finish within the budget: force the rest
      for (size_t at = 0; at < rest.size();) {
        int32_t t = a.trie().longest_prefix(std::string_view(rest).substr(at));
        if (t < 0 || !m.accept_token(static_cast<uint32_t>(t))) {
          g.finish_reason = "internal error";
          return g;
        }
        g.tokens.push_back(static_cast<uint32_t>(t));
        g.text += a.trie().bytes(static_cast<uint32_t>(t));
        ++g.forced;
        at += a.trie().bytes(static_cast<uint32_t>(t)).size();
      }
      g.finish_reason = "budget";
      return g;
    }
    if (m.is_complete() && left == 0) {
      g.finish_reason = "budget";
      return g;
    }
    const uint64_t t0 = now_ns();
    m.fill_mask(mask, c.stop_at_eos ? eos : UINT32_MAX);
    g.mask_ns += now_ns() - t0;
    for (uint64_t w : mask) g.allowed_total += static_cast<uint64_t>(__builtin_popcountll(w));
    // The server applies the mask and ranks the allowed tokens.
    const bool ranked = !c.whole_vocabulary && (c.temperature <= 0 || c.top_k > 0);
    Result<Distribution> d = ranked ? ctx.decode_step(c.temperature <= 0 ? 1 : c.top_k, mask)
                                    : ctx.decode_step(PITH_TOP_K_ALL);
    if (!d) {
      g.finish_reason = status_name(d.status());
      g.error = std::move(d).take_error();
      return g;
    }
    const uint32_t tok = ranked ? sample_ranked(*d, c.temperature, rng)
                                : sample_masked(*d, mask, c.temperature, rng);
    if (tok == UINT32_MAX) {  // complete and nothing may follow (eos not wanted)
      g.finish_reason = "complete";
      return g;
    }
    if (tok == eos && m.is_complete()) {
      g.finish_reason = "eos";
      return g;
    }
    if (!m.accept_token(tok)) {
      g.finish_reason = "internal error";
      return g;
    }
    g.tokens.push_back(tok);
    g.text += a.trie().bytes(tok);
    ++g.sampled;
    ctx.fill_tokens({tok});
  }
}

}  // namespace pith
