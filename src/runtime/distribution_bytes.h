// The bytes a distribution future resolves to (abi.h next_dist / forward_tokens): per output,
// uint32 k, k uint32 token ids, k float32 values, back to back (a hidden state: uint32 n, n
// float32). One writer per form the ABI asks for: a top-K as the engine sorted it, the whole
// vocabulary by id (probabilities or raw logits), a hidden state.
#pragma once

#include <string>
#include <vector>

#include "backend/forward_batch.h"

namespace pith::runtime {

// A top-K distribution as it is (sorted by probability).
void append_dist(std::string& out, const TokenDistribution& d);
// PITH_TOP_K_ALL from logits: the whole vocabulary in id order, probabilities = their softmax.
void append_full_dist(std::string& out, const std::vector<float>& logits);
// PITH_TOP_K_LOGITS: the whole vocabulary in id order, raw logits in place of probabilities.
void append_raw_logits(std::string& out, const std::vector<float>& logits);
// A top-K distribution covering the whole vocabulary, reordered by token id (next_dist with
// PITH_TOP_K_ALL).
void append_dist_by_id(std::string& out, const TokenDistribution& d);
// PITH_TOP_K_HIDDEN: uint32 n, then the n float32 of a normed hidden state (no token ids).
void append_hidden(std::string& out, const std::vector<float>& hidden);

}  // namespace pith::runtime
