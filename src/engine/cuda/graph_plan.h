// Host-side rules for replaying decode steps as CUDA graphs (decode_graphs.h): which batches a
// graph may run, the batch-size buckets graphs are captured for, and the padding that fills a
// batch up to its bucket. Plain C++ (no CUDA), unit-tested on any machine.
//
// A graph replays the exact launches it captured, so it fits a step only if every launch's
// shape and by-value arguments are the same: T = bucket rows, one top-K row per row, the same
// k_max, causal attention over whatever pages the device arrays name, the recurrent layers'
// single-step form over whatever state slots they name. That is a pure decode batch: one token
// input per sequence, a causal mask, one top-K output that the device reduction takes, no
// adapter. Everything else runs eagerly.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/forward_batch.h"
#include "engine/cuda/batch_plan.h"

namespace pith::cuda {

inline constexpr uint32_t kMaxGraphBatch = 256;
// LmHeadRow::sequence of a padding row (its output is computed and dropped).
inline constexpr uint32_t kPaddingSequence = UINT32_MAX;

// The smallest bucket holding n sequences (1, 2, 4, 8, then steps of 8 to 64, of 16 to 128, of
// 32 to 256), 0 when n is 0 or above kMaxGraphBatch: 19 graphs at most per key, and a decode
// step reads the weights once whatever its rows, so padding rows cost little.
uint32_t decode_graph_bucket(uint32_t n);

// Every bucket, ascending (what the tests check the buckets against).
std::vector<uint32_t> decode_graph_buckets();

// Whether `batch` (built into `plan`) is a pure decode step a graph can run (see above).
bool is_graphable_decode(const std::vector<SequenceInput>& batch, const BatchPlan& plan);

// The longest context among the plan's sequences (the graph key's context class).
uint32_t max_context_len(const BatchPlan& plan);

// The top-K width a graph step computes for a batch whose largest k is k_max: the next power of
// two (at most the vocabulary), so requests with varied top-k share a few graphs. Each row still
// takes its own k; only the results' row stride widens.
uint32_t graph_top_k(uint32_t k_max, uint32_t vocab_size);

// Appends bucket - n_tokens padding sequences to a graphable plan: token 0 at position 0,
// written to slot 0 of `pad_page` (a page outside the control layer's pool) and attending to it
// alone, with a top-1 output row of sequence kPaddingSequence. `pad_page` must outlive the
// plan's use (the attention views point into it).
void pad_decode_plan(BatchPlan& plan, uint32_t bucket, std::span<const uint32_t, 1> pad_page);

// The recurrent layers' view of a step (hybrid models): each sequence's first input row, its
// number of inputs and its state slot, then, where a graph step was padded to n_rows, one
// single-row sequence per padding row on `pad_state` (a state slot outside the control layer's
// pool, which every padding row shares: their outputs are dropped).
struct StateRows {
  std::vector<uint32_t> first, count, slot;
};
StateRows state_rows(const std::vector<SequenceInput>& batch, uint32_t n_rows, uint32_t pad_state);

}  // namespace pith::cuda
