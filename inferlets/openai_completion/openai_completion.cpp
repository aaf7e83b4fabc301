// openai_completion: the built-in inferlet behind pith serve's OpenAI-compatible endpoints.
// The server renders the chat template and tokenizes; this program prefills the prompt once
// (through the prefix cache), forks it into n choices that share the prompt's pages, and
// samples them round-robin. It streams one message per generated token so the server can
// produce SSE chunks, usage and logprobs; the messages (usage, tok, end, error with its status
// code) are defined in <pith/openai_protocol.hpp>, which the server parses with the same header.
//
//   openai_completion --tokens ID,ID,... [--tokens ...] [--max-tokens N] [--prompt-logprobs 1]
//   [--min-tokens N] [--temperature T]
//                     [--top-p P] [--top-k K] [--min-p P] [--seed S] [--stop STR]...
//                     [--stop-token-ids ID,...] [--ignore-eos 1] [--n N] [--logprobs K]
//                     [--presence-penalty X] [--frequency-penalty X] [--repetition-penalty X]
//                     [--logit-bias ID:BIAS,...] [--grammar GBNF] [--adapter NAME]
//                     [--prediction TEXT]
// Each --tokens is one prompt with n choices of its own (choice index = prompt * n + j);
// --prompt-logprobs reports every prompt token's logprob (ptok messages, for echo); max_tokens
// may then be 0 (scoring a text without generating).
// --grammar constrains every choice to a sentence of the grammar (structured outputs: the server
// turns a response_format's JSON Schema into GBNF); near the end of max_tokens only a shortest
// completion is allowed, so the output is complete whenever the budget can hold one.
// --prediction (OpenAI's predicted outputs) drafts from the expected output and verifies each
// draft in one forward (pith/prediction_drafter.hpp): the tokens are those sampling without it
// gives (greedy: the same; sampled: the same law), in fewer forwards where the prediction holds.
// Logprobs are the model's own (before penalties and biases), as vLLM reports them; without
// them, penalties, biases and grammars are applied by the server (Sampler::shaping).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <pith/constrained.hpp>
#include <pith/context.hpp>
#include <pith/openai_protocol.hpp>
#include <pith/prediction_drafter.hpp>

#include <cmath>
#include <memory>
#include <optional>

