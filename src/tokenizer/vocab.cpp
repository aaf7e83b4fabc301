// Vocab validation and the GGUF loader (see vocab.h). The GGUF keys follow llama.cpp:
// tokenizer.ggml.{model,pre,tokens,scores,token_type,merges,bos_token_id,eos_token_id,
// eot_token_id,eom_token_id,unknown_token_id,padding_token_id,add_bos_token,add_eos_token,
// add_space_prefix}, tokenizer.chat_template.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"
#include "formats/gguf.h"

namespace pith {

void Vocab::validate(const std::string& source) const {
  if (tokens.empty()) fail("{}: tokenizer has no tokens", source);
  if (!scores.empty() && scores.size() != tokens.size())
    fail("{}: tokenizer has {} scores for {} tokens", source, scores.size(), tokens.size());
  if (types.size() != tokens.size())
    fail("{}: tokenizer has {} token types for {} tokens", source, types.size(), tokens.size());
  auto check_id = [&](int32_t id, const char* what) {
    if (id < -1 || id >= static_cast<int64_t>(tokens.size()))
      fail("{}: {} id {} is out of range (vocab size {})", source, what, id, tokens.size());
  };
  check_id(bos_id, "BOS");
  check_id(eos_id, "EOS");
  check_id(eot_id, "EOT");
  check_id(eom_id, "EOM");
  check_id(fim_pad_id, "FIM pad");
  check_id(fim_rep_id, "FIM repo");
  check_id(fim_sep_id, "FIM separator");
  check_id(fim_pre_id, "FIM prefix");
  check_id(fim_suf_id, "FIM suffix");
  check_id(fim_mid_id, "FIM middle");
  check_id(unk_id, "UNK");
  check_id(pad_id, "PAD");
  for (const auto* ids : {&lstrip_ids, &rstrip_ids}) {
    for (int32_t id : *ids) check_id(id, "strip-whitespace token");
    if (!std::is_sorted(ids->begin(), ids->end()))
      fail("{}: strip-whitespace token ids are not sorted", source);
  }
  if (add_bos && bos_id < 0) fail("{}: add_bos_token is true but there is no BOS token", source);
  if (add_eos && eos_id < 0) fail("{}: add_eos_token is true but there is no EOS token", source);
}

namespace {

int32_t id_or(const GGUFFile& f, const std::string& key) {
  // Some converters store "none" as -1 in a u32 (4294967295): anything outside 0..INT32_MAX
  // means "no such token".
  const GGUFValue* v = f.find(key);
  if (!v) return -1;
  if (auto* u = std::get_if<uint64_t>(&v->v)) return *u > uint64_t(INT32_MAX) ? -1 : int32_t(*u);
  if (auto* i = std::get_if<int64_t>(&v->v)) return *i < 0 || *i > INT32_MAX ? -1 : int32_t(*i);
  fail("{}: metadata '{}' is not an integer token id", f.path(), key);
}

// llama.cpp gives every added token of Phi-3 models (recognised by general.name) rstrip,
// except <unk>, <s> and <|endoftext|>.
void phi3_rstrip(const GGUFFile& f, Vocab& v) {
  std::string name = f.get_string_opt("general.name").value_or("");
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    TokenType t = v.types[i];
    const std::string& text = v.tokens[i];
    bool literal =
        t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
    if (literal && text != "<unk>" && text != "<s>" && text != "<|endoftext|>")
      v.rstrip_ids.push_back(static_cast<int32_t>(i));
  }
}

bool bpe_adds_bos_by_default(const std::string& pre) {
  for (const char* name : {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                           "midm-2.0", "lfm2", "tekken", "chameleon"})
    if (pre == name) return true;
  return false;
}

}  // namespace

