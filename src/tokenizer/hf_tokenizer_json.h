// Hugging Face tokenizer files ↔ Vocab. Reads a model folder's tokenizer.json (model type
// BPE: byte-level like GPT-2/Llama 3/Qwen2, or SentencePiece-style with byte_fallback like
// Llama 2) plus tokenizer_config.json (bos/eos tokens, add_bos_token, chat_template), and
// writes the same standard format, so a GGUF vocabulary can be turned into an HF folder
// (`pith model gen --format hf` calls write_hf_tokenizer_folder).
//
// SentencePiece vocabularies are written the way transformers' LlamaConverter does: BPE with
// byte_fallback, merges derived from the vocab and ordered by piece score, a normalizer that
// prepends "▁" and replaces spaces. HF files carry no scores, so the reader gives each piece
// the score -(rank of the first merge producing it); merge order is therefore what defines
// the segmentation, as in Hugging Face.
#pragma once

#include <string>

#include "tokenizer/vocab.h"

namespace pith {

class Tokenizer;

// Reads `dir`/tokenizer.json and, when present, `dir`/tokenizer_config.json. Throws
// pith::Error naming the file for missing files, bad JSON or unsupported tokenizers.
Vocab read_hf_tokenizer(const std::string& dir);

// Writes a standard tokenizer.json for `vocab` to `path`. Throws pith::Error when the file
// cannot be written or the vocab's pre-tokenizer is unknown. Token texts should be unique (a
// JSON object maps text → id): with duplicates the last id wins and reading the file back
// leaves the other ids as unused placeholders.
void write_hf_tokenizer_json(const Vocab& vocab, const std::string& path);
void write_hf_tokenizer_json(const Tokenizer& tokenizer, const std::string& path);

// Writes tokenizer_config.json (bos/eos/unk tokens, add_bos_token, add_eos_token,
// chat_template) to `path`.
void write_hf_tokenizer_config(const Vocab& vocab, const std::string& path);

// Creates `dir` if needed and writes both files into it.
void write_hf_tokenizer_folder(const Vocab& vocab, const std::string& dir);

}  // namespace pith