namespace {

namespace proto = pith::openai_protocol;

struct Request {
  std::vector<std::vector<uint32_t>> prompts;  // one per --tokens; n choices each
  pith::SamplerConfig sampling;
  pith::Stop stop;
  uint32_t n = 1;
  uint32_t logprobs = 0;         // alternatives per token (0: only the chosen token's logprob)
  std::string grammar;           // GBNF; empty: unconstrained
  bool prompt_logprobs = false;  // echo: the logprob of every prompt token (ptok messages)
  std::string adapter;           // LoRA adapter name (the request's model); empty: the base
  std::string prediction;        // a predicted output's text (drafts); empty: none
};

bool parse_tokens(const std::string& s, std::vector<uint32_t>& out) {
  const char* p = s.c_str();
  while (*p) {
    char* end = nullptr;
    unsigned long v = strtoul(p, &end, 10);
    if (end == p) return false;
    out.push_back(static_cast<uint32_t>(v));
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return false;
  }
  return !out.empty();
}

bool parse_biases(const std::string& s, std::vector<std::pair<uint32_t, float>>& out) {
  const char* p = s.c_str();
  while (*p) {
    char* end = nullptr;
    unsigned long id = strtoul(p, &end, 10);
    if (end == p || *end != ':') return false;
    p = end + 1;
    float bias = strtof(p, &end);
    if (end == p || (*end && *end != ',')) return false;
    out.emplace_back(static_cast<uint32_t>(id), bias);
    p = *end == ',' ? end + 1 : end;
  }
  return !out.empty();
}

const char* parse_args(Request& r) {
  std::vector<std::string> a = pith::args();
  r.stop.max_tokens = 16;
  for (size_t i = 1; i < a.size(); ++i) {
    if (i + 1 >= a.size()) return "missing value after an argument";
    const std::string& k = a[i];
    const std::string& v = a[++i];
    if (k == "--tokens") {
      r.prompts.emplace_back();
      if (!parse_tokens(v, r.prompts.back())) return "--tokens needs ID,ID,...";
    } else if (k == "--prompt-logprobs") {
      r.prompt_logprobs = v == "1";
    } else if (k == "--max-tokens")
      r.stop.max_tokens = static_cast<uint32_t>(strtoul(v.c_str(), nullptr, 10));
    else if (k == "--min-tokens")
      r.stop.min_tokens = static_cast<uint32_t>(strtoul(v.c_str(), nullptr, 10));
    else if (k == "--stop-token-ids") {
      if (!parse_tokens(v, r.stop.stop_ids)) return "--stop-token-ids needs ID,ID,...";
    } else if (k == "--ignore-eos")
      r.stop.stop_at_eos = v != "1";
    else if (k == "--presence-penalty")
      r.sampling.presence_penalty = strtof(v.c_str(), nullptr);
    else if (k == "--frequency-penalty")
      r.sampling.frequency_penalty = strtof(v.c_str(), nullptr);
    else if (k == "--repetition-penalty")
      r.sampling.repetition_penalty = strtof(v.c_str(), nullptr);
    else if (k == "--grammar")
      r.grammar = v;
    else if (k == "--logit-bias") {
      if (!parse_biases(v, r.sampling.logit_bias)) return "--logit-bias needs ID:BIAS,...";
    } else if (k == "--temperature")
      r.sampling.temperature = strtof(v.c_str(), nullptr);
    else if (k == "--top-p")
      r.sampling.top_p = strtof(v.c_str(), nullptr);
    else if (k == "--top-k")
      r.sampling.top_k = static_cast<uint32_t>(strtoul(v.c_str(), nullptr, 10));
    else if (k == "--min-p")
      r.sampling.min_p = strtof(v.c_str(), nullptr);
    else if (k == "--seed")
      r.sampling.seed = strtoull(v.c_str(), nullptr, 10);
    else if (k == "--stop")
      r.stop.strings.push_back(v);
    else if (k == "--n")
      r.n = static_cast<uint32_t>(strtoul(v.c_str(), nullptr, 10));
    else if (k == "--logprobs")
      r.logprobs = static_cast<uint32_t>(strtoul(v.c_str(), nullptr, 10));
    else if (k == "--adapter")
      r.adapter = v;
    else if (k == "--prediction")
      r.prediction = v;
    else
      return "unknown argument";
  }
  if (r.prompts.empty()) return "--tokens is required";
  if (r.n == 0) return "--n must be at least 1";
  return nullptr;
}

struct Choice {
  pith::Context ctx;
  pith::Sampler sampler;
  std::vector<uint32_t> generated;
  bool done = false;
  std::optional<pith::GrammarConstraint> grammar;
  pith::PredictionDrafter drafter = {};  // empty without a prediction
};

// The grammar's compiled form over this model's vocabulary, shared by the choices.
struct CompiledGrammar {
  pith::TokenTrie trie;
  pith::grammar::Grammar grammar;
  std::unique_ptr<pith::grammar::Automaton> automaton;
};

// Reports the failure with the status that caused it (the server maps it to an HTTP status).
int fail(pith_status_t code, const std::string& what) {
  (void)pith::send(proto::encode(
      proto::ErrorMessage{code, what}));  // failing already: the exit code says it too
  return 1;
}

int fail(pith_status_t code) {
  return fail(code, pith::status_name(code));
}

// The model's log-probabilities from a whole-vocabulary distribution in id order (logits or
// probabilities): the chosen token's and the `want` most likely.
void model_logprobs(const pith::Distribution& d, uint32_t tok, uint32_t want,
                    proto::TokenMessage& msg) {
  // Runs every step under a grammar or penalties: no copy of the vocabulary, and only the
  // logsumexp pass that logits need (log p and logit order the tokens alike).
  const std::vector<float>& v = d.probs;
  double lse = 0;
  if (d.logits) {
    float max = -INFINITY;
    for (float x : v) max = x > max ? x : max;
    double sum = 0;
    for (float x : v) sum += exp(double(x) - double(max));
    lse = double(max) + log(sum);
  }
  auto logprob = [&](uint32_t i) {
    if (d.logits) return double(v[i]) - lse;
    return v[i] > 0 ? log(double(v[i])) : -INFINITY;
  };
  if (tok < v.size() && std::isfinite(logprob(tok))) msg.logprob = logprob(tok);
  if (want == 0) return;
  std::vector<uint32_t> order(v.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t n = want < order.size() ? want : order.size();
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(n), order.end(),
                    [&](uint32_t a, uint32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  for (size_t j = 0; j < n; ++j)
    msg.top.push_back({static_cast<int32_t>(order[j]), logprob(order[j])});
}

// The messages one step of a choice produces, sent together: the prediction's tally first (the
// server may stop reading once the last choice ends), then the tokens, then the end.
struct StepMessages {
  std::vector<proto::TokenMessage> tokens;
  std::optional<proto::EndMessage> end;
  uint32_t drafted = 0, accepted = 0;
};

// Chooses the next tokens of a choice: one per forward, or, with a predicted output, a draft
// of it verified in one forward (every position's distribution), keeping what sampling without
// the draft would have produced.
struct Generator {
  const Request& req;
  const pith::Model& model;
  const pith::TokenTrie& vocabulary;  // token bytes (built when a prediction is followed)
  uint32_t eos;
  bool space_prefix = false;  // adds_space_prefix(), when a prediction is followed
  size_t stop_bytes = req.stop.max_string_bytes();
  uint32_t want = req.logprobs > 0 ? (req.logprobs > 20 ? 20 : req.logprobs) : 0;

  pith::Status step(Choice& c, uint32_t i, StepMessages& out) {
    const size_t left = req.stop.max_tokens - c.generated.size();
    // A draft ends one token short of the budget (the last verified position yields one more),
    // and where every position brings the whole vocabulary up (8 bytes a token), those come to
    // 4 MiB at most.
    const bool whole = c.grammar || c.sampler.config().adjusts_logits();
    const size_t per_position = size_t{c.ctx.info().vocab_size} * 8 + 1;
    const size_t limit =
        left < 2 ? 0
        : whole  ? std::min<size_t>(left - 1, std::max<size_t>(1, (4u << 20) / per_position))
                 : left - 1;
    const bool at_start = c.generated.empty();
    std::vector<uint32_t> draft =
        c.drafter.draft(limit, [&](std::string_view text) { return continuation(text, at_start); });
    PITH_TRY(draft.empty() ? single(c, i, out) : speculate(c, i, draft, out));
    if (!c.drafter.empty()) {
      std::string appended;
      for (const proto::TokenMessage& m : out.tokens)
        appended += vocabulary.bytes(static_cast<uint32_t>(m.token));
      // The text a client sees has no space prefix (the server's decoder strips it).
      if (at_start && space_prefix && !appended.empty() && appended[0] == ' ') appended.erase(0, 1);
      c.drafter.advance(appended, out.drafted, out.accepted);
    }
    return {};
  }

  // Whether the tokenizer puts a space before a text (SentencePiece's add_space_prefix): the
  // model's first token then starts with one the client's text does not show.
  static bool adds_space_prefix(const pith::Model& m, const pith::TokenTrie& vocab) {
    pith::Result<std::vector<uint32_t>> ids = m.tokenize("a");
    return ids && !ids->empty() && (*ids)[0] < vocab.vocab_size() &&
           vocab.bytes((*ids)[0]).substr(0, 1) == " ";
  }

 private:
  // The model's tokens of a piece of the prediction that continues the completion (at its start
  // when `at_start`), kept only while their bytes spell it: mid-text, a space-prefixing
  // tokenizer gets the piece without its leading space (the prefix puts it back), and a piece
  // that starts inside a word, which such a tokenizer cannot spell, gives no draft.
  std::vector<uint32_t> continuation(std::string_view text, bool at_start) const {
    std::string_view input = text;
    std::string expected(text);
    if (space_prefix && at_start)
      expected.insert(0, 1, ' ');
    else if (space_prefix && !text.empty() && text[0] == ' ')
      input.remove_prefix(1);
    pith::Result<std::vector<uint32_t>> ids = model.tokenize(input);
    if (!ids) return {};  // no draft: a plain step
    size_t at = 0, keep = 0;
    for (uint32_t id : *ids) {
      if (id >= vocabulary.vocab_size()) break;
      const std::string_view b = vocabulary.bytes(id);
      if (b.empty() || expected.compare(at, b.size(), b) != 0) break;
      at += b.size();
      ++keep;
    }
    ids->resize(keep);
    return std::move(*ids);
  }

  // What a step that samples in the inferlet asks for: the candidates sample() needs (the
  // whole vocabulary under a grammar), and at least the alternatives logprobs reports.
  uint32_t unshaped_top_k(const Choice& c) const {
    return std::max(want, c.grammar ? c.sampler.whole_vocabulary() : c.sampler.candidates());
  }

  pith::Status single(Choice& c, uint32_t i, StepMessages& out) {
    // The last prompt token is computed by the first step (flush left the distribution unread).
    // A grammar's mask, penalties and biases go down with the step and the server ranks the
    // allowed tokens by their adjusted logits; top_logprobs (the model's own alternatives,
    // allowed or not, before penalties) take the whole vocabulary instead.
    const size_t left = req.stop.max_tokens - c.generated.size();
    const std::vector<uint64_t>* allowed = c.grammar ? &c.grammar->mask(eos) : nullptr;
    const bool shaped = want == 0;
    auto d = shaped ? c.ctx.decode_step(c.sampler.step_top_k(), c.sampler.shaping(allowed))
                    : c.ctx.decode_step(unshaped_top_k(c));
    if (!d) return pith::Error(d.status(), std::string("decode: ") + pith::status_name(d.status()));
    uint32_t tok = shaped ? c.sampler.sample_step(*d) : c.sampler.sample(*d, allowed);
    if (c.grammar && tok != UINT32_MAX) tok = c.grammar->choose(tok, left, eos);
    PITH_TRY(take(c, i, *d, tok, shaped, out));
    if (!out.end) c.ctx.fill_tokens({tok});
    return {};
  }

  // One forward over [last token, draft...]; position j's token is sampled against draft[j]
  // (Sampler::sample_draft) and the run stops at the first token that differs, which is kept:
  // the step yields 1 to draft.size() + 1 tokens. The rejected drafts are rolled back: on a
  // hybrid model, whose recurrent state cannot be rewound, by a snapshot taken before the
  // forward, which takes over with the accepted drafts pending (computed by the next step).
  pith::Status speculate(Choice& c, uint32_t i, const std::vector<uint32_t>& draft,
                         StepMessages& out) {
    const size_t base = c.ctx.tokens().size();
    // Pending before the drafts: the last token, and after a snapshot took over, the accepted
    // drafts and the token after them too; only the last one's distribution is read.
    const size_t pending = base - c.ctx.computed();
    std::optional<pith::Context> before;
    if (model.recurrent()) {
      auto snapshot = c.ctx.snapshot();
      if (!snapshot) return single(c, i, out);  // no state free to keep one: a plain step
      before.emplace(std::move(*snapshot));
    }
    c.ctx.fill_tokens(draft);
    auto dists = c.ctx.decode_all(unshaped_top_k(c));
    if (!dists)
      return pith::Error(dists.status(),
                         std::string("decode: ") + pith::status_name(dists.status()));
    if (pending == 0 || dists->size() != pending + draft.size())
      return pith::Error(PITH_ERR_INTERNAL, "decode_all returned " + std::to_string(dists->size()) +
                                                " distributions for " +
                                                std::to_string(pending + draft.size()) + " inputs");
    out.drafted = static_cast<uint32_t>(draft.size());
    uint32_t tok = UINT32_MAX;
    for (size_t j = 0;; ++j) {
      const size_t left = req.stop.max_tokens - c.generated.size();
      const std::vector<uint64_t>* allowed = c.grammar ? &c.grammar->mask(eos) : nullptr;
      const pith::Distribution& d = (*dists)[pending - 1 + j];
      tok = j < draft.size() ? c.sampler.sample_draft(d, draft[j], allowed)
                             : c.sampler.sample(d, allowed);
      if (c.grammar && tok != UINT32_MAX) tok = c.grammar->choose(tok, left, eos);
      PITH_TRY(take(c, i, d, tok, false, out));
      const bool kept = j < draft.size() && tok == draft[j];
      if (kept) ++out.accepted;
      if (out.end || !kept) break;
    }
    if (out.end) return {};
    if (before && out.accepted < draft.size()) {
      std::vector<uint32_t> kept(draft.begin(), draft.begin() + out.accepted);
      kept.push_back(tok);
      before->fill_tokens(kept);
      c.ctx = std::move(*before);
    } else {
      c.ctx.truncate(base + out.accepted);  // keeps the accepted drafts, drops the rest
      c.ctx.fill_tokens({tok});
    }
    return {};
  }

  // A chosen token (UINT32_MAX: the grammar is complete and nothing may follow): its message,
  // and the choice's end if it stops here.
  pith::Status take(Choice& c, uint32_t i, const pith::Distribution& d, uint32_t tok, bool shaped,
                    StepMessages& out) {
    if (tok == UINT32_MAX) {
      out.end = proto::EndMessage{i, proto::FinishReason::Stop,
                                  static_cast<uint32_t>(c.generated.size())};
      return {};
    }
    proto::TokenMessage msg{i, static_cast<int32_t>(tok), -9999.0, {}};
    if (d.logits || (c.grammar && !shaped)) {  // the whole vocabulary, in id order
      model_logprobs(d, tok, want, msg);
    } else {
      for (size_t j = 0; j < d.ids.size(); ++j) {
        if (d.ids[j] == tok) msg.logprob = log(d.probs[j]);
        if (j < want) msg.top.push_back({static_cast<int32_t>(d.ids[j]), log(d.probs[j])});
      }
    }
    out.tokens.push_back(std::move(msg));
    c.generated.push_back(tok);
    // Stop::check only looks at the end of the text: a decoded tail, not the whole generation.
    pith::Result<std::string> text =
        stop_bytes ? model.detokenize_tail(c.generated, stop_bytes) : std::string();
    if (!text)
      return pith::Error(text.status(),
                         std::string("detokenize: ") + pith::status_name(text.status()));
    const char* why = req.stop.check(c.generated, *text);
    if (*why) {
      // A structured output that is complete when the budget ends has not been cut short.
      const bool cut = why[0] == 'l' && !(c.grammar && c.grammar->complete());
      out.end = proto::EndMessage{i, cut ? proto::FinishReason::Length : proto::FinishReason::Stop,
                                  static_cast<uint32_t>(c.generated.size())};
    }
    return {};
  }
};

pith::Status send_usage(uint32_t prompt_tokens, uint32_t cached_tokens) {
  return pith::send(proto::encode(proto::UsageMessage{prompt_tokens, cached_tokens}));
}

// Computes the prompt but its last token in chunks, one whole-vocabulary distribution per
// position, and reports each prompt token's logprob given the tokens before it (ptok). Chunks
// bound the guest memory the distributions take (about 8 bytes per vocabulary entry each).
pith::Status score_prompt(pith::Context& ctx, uint32_t prompt_index,
                          const std::vector<uint32_t>& prompt, uint32_t want) {
  const uint32_t top = want > 20 ? 20 : want;
  PITH_TRY(pith::send(proto::encode(
      proto::PromptTokenMessage{prompt_index, static_cast<int32_t>(prompt[0]), false, 0, {}})));
  constexpr size_t kChunk = 8;
  for (size_t at = 0; at + 1 < prompt.size(); at += kChunk) {
    const size_t end = at + kChunk < prompt.size() - 1 ? at + kChunk : prompt.size() - 1;
    ctx.fill_tokens(std::vector<uint32_t>(prompt.begin() + at, prompt.begin() + end));
    std::vector<pith::Distribution> dists = PITH_TRY(ctx.decode_all(PITH_TOP_K_ALL));
    for (size_t j = 0; j < dists.size(); ++j) {
      const uint32_t next = prompt[at + j + 1];
      proto::TokenMessage scored{0, static_cast<int32_t>(next), -9999.0, {}};
      model_logprobs(dists[j], next, top, scored);
      PITH_TRY(pith::send(proto::encode(proto::PromptTokenMessage{
          prompt_index, static_cast<int32_t>(next), true, scored.logprob, scored.top})));
    }
  }
  return {};
}

}  // namespace

int main() {
  Request req;
  if (const char* err = parse_args(req)) return fail(PITH_ERR_BAD_ARGUMENT, err);

  auto model = pith::Model::open("");
  if (!model) return fail(model.status());
  pith_adapter_t adapter = 0;
  if (!req.adapter.empty()) {
    auto a = model->open_adapter(req.adapter);
    if (!a) return fail(a.status(), a.error().what());
    adapter = *a;
  }
  const bool drafting = !req.prediction.empty();
  auto root = pith::Context::create(*model);
  if (!root) return fail(root.status());
  if (adapter != 0)
    if (pith::Status s = root->set_adapter(adapter); !s) return fail(s.status(), s.error().what());
  if (req.stop.eos_ids.empty()) req.stop.eos_ids = root->eos_tokens();
  // Per prompt: with n > 1 (or prompt logprobs) the prompt but its last token is computed once
  // and forked, so the choices share its pages; each choice computes the last token itself,
  // which yields its first distribution.
  std::vector<Choice> choices;
  std::vector<bool> usage_sent;  // per choice group: the prompt's usage message went out
  for (uint32_t p = 0; p < req.prompts.size(); ++p) {
    const std::vector<uint32_t>& prompt = req.prompts[p];
    auto group_root = p == 0 ? std::move(root) : pith::Context::create(*model);
    if (!group_root) return fail(group_root.status());
    if (p > 0 && adapter != 0)
      if (pith::Status s = group_root->set_adapter(adapter); !s)
        return fail(s.status(), s.error().what());
    // A predicted output's first draft is verified with the last prompt token.
    const bool split_last =
        req.n > 1 || req.prompt_logprobs || req.stop.max_tokens == 0 || drafting;
    if (!split_last) {
      group_root->fill_tokens(prompt);
    } else {
      std::vector<uint32_t> head(prompt.begin(), prompt.end() - 1);
      if (req.prompt_logprobs) {
        if (pith::Status s = score_prompt(*group_root, p, prompt, req.logprobs); !s)
          return fail(s.status(), s.error().what());
      } else {
        group_root->fill_tokens(head);
        if (pith::Status s = group_root->flush(); !s)
          return fail(s.status(), pith::status_name(s.status()));
      }
      if (!send_usage(static_cast<uint32_t>(prompt.size()), group_root->cached_tokens())) return 1;
    }
    usage_sent.push_back(split_last);
    for (uint32_t i = 0; i < req.n; ++i) {
      pith::SamplerConfig sc = req.sampling;
      sc.seed = req.sampling.seed + p * req.n + i;
      if (i + 1 == req.n) {
        choices.push_back(Choice{std::move(*group_root), pith::Sampler(sc), {}, false, {}, {}});
      } else {
        auto child = group_root->fork();
        if (!child) return fail(child.status());
        choices.push_back(Choice{std::move(*child), pith::Sampler(sc), {}, false, {}, {}});
      }
      if (split_last) choices.back().ctx.fill_tokens({prompt.back()});
      if (sc.repetition_penalty != 1.0f) choices.back().sampler.observe_prompt(prompt);
      if (req.stop.min_tokens > 0)
        choices.back().sampler.suppress_until(req.stop.min_tokens, req.stop.ending_ids());
    }
  }
  const uint32_t total = static_cast<uint32_t>(choices.size());
  if (req.stop.max_tokens == 0) {  // scoring only: nothing to generate
    for (uint32_t i = 0; i < total; ++i)
      if (!pith::send(proto::encode(proto::EndMessage{i, proto::FinishReason::Length, 0})))
        return 1;
    return 0;
  }

  CompiledGrammar compiled;  // its trie: every token's bytes (grammars, following predictions)
  if (!req.grammar.empty() || drafting) {
    auto trie = pith::vocabulary_trie(*model);
    if (!trie) return fail(trie.status(), "vocabulary: " + trie.error().what());
    compiled.trie = std::move(*trie);
  }
  if (!req.grammar.empty()) {
    std::string err;
    if (!pith::grammar::Grammar::parse(req.grammar, &compiled.grammar, &err))
      return fail(PITH_ERR_BAD_ARGUMENT, "grammar: " + err);
    compiled.automaton =
        std::make_unique<pith::grammar::Automaton>(compiled.grammar, compiled.trie);
    for (Choice& c : choices) c.grammar.emplace(*compiled.automaton);
  }
  const uint32_t eos =
      req.stop.stop_at_eos && !req.stop.eos_ids.empty() ? req.stop.eos_ids[0] : UINT32_MAX;
  Generator gen{req, *model, compiled.trie, eos};
  if (drafting) gen.space_prefix = Generator::adds_space_prefix(*model, compiled.trie);
  if (drafting)
    for (Choice& c : choices) c.drafter = pith::PredictionDrafter(req.prediction);

  uint32_t live = total;
  while (live > 0) {
    for (uint32_t i = 0; i < total; ++i) {
      Choice& c = choices[i];
      if (c.done) continue;
      const uint32_t group = i / req.n;
      StepMessages step;
      pith::Status s = gen.step(c, i, step);
      if (!s) return fail(s.status(), s.error().what());
      if (!usage_sent[group]) {  // the prefix-cache lookup happened in the first computation
        usage_sent[group] = true;
        if (!send_usage(static_cast<uint32_t>(req.prompts[group].size()), c.ctx.cached_tokens()))
          return 1;
      }
      if (step.drafted > 0 && !pith::send(proto::encode(proto::PredictionMessage{
                                  i, step.accepted, step.drafted - step.accepted})))
        return 1;
      for (const proto::TokenMessage& m : step.tokens)
        if (!pith::send(proto::encode(m))) return 1;
      if (step.end) {
        c.done = true;
        --live;
        if (!pith::send(proto::encode(*step.end))) return 1;
      }
    }
  }
  return 0;
}
