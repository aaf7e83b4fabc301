#include "control/chunked_prefill.h"

#include <algorithm>

#include "common/error.h"
#include "control/calls.h"

namespace pith {

namespace {

size_t context_of(const SequenceInput& seq, uint32_t ps) {
  return (seq.kv_pages.size() - 1) * size_t{ps} + seq.last_page_len;
}

}  // namespace

PrefillChunk split_prefill(SequenceInput& seq, std::vector<uint32_t>& origin, uint32_t m,
                           uint32_t ps) {
  const size_t n = seq.n_inputs();
  const size_t ctx = context_of(seq, ps);
  const size_t chunk_ctx = ctx - n + m;
  PITH_CHECK(m > 0 && m < n);
  if (origin.empty())
    for (size_t i = 0; i < seq.outputs.size(); ++i) origin.push_back(static_cast<uint32_t>(i));

  PrefillChunk chunk;
  SequenceInput& c = chunk.seq;
  if (!seq.tokens.empty()) {
    c.tokens.assign(seq.tokens.begin(), seq.tokens.begin() + m);
    seq.tokens.erase(seq.tokens.begin(), seq.tokens.begin() + m);
  } else {
    c.embed_slots.assign(seq.embed_slots.begin(), seq.embed_slots.begin() + m);
    seq.embed_slots.erase(seq.embed_slots.begin(), seq.embed_slots.begin() + m);
  }
  c.adapter = seq.adapter;  // every chunk runs under the call's adapter
  // Chunks of a hybrid sequence advance its one state in order, chunk after chunk.
  c.state_slot = seq.state_slot;
  c.positions.assign(seq.positions.begin(), seq.positions.begin() + m);
  seq.positions.erase(seq.positions.begin(), seq.positions.begin() + m);
  const size_t chunk_pages = (chunk_ctx + ps - 1) / ps;
  c.kv_pages.assign(seq.kv_pages.begin(), seq.kv_pages.begin() + chunk_pages);
  c.last_page_len = static_cast<uint32_t>(chunk_ctx - (chunk_pages - 1) * ps);
  if (!seq.mask.empty()) {
    for (size_t i = 0; i < m; ++i) {
      // Truncate the row's runs to the chunk's context.
      std::vector<uint32_t> runs;
      size_t covered = 0;
      for (uint32_t r : seq.mask[i]) {
        if (covered >= chunk_ctx) break;
        uint32_t keep = static_cast<uint32_t>(std::min<size_t>(r, chunk_ctx - covered));
        runs.push_back(keep);
        covered += keep;
      }
      c.mask.push_back(std::move(runs));
    }
    seq.mask.erase(seq.mask.begin(), seq.mask.begin() + m);
  }
  // Outputs of inputs < m move to the chunk; the rest are re-indexed.
  std::vector<OutputSpec> keep;
  std::vector<uint32_t> keep_origin;
  for (size_t i = 0; i < seq.outputs.size(); ++i) {
    OutputSpec o = seq.outputs[i];
    if (o.input_index < m) {
      c.outputs.push_back(o);
      chunk.origin.push_back(origin[i]);
    } else {
      o.input_index -= m;
      keep.push_back(o);
      keep_origin.push_back(origin[i]);
    }
  }
  seq.outputs = std::move(keep);
  origin = std::move(keep_origin);
  return chunk;
}

void narrow_after_split(CallInfo& info, const SequenceInput& rest, uint32_t m, uint32_t ps) {
  info.n_tokens -= m;
  info.splittable = info.n_tokens > 1;
  // rest's inputs now start at the chunk's context end: pages before it are only read.
  const size_t chunk_ctx = context_of(rest, ps) - rest.n_inputs();
  const size_t first_write_page = chunk_ctx / ps;
  std::vector<uint32_t> reads, writes;
  for (size_t i = 0; i < rest.kv_pages.size(); ++i)
    (i >= first_write_page ? writes : reads).push_back(rest.kv_pages[i]);
  for (uint32_t e : info.reads)
    if (e & kEmbedTag) reads.push_back(e);
  for (uint32_t e : info.writes)
    if (e & kEmbedTag) writes.push_back(e);
  info.reads = std::move(reads);
  info.writes = std::move(writes);
}

void gather_outputs(std::vector<OutputResult>& gathered, std::span<const uint32_t> origin,
                    std::vector<OutputResult>& outputs) {
  for (size_t i = 0; i < origin.size() && i < outputs.size(); ++i)
    gathered[origin[i]] = std::move(outputs[i]);
}

}  // namespace pith
