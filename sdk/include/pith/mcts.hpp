// pith/mcts.hpp: the bookkeeping of a Monte-Carlo tree search over token choices — PUCT
// selection, expansion with priors, backup — independent of how an inferlet evaluates nodes
// (inferlets/mcts forks a Context per node and values a node by a rollout).
//
//   pith::MctsTree t(/*c_puct=*/1.5);
//   for (int i = 0; i < iterations; ++i) {
//     std::vector<uint32_t> path = t.select();          // root .. a node without children
//     t.expand(path.back(), moves);                     // (token, prior) pairs, if not terminal
//     t.backup(path, value);                            // one evaluation of path.back()
//   }
//   t.best_path();                                      // most visited children from the root
//
// Invariants after every backup (checked by the mcts inferlet's test): root visits == backups;
// for every node, visits == evals + sum of its children's visits, and value_sum == eval_sum +
// sum of its children's value_sum.
#pragma once

#include <math.h>
#include <stdint.h>

#include <utility>
#include <vector>

namespace pith {

struct MctsNode {
  int32_t parent = -1;
  uint32_t token = 0;  // the move from the parent to this node
  float prior = 0;     // the parent's probability of that move (renormalised over the moves)
  uint32_t depth = 0;  // root = 0
  std::vector<uint32_t> children;
  uint32_t visits = 0;  // backups through this node
  double value_sum = 0;
  uint32_t evals = 0;  // backups that started at this node (it was the evaluated leaf)
  double eval_sum = 0;
};

class MctsTree {
 public:
  explicit MctsTree(double c_puct = 1.5) : c_(c_puct) { nodes_.emplace_back(); }

  const std::vector<MctsNode>& nodes() const { return nodes_; }
  const MctsNode& node(uint32_t i) const { return nodes_[i]; }
  uint32_t expansions() const { return expansions_; }

  // From the root, follows the child with the highest PUCT score (Q + c * prior * sqrt(N) /
  // (1 + n); an unvisited child's Q is its parent's mean) to a node without children.
  std::vector<uint32_t> select() const {
    std::vector<uint32_t> path{0};
    while (!nodes_[path.back()].children.empty()) {
      const MctsNode& p = nodes_[path.back()];
      const double parent_q = p.visits ? p.value_sum / p.visits : 0;
      const double sqrt_n = ::sqrt(double(p.visits > 0 ? p.visits : 1));
      uint32_t best = p.children[0];
      double best_score = -1e300;
      for (uint32_t c : p.children) {
        const MctsNode& ch = nodes_[c];
        double q = ch.visits ? ch.value_sum / ch.visits : parent_q;
        double score = q + c_ * double(ch.prior) * sqrt_n / (1.0 + ch.visits);
        if (score > best_score) {
          best_score = score;
          best = c;
        }
      }
      path.push_back(best);
    }
    return path;
  }

  // Gives `node` one child per (token, prior) move; priors are renormalised to sum to 1.
  void expand(uint32_t node, const std::vector<std::pair<uint32_t, float>>& moves) {
    if (moves.empty() || !nodes_[node].children.empty()) return;
    double total = 0;
    for (const auto& m : moves) total += m.second;
    for (const auto& m : moves) {
      MctsNode ch;
      ch.parent = static_cast<int32_t>(node);
      ch.token = m.first;
      ch.prior = total > 0 ? float(m.second / total) : 1.0f / float(moves.size());
      ch.depth = nodes_[node].depth + 1;
      nodes_.push_back(ch);
      nodes_[node].children.push_back(static_cast<uint32_t>(nodes_.size() - 1));
    }
    ++expansions_;
  }

  // Records one evaluation `value` of path.back() and adds it to every node of the path.
  void backup(const std::vector<uint32_t>& path, double value) {
    if (path.empty()) return;
    nodes_[path.back()].evals += 1;
    nodes_[path.back()].eval_sum += value;
    for (uint32_t n : path) {
      nodes_[n].visits += 1;
      nodes_[n].value_sum += value;
    }
  }

  // The moves of the most visited child at each level, from the root down (ties: the first).
  std::vector<uint32_t> best_path() const {
    std::vector<uint32_t> moves;
    uint32_t at = 0;
    while (!nodes_[at].children.empty()) {
      uint32_t best = nodes_[at].children[0];
      for (uint32_t c : nodes_[at].children)
        if (nodes_[c].visits > nodes_[best].visits) best = c;
      if (nodes_[best].visits == 0) break;
      moves.push_back(nodes_[best].token);
      at = best;
    }
    return moves;
  }

  // The moves from the root to `node`.
  std::vector<uint32_t> moves_to(uint32_t node) const {
    std::vector<uint32_t> out;
    for (int32_t n = static_cast<int32_t>(node); n > 0; n = nodes_[n].parent)
      out.insert(out.begin(), nodes_[n].token);
    return out;
  }

 private:
  double c_;
  std::vector<MctsNode> nodes_;
  uint32_t expansions_ = 0;
};

}  // namespace pith
