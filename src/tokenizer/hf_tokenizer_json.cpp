// Hugging Face tokenizer.json / tokenizer_config.json reader and writer (see
// hf_tokenizer_json.h).
#include "tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "common/error.h"
#include "common/read_file.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace pith {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Unused ids a vocabulary may leave between its tokens (placeholders fill them).
constexpr size_t kMaxIdGaps = 65536;

constexpr const char* kSpace = "\xE2\x96\x81";  // "▁"

json read_json(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", path, e.what());
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("{}: cannot open for writing", path);
  out << text;
  if (!out.flush()) fail("{}: write failed", path);
}

// Calls fn on `node` and, recursively, on the members of a "Sequence" (pretokenizers,
// normalizers, decoders, processors lists).
template <typename Fn>
void visit(const json& node, const Fn& fn) {
  if (!node.is_object()) return;
  fn(node);
  for (const char* key : {"pretokenizers", "normalizers", "decoders", "processors"}) {
    if (auto it = node.find(key); it != node.end() && it->is_array())
      for (const auto& child : *it) visit(child, fn);
  }
}

std::string type_of(const json& node) {
  auto it = node.find("type");
  return it != node.end() && it->is_string() ? it->get<std::string>() : "";
}

// tokenizer_config.json tokens are a string or {"content": ...}.
std::optional<std::string> token_content(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return std::nullopt;
}

// A token id as tokenizer.json writes it: a non-negative integer (a float, even a whole one, is
// refused: converting an out-of-range one is undefined behaviour).
int64_t token_id(const json& id, const std::string& path) {
  if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= INT32_MAX)
    fail("{}: token id {} is not an integer in [0, 2^31 - 1)", path, id.dump());
  return id.get<int64_t>();
}

bool is_byte_token(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
         std::isxdigit(static_cast<unsigned char>(t[3])) &&
         std::isxdigit(static_cast<unsigned char>(t[4]));
}

}  // namespace

