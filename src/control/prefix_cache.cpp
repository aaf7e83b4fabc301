#include "control/prefix_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace pith {

struct PrefixCache::Node {
  Node* parent = nullptr;
  std::vector<int32_t> block;  // page_size tokens (empty at the root)
  uint32_t page = 0;
  uint32_t adapter = 0;       // LoRA adapter whose K/V the page holds (the whole path shares it)
  uint32_t state = kNoState;  // hybrid models: the recurrent state after this node's tokens
  uint64_t last_use = 0;
  // Children by hash of their block; collisions are resolved by comparing blocks.
  std::unordered_multimap<uint64_t, std::unique_ptr<Node>> children;
};

namespace {
uint64_t hash_block(std::span<const int32_t> block, uint32_t adapter) {
  return XXH3_64bits_withSeed(block.data(), block.size_bytes(), adapter);
}
}  // namespace

PrefixCache::PrefixCache(RefCounts& refs, uint32_t page_size, RefCounts* states)
    : refs_(refs), states_(states), page_size_(page_size), root_(std::make_unique<Node>()) {}

PrefixCache::~PrefixCache() {
  // Give every cached page's reference back (depth-first, children before parents).
  std::vector<Node*> stack{root_.get()};
  std::vector<Node*> order;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (auto& [_, c] : n->children) stack.push_back(c.get());
  }
  for (Node* n : order) {
    if (n == root_.get()) continue;
    refs_.release(n->page);
    if (n->state != kNoState) states_->release(n->state);
  }
}

PrefixCache::Node* PrefixCache::find_child(Node* node, std::span<const int32_t> block,
                                           uint32_t adapter) const {
  auto [lo, hi] = node->children.equal_range(hash_block(block, adapter));
  for (auto it = lo; it != hi; ++it)
    if (it->second->adapter == adapter &&
        std::equal(block.begin(), block.end(), it->second->block.begin()))
      return it->second.get();
  return nullptr;
}

void PrefixCache::touch(Node* node) {
  if (node->children.empty()) leaves_.erase({node->last_use, node});
  node->last_use = ++clock_;
  if (node->children.empty()) leaves_.insert({node->last_use, node});
}

size_t PrefixCache::match(std::span<const int32_t> tokens, std::vector<uint32_t>& pages,
                          uint32_t adapter, uint32_t* state, size_t* shared) {
  Node* node = root_.get();
  size_t matched = 0;
  std::vector<Node*> path;
  while (matched + page_size_ <= tokens.size()) {
    Node* child = find_child(node, tokens.subspan(matched, page_size_), adapter);
    if (!child) break;
    path.push_back(child);
    node = child;
    matched += page_size_;
  }
  if (shared) *shared = matched;
  if (states_) {
    // A hybrid model resumes only where a checkpoint holds the recurrent state.
    while (!path.empty() && path.back()->state == kNoState) {
      path.pop_back();
      matched -= page_size_;
    }
    if (!path.empty()) {
      states_->retain(path.back()->state);
      if (state) *state = path.back()->state;
    }
  }
  for (Node* n : path) {
    refs_.retain(n->page);
    pages.push_back(n->page);
    touch(n);
  }
  stats_.hit_tokens += matched;
  stats_.miss_tokens += tokens.size() - matched;
  return matched;
}

size_t PrefixCache::insert(std::span<const int32_t> tokens, std::span<const uint32_t> pages,
                           uint32_t adapter, uint32_t state) {
  Node* node = root_.get();
  size_t adopted = 0;
  for (size_t i = 0; i < pages.size() && (i + 1) * page_size_ <= tokens.size(); ++i) {
    auto block = tokens.subspan(i * page_size_, page_size_);
    Node* child = find_child(node, block, adapter);
    if (!child) {
      if (node != root_.get() && node->children.empty()) leaves_.erase({node->last_use, node});
      auto fresh = std::make_unique<Node>();
      fresh->parent = node;
      fresh->block.assign(block.begin(), block.end());
      fresh->page = pages[i];
      fresh->adapter = adapter;
      refs_.retain(pages[i]);
      child = fresh.get();
      node->children.emplace(hash_block(block, adapter), std::move(fresh));
      child->last_use = ++clock_;
      leaves_.insert({child->last_use, child});
      ++adopted;
      ++stats_.cached_pages;
      ++stats_.inserted_pages;
    } else {
      touch(child);
    }
    node = child;
  }
  if (states_ && state != kNoState && node != root_.get() && node->state == kNoState &&
      pages.size() * page_size_ <= tokens.size()) {
    states_->retain(state);
    node->state = state;
    ++stats_.cached_states;
  }
  return adopted;
}

void PrefixCache::remove_leaf(Node* node) {
  leaves_.erase({node->last_use, node});
  Node* parent = node->parent;
  uint32_t page = node->page;
  uint32_t node_state = node->state;
  auto [lo, hi] = parent->children.equal_range(hash_block(node->block, node->adapter));
  for (auto it = lo; it != hi; ++it)
    if (it->second.get() == node) {
      parent->children.erase(it);  // destroys node
      break;
    }
  refs_.release(page);
  if (node_state != kNoState) {
    states_->release(node_state);
    --stats_.cached_states;
    ++stats_.evicted_states;
  }
  --stats_.cached_pages;
  ++stats_.evicted_pages;
  if (parent != root_.get() && parent->children.empty()) leaves_.insert({parent->last_use, parent});
}

uint32_t PrefixCache::evict(uint32_t n) {
  uint32_t freed = 0;
  // Walk leaves from least recently used; skip (keep) leaves someone still references.
  auto it = leaves_.begin();
  while (freed < n && it != leaves_.end()) {
    Node* leaf = it->second;
    ++it;
    if (refs_.count(leaf->page) != 1) continue;  // an inferlet uses it
    Node* parent = leaf->parent;
    remove_leaf(leaf);
    ++freed;
    // The parent may just have become an evictable leaf older than `it`: restart the scan
    // from the oldest so LRU order holds.
    if (parent != root_.get() && parent->children.empty()) it = leaves_.begin();
  }
  return freed;
}

uint32_t PrefixCache::evict_states(uint32_t n) {
  if (!states_ || n == 0) return 0;
  std::vector<std::pair<uint64_t, Node*>> held;  // (last use, node) with a checkpoint
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (node->state != kNoState && states_->count(node->state) == 1)
      held.push_back({node->last_use, node});
    for (auto& [_, c] : node->children) stack.push_back(c.get());
  }
  std::sort(held.begin(), held.end());
  uint32_t freed = 0;
  for (auto& [_, node] : held) {
    if (freed == n) break;
    states_->release(node->state);
    node->state = kNoState;
    --stats_.cached_states;
    ++stats_.evicted_states;
    ++freed;
  }
  return freed;
}

uint32_t PrefixCache::evictable_pages() const {
  // A node is evictable when it and its whole subtree are referenced only by the cache.
  uint32_t total = 0;
  std::vector<std::pair<const Node*, bool>> stack;  // (node, children done)
  std::unordered_map<const Node*, bool> free_subtree;
  stack.push_back({root_.get(), false});
  while (!stack.empty()) {
    auto [n, done] = stack.back();
    stack.pop_back();
    if (!done) {
      stack.push_back({n, true});
      for (auto& [_, c] : n->children) stack.push_back({c.get(), false});
      continue;
    }
    bool all = true;
    for (auto& [_, c] : n->children) all = all && free_subtree[c.get()];
    if (n == root_.get()) continue;
    bool mine = all && refs_.count(n->page) == 1;
    free_subtree[n] = mine;
    if (mine) ++total;
  }
  return total;
}

}  // namespace pith
