#include "control/kv_provenance.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

namespace pith {

bool same_context(const KvContextNode* a, const KvContextNode* b) {
  while (a && b) {
    if (a == b) return true;
    if (a->page != b->page || a->version != b->version) return false;
    a = a->before.get();
    b = b->before.get();
  }
  return a == b;
}

KvProvenance::KvProvenance(uint32_t n_pages, uint32_t n_embeds, uint32_t page_size)
    : page_size_(page_size),
      version_(n_pages, 0),
      recipe_(n_pages),
      node_(n_pages),
      embed_token_(n_embeds, -1) {}

const KvRecipe* KvProvenance::recipe(uint32_t page) const {
  return page < recipe_.size() && recipe_[page] ? &*recipe_[page] : nullptr;
}

void KvProvenance::set_opaque(uint32_t page) {
  recipe_[page].reset();
  version_[page] = next_version_++;
}

void KvProvenance::on_opaque_write(uint32_t page) {
  if (page < version_.size()) set_opaque(page);
}

void KvProvenance::on_embed_tokens(std::span<const int32_t> tokens,
                                   std::span<const uint32_t> slots) {
  for (size_t i = 0; i < slots.size() && i < tokens.size(); ++i)
    if (slots[i] < embed_token_.size()) embed_token_[slots[i]] = tokens[i];
}

void KvProvenance::on_embed_overwritten(uint32_t slot) {
  if (slot < embed_token_.size()) embed_token_[slot] = -1;
}

KvContext KvProvenance::extend(KvContext before, uint32_t page) {
  // Reuses the page's last node when it has the page's version and the same predecessor, so
  // equal contexts are usually one pointer.
  KvContext& cached = node_[page];
  if (!cached || cached->version != version_[page] || cached->before != before)
    cached = std::make_shared<const KvContextNode>(
        KvContextNode{page, version_[page], std::move(before)});
  return cached;
}

KvContext KvProvenance::context_of(std::span<const uint32_t> pages) {
  KvContext ctx;
  for (uint32_t page : pages) ctx = extend(std::move(ctx), page);
  return ctx;
}

void KvProvenance::on_forward(const SequenceInput& seq) {
  const size_t n = seq.n_inputs();
  if (n == 0 || seq.kv_pages.empty()) return;
  const uint32_t ps = page_size_;
  const size_t ctx_len = (seq.kv_pages.size() - 1) * size_t{ps} + seq.last_page_len;
  const size_t first = ctx_len - n;
  bool known = seq.mask.empty() && seq.adapter == 0;
  if (known && seq.tokens.empty())
    for (uint32_t slot : seq.embed_slots)
      if (slot >= embed_token_.size() || embed_token_[slot] < 0) known = false;
  auto token = [&](size_t i) {
    return seq.tokens.empty() ? embed_token_[seq.embed_slots[i]] : seq.tokens[i];
  };

  const size_t first_page = first / ps, last_page = seq.kv_pages.size() - 1;
  KvContext ctx = known ? context_of(std::span(seq.kv_pages).first(first_page)) : KvContext{};
  for (size_t j = first_page; j <= last_page; ++j) {
    const uint32_t page = seq.kv_pages[j];
    if (!known) {
      set_opaque(page);
      continue;
    }
    const size_t s = j == first_page ? first % ps : 0;
    const size_t e = j == last_page ? seq.last_page_len : ps;
    std::optional<KvRecipe>& rec = recipe_[page];
    if (s == 0) {
      rec = KvRecipe{ctx, {}, {}};
    } else if (rec && s <= rec->tokens.size() && same_context(rec->context.get(), ctx.get())) {
      rec->tokens.resize(s);  // a rewrite from inside the filled part drops what follows
      rec->positions.resize(s);
    } else {
      rec.reset();  // a gap, or slots over another context: opaque
    }
    if (rec) {
      const size_t in0 = j * ps + s - first;
      for (size_t i = in0; i < in0 + (e - s); ++i) {
        rec->tokens.push_back(token(i));
        rec->positions.push_back(seq.positions[i]);
      }
    }
    version_[page] = next_version_++;
    if (j < last_page) ctx = extend(std::move(ctx), page);
  }
  // Embed outputs overwrite their slots with hidden states (after the inputs were read).
  for (const OutputSpec& o : seq.outputs)
    if (o.kind == OutputKind::Embed) on_embed_overwritten(o.embed_slot);
}

std::vector<bool> KvProvenance::replayable(std::span<const uint32_t> own,
                                           std::span<const uint32_t> visible) const {
  std::unordered_map<uint32_t, size_t> index;  // own page -> its position in `own`
  for (size_t i = 0; i < own.size(); ++i) index.emplace(own[i], i);
  const std::unordered_set<uint32_t> seen(visible.begin(), visible.end());
  std::vector<size_t> order(own.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // A context only names versions older than the page's own: deciding in version order decides
  // every context page first.
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return version_[own[a]] < version_[own[b]]; });
  std::vector<bool> replay(own.size(), false);
  std::unordered_map<const KvContextNode*, bool> verdict;  // contexts already judged
  std::vector<const KvContextNode*> path;
  for (size_t i : order) {
    const std::optional<KvRecipe>& rec = recipe_[own[i]];
    if (!rec || rec->tokens.empty()) continue;
    // Walk the context until a node judged before; then judge the walked nodes back to front.
    bool ok = true;
    path.clear();
    const KvContextNode* node = rec->context.get();
    for (; node; node = node->before.get()) {
      if (auto v = verdict.find(node); v != verdict.end()) {
        ok = v->second;
        break;
      }
      path.push_back(node);
    }
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      const KvContextNode* n = *it;
      if (ok) {
        if (version_[n->page] != n->version) {
          ok = false;  // rewritten since the slots attended to it
        } else if (auto own_it = index.find(n->page); own_it != index.end()) {
          // Restored with the instance: exactly when saved, from slot 0 to the filled end when
          // recomputed, so a recomputed context page must be full.
          const size_t k = own_it->second;
          ok = !replay[k] || recipe_[n->page]->tokens.size() == page_size_;
        } else {
          ok = seen.count(n->page) != 0;  // stays resident only while the instance holds it
        }
      }
      verdict.emplace(n, ok);
    }
    replay[i] = ok;
  }
  return replay;
}

