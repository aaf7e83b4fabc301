// Host-side planning of one forward's paged attention: from the batch's AttentionSequences, the
// index arrays both attention implementations read (FlashInfer's CSR page table and qo_indptr,
// the own kernel's per-row task list) and the custom-mask bits. Plain C++, no CUDA: the backend
// copies the arrays into pinned staging and uploads them once per forward; unit tests check
// them on the CPU.
//
// Custom-mask bits use FlashInfer's layout, so one buffer serves both kernels: sequence s owns
// the bytes from mask_indptr[s]; input i's visibility of slot j is bit (i * context_len + j) of
// that segment, bit b of a segment living in byte b / 8 at bit position b % 8 (little-endian
// bit order). Each segment starts on a byte boundary. Causal sequences get no bits
// (mask_indptr = -1) unless the plan is asked for them (`causal_bits`), which a FlashInfer
// custom-mask launch over a batch that mixes causal and masked sequences needs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/cuda/attention/paged_kv.h"

namespace pith::cuda {

struct AttentionPlan {
  // Per planned sequence s (sequences with n_q = 0 are left out), int32 as FlashInfer's IdType.
  std::vector<int32_t> qo_indptr;         // [n_seqs + 1] prefix sums of n_q (packed rows)
  std::vector<int32_t> q_begin;           // [n_seqs] first query row in the batch matrix
  std::vector<int32_t> kv_page_indptr;    // [n_seqs + 1] into kv_page_indices
  std::vector<int32_t> kv_page_indices;   // physical page ids, context order per sequence
  std::vector<int32_t> kv_last_page_len;  // [n_seqs] slots used in the last page, 1..page_size
  std::vector<int32_t> kv_len;            // [n_seqs] context_len
  std::vector<int32_t> mask_indptr;       // [n_seqs] byte offset into mask_bits, -1 = causal
  // Per query row r of the batch that some sequence owns (the own kernel's grid.x).
  std::vector<int32_t> row_seq;  // [n_rows] planned sequence index
  std::vector<int32_t> row_q;    // [n_rows] row in the [n_tokens] query/output matrices
  std::vector<int32_t> row_pos;  // [n_rows] input index i within its sequence (0..n_q-1)
  std::vector<uint8_t> mask_bits;

  uint32_t n_seqs() const { return static_cast<uint32_t>(kv_len.size()); }
  uint32_t n_rows() const { return static_cast<uint32_t>(row_q.size()); }
  bool any_custom_mask = false;   // some sequence carries a BRLE mask
  bool all_single_query = false;  // every sequence has n_q == 1 (a pure decode batch)
  // Query rows are the sequences' n_q rows back to back from row 0, in plan order, so
  // qo_indptr addresses them directly (what FlashInfer's batch kernels require).
  bool rows_packed = false;
  uint32_t max_kv_len = 0;
  uint32_t max_n_q = 0;
};

// Builds `plan` (its vectors are reused: no allocation once warmed up). Throws pith::Error on an
// inconsistent sequence: a page table whose length does not match context_len, n_q greater than
// context_len, a mask with a row count other than n_q, runs that do not sum to context_len.
void build_attention_plan(std::span<const AttentionSequence> seqs, uint32_t page_size,
                          bool causal_bits, AttentionPlan& plan);

// Whether input `i` of a sequence sees slot `j` according to its bits (for tests and host runs).
inline bool mask_bit(const uint8_t* segment, uint32_t context_len, uint32_t i, uint32_t j) {
  const uint64_t b = uint64_t{i} * context_len + j;
  return (segment[b / 8] >> (b % 8)) & 1;
}

}  // namespace pith::cuda
