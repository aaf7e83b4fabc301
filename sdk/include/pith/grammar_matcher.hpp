// pith/grammar_matcher.hpp: incremental matching of a compiled grammar (pith/grammar.hpp) over
// token bytes, and the mask of every vocabulary token the grammar allows next, computed in
// microseconds for a 128k vocabulary. Header-only, std-only.
//
//   pith::TokenTrie trie(vocab_bytes, special);
//   pith::grammar::Automaton a(grammar, trie);     // caches; outlives its matchers
//   pith::grammar::Matcher m(a);
//   m.fill_mask(mask, eos);                        // bit i: token i may come next
//   m.accept_token(id);  m.is_complete();  m.completion();
//
// The parser state is a set of stacks (a pushdown automaton run nondeterministically, like
// llama.cpp's GBNF sampler): a stack's top is a byte-set position, the nodes below it are the
// positions to continue at when the rule above finishes. Stacks are hash-consed into a forest
// (shared tails, one id per distinct stack), and a *state* is an interned set of stack ids.
//
// Three caches make masking cheap:
//  1. A lazy DFA over states: step(state, byte) is computed once, then a table lookup.
//  2. Token classes per *context*: a context is the top `context_frames` nodes of a stack with
//     the rest replaced by a sentinel. One walk over the vocabulary trie from the context sorts
//     every token into accepted (matched without leaving the context), rejected, or deferred:
//     the context finished inside the token (the walk met the sentinel) and what the rest of
//     the token does depends on the stack below. Only trie nodes whose byte can follow the
//     context's rule (its FOLLOW set) are kept as deferred.
//  3. At mask time, per stack of the state: OR the context's accepted bitset, then walk only
//     the deferred subtrees from the real continuation (the expansion of the stack below the
//     context), pruning dead prefixes through the DFA.
// Contexts repeat constantly (inside a string, between members of an object), so after the
// first visits a mask costs a few bitset ORs plus short subtree walks. A bounded repetition
// x{0,n} compiles to a chain of rules R_k ::= x R_k-1 | ε, one context per count; a context in
// link k classifies every token of at most k bytes as the chain's top link does (each link takes
// at least one byte, so no such token reaches the chain's end), so it copies those from the
// top's context and walks only the trie's deeper subtrees. The walks give the same
// answer as matching each token from scratch (fill_mask_naive, the baseline and the oracle of
// the tests): a token is allowed iff some stack survives all of its bytes.
#pragma once

#include <stdint.h>
#include <string.h>
#include <pith/grammar.hpp>
#include <pith/token_trie.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace pith::grammar {

class Automaton {
 public:
  static constexpr uint32_t kEmpty = 0;     // stack id: the root rule has finished
  static constexpr uint32_t kSentinel = 1;  // stack id: the cut bottom of a context
  static constexpr uint32_t kDead = 0;      // state id: no stack survives

  // g and trie must outlive the automaton. context_frames: stack nodes per context (more:
  // fewer deferred subtrees per mask, more contexts to classify). share_chains: classify a
  // bounded repetition's lower links from its top (off: the previous design, for benchmarks).
  Automaton(const Grammar& g, const TokenTrie& trie, uint32_t context_frames = 3,
            bool share_chains = true)
      : g_(g), trie_(trie), frames_(context_frames ? context_frames : 1) {
    nodes_.push_back({UINT32_MAX, 0});  // kEmpty
    nodes_.push_back({UINT32_MAX, 0});  // kSentinel
    std::vector<uint32_t> none;
    intern(none);  // kDead
    std::vector<uint32_t> start;
    seen_.clear();
    for (uint32_t a : g_.alternatives(g_.root())) expand(a, kEmpty, start);
    initial_ = intern(start);
    walk_.assign(trie_.max_depth() + 2, 0);
    links_.assign(g_.rule_count(), Link{});
    if (share_chains) find_chains();
  }
  Automaton(const Automaton&) = delete;
  Automaton& operator=(const Automaton&) = delete;

  const Grammar& grammar() const { return g_; }
  const TokenTrie& trie() const { return trie_; }
  uint32_t initial() const { return initial_; }
  bool accepting(uint32_t s) const { return states_[s].accepting; }
  size_t mask_words() const { return (size_t{trie_.vocab_size()} + 63) / 64; }