std::vector<DetachedPage> KvProvenance::detach(std::span<const uint32_t> pages) {
  std::vector<DetachedPage> out;
  out.reserve(pages.size());
  for (uint32_t p : pages) {
    out.push_back({p, version_[p], std::move(recipe_[p])});
    recipe_[p].reset();  // the content stays, and its version, until the page is written
  }
  return out;
}

std::optional<ReplayPlan> KvProvenance::replay_plan(
    std::vector<DetachedPage> dropped,
    const std::unordered_map<uint32_t, uint32_t>& fresh_of) const {
  std::sort(dropped.begin(), dropped.end(),
            [](const DetachedPage& a, const DetachedPage& b) { return a.version < b.version; });
  ReplayPlan plan;
  struct Open {  // the sequence a chain of full pages can still extend
    size_t seq = 0;
    const DetachedPage* last = nullptr;
  };
  std::unordered_map<uint32_t, Open> open;  // by its last page (stale id)
  std::vector<uint32_t> ctx;
  for (const DetachedPage& d : dropped) {
    if (!d.recipe) continue;
    const KvRecipe& rec = *d.recipe;
    const KvContextNode* top = rec.context.get();
    size_t s = plan.sequences.size();
    if (auto it = top ? open.find(top->page) : open.end();
        it != open.end() && it->second.last->version == top->version &&
        it->second.last->recipe->tokens.size() == page_size_ &&
        same_context(top->before.get(), it->second.last->recipe->context.get())) {
      s = it->second.seq;
      open.erase(it);
    } else {
      ctx.clear();
      for (const KvContextNode* n = top; n; n = n->before.get()) {
        if (auto f = fresh_of.find(n->page); f != fresh_of.end())
          ctx.push_back(f->second);
        else if (version_[n->page] == n->version)
          ctx.push_back(n->page);
        else
          return std::nullopt;  // a page it kept was rewritten by someone else meanwhile
      }
      SequenceInput seq;
      seq.kv_pages.assign(ctx.rbegin(), ctx.rend());
      plan.sequences.push_back(std::move(seq));
      plan.writes.emplace_back();
    }
    SequenceInput& seq = plan.sequences[s];
    seq.tokens.insert(seq.tokens.end(), rec.tokens.begin(), rec.tokens.end());
    seq.positions.insert(seq.positions.end(), rec.positions.begin(), rec.positions.end());
    const uint32_t fresh = fresh_of.at(d.page);
    seq.kv_pages.push_back(fresh);
    seq.last_page_len = static_cast<uint32_t>(rec.tokens.size());
    plan.writes[s].push_back(fresh);
    plan.tokens += static_cast<uint32_t>(rec.tokens.size());
    open[d.page] = Open{s, &d};
  }
  return plan;
}

}  // namespace pith
