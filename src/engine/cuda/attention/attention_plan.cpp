// Host-side attention planning: index arrays and mask bits. See attention_plan.h.
#include "engine/cuda/attention/attention_plan.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "engine/cuda/attention/attention_error.h"

namespace pith::cuda {

namespace {

// Sets bits [begin, end) of `bits` (little-endian bit order): whole bytes in the middle.
void set_bit_range(uint8_t* bits, uint64_t begin, uint64_t end) {
  while (begin < end && begin % 8 != 0) {
    bits[begin / 8] |= uint8_t(1u << (begin % 8));
    ++begin;
  }
  const uint64_t full_end = end & ~uint64_t{7};
  if (begin < full_end) {
    std::memset(bits + begin / 8, 0xff, (full_end - begin) / 8);
    begin = full_end;
  }
  for (; begin < end; ++begin) bits[begin / 8] |= uint8_t(1u << (begin % 8));
}

void check_sequence(const AttentionSequence& s, size_t index, uint32_t page_size) {
  if (s.context_len == 0) fail("attention plan: sequence {} has an empty context", index);
  if (s.n_q > s.context_len)
    fail("attention plan: sequence {} has {} inputs but a context of {} slots", index, s.n_q,
         s.context_len);
  const size_t want_pages = (size_t{s.context_len} + page_size - 1) / page_size;
  if (s.pages.size() != want_pages)
    fail("attention plan: sequence {} has {} pages for {} slots (page size {}, need {})", index,
         s.pages.size(), s.context_len, page_size, want_pages);
  if (s.mask == nullptr || s.mask->empty()) return;
  if (s.mask->size() != s.n_q)
    fail("attention plan: sequence {} has {} mask rows for {} inputs", index, s.mask->size(),
         s.n_q);
  for (size_t i = 0; i < s.mask->size(); ++i) {
    uint64_t sum = 0;
    for (uint32_t run : (*s.mask)[i]) sum += run;
    if (sum != s.context_len)
      fail("attention plan: sequence {} mask row {} covers {} slots, context has {}", index, i, sum,
           s.context_len);
  }
}

}  // namespace

void throw_attention_error(const std::string& what) {
  throw Error(what);
}

void build_attention_plan(std::span<const AttentionSequence> seqs, uint32_t page_size,
                          bool causal_bits, AttentionPlan& plan) {
  if (page_size == 0) fail("attention plan: page size 0");
  plan.qo_indptr.assign(1, 0);
  plan.q_begin.clear();
  plan.kv_page_indptr.assign(1, 0);
  plan.kv_page_indices.clear();
  plan.kv_last_page_len.clear();
  plan.kv_len.clear();
  plan.mask_indptr.clear();
  plan.row_seq.clear();
  plan.row_q.clear();
  plan.row_pos.clear();
  plan.mask_bits.clear();
  plan.any_custom_mask = false;
  plan.all_single_query = true;
  plan.rows_packed = true;
  plan.max_kv_len = 0;
  plan.max_n_q = 0;

  // Validate everything first so a bad sequence leaves no half-built plan behind.
  size_t mask_bytes = 0;
  for (size_t k = 0; k < seqs.size(); ++k) {
    const AttentionSequence& s = seqs[k];
    if (s.n_q == 0) continue;
    check_sequence(s, k, page_size);
    const bool custom = s.mask != nullptr && !s.mask->empty();
    if (custom || causal_bits) mask_bytes += (uint64_t{s.n_q} * s.context_len + 7) / 8;
  }
  if (mask_bytes > size_t{INT32_MAX})
    fail("attention plan: {} bytes of mask bits exceed the 2 GiB index range", mask_bytes);
  plan.mask_bits.assign(mask_bytes, 0);

  size_t mask_at = 0;
  for (const AttentionSequence& s : seqs) {
    if (s.n_q == 0) continue;
    const auto seq = static_cast<int32_t>(plan.kv_len.size());
    if (s.q_begin != static_cast<uint32_t>(plan.qo_indptr.back())) plan.rows_packed = false;
    plan.qo_indptr.push_back(plan.qo_indptr.back() + static_cast<int32_t>(s.n_q));
    plan.q_begin.push_back(static_cast<int32_t>(s.q_begin));
    for (uint32_t p : s.pages) plan.kv_page_indices.push_back(static_cast<int32_t>(p));
    plan.kv_page_indptr.push_back(static_cast<int32_t>(plan.kv_page_indices.size()));
    plan.kv_last_page_len.push_back(
        static_cast<int32_t>(s.context_len - (s.pages.size() - 1) * page_size));
    plan.kv_len.push_back(static_cast<int32_t>(s.context_len));
    plan.max_kv_len = std::max(plan.max_kv_len, s.context_len);
    plan.max_n_q = std::max(plan.max_n_q, s.n_q);
    if (s.n_q != 1) plan.all_single_query = false;
    for (uint32_t i = 0; i < s.n_q; ++i) {
      plan.row_seq.push_back(seq);
      plan.row_q.push_back(static_cast<int32_t>(s.q_begin + i));
      plan.row_pos.push_back(static_cast<int32_t>(i));
    }

    const bool custom = s.mask != nullptr && !s.mask->empty();
    plan.any_custom_mask = plan.any_custom_mask || custom;
    if (!custom && !causal_bits) {
      plan.mask_indptr.push_back(-1);
      continue;
    }
    plan.mask_indptr.push_back(static_cast<int32_t>(mask_at));
    uint8_t* bits = plan.mask_bits.data() + mask_at;
    for (uint32_t i = 0; i < s.n_q; ++i) {
      const uint64_t row = uint64_t{i} * s.context_len;
      if (!custom) {  // causal: input i sees slots [0, context_len - n_q + i]
        set_bit_range(bits, row, row + (s.context_len - s.n_q + i + 1));
        continue;
      }
      uint64_t at = 0;
      bool visible = true;
      for (uint32_t run : (*s.mask)[i]) {
        if (visible) set_bit_range(bits, row + at, row + at + run);
        at += run;
        visible = !visible;
      }
    }
    mask_at += (uint64_t{s.n_q} * s.context_len + 7) / 8;
  }
  if (plan.kv_len.empty()) plan.all_single_query = false;
}

}  // namespace pith::cuda