  uint32_t step(uint32_t s, uint8_t b) {
    int32_t t = trans_[size_t{s} * 256 + b];
    return t >= 0 ? static_cast<uint32_t>(t) : step_slow(s, b);
  }
  // The state after all of bytes, or kDead.
  uint32_t run(uint32_t s, std::string_view bytes) {
    for (unsigned char b : bytes) {
      s = step(s, b);
      if (s == kDead) return kDead;
    }
    return s;
  }

  // mask (mask_words() words): bit t set iff token t (a usable trie token) may come next.
  void fill_mask(uint32_t s, uint64_t* mask) {
    memset(mask, 0, mask_words() * 8);
    const std::vector<uint32_t> stacks = states_[s].stacks;  // interning below may move states_
    for (uint32_t id : stacks) {
      if (id <= kSentinel) continue;
      const StackInfo si = info(id);
      const uint64_t* acc = contexts_[si.context].accept.data();
      for (size_t w = 0, n = mask_words(); w < n; ++w) mask[w] |= acc[w];
      if (contexts_[si.context].deferred.empty()) continue;
      const uint32_t cont = continuation(si.rest);
      for (uint32_t node : contexts_[si.context].deferred) walk_subtree(node, cont, mask);
    }
  }

  // The baseline: every token matched byte by byte from the state's stacks, nothing shared
  // between tokens and no cached transitions (llama.cpp's per-candidate approach).
  bool accepts_naive(uint32_t s, std::string_view bytes) {
    std::vector<uint32_t> cur = states_[s].stacks, next;
    for (unsigned char b : bytes) {
      next.clear();
      seen_.clear();
      for (uint32_t id : cur) {
        if (id <= kSentinel) continue;
        const Node n = nodes_[id];
        if (g_.bytes(g_.at(n.pos).arg).has(b)) expand(n.pos + 1, n.parent, next);
      }
      if (next.empty()) return false;
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
      cur.swap(next);
    }
    return !bytes.empty();
  }
  void fill_mask_naive(uint32_t s, uint64_t* mask) {
    memset(mask, 0, mask_words() * 8);
    for (uint32_t t = 0; t < trie_.vocab_size(); ++t)
      if (trie_.usable(t) && accepts_naive(s, trie_.bytes(t)))
        mask[t >> 6] |= uint64_t{1} << (t & 63);
  }

  // A shortest byte string that takes state s to an accepting state ("" if s accepts); when it
  // is longer than Grammar::kMaxTail bytes, its first kMaxTail + 1 bytes (no token budget reaches
  // it, and the size says so).
  std::string completion(uint32_t s) const {
    std::string best;
    bool found = false;
    for (uint32_t id : states_[s].stacks) {
      if (id == kEmpty) return std::string();
      if (id == kSentinel) continue;
      std::string c = g_.min_tail(nodes_[id].pos);
      for (uint32_t p = nodes_[id].parent; p > kSentinel && c.size() <= Grammar::kMaxTail;
           p = nodes_[p].parent)
        c += g_.min_tail(nodes_[p].pos);
      if (c.size() > Grammar::kMaxTail) c.resize(Grammar::kMaxTail + 1);
      if (!found || c.size() < best.size()) best = std::move(c);
      found = true;
    }
    return best;
  }

  size_t state_count() const { return states_.size(); }
  size_t stack_count() const { return nodes_.size(); }
  size_t context_count() const { return contexts_.size(); }
  // Contexts classified from a chain top's context plus a walk of the deeper subtrees only.
  size_t derived_context_count() const { return derived_; }
  // Deferred subtrees over all contexts: the work left to mask time.
  size_t deferred_count() const {
    size_t n = 0;
    for (const Context& c : contexts_) n += c.deferred.size();
    return n;
  }

 private:
  struct Node {
    uint32_t pos, parent;
  };
  struct State {
    std::vector<uint32_t> stacks;  // sorted stack ids
    bool accepting = false;        // holds kEmpty
    bool sentinel = false;         // holds kSentinel
  };
  struct Context {
    std::vector<uint64_t> accept;    // tokens matched inside the context
    std::vector<uint32_t> deferred;  // trie nodes to continue from the stack below
    uint32_t walked = 0;             // trie nodes its classification stepped through
  };
  struct StackInfo {
    uint32_t context;
    uint32_t rest;  // the stack below the context (kEmpty: the context is the whole stack)
  };
  static constexpr uint32_t kChainWorthATop = 16;  // links
  struct Link {
    uint32_t k = 0;             // links left from here on, this one included
    uint32_t start = 0;         // the position of x in this link
    uint32_t top = UINT32_MAX;  // the chain's first link (UINT32_MAX: not a link)
  };

