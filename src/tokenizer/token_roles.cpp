// Token roles by declaration and by text (see token_roles.h). The marker lists
// follow llama.cpp's (llama-vocab.cpp at the commit of tests/data/tokenizer).
#include "tokenizer/token_roles.h"

#include <algorithm>
#include <span>
#include <string_view>

namespace pith {

namespace {

using Texts = std::span<const std::string_view>;

// Texts that end a turn or the whole text in common model families.
// clang-format off
constexpr std::string_view kEndMarkers[] = {
    "<|eot_id|>", "<|eom_id|>",                          // Llama 3
    "<|im_end|>",                                        // ChatML (Qwen)
    "<|endoftext|>",                                     // GPT-2 family, Qwen, Phi
    "<|end|>",                                           // Phi-3
    "<end_of_turn>", "<eos>", "<turn|>", "<|tool_response>",  // Gemma
    "<|end_of_text|>",                                   // Granite, Llama 3 base
    "<｜end▁of▁sentence｜>",                            // DeepSeek
    "<EOT>", "_<EOT>",                                   // CodeLlama infill
    "[EOT]", "[EOS]",                                    // Kimi K2
    "</s>",                                              // Llama 2 style, declared or not
    "<end_of_utterance>",                                // SmolDocling
    "<|return|>", "<|call|>",                            // gpt-oss (harmony)
    "<|flush|>", "<|calls|>",                            // Solar Open
    "[e~[",                                              // MiniMax
};

// End of turn when the file declares no EOT id, by preference.
constexpr std::string_view kTurnMarkers[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"};
// clang-format on

// Fill-in-the-middle roles that end generation: padding, repository name, file separator
// (one token each, the first of its list present).
constexpr std::string_view kFimPad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepo[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                         "<reponame>"};
constexpr std::string_view kFimSep[] = {"<|file_sep|>"};
// The other fill-in-the-middle roles: control tokens, but generation goes on after them.
constexpr std::string_view kFimPrefix[] = {"<|fim_prefix|>",  "<fim-prefix>", "<fim_prefix>",
                                           "<｜fim▁begin｜>", "<PRE>",        "▁<PRE>",
                                           "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSuffix[] = {"<|fim_suffix|>",  "<fim-suffix>", "<fim_suffix>",
                                           "<｜fim▁hole｜>",  "<SUF>",        "▁<SUF>",
                                           "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMiddle[] = {"<|fim_middle|>",  "<fim-middle>", "<fim_middle>",
                                           "<｜fim▁end｜>",   "<MID>",        "▁<MID>",
                                           "<|code_middle|>", "<|middle|>"};

int32_t first_present(const TokenIndex& index, Texts texts) {
  for (std::string_view t : texts)
    if (int32_t id = lookup(index, t); id >= 0) return id;
  return -1;
}

}  // namespace

std::vector<int32_t> assign_token_roles(Vocab& v, const TokenIndex& index) {
  auto present = [&](std::string_view text) { return lookup(index, text) >= 0; };
  // Gemma 4 and PLaMo use "</s>" as ordinary text.
  const bool plain_s = present("<|tool_response>") || present("<|plamo:eos|>");
  const bool harmony = (present("<|return|>") && present("<|call|>")) ||
                       (present("<|flush|>") && present("<|calls|>"));

  std::vector<int32_t> eog;
  std::vector<int32_t> by_text;
  for (int32_t id : {v.eos_id, v.eot_id, v.eom_id, v.fim_pad_id, v.fim_rep_id, v.fim_sep_id})
    if (id >= 0) eog.push_back(id);
  for (Texts list : {Texts(kFimPad), Texts(kFimRepo), Texts(kFimSep)})
    if (int32_t id = first_present(index, list); id >= 0) by_text.push_back(id);
  for (std::string_view text : kEndMarkers) {
    if (text == "</s>" && plain_s) continue;
    if (int32_t id = lookup(index, text); id >= 0) by_text.push_back(id);
  }
  if (v.eot_id < 0) {
    for (std::string_view text : kTurnMarkers) {
      if (harmony && text == "<|end|>") continue;
      if (int32_t id = lookup(index, text); id >= 0) {
        v.eot_id = id;
        by_text.push_back(id);
        break;
      }
    }
  }
  for (int32_t id : by_text) {
    v.types[id] = TokenType::Control;
    eog.push_back(id);
  }
  // The FIM markers the file does not declare, by text (each a control token); the model can
  // fill in the middle only with all three.
  for (auto [list, id] :
       {std::pair{Texts(kFimPrefix), &v.fim_pre_id}, std::pair{Texts(kFimSuffix), &v.fim_suf_id},
        std::pair{Texts(kFimMiddle), &v.fim_mid_id}}) {
    if (*id < 0) *id = first_present(index, list);
    if (*id >= 0) v.types[*id] = TokenType::Control;
  }
  if (v.fim_pre_id < 0 || v.fim_suf_id < 0 || v.fim_mid_id < 0)
    v.fim_pre_id = v.fim_suf_id = v.fim_mid_id = -1;
  // Harmony (gpt-oss; Solar Open's variant): <|end|> closes one message of a turn that goes on,
  // so it does not end generation. It and gpt-oss's header markers are user-defined tokens, as
  // llama.cpp types them: they stay in the decoded text (the harmony parser reads channels and
  // recipients from it) and in grammars (a forced tool call is written as its header).
  if (harmony) {
    if (int32_t end = lookup(index, "<|end|>"); end >= 0) {
      eog.erase(std::remove(eog.begin(), eog.end(), end), eog.end());
      v.types[end] = TokenType::UserDefined;
    }
    if (present("<|return|>"))
      for (std::string_view text : {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"})
        if (int32_t id = lookup(index, text); id >= 0) v.types[id] = TokenType::UserDefined;
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  return eog;
}

}  // namespace pith
