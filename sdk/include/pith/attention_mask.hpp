// pith/attention_mask.hpp: an explicit attention mask for one forward call, in the bit layout of
// pith_forward_tokens_args_t::attn_mask (abi.h): one row per input token, one bit per context
// slot (row-major, rows of ceil(context_len / 8) bytes, bit set = may attend).
//
//   pith::AttentionMask m(/*rows=*/n_pending, /*context_len=*/ctx.tokens().size());
//   m.allow(r, 0, 4);        // row r sees slots [0, 4)
//   ctx.flush(m);            // Context applies it to its pending tokens
//
// Page masks (kvpage_mask) still hide their slots on top of an explicit mask. Every row must
// see at least one slot (a query with nothing to attend to is rejected by the host).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <vector>

namespace pith {

class AttentionMask {
 public:
  AttentionMask() = default;
  AttentionMask(size_t rows, size_t context_len)
      : rows_(rows),
        context_len_(context_len),
        row_bytes_((context_len + 7) / 8),
        bits_(rows * row_bytes_, 0) {}

  // The causal mask of `rows` new tokens at the end of a context of context_len slots: row r
  // sees slots [0, context_len - rows + r].
  static AttentionMask causal(size_t rows, size_t context_len) {
    AttentionMask m(rows, context_len);
    for (size_t r = 0; r < rows; ++r) m.allow(r, 0, context_len - rows + r + 1);
    return m;
  }

  size_t rows() const { return rows_; }
  size_t context_len() const { return context_len_; }
  bool empty() const { return rows_ == 0; }

  // Row `row` may attend to slots [begin, end).
  void allow(size_t row, size_t begin, size_t end) {
    for (size_t s = begin; s < end && s < context_len_; ++s)
      bits_[row * row_bytes_ + s / 8] |= uint8_t(1u << (s % 8));
  }
  void hide(size_t row, size_t begin, size_t end) {
    for (size_t s = begin; s < end && s < context_len_; ++s)
      bits_[row * row_bytes_ + s / 8] &= uint8_t(~(1u << (s % 8)));
  }
  bool allowed(size_t row, size_t slot) const {
    return (bits_[row * row_bytes_ + slot / 8] >> (slot % 8)) & 1u;
  }

  const std::vector<uint8_t>& bytes() const { return bits_; }

 private:
  size_t rows_ = 0, context_len_ = 0, row_bytes_ = 0;
  std::vector<uint8_t> bits_;
};

}  // namespace pith