  uint32_t push(uint32_t pos, uint32_t parent) {
    uint64_t key = (uint64_t{pos} << 32) | parent;
    auto it = node_ids_.find(key);
    if (it != node_ids_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back({pos, parent});
    node_ids_.emplace(key, id);
    return id;
  }

  // Adds to out the stacks whose top is a byte set, reachable from "at pos, then parent"
  // without consuming input: rule references open their alternatives (pushing the position
  // after the reference unless it is the End: a tail call keeps stacks flat for x* loops),
  // End pops. seen_ (cleared by the caller) drops repeats: a hash set, since an ambiguous grammar
  // (nested repetitions like `x ::= "[" ++++`) reaches tens of thousands of positions in one step.
  void expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out) {
    const uint64_t key = (uint64_t{pos} << 32) | parent;
    if (!seen_.insert(key).second) return;
    const Elem e = g_.at(pos);
    switch (e.op) {
      case Op::Bytes:
        out.push_back(push(pos, parent));
        return;
      case Op::End:
        if (parent <= kSentinel) {
          out.push_back(parent);
        } else {
          const Node n = nodes_[parent];
          expand(n.pos, n.parent, out);
        }
        return;
      case Op::Rule: {
        const uint32_t np = g_.at(pos + 1).op == Op::End ? parent : push(pos + 1, parent);
        for (uint32_t a : g_.alternatives(e.arg)) expand(a, np, out);
        return;
      }
    }
  }

  uint32_t intern(std::vector<uint32_t>& stacks) {
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
    std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * 4);
    auto it = state_ids_.find(key);
    if (it != state_ids_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(states_.size());
    State st;
    st.stacks = stacks;
    st.accepting = std::binary_search(stacks.begin(), stacks.end(), kEmpty);
    st.sentinel = std::binary_search(stacks.begin(), stacks.end(), kSentinel);
    states_.push_back(std::move(st));
    trans_.resize(trans_.size() + 256, -1);
    state_ids_.emplace(std::move(key), id);
    return id;
  }

  uint32_t step_slow(uint32_t s, uint8_t b) {
    std::vector<uint32_t> out;
    seen_.clear();
    const std::vector<uint32_t> stacks = states_[s].stacks;
    for (uint32_t id : stacks) {
      if (id <= kSentinel) continue;
      const Node n = nodes_[id];
      if (g_.bytes(g_.at(n.pos).arg).has(b)) expand(n.pos + 1, n.parent, out);
    }
    uint32_t ns = intern(out);
    trans_[size_t{s} * 256 + b] = static_cast<int32_t>(ns);
    return ns;
  }

  // The context of a stack (its top frames_ nodes over a sentinel) and the stack below it.
  StackInfo info(uint32_t id) {
    auto it = stack_info_.find(id);
    if (it != stack_info_.end()) return it->second;
    std::vector<uint32_t> chain;
    uint32_t cur = id;
    while (chain.size() < frames_ && cur > kSentinel) {
      chain.push_back(cur);
      cur = nodes_[cur].parent;
    }
    StackInfo si{0, kEmpty};
    uint32_t key = id;
    const ByteSet* follow = nullptr;
    if (cur != kEmpty) {  // cut: the context ends where the bottom node's alternative ends
      si.rest = cur;
      key = kSentinel;
      for (size_t i = chain.size(); i-- > 0;) key = push(nodes_[chain[i]].pos, key);
      follow = &g_.follow(g_.rule_of(nodes_[chain.back()].pos));
    }
    auto c = context_ids_.find(key);
    if (c != context_ids_.end()) {
      si.context = c->second;
    } else {
      // The same frames with every chain link moved to its chain's top, and the fewest links
      // any of them has left: tokens up to that many bytes classify alike in both contexts.
      uint32_t top_key = cur != kEmpty ? kSentinel : kEmpty;
      uint32_t left = UINT32_MAX, longest = 0;
      for (size_t i = chain.size(); i-- > 0;) {
        uint32_t pos = nodes_[chain[i]].pos;
        const Link& l = links_[g_.rule_of(pos)];
        if (l.top != UINT32_MAX && l.k < links_[l.top].k) {
          const uint32_t offset = pos - l.start;
          left = std::min(left, l.k - offset);
          longest = std::max(longest, links_[l.top].k);
          pos = links_[l.top].start + offset;
        }
        top_key = push(pos, top_key);
      }
      if (left == UINT32_MAX || left < 2 || top_key == key) {
        si.context = classify(key, follow);
      } else {
        // A top not met yet is classified for chains long enough to repay it.
        auto t = context_ids_.find(top_key);
        const uint32_t top = t != context_ids_.end()      ? t->second
                             : longest >= kChainWorthATop ? classify(top_key, follow)
                                                          : UINT32_MAX;
        // Deriving costs about two steps per token longer than `left` (trimming the top's
        // verdicts, walking their subtrees); a full walk, what the top's walk cost. A context
        // few tokens fit is walked in full.
        si.context = top != UINT32_MAX && contexts_[top].walked > 2 * longer_than(left)
                         ? classify_below(key, follow, top, left)
                         : classify(key, follow);
      }
    }
    stack_info_.emplace(id, si);
    return si;
  }

