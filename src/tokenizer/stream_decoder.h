// StreamDecoder: incremental detokenization for generation. Feed ids one at a time; text
// comes out only when its bytes form complete UTF-8 characters, since a character can be
// split across tokens (byte-level BPE bytes, SentencePiece <0xNN> byte fallback). Bytes that
// can never become valid UTF-8 are passed through as they are, so for any id sequence
//   concat(push(id)...) + flush() == tokenizer.decode(ids)
// exactly. One decoder per generation stream; not thread-safe (cheap to create).
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace pith {

class StreamDecoder {
 public:
  // `at_text_start`: the first id begins the text (SentencePiece then drops the space it
  // prepends, as decode() does). Use false to continue after a prompt: a generated "▁Paris"
  // then yields " Paris".
  explicit StreamDecoder(Tokenizer tokenizer, bool skip_special = false,
                         bool at_text_start = false);

  // Adds one token; returns the text that became complete (possibly empty). Throws
  // pith::Error for an out-of-range id (the decoder's state is unchanged).
  std::string push(int32_t id);
  // Returns whatever is still held back (an incomplete character at the very end).
  std::string flush();
  // Bytes currently held back.
  size_t pending() const { return held_.size(); }

 private:
  Tokenizer tok_;
  bool skip_special_;
  bool strip_space_;
  std::string held_;
};

}  // namespace pith