Vocab read_hf_tokenizer(const std::string& dir) {
  const std::string tj_path = (fs::path(dir) / "tokenizer.json").string();
  if (!fs::exists(tj_path)) fail("{}: no tokenizer.json in this folder", dir);
  json tj = read_json(tj_path);
  try {
    const json& model = tj.at("model");
    std::string mtype = model.value("type", "BPE");
    if (mtype != "BPE")
      fail("{}: tokenizer model type '{}' is not supported (pith supports BPE)", tj_path, mtype);

    // Byte-level, SentencePiece-style, or BPE behind a space-escaping normalizer (Gemma 4)?
    bool byte_level = false, metaspace = false, prepend_space = false;
    bool replace_space = false, metaspace_pretokenizer = false;
    std::vector<std::string> split_regexes;  // in the order the Sequence applies them
    bool bytelevel_regex = false;
    auto scan = [&](const json& n) {
      std::string t = type_of(n);
      if (t == "ByteLevel") {
        byte_level = true;
        if (n.value("use_regex", true)) bytelevel_regex = true;
      } else if (t == "Split") {
        if (auto p = n.find("pattern"); p != n.end() && p->is_object() && p->contains("Regex"))
          split_regexes.push_back((*p)["Regex"].get<std::string>());
      } else if (t == "Metaspace") {
        metaspace = true;
        metaspace_pretokenizer = true;
        std::string scheme =
            n.value("prepend_scheme", n.value("add_prefix_space", true) ? "always" : "never");
        if (scheme != "never") prepend_space = true;
      } else if (t == "Prepend") {
        metaspace = true;
        if (n.value("prepend", "") == kSpace) prepend_space = true;
      } else if (t == "Replace") {
        metaspace = true;
        const json* pattern = n.contains("pattern") ? &n["pattern"] : nullptr;
        replace_space |= pattern && pattern->is_object() && pattern->value("String", "") == " " &&
                         n.value("content", "") == kSpace;
      }
    };
    for (const char* key : {"normalizer", "pre_tokenizer", "decoder"})
      if (tj.contains(key)) visit(tj[key], scan);

    Vocab v;
    if (byte_level) {
      v.kind = VocabKind::BytePairBPE;
      if (!split_regexes.empty()) {
        v.pre_regexes = std::move(split_regexes);
        v.pre = "custom";
      } else if (bytelevel_regex) {
        v.pre = "gpt2";
      } else {
        fail("{}: byte-level tokenizer without a split regex is not supported", tj_path);
      }
      v.ignore_merges = model.value("ignore_merges", false);
    } else if (replace_space && !prepend_space && !metaspace_pretokenizer &&
               model.value("byte_fallback", false)) {
      // Merges by rank over the whole escaped text, exactly as the BPE model runs them.
      v.kind = VocabKind::MetaspaceBPE;
      v.pre = "metaspace";
      v.add_space_prefix = false;
    } else if (metaspace || model.value("byte_fallback", false)) {
      v.kind = VocabKind::SentencePiece;
      v.add_space_prefix = prepend_space;
    } else {
      fail("{}: neither a byte-level nor a SentencePiece-style BPE tokenizer", tj_path);
    }

    // Tokens: model vocab plus added tokens, placed by id.
    std::map<int64_t, std::string> by_id;
    for (const auto& [text, id] : model.at("vocab").items()) by_id[token_id(id, tj_path)] = text;
    std::map<int64_t, TokenType> added_type;
    if (tj.contains("added_tokens") && tj["added_tokens"].is_array()) {
      for (const auto& a : tj["added_tokens"]) {
        int64_t id = token_id(a.at("id"), tj_path);
        by_id[id] = a.at("content").get<std::string>();
        added_type[id] = a.value("special", false) ? TokenType::Control : TokenType::UserDefined;
        if (a.value("lstrip", false)) v.lstrip_ids.push_back(static_cast<int32_t>(id));
        if (a.value("rstrip", false)) v.rstrip_ids.push_back(static_cast<int32_t>(id));
      }
      std::sort(v.lstrip_ids.begin(), v.lstrip_ids.end());
      std::sort(v.rstrip_ids.begin(), v.rstrip_ids.end());
    }
    if (by_id.empty()) fail("{}: empty vocabulary", tj_path);
    // Ids are dense in real vocabularies; a file naming id 2e9 for a handful of tokens must not
    // make the reader allocate two billion placeholders.
    size_t n = static_cast<size_t>(by_id.rbegin()->first) + 1;
    if (n > by_id.size() + kMaxIdGaps)
      fail("{}: token ids are sparse: the largest is {} for {} tokens", tj_path, n - 1,
           by_id.size());
    v.tokens.resize(n);
    v.types.assign(n, TokenType::Unused);
    for (size_t i = 0; i < n; ++i) v.tokens[i] = "<pith_unused_" + std::to_string(i) + ">";
    for (auto& [id, text] : by_id) {
      v.tokens[id] = text;
      auto it = added_type.find(id);
      if (it != added_type.end()) {
        v.types[id] = it->second;
      } else if (v.kind != VocabKind::BytePairBPE && is_byte_token(text)) {
        v.types[id] = TokenType::Byte;
      } else {
        v.types[id] = TokenType::Normal;
      }
    }
    // Gemma 4's chat-format markers are special in tokenizer.json, but the chat parsers must see
    // them in decoded text: user-defined, as llama.cpp's converter makes them.
    if (v.kind == VocabKind::MetaspaceBPE) {
      for (const char* marker : {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>",
                                 "<|tool_response>", "<tool_response|>", "<|\"|>"})
        for (auto& [id, text] : by_id)
          if (text == marker && v.types[id] == TokenType::Control)
            v.types[id] = TokenType::UserDefined;
    }
    if (auto unk = model.find("unk_token"); unk != model.end() && unk->is_string()) {
      for (auto& [id, text] : by_id)
        if (text == unk->get<std::string>()) {
          v.unk_id = static_cast<int32_t>(id);
          v.types[id] = TokenType::Unknown;
        }
    }

    // Merges: "a b" strings or ["a", "b"] pairs.
    if (model.contains("merges")) {
      for (const auto& m : model["merges"]) {
        if (m.is_string()) {
          std::string s = m.get<std::string>();
          size_t sp = s.find(' ', 1);
          if (sp == std::string::npos) fail("{}: merge '{}' has no space separator", tj_path, s);
          v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        } else {
          v.merges.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
        }
      }
    }
    if (v.kind == VocabKind::SentencePiece) {
      // Scores from merge order: the earlier a piece can be formed, the higher its score.
      std::unordered_map<std::string, size_t> first_rank;
      for (size_t r = 0; r < v.merges.size(); ++r)
        first_rank.try_emplace(v.merges[r].first + v.merges[r].second, r);
      v.scores.assign(n, 0.0f);
      for (size_t i = 0; i < n; ++i) {
        if (v.types[i] != TokenType::Normal) continue;
        auto it = first_rank.find(v.tokens[i]);
        v.scores[i] = it == first_rank.end() ? -1e30f : -static_cast<float>(it->second);
      }
      v.merges.clear();
    }

    // Post-processor template: a leading special token means "add BOS".
    std::optional<std::string> tpl_bos, tpl_eos;
    if (tj.contains("post_processor")) {
      visit(tj["post_processor"], [&](const json& p) {
        if (type_of(p) != "TemplateProcessing" || !p.contains("single")) return;
        const json& single = p["single"];
        if (!single.is_array() || single.empty()) return;
        if (single.front().contains("SpecialToken"))
          tpl_bos = single.front()["SpecialToken"].value("id", "");
        if (single.size() > 1 && single.back().contains("SpecialToken"))
          tpl_eos = single.back()["SpecialToken"].value("id", "");
      });
    }
    auto find_id = [&](const std::string& text) -> int32_t {
      for (size_t i = 0; i < n; ++i)
        if (v.tokens[i] == text) return static_cast<int32_t>(i);
      return -1;
    };

    json cfg = json::object();
    const std::string cfg_path = (fs::path(dir) / "tokenizer_config.json").string();
    if (fs::exists(cfg_path)) cfg = read_json(cfg_path);
    if (auto b = token_content(cfg, "bos_token"))
      v.bos_id = find_id(*b);
    else if (tpl_bos)
      v.bos_id = find_id(*tpl_bos);
    if (auto e = token_content(cfg, "eos_token")) v.eos_id = find_id(*e);
    if (auto p = token_content(cfg, "pad_token")) v.pad_id = find_id(*p);
    if (auto u = token_content(cfg, "unk_token"); u && v.unk_id < 0) v.unk_id = find_id(*u);
    if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
      v.add_bos = cfg["add_bos_token"].get<bool>();
    } else {
      v.add_bos = tpl_bos.has_value() || (v.kind == VocabKind::SentencePiece && v.bos_id >= 0);
    }
    if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean())
      v.add_eos = cfg["add_eos_token"].get<bool>();
    else
      v.add_eos = tpl_eos.has_value() && tpl_bos != tpl_eos;
    if (v.add_eos && v.eos_id < 0 && tpl_eos) v.eos_id = find_id(*tpl_eos);
    if (v.add_bos && v.bos_id < 0) v.add_bos = false;
    if (v.add_eos && v.eos_id < 0) v.add_eos = false;
    if (auto t = cfg.find("chat_template"); t != cfg.end()) {
      if (t->is_string()) {
        v.chat_template = t->get<std::string>();
      } else if (t->is_array()) {  // [{name, template}, ...]: the default one
        for (const auto& e : *t)
          if (e.value("name", "") == "default") v.chat_template = e.value("template", "");
      }
    }
    v.validate(tj_path);
    return v;
  } catch (const json::exception& e) {
    fail("{}: unexpected tokenizer.json structure: {}", tj_path, e.what());
  }
}