  // Chains of bounded repetitions (grammar.hpp's repeat): rules R with two alternatives, x R'
  // and nothing, where R' is a link of the same x, down to a last link x | ε; x takes at least
  // one byte. links_[R]: the links left from R on (itself included), the start of its x
  // alternative and the top of a chain it is in (UINT32_MAX: not a link).
  void find_chains() {
    const uint32_t rules = static_cast<uint32_t>(g_.rule_count());
    struct Shape {
      bool ok = false, last = false;
      uint32_t next = UINT32_MAX, start = 0;
      Elem x{Op::End, 0};
    };
    std::vector<Shape> sh(rules);
    for (uint32_t r = 0; r < rules; ++r) {
      const std::vector<uint32_t>& alts = g_.alternatives(r);
      if (alts.size() != 2) continue;
      const bool first_empty = g_.at(alts[0]).op == Op::End;
      if (first_empty == (g_.at(alts[1]).op == Op::End)) continue;
      const uint32_t body = first_empty ? alts[1] : alts[0];
      const Elem x = g_.at(body);
      if (x.op == Op::Rule && g_.nullable(x.arg)) continue;
      const Elem second = g_.at(body + 1);
      if (second.op == Op::End) {
        sh[r].last = true;
      } else if (second.op == Op::Rule && g_.at(body + 2).op == Op::End) {
        sh[r].next = second.arg;
      } else {
        continue;
      }
      sh[r].ok = true;
      sh[r].x = x;
      sh[r].start = body;
    }
    // Counts from the last link up (0: not a link); iterative, chains are up to 1000 long.
    std::vector<uint32_t> count(rules, 0);
    std::vector<uint8_t> seen(rules, 0);  // 1 on the current path, 2 done
    std::vector<uint32_t> path;
    for (uint32_t r = 0; r < rules; ++r) {
      if (!sh[r].ok || seen[r]) continue;
      path.clear();
      bool valid = false;
      uint32_t k = 0;
      for (uint32_t at = r;;) {
        if (seen[at] == 2) {
          valid = count[at] > 0;
          k = count[at];
          break;
        }
        if (seen[at] == 1) break;  // a cycle: not a chain
        seen[at] = 1;
        path.push_back(at);
        if (sh[at].last) {
          valid = true;
          break;
        }
        const uint32_t n = sh[at].next;
        if (!sh[n].ok || sh[n].x.op != sh[at].x.op || sh[n].x.arg != sh[at].x.arg) break;
        at = n;
      }
      for (size_t i = path.size(); i-- > 0;) {
        count[path[i]] = valid ? ++k : 0;
        seen[path[i]] = 2;
      }
    }
    std::vector<uint32_t> up(rules, UINT32_MAX);  // a link whose next link this is
    for (uint32_t r = 0; r < rules; ++r)
      if (count[r] > 1 && up[sh[r].next] == UINT32_MAX) up[sh[r].next] = r;
    for (uint32_t r = 0; r < rules; ++r) {
      if (!count[r]) continue;
      uint32_t top = r;
      while (up[top] != UINT32_MAX) top = up[top];  // counts grow upwards: this ends
      links_[r] = Link{count[r], sh[r].start, top};
    }
  }

