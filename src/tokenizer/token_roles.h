// Token roles recognised by text. End of generation: which token ids end a model's output. GGUF
// files declare EOS (and
// sometimes EOT/EOM), but chat models often end a turn with another token that the file does
// not name: Phi-3 declares <|endoftext|> yet ends turns with <|end|>, Qwen2 base files declare
// <|endoftext|> while the chat template closes turns with <|im_end|>, code models stop at their
// fill-in-the-middle padding and file separators. As llama.cpp does (the reference pith is
// checked against), such tokens are recognised by their text, and become control tokens
// whatever type the file gave them: plain text never turns into them, and they are not text
// when decoded with skip_special. The fill-in-the-middle prefix/suffix/middle markers
// (<|fim_prefix|>, <｜fim▁begin｜>, <PRE>, ...) become control tokens the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace pith {

// The sorted end-of-generation ids of `vocab` (`index`: its text → id map): the declared
// EOS/EOT/EOM and fill-in-the-middle pad/repo/separator ids plus every token whose text is a
// known end marker. Retypes the tokens found by text as Control; sets `vocab.eot_id` when the
// file has none and an end-of-turn marker (<|eot_id|>, <|im_end|>, <end_of_turn>, <|end|>, ...)
// is present. Harmony-style vocabularies (gpt-oss) keep <|end|> out of the set, as a
// user-defined token, since it ends a reasoning channel, not the output. Also retypes the
// fill-in-the-middle markers as Control.
std::vector<int32_t> assign_token_roles(Vocab& vocab, const TokenIndex& index);

}  // namespace pith