namespace {

json added_token(const Vocab& v, int32_t id, bool special) {
  auto has = [id](const std::vector<int32_t>& ids) {
    return std::binary_search(ids.begin(), ids.end(), id);
  };
  return {{"id", id},
          {"content", v.tokens[id]},
          {"single_word", false},
          {"lstrip", has(v.lstrip_ids)},
          {"rstrip", has(v.rstrip_ids)},
          {"normalized", false},
          {"special", special}};
}

// SentencePiece → HF merges, as transformers' SentencePieceExtractor: every split of a piece
// into two pieces of the vocab, ordered by the piece's score (descending, stable in vocab
// order), splits of one piece ordered by the ids of their halves.
std::vector<std::pair<std::string, std::string>> spm_merges(
    const Vocab& v, const std::unordered_map<std::string, int32_t>& ids) {
  struct M {
    float score;
    int32_t l, r;
    size_t order;
  };
  std::vector<M> all;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] != TokenType::Normal) continue;
    const std::string& t = v.tokens[i];
    std::vector<M> local;
    for (size_t cut = utf8::sequence_length(uint8_t(t[0])); cut < t.size();
         cut += utf8::sequence_length(uint8_t(t[cut]))) {
      auto l = ids.find(t.substr(0, cut)), r = ids.find(t.substr(cut));
      if (l != ids.end() && r != ids.end())
        local.push_back({v.scores.empty() ? 0.0f : v.scores[i], l->second, r->second, 0});
    }
    std::sort(local.begin(), local.end(),
              [](const M& a, const M& b) { return a.l != b.l ? a.l < b.l : a.r < b.r; });
    for (auto& m : local) {
      m.order = all.size();
      all.push_back(m);
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const M& a, const M& b) { return a.score > b.score; });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(all.size());
  for (const auto& m : all) out.emplace_back(v.tokens[m.l], v.tokens[m.r]);
  return out;
}

}  // namespace