  // A context below a chain top's context (see info): the tokens of at most `left` bytes as
  // the top classified them, then a walk of the trie's subtrees that hold longer tokens.
  // Usable tokens of more than `bytes` bytes (long_first_ holds them first).
  uint32_t longer_than(uint32_t bytes) {
    if (long_first_.empty()) {  // a counting sort by length, longest first
      const size_t depth = trie_.max_depth();
      longer_.assign(depth + 2, 0);
      for (uint32_t t = 0; t < trie_.vocab_size(); ++t)
        if (trie_.usable(t)) ++longer_[depth - trie_.bytes(t).size() + 1];
      for (size_t d = 1; d < longer_.size(); ++d) longer_[d] += longer_[d - 1];
      std::vector<uint32_t> at = longer_;
      long_first_.resize(longer_.back());
      for (uint32_t t = 0; t < trie_.vocab_size(); ++t)
        if (trie_.usable(t)) long_first_[at[depth - trie_.bytes(t).size()]++] = t;
    }
    // longer_[depth - b] = tokens of more than b bytes
    return bytes >= trie_.max_depth() ? 0 : longer_[trie_.max_depth() - bytes];
  }

  uint32_t classify_below(uint32_t key, const ByteSet* follow, uint32_t top, uint32_t left) {
    left = std::min<uint32_t>(left, static_cast<uint32_t>(trie_.max_depth()));
    if (subtree_depth_.empty()) {
      subtree_depth_.resize(trie_.nodes());
      for (uint32_t i = trie_.nodes(); i-- > 0;) {
        uint16_t d = trie_.depth(i);
        for (uint32_t ch = i + 1; ch < trie_.end(i); ch = trie_.end(ch))
          d = std::max(d, subtree_depth_[ch]);
        subtree_depth_[i] = d;
      }
    }
    Context c;
    c.accept = contexts_[top].accept;
    for (uint32_t i = 0, n = longer_than(left); i < n; ++i) {  // the top's verdicts on longer
      const uint32_t t = long_first_[i];                       // tokens do not carry over
      c.accept[t >> 6] &= ~(uint64_t{1} << (t & 63));
    }
    for (uint32_t ch : contexts_[top].deferred)
      if (trie_.depth(ch) <= left + 1) c.deferred.push_back(ch);
    std::vector<uint32_t> one{key};
    walk_[0] = intern(one);
    for (uint32_t i = 0, n = trie_.nodes(); i < n;) {
      if (subtree_depth_[i] <= left) {  // every token and deferral below was copied
        i = trie_.end(i);
        continue;
      }
      const uint16_t d = trie_.depth(i);
      const uint32_t s = step(walk_[d - 1], trie_.byte(i));
      if (s == kDead) {
        i = trie_.end(i);
        continue;
      }
      walk_[d] = s;
      if (d > left) {
        add_tokens(i, c.accept.data());
        if (follow && states_[s].sentinel)
          for (uint32_t ch = i + 1; ch < trie_.end(i); ch = trie_.end(ch))
            if (follow->has(trie_.byte(ch))) c.deferred.push_back(ch);
      }
      ++i;
    }
    uint32_t id = static_cast<uint32_t>(contexts_.size());
    contexts_.push_back(std::move(c));
    context_ids_.emplace(key, id);
    ++derived_;
    return id;
  }

  // One walk over the whole trie from the context's own state (see the file comment).
  uint32_t classify(uint32_t key, const ByteSet* follow) {
    Context c;
    c.accept.assign(mask_words(), 0);
    std::vector<uint32_t> one{key};
    walk_[0] = intern(one);
    for (uint32_t i = 0, n = trie_.nodes(); i < n;) {
      const uint16_t d = trie_.depth(i);
      const uint32_t s = step(walk_[d - 1], trie_.byte(i));
      if (s == kDead) {
        i = trie_.end(i);
        continue;
      }
      walk_[d] = s;
      ++c.walked;
      add_tokens(i, c.accept.data());
      if (follow && states_[s].sentinel)
        for (uint32_t ch = i + 1; ch < trie_.end(i); ch = trie_.end(ch))
          if (follow->has(trie_.byte(ch))) c.deferred.push_back(ch);
      ++i;
    }
    uint32_t id = static_cast<uint32_t>(contexts_.size());
    contexts_.push_back(std::move(c));
    context_ids_.emplace(key, id);
    return id;
  }

