// Tokenizer: text ↔ token ids for the models pith serves, byte-exact with llama.cpp.
//  - byte-level BPE (GGUF tokenizer.ggml.model "gpt2": GPT-2, Llama 3, Qwen2): regex
//    pre-tokenizer chosen from the model, GPT-2 byte-to-unicode mapping, merges by rank;
//  - SentencePiece BPE ("llama": Llama 2, TinyLlama, Mistral): "▁" for spaces with a space
//    prepended to the text, merges by score, byte fallback <0xNN>;
//  - metaspace BPE ("gemma4": Gemma 4): "▁" for spaces, no prepended space, merges by rank
//    within runs of newlines and runs of other characters, byte fallback <0xNN>.
// Loaded from a GGUF file (model or vocab-only) or a Hugging Face folder (tokenizer.json +
// tokenizer_config.json). The object is immutable once built and cheap to copy (shared
// state), so one instance serves every thread, inferlet and request.
//
// Special tokens: control tokens (BOS, <|eot_id|>, ...) written in text become single ids
// only when encode() is called with parse_special = true; otherwise they are tokenized as
// plain text. User-defined (added) tokens are always recognised.
//
// Invalid UTF-8 input never fails: byte-level BPE encodes stray bytes as byte tokens and
// SentencePiece and metaspace BPE as <0xNN> byte-fallback tokens (llama.cpp turns them into
// U+FFFD first; valid UTF-8 tokenizes the same in both), so decode(encode(s)) == s for any bytes s
// (when the vocab has all 256 byte tokens, as every supported model does).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pith {

class GGUFFile;

class Tokenizer {
 public:
  // Builds from a GGUF file's tokenizer.ggml.* metadata.
  static Tokenizer from_gguf(const GGUFFile& file);
  // Builds from a Hugging Face folder: tokenizer.json, plus tokenizer_config.json when
  // present (bos/eos tokens, add_bos_token, chat_template).
  static Tokenizer from_hf_folder(const std::string& dir);
  // A .gguf file, an HF folder, or a tokenizer.json file (its folder is used).
  static Tokenizer load(const std::string& path);
  // From already-loaded vocabulary data; `source` names it in error messages.
  static Tokenizer from_vocab(Vocab vocab, const std::string& source);

  // Text → ids. `add_special`: prepend BOS / append EOS when the model asks for them
  // (add_bos_token / add_eos_token); `parse_special`: recognise control tokens written in the
  // text. Never throws for any input bytes.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Ids → text bytes (the concatenation of token_bytes, with SentencePiece's prepended space
  // removed at the start of the text and after special tokens, mirroring encode). With
  // `skip_special`, control and unknown tokens produce nothing. Throws pith::Error for an id
  // outside [0, vocab_size()). The result may be invalid UTF-8 when the ids split a character.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Raw bytes of one token: " the" for "Ġthe" or "▁the", one byte for <0xNN>, the literal
  // text for control tokens ("<|eot_id|>"). Throws pith::Error for an out-of-range id.
  const std::string& token_bytes(int32_t id) const;
  // The token's text as stored in the vocab ("Ġthe", "▁the", "<0x0A>").
  const std::string& token_text(int32_t id) const;
  // Id of the token whose stored text is `text`, or -1.
  int32_t find_token(std::string_view text) const;

  size_t vocab_size() const;
  VocabKind kind() const;
  TokenType token_type(int32_t id) const;
  // Control or unknown token (never produced from plain text without parse_special).
  bool is_special(int32_t id) const;
  // End of generation: EOS, EOT/EOM and end-of-turn control tokens such as <|eot_id|>,
  // <|eom_id|>, <|im_end|>, <|end_of_text|>.
  bool is_eog(int32_t id) const;

  int32_t bos_id() const;                       // -1 when none
  int32_t eos_id() const;                       // -1 when none
  const std::vector<int32_t>& eos_ids() const;  // every end-of-generation id, sorted
  bool add_bos() const;
  std::string bos_text() const;              // "" when none
  std::string eos_text() const;              // "" when none
  const std::string& chat_template() const;  // "" when the model has none
  const Vocab& vocab() const;

  // The quadratic reference encoder (same ids as encode, naive pair rescan in BPE merging);
  // for tests and the benchmark baseline only.
  std::vector<int32_t> encode_naive(std::string_view text, bool add_special,
                                    bool parse_special) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
  friend class StreamDecoder;
};

}  // namespace pith
