// The grammar-mask benchmark suite (see bench_grammar.h).
#include "bench/bench_grammar.h"

#include <fmt/format.h>
#include <pith/grammar_matcher.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include "common/error.h"
#include "common/read_file.h"
#include "server/json_schema_grammar.h"
#include "tokenizer/tokenizer.h"

namespace pith::bench {

namespace {

using Clock = std::chrono::steady_clock;
using grammar::Automaton;
using grammar::Matcher;

double since_us(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Walk {
  std::vector<double> us;        // per step: mask + accept
  std::vector<uint32_t> states;  // the matcher state each mask was computed for
  std::vector<int64_t> picks;    // per step: the accepted token, or -1 where the walk restarted
  std::vector<size_t> allowed;   // per step: tokens the mask allowed
  size_t documents = 0;          // completed documents
};

// One seeded random walk of `steps` tokens under the grammar (see the header for the policy).
Walk random_walk(Automaton& a, const std::vector<std::string>& vocab, size_t steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Matcher m(a);
  std::vector<uint64_t> mask;
  std::vector<uint32_t> allowed, structural;
  Walk w;
  for (size_t step = 0; step < steps; ++step) {
    w.states.push_back(m.state());
    auto t0 = Clock::now();
    m.fill_mask(mask);
    double mask_us = since_us(t0);
    allowed.clear();
    structural.clear();
    for (uint32_t t = 0; t < vocab.size(); ++t) {
      if (!Matcher::allowed(mask, t)) continue;
      allowed.push_back(t);
      if (vocab[t].size() <= 2 &&
          vocab[t].find_first_of("{}[]\",:0123456789tfn-()+*") != std::string::npos)
        structural.push_back(t);
    }
    w.allowed.push_back(allowed.size());
    if (allowed.empty() || (m.is_complete() && rng() % 3 == 0)) {
      w.documents += m.is_complete();
      m.reset();
      w.us.push_back(mask_us);
      w.picks.push_back(-1);
      continue;
    }
    uint32_t pick = !structural.empty() && rng() % 2 ? structural[rng() % structural.size()]
                                                     : allowed[rng() % allowed.size()];
    t0 = Clock::now();
    if (!m.accept_token(pick))
      fail("grammar bench: an allowed token was rejected (token {})", pick);
    w.us.push_back(mask_us + since_us(t0));
    w.picks.push_back(pick);
  }
  return w;
}

// The cold pass's tokens again on fresh automata with chain sharing on and off, step by step in
// turn, twice with the construction order swapped (the first-built automaton measured ~5 %
// slower on identical work): per step mask + accept, microseconds, both orders appended.
void replay_fresh_pair(const grammar::Grammar& g, const TokenTrie& trie, uint32_t frames,
                       const Walk& walk, std::vector<double>* shared, std::vector<double>* own) {
  for (int order = 0; order < 2; ++order) {
    Automaton first(g, trie, frames, order == 0), second(g, trie, frames, order != 0);
    Automaton& on = order == 0 ? first : second;
    Automaton& off = order == 0 ? second : first;
    Matcher mon(on), moff(off);
    std::vector<uint64_t> mask;
    for (size_t step = 0; step < walk.picks.size(); ++step) {
      const int64_t pick = walk.picks[step];
      for (int turn = 0; turn < 2; ++turn) {
        const int side = (turn + static_cast<int>(step)) % 2;  // who goes first alternates
        Matcher& m = side == 0 ? mon : moff;
        auto t0 = Clock::now();
        m.fill_mask(mask);
        if (pick < 0) {
          m.reset();
        } else if (!m.accept_token(static_cast<uint32_t>(pick))) {
          fail("grammar bench: the replayed walk's token {} was rejected", pick);
        }
        (side == 0 ? shared : own)->push_back(since_us(t0));
      }
    }
  }
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * double(v.size())))];
}

// The timed walk with everything another matcher needs to replay it: vocabulary bytes (hex),
// special tokens, the GBNF, the schema it came from (if any), and per step the accepted token
// (-1: restart) and how many tokens the mask allowed (to compare masks without storing them).
void write_replay(const std::string& path, const std::vector<std::string>& vocab,
                  const std::vector<bool>& special, const std::string& gbnf,
                  const nlohmann::ordered_json& schema, const Walk& w) {
  nlohmann::ordered_json j;
  j["gbnf"] = gbnf;
  j["schema"] = schema;
  j["special"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < special.size(); ++i)
    if (special[i]) j["special"].push_back(i);
  j["vocab_hex"] = nlohmann::ordered_json::array();
  for (const std::string& t : vocab) {
    std::string hex;
    for (unsigned char c : t) hex += fmt::format("{:02x}", c);
    j["vocab_hex"].push_back(std::move(hex));
  }
  j["picks"] = w.picks;
  j["allowed"] = w.allowed;
  j["us"] = w.us;
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("{}: cannot write", path);
  out << j.dump();
}

}  // namespace