  // The state of "continue with stack rest" (memoized per rest).
  uint32_t continuation(uint32_t rest) {
    auto it = cont_state_.find(rest);
    if (it != cont_state_.end()) return it->second;
    std::vector<uint32_t> out;
    seen_.clear();
    const Node n = nodes_[rest];
    expand(n.pos, n.parent, out);
    uint32_t s = intern(out);
    cont_state_.emplace(rest, s);
    return s;
  }

  // Marks the tokens of node's subtree that state `from` accepts, node's byte first.
  void walk_subtree(uint32_t node, uint32_t from, uint64_t* mask) {
    uint32_t s = step(from, trie_.byte(node));
    if (s == kDead) return;
    walk_[trie_.depth(node)] = s;
    add_tokens(node, mask);
    for (uint32_t i = node + 1, e = trie_.end(node); i < e;) {
      const uint16_t d = trie_.depth(i);
      s = step(walk_[d - 1], trie_.byte(i));
      if (s == kDead) {
        i = trie_.end(i);
        continue;
      }
      walk_[d] = s;
      add_tokens(i, mask);
      ++i;
    }
  }

  void add_tokens(uint32_t node, uint64_t* mask) const {
    for (int32_t t = trie_.token(node); t >= 0; t = trie_.same_next(static_cast<uint32_t>(t)))
      mask[static_cast<uint32_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  }

  const Grammar& g_;
  const TokenTrie& trie_;
  uint32_t frames_;
  std::vector<Node> nodes_;  // stack forest; 0 kEmpty, 1 kSentinel
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<State> states_;  // 0 kDead
  std::unordered_map<std::string, uint32_t> state_ids_;
  std::vector<int32_t> trans_;  // [state * 256 + byte] -> state, -1 unknown
  std::vector<Context> contexts_;
  std::unordered_map<uint32_t, uint32_t> context_ids_;  // context key stack -> contexts_ index
  std::unordered_map<uint32_t, StackInfo> stack_info_;
  std::unordered_map<uint32_t, uint32_t> cont_state_;
  std::unordered_set<uint64_t> seen_;
  std::vector<uint32_t> walk_;  // state per trie depth during a walk
  uint32_t initial_ = 0;
  std::vector<Link> links_;              // per rule
  std::vector<uint16_t> subtree_depth_;  // per trie node: its deepest descendant's depth
  std::vector<uint32_t> long_first_;     // usable tokens by byte length, longest first
  std::vector<uint32_t> longer_;         // [max_depth - b]: tokens of more than b bytes
  size_t derived_ = 0;
};

// One generation's position in the grammar.
class Matcher {
 public:
  explicit Matcher(Automaton& a) : a_(&a), state_(a.initial()) {}

  // Advances over the token's bytes; false (and no change) if the grammar rejects them or the
  // token is not usable (special, empty, out of range).
  bool accept_token(uint32_t id) {
    if (!a_->trie().usable(id)) return false;
    return accept_bytes(a_->trie().bytes(id));
  }
  bool accept_bytes(std::string_view bytes) {
    uint32_t s = a_->run(state_, bytes);
    if (s == Automaton::kDead) return false;
    state_ = s;
    return true;
  }
  // mask: one bit per token id (resized); eos, if given, is allowed once the grammar is complete.
  void fill_mask(std::vector<uint64_t>& mask, uint32_t eos = UINT32_MAX) {
    mask.resize(a_->mask_words());
    a_->fill_mask(state_, mask.data());
    if (eos < a_->trie().vocab_size() && is_complete()) mask[eos >> 6] |= uint64_t{1} << (eos & 63);
  }
  static bool allowed(const std::vector<uint64_t>& mask, uint32_t id) {
    return (id >> 6) < mask.size() && ((mask[id >> 6] >> (id & 63)) & 1);
  }
  // The input so far is a complete sentence of the grammar (it may still continue).
  bool is_complete() const { return a_->accepting(state_); }
  // A shortest byte string that completes the input.
  std::string completion() const { return a_->completion(state_); }
  uint32_t state() const { return state_; }
  void reset() { state_ = a_->initial(); }

 private:
  Automaton* a_;
  uint32_t state_;
};

}  // namespace pith::grammar