void write_hf_tokenizer_json(const Vocab& v, const std::string& path) {
  v.validate(path);
  const bool spm = v.kind == VocabKind::SentencePiece;
  const bool metaspace = v.kind == VocabKind::MetaspaceBPE;  // as transformers writes Gemma's
  json vocab = json::object();
  std::unordered_map<std::string, int32_t> ids;
  json added = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    int32_t id = static_cast<int32_t>(i);
    ids.try_emplace(v.tokens[i], id);
    vocab[v.tokens[i]] = id;
    TokenType t = v.types[i];
    if (t == TokenType::Control || t == TokenType::Unknown || t == TokenType::UserDefined)
      added.push_back(added_token(v, id, t != TokenType::UserDefined));
  }
  auto merges_src = spm ? spm_merges(v, ids) : v.merges;
  bool space_in_merge = false;
  for (const auto& [a, b] : merges_src)
    space_in_merge |= a.find(' ') != std::string::npos || b.find(' ') != std::string::npos;
  json merges = json::array();
  for (const auto& [a, b] : merges_src) {
    if (space_in_merge)
      merges.push_back(json::array({a, b}));
    else
      merges.push_back(a + " " + b);
  }

  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  if (metaspace) {
    j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
    j["pre_tokenizer"] = {{"type", "Split"},
                          {"pattern", {{"String", " "}}},
                          {"behavior", "MergedWithPrevious"},
                          {"invert", false}};
  } else if (spm) {
    json norms = json::array();
    if (v.add_space_prefix) norms.push_back({{"type", "Prepend"}, {"prepend", kSpace}});
    norms.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}});
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", norms}};
    j["pre_tokenizer"] = nullptr;
  } else {
    const std::vector<std::string> regexes =
        v.pre_regexes.empty() ? PreTokenizer::regexes_for(v.pre) : v.pre_regexes;
    json steps = json::array();
    for (const std::string& regex : regexes)
      steps.push_back({{"type", "Split"},
                       {"pattern", {{"Regex", regex}}},
                       {"behavior", "Isolated"},
                       {"invert", false}});
    steps.push_back({{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", true},
                     {"use_regex", false}});
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
  }
  if (v.add_bos && v.bos_id >= 0) {
    const std::string& bos = v.tokens[v.bos_id];
    json single = json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                               {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}});
    json pair = single;
    pair.push_back({{"SpecialToken", {{"id", bos}, {"type_id", 1}}}});
    pair.push_back({{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
    json special = json::object();
    special[bos] = {{"id", bos}, {"ids", json::array({v.bos_id})}, {"tokens", json::array({bos})}};
    json proc = json::object();
    proc["type"] = "TemplateProcessing";
    proc["single"] = single;
    proc["pair"] = pair;
    proc["special_tokens"] = special;
    j["post_processor"] = proc;
  } else {
    j["post_processor"] = nullptr;
  }
  if (spm || metaspace) {
    json decs =
        json::array({{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                     {{"type", "ByteFallback"}},
                     {{"type", "Fuse"}}});
    if (spm && v.add_space_prefix)
      decs.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    j["decoder"] = {{"type", "Sequence"}, {"decoders", decs}};
  } else {
    j["decoder"] = {{"type", "ByteLevel"},
                    {"add_prefix_space", true},
                    {"trim_offsets", true},
                    {"use_regex", true}};
  }
  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", v.unk_id >= 0 ? json(v.tokens[v.unk_id]) : json(nullptr)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", spm || metaspace},
                {"byte_fallback", spm || metaspace},
                {"ignore_merges", v.ignore_merges},
                {"vocab", vocab},
                {"merges", merges}};
  j["model"] = std::move(model);
  // ensure_ascii=false keeps "▁" and "Ġ" readable; replace invalid UTF-8 rather than throw.
  write_text(path, j.dump(1, ' ', false, json::error_handler_t::replace) + "\n");
}

void write_hf_tokenizer_json(const Tokenizer& tokenizer, const std::string& path) {
  write_hf_tokenizer_json(tokenizer.vocab(), path);
}

void write_hf_tokenizer_config(const Vocab& v, const std::string& path) {
  auto tok = [&](int32_t id) { return id >= 0 ? json(v.tokens[id]) : json(nullptr); };
  json c;
  c["add_bos_token"] = v.add_bos;
  c["add_eos_token"] = v.add_eos;
  c["bos_token"] = tok(v.bos_id);
  c["eos_token"] = tok(v.eos_id);
  c["unk_token"] = tok(v.unk_id);
  if (v.pad_id >= 0) c["pad_token"] = tok(v.pad_id);
  c["clean_up_tokenization_spaces"] = false;
  c["model_max_length"] = 131072;
  c["tokenizer_class"] = "PreTrainedTokenizerFast";
  if (v.kind == VocabKind::SentencePiece) c["legacy"] = true;
  if (!v.chat_template.empty()) c["chat_template"] = v.chat_template;
  write_text(path, c.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

void write_hf_tokenizer_folder(const Vocab& v, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create folder: {}", dir, ec.message());
  write_hf_tokenizer_json(v, (fs::path(dir) / "tokenizer.json").string());
  write_hf_tokenizer_config(v, (fs::path(dir) / "tokenizer_config.json").string());
}

}  // namespace pith