nlohmann::json run_grammar_bench(const GrammarBenchOptions& o) {
  if (o.tokens == 0) fail("--tokens must be at least 1");
  const Tokenizer tok = Tokenizer::load(o.model);
  std::vector<std::string> vocab;
  std::vector<bool> special;  // control tokens never match a grammar
  for (size_t i = 0; i < tok.vocab_size(); ++i) {
    vocab.push_back(tok.token_bytes(static_cast<int32_t>(i)));
    special.push_back(tok.is_special(static_cast<int32_t>(i)));
  }
  if (!o.grammar_file.empty() && !o.schema_file.empty())
    fail("--grammar and --schema exclude each other");
  std::string text = grammar::json_gbnf();
  nlohmann::ordered_json schema;
  if (!o.grammar_file.empty()) text = read_file(o.grammar_file);
  if (!o.schema_file.empty()) {
    schema = nlohmann::ordered_json::parse(read_file(o.schema_file), nullptr, false);
    if (schema.is_discarded()) fail("{}: not JSON", o.schema_file);
    text = server::json_schema_to_gbnf(schema).gbnf;
  }
  const std::string grammar_name = !o.schema_file.empty()    ? o.schema_file
                                   : !o.grammar_file.empty() ? o.grammar_file
                                                             : "JSON";
  grammar::Grammar g;
  std::string err;
  auto t0 = Clock::now();
  if (!grammar::Grammar::parse(text, &g, &err)) fail("grammar: {}", err);
  const double parse_ms = since_us(t0) / 1e3;
  t0 = Clock::now();
  TokenTrie trie(vocab, special);
  const double trie_ms = since_us(t0) / 1e3;
  Automaton a(g, trie, o.context_frames);
  fmt::print("grammar bench: {} over {} ({} tokens, {} trie nodes), {} tokens per pass\n",
             grammar_name, o.model, vocab.size(), trie.nodes(), o.tokens);
  fmt::print("  compile grammar     {:10.3f} ms ({} rules)\n", parse_ms, g.rule_count());
  fmt::print("  build token trie    {:10.3f} ms\n", trie_ms);

  Walk cold = random_walk(a, vocab, o.tokens, o.seed);
  const size_t cold_contexts = a.context_count();
  Walk warm = random_walk(a, vocab, o.tokens, o.seed + 1);
  const double us = mean(warm.us), p50 = percentile(warm.us, 0.5), p99 = percentile(warm.us, 0.99);
  fmt::print(
      "  cold pass           {:10.1f} us/token mean (lazy classification of {} contexts "
      "included)\n",
      mean(cold.us), cold_contexts);
  fmt::print(
      "  timed pass          {:10.1f} us/token mean, p50 {:.1f}, p99 {:.1f} ({} documents, {} new "
      "contexts)\n",
      us, p50, p99, warm.documents, a.context_count() - cold_contexts);

  // Baseline on the first states of the timed walk; the masks must agree.
  std::vector<double> naive_us, same_us;
  std::vector<uint64_t> fast(a.mask_words()), naive(a.mask_words());
  for (size_t i = 0; i < std::min(o.naive_steps, warm.states.size()); ++i) {
    t0 = Clock::now();
    a.fill_mask_naive(warm.states[i], naive.data());
    naive_us.push_back(since_us(t0));
    t0 = Clock::now();
    a.fill_mask(warm.states[i], fast.data());
    same_us.push_back(since_us(t0));
    if (fast != naive) fail("grammar bench: fast and naive masks differ at step {}", i);
  }
  nlohmann::json j = {{"suite", "grammar"},
                      {"model", o.model},
                      {"grammar", grammar_name},
                      {"vocab", vocab.size()},
                      {"trie_nodes", trie.nodes()},
                      {"tokens", o.tokens},
                      {"context_frames", o.context_frames},
                      {"parse_ms", parse_ms},
                      {"trie_ms", trie_ms},
                      {"cold_us_per_token", mean(cold.us)},
                      {"p50_us", p50},
                      {"p99_us", p99},
                      {"contexts", a.context_count()},
                      {"deferred_subtrees", a.deferred_count()},
                      {"dfa_states", a.state_count()}};
  if (!naive_us.empty()) {
    const double nv = mean(naive_us);
    fmt::print(
        "  naive mask (base)   {:10.1f} us/token over {} steps, masks identical; speedup {:.0f}x\n",
        nv, naive_us.size(), nv / us);
    fmt::print("  fast, same states   {:10.1f} us/token\n", mean(same_us));
    j["naive_us_per_token"] = nv;
    j["fast_us_same_states"] = mean(same_us);
    j["naive_steps"] = naive_us.size();
    j["speedup_vs_naive"] = nv / us;
  }
  // Same-run baseline for bounded repetitions: the previous design classified every count of
  // a chain from scratch.
  std::vector<double> shared_us, own_us;
  replay_fresh_pair(g, trie, o.context_frames, cold, &shared_us, &own_us);
  fmt::print(
      "  cold pass again     {:10.1f} us/token with chain sharing, {:.1f} without ({:.2f}x)\n",
      mean(shared_us), mean(own_us), mean(own_us) / mean(shared_us));
  j["cold_us_chain_sharing"] = mean(shared_us);
  j["cold_us_no_chain_sharing"] = mean(own_us);
  j["chain_sharing_speedup"] = mean(own_us) / mean(shared_us);
  j["derived_contexts"] = a.derived_context_count();
  j["us_per_token"] = us;
  if (!o.replay_file.empty()) write_replay(o.replay_file, vocab, special, text, schema, warm);
  return j;
}

}  // namespace pith::bench
