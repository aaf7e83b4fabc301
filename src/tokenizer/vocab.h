// Vocab: the plain data that defines a tokenizer, as read from a GGUF file
// (tokenizer.ggml.*) or a Hugging Face tokenizer.json, before any lookup structure is built.
// It is the exchange format between the loaders (gguf_vocab.cpp, hf_tokenizer_json.cpp), the
// Tokenizer (which indexes it) and the tokenizer.json writer. Token texts are kept exactly as
// the model stores them: GPT-2 byte-mapped for byte-level BPE ("Ġthe"), with "▁" for spaces
// and "<0xNN>" byte tokens for SentencePiece.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pith {

class GGUFFile;

// Token kinds, numbered as llama.cpp's GGUF `tokenizer.ggml.token_type`.
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,      // special: BOS, EOS, <|eot_id|>; matched in text only with parse_special
  UserDefined = 4,  // added token: always matched in text, before the model splits it
  Unused = 5,
  Byte = 6,  // SentencePiece byte fallback "<0xNN>"
};

enum class VocabKind {
  BytePairBPE,    // byte-level BPE (tokenizer.ggml.model "gpt2"): GPT-2, Llama 3, Qwen2
  SentencePiece,  // SentencePiece BPE with scores and byte fallback ("llama"): Llama 2, Mistral
  MetaspaceBPE,   // BPE merges by rank over text with "▁" for spaces, <0xNN> byte fallback
                  // ("gemma4"): Gemma 4 (see metaspace_bpe.h)
};

struct Vocab {
  VocabKind kind = VocabKind::BytePairBPE;
  // Pre-tokenizer name as in GGUF tokenizer.ggml.pre ("llama-bpe", "gpt2", "qwen2", "default",
  // ...). `pre_regexes`, when not empty, are the split regexes themselves, applied in order
  // (from tokenizer.json), and win.
  std::string pre = "default";
  std::vector<std::string> pre_regexes;

  std::vector<std::string> tokens;  // id → stored text
  std::vector<float> scores;        // id → score (SentencePiece); may be empty for BPE
  std::vector<TokenType> types;     // id → type
  std::vector<std::pair<std::string, std::string>> merges;  // BPE merges, rank = index

  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;  // end of turn (<|eot_id|>, <|im_end|>); -1 when the model has none
  int32_t eom_id = -1;
  int32_t fim_pad_id = -1;  // fill-in-the-middle padding, repository and file separator:
  int32_t fim_rep_id = -1;  // code models stop there
  int32_t fim_sep_id = -1;
  // Fill-in-the-middle markers: a prompt <PRE> prefix <SUF> suffix <MID> asks a code model for
  // the text between (-1 when the model has none; found by text when the file does not say).
  int32_t fim_pre_id = -1;
  int32_t fim_suf_id = -1;
  int32_t fim_mid_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;  // SentencePiece: prepend "▁" to the text (llama.cpp default)
  bool ignore_merges = false;    // BPE: a pre-token word that is itself a token is not split
                                 // (Llama 3; true by default for pre "llama-bpe")
  // Literal tokens that swallow the ASCII whitespace before (lstrip) or after (rstrip) them
  // when matched in text, sorted: HF added tokens' lstrip/rstrip flags; for GGUF files,
  // llama.cpp's rule that Phi-3's added tokens rstrip (its chat format "<|user|>\n..." then
  // tokenizes without the newline, as the HF tokenizer does).
  std::vector<int32_t> lstrip_ids;
  std::vector<int32_t> rstrip_ids;

  std::string chat_template;  // Jinja source, empty when the model has none

  size_t size() const { return tokens.size(); }

  // Checks internal consistency (array lengths, special ids in range); throws pith::Error
  // naming `source` on the first problem.
  void validate(const std::string& source) const;
};

// Reads tokenizer.ggml.* from a GGUF file (model or vocab-only). Throws pith::Error when the
// file has no tokenizer or an unsupported tokenizer model.
Vocab vocab_from_gguf(const GGUFFile& file);

}  // namespace pith