Vocab vocab_from_gguf(const GGUFFile& f) {
  if (!f.has("tokenizer.ggml.model"))
    fail("{}: no tokenizer in this file (tokenizer.ggml.model missing)", f.path());
  std::string model = f.get_string("tokenizer.ggml.model");
  Vocab v;
  if (model == "gpt2") {
    v.kind = VocabKind::BytePairBPE;
  } else if (model == "llama") {
    v.kind = VocabKind::SentencePiece;
  } else if (model == "gemma4") {
    v.kind = VocabKind::MetaspaceBPE;
  } else {
    fail("{}: unsupported tokenizer model '{}' (supported: gpt2, llama, gemma4)", f.path(), model);
  }
  v.pre = f.get_string_opt("tokenizer.ggml.pre").value_or("default");
  if (v.kind == VocabKind::MetaspaceBPE) v.pre = "gemma4";  // the model implies its splitting
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.scores")) v.scores = f.get_f32_array("tokenizer.ggml.scores");
  if (f.has("tokenizer.ggml.token_type")) {
    auto t = f.get_i32_array("tokenizer.ggml.token_type");
    v.types.reserve(t.size());
    for (int32_t x : t) {
      if (x < 0 || x > 6) fail("{}: token type {} is not a known type (0..6)", f.path(), x);
      v.types.push_back(static_cast<TokenType>(x));
    }
  } else {
    v.types.assign(v.tokens.size(), TokenType::Normal);
  }
  if (f.has("tokenizer.ggml.merges")) {
    const auto& m = f.get_string_array("tokenizer.ggml.merges");
    v.merges.reserve(m.size());
    for (const auto& s : m) {
      // llama.cpp splits at the first space after position 0 (a token may be " " itself
      // only in exotic vocabs; byte-level tokens never contain a raw space).
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) fail("{}: merge '{}' has no space separator", f.path(), s);
      v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  }
  v.bos_id = id_or(f, "tokenizer.ggml.bos_token_id");
  v.eos_id = id_or(f, "tokenizer.ggml.eos_token_id");
  v.eot_id = id_or(f, "tokenizer.ggml.eot_token_id");
  v.eom_id = id_or(f, "tokenizer.ggml.eom_token_id");
  v.fim_pad_id = id_or(f, "tokenizer.ggml.fim_pad_token_id");
  v.fim_rep_id = id_or(f, "tokenizer.ggml.fim_rep_token_id");
  v.fim_sep_id = id_or(f, "tokenizer.ggml.fim_sep_token_id");
  // Older converters (CodeLlama files) wrote the FIM markers as prefix/suffix/middle.
  auto fim_id = [&](const char* key, const char* old_key) {
    int32_t id = id_or(f, key);
    return id >= 0 ? id : id_or(f, old_key);
  };
  v.fim_pre_id = fim_id("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id");
  v.fim_suf_id = fim_id("tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id");
  v.fim_mid_id = fim_id("tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id");
  v.unk_id = id_or(f, "tokenizer.ggml.unknown_token_id");
  v.pad_id = id_or(f, "tokenizer.ggml.padding_token_id");
  // llama.cpp's defaults when the file does not say: SentencePiece adds BOS; byte-level BPE
  // adds it only for the Llama 3 family (GPT-2, Qwen2, Falcon, StarCoder name <|endoftext|> as
  // BOS but never start a prompt with it).
  v.add_bos = f.get_bool_or(
      "tokenizer.ggml.add_bos_token",
      v.bos_id >= 0 && (v.kind == VocabKind::SentencePiece || bpe_adds_bos_by_default(v.pre)));
  // Gemma 4 GGUF files that say add_bos_token = false were converted wrongly: llama.cpp adds
  // BOS to them anyway, and so does pith.
  if (v.kind == VocabKind::MetaspaceBPE && v.bos_id >= 0) v.add_bos = true;
  v.add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", false);
  v.add_space_prefix =
      f.get_bool_or("tokenizer.ggml.add_space_prefix", v.kind == VocabKind::SentencePiece);
  v.ignore_merges = v.kind == VocabKind::BytePairBPE && v.pre == "llama-bpe";
  v.chat_template = f.get_string_opt("tokenizer.chat_template").value_or("");
  phi3_rstrip(f, v);
  v.validate(f.path());
  return v;
}

}  // namespace pith
