// Incremental detokenization (see stream_decoder.h).
#include "tokenizer/stream_decoder.h"

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace pith {

StreamDecoder::StreamDecoder(Tokenizer tokenizer, bool skip_special, bool at_text_start)
    : tok_(std::move(tokenizer)),
      skip_special_(skip_special),
      strip_space_(at_text_start && tok_.impl_->spm_prefix) {}

std::string StreamDecoder::push(int32_t id) {
  tok_.impl_->check_id(id);
  tok_.impl_->append_piece(held_, id, skip_special_, strip_space_);
  size_t keep = utf8::incomplete_suffix_length(held_);
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace pith
