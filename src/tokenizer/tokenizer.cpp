// Tokenizer construction, encode and decode (see tokenizer.h). Behaviour follows llama.cpp's
// llama-vocab.cpp (the reference the test vectors come from): special-token partition first,
// then per fragment either regex split + byte-level BPE, SentencePiece with a space prepended
// to the first fragment and to every fragment that follows a literal token, or Gemma 4's
// metaspace BPE (spaces escaped, split at newline runs).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "formats/gguf.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/metaspace_bpe.h"
#include "tokenizer/token_roles.h"
#include "tokenizer/tokenizer_impl.h"

namespace pith {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁" U+2581

bool is_literal_type(TokenType t) {
  return t == TokenType::Control || t == TokenType::Unknown || t == TokenType::UserDefined;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos);
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xNN>" → NN, or -1.
int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Id of byte b's "<0xNN>" token (upper-case hex, as llama.cpp looks it up), or -1.
int32_t byte_fallback_token(const TokenIndex& index, int b) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char text[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
  return lookup(index, std::string_view(text, sizeof text));
}

}  // namespace

Tokenizer::Impl::Impl(Vocab vocab, std::string src) : v(std::move(vocab)), source(std::move(src)) {
  v.validate(source);
  const size_t n = v.tokens.size();
  if (n > size_t(INT32_MAX)) fail("{}: vocab of {} tokens is too large", source, n);
  const bool bpe = v.kind == VocabKind::BytePairBPE;
  const bool ranked_merges = v.kind != VocabKind::SentencePiece;  // byte-level or metaspace
  spm_prefix = v.kind == VocabKind::SentencePiece && v.add_space_prefix;
  index.reserve(n);
  for (size_t i = 0; i < n; ++i) index.assign(v.tokens[i], static_cast<int32_t>(i));  // last wins
  eog = assign_token_roles(v, index);  // may retype tokens: before anything reads types

  ByteUnicode bu;
  bytes.resize(n);
  byte_tokens.fill(-1);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = v.tokens[i];
    TokenType type = v.types[i];
    if (is_literal_type(type)) {
      bytes[i] = t;
    } else if (type == TokenType::Byte) {
      int b = parse_byte_token(t);
      bytes[i] = b >= 0 ? std::string(1, static_cast<char>(b)) : t;
    } else if (bpe) {
      // A normal token whose text is not in the byte mapping (written in plain text by some
      // converters) decodes as its own UTF-8 text.
      auto raw = bu.decode(t);
      bytes[i] = raw ? std::move(*raw) : t;
    } else {
      bytes[i] = replace_all(t, kSpace, " ");
    }
  }

  flat_off.reserve(n + 1);
  literal.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    flat_off.push_back(static_cast<uint32_t>(flat.size()));
    flat += bytes[i];
    if (flat.size() > UINT32_MAX) fail("{}: vocab text is too large", source);
    TokenType t = v.types[i];
    literal.push_back(t == TokenType::UserDefined ? 2 : is_literal_type(t) ? 1 : 0);
  }
  flat_off.push_back(static_cast<uint32_t>(flat.size()));

  if (ranked_merges) {
    if (bpe) {
      for (int b = 0; b < 256; ++b)
        byte_tokens[b] = lookup(index, bu.text(static_cast<uint8_t>(b)));
    } else {
      for (int b = 0; b < 256; ++b) byte_tokens[b] = byte_fallback_token(index, b);
    }
    if (v.ignore_merges) {
      raw_index.reserve(n);
      for (size_t i = 0; i < n; ++i)
        if (!is_literal_type(v.types[i])) raw_index.try_emplace(bytes[i], static_cast<int32_t>(i));
    }
    std::string joined;
    merger.reserve(v.merges.size());
    for (size_t r = 0; r < v.merges.size(); ++r) {
      const auto& [a, b] = v.merges[r];
      int32_t ia = lookup(index, a), ib = lookup(index, b);
      joined.assign(a).append(b);
      int32_t im = lookup(index, joined);
      if (ia < 0 || ib < 0 || im < 0) continue;  // merge of/into unknown tokens: unusable
      merger.add(ia, ib, im, static_cast<int32_t>(r));
    }
    if (bpe) pre.emplace(v.pre_regexes.empty() ? PreTokenizer::regexes_for(v.pre) : v.pre_regexes);
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (v.types[i] != TokenType::Byte) continue;
      int b = parse_byte_token(v.tokens[i]);
      if (b >= 0 && byte_tokens[b] < 0) byte_tokens[b] = static_cast<int32_t>(i);
    }
    for (int b = 0; b < 128; ++b)  // vocabs without <0xNN> tokens: ASCII as itself
      if (byte_tokens[b] < 0) byte_tokens[b] = lookup(index, std::string(1, char(b)));
    spm = std::make_unique<SpmSegmenter>(index, v.scores, byte_tokens, v.unk_id);
    spm_split_words = std::none_of(v.tokens.begin(), v.tokens.end(), [](const std::string& t) {
      for (size_t p = t.find(kSpace, 1); p != std::string::npos; p = t.find(kSpace, p + 1))
        if (p < kSpace.size() || t.compare(p - kSpace.size(), kSpace.size(), kSpace) != 0)
          return true;
      return false;
    });
  }

  auto has = [](const std::vector<int32_t>& ids, int32_t id) {
    return std::binary_search(ids.begin(), ids.end(), id);
  };
  for (size_t i = 0; i < n; ++i) {
    TokenType t = v.types[i];
    if (!is_literal_type(t)) continue;
    const auto id = static_cast<int32_t>(i);
    const bool always = t == TokenType::UserDefined;
    uint8_t strip = SpecialTokenMatcher::kNoStrip;
    if (has(v.lstrip_ids, id)) strip |= SpecialTokenMatcher::kStripLeft;
    if (has(v.rstrip_ids, id)) strip |= SpecialTokenMatcher::kStripRight;
    specials.add(id, v.tokens[i], always, strip);
  }
}

void Tokenizer::Impl::check_id(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= v.tokens.size())
    fail("token id {} is out of range (vocab size {})", id, v.tokens.size());
}

void Tokenizer::Impl::encode_bpe_word(std::string_view word, bool naive, std::vector<int32_t>& out,
                                      std::vector<int32_t>& scratch) const {
  if (v.ignore_merges) {
    if (int32_t id = lookup(raw_index, word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<int32_t>& syms = scratch;  // reused across words: no allocation per word
  syms.clear();
  for (char c : word) syms.push_back(byte_tokens[static_cast<uint8_t>(c)]);
  if (naive) {
    merger.merge_naive(syms);
  } else {
    merger.merge(syms);
  }
  for (int32_t s : syms) {
    if (s >= 0) {
      out.push_back(s);
    } else if (v.unk_id >= 0) {
      out.push_back(v.unk_id);
    }
  }
}

template <typename EncodeFn>
void Tokenizer::Impl::encode_cached(std::string_view word, WordCache& cache,
                                    std::vector<int32_t>& out, const EncodeFn& encode_word) const {
  if (auto it = cache.find(word); it != cache.end()) {
    // Copy by index after reserving: inserting a vector's own range into it is undefined.
    auto [first, last] = it->second;
    out.reserve(out.size() + (last - first));
    for (uint32_t i = first; i < last; ++i) out.push_back(out[i]);
    return;
  }
  size_t begin = out.size();
  encode_word(word, out);
  if (out.size() > UINT32_MAX) return;  // offsets no longer fit: stop caching
  cache.emplace(word, std::make_pair(uint32_t(begin), uint32_t(out.size())));
}

void Tokenizer::Impl::encode(std::string_view text, bool add_special, bool parse_special,
                             bool naive, std::vector<int32_t>& out) const {
  if (add_special && v.add_bos) out.push_back(v.bos_id);
  std::vector<SpecialTokenMatcher::Fragment> frags;
  specials.partition(text, parse_special, frags);
  std::vector<std::pair<uint32_t, uint32_t>> pieces;
  WordCache cache;
  std::vector<int32_t> scratch;
  bool after_literal = true;  // SentencePiece prepends a space to the first fragment too
  for (const auto& f : frags) {
    if (f.id >= 0) {
      out.push_back(f.id);
      after_literal = true;
      continue;
    }
    if (spm) {
      std::string s;
      s.reserve(f.text.size() + 1);
      if (spm_prefix && after_literal) s.push_back(' ');  // (not `s = " "`: gcc 12 -Wrestrict)
      s += f.text;
      const std::string escaped = replace_all(s, " ", kSpace);
      auto seg = [&](std::string_view w, std::vector<int32_t>& o) { spm->encode(w, o); };
      if (!spm_split_words) {
        spm->encode(escaped, out);
      } else {
        // Cut before each "▁" that follows another character (see spm_split_words).
        std::string_view e = escaped;
        size_t start = 0;
        for (size_t pos = e.find(kSpace, 1); pos != std::string_view::npos;
             pos = e.find(kSpace, pos + kSpace.size())) {
          if (pos >= kSpace.size() && e.substr(pos - kSpace.size(), kSpace.size()) == kSpace)
            continue;
          encode_cached(e.substr(start, pos - start), cache, out, seg);
          start = pos;
        }
        encode_cached(e.substr(start), cache, out, seg);
      }
      cache.clear();  // keys point into `escaped`
    } else if (!pre) {
      const std::string escaped = escape_spaces(f.text);
      pieces.clear();
      if (v.pre == "gemma4") {  // llama.cpp's split (GGUF); tokenizer.json: the whole text
        split_newline_runs(escaped, pieces);
      } else {
        pieces.emplace_back(0, static_cast<uint32_t>(escaped.size()));
      }
      const MetaspaceBpe metaspace{index, merger, byte_tokens};
      for (auto [off, len] : pieces)
        metaspace.encode(std::string_view(escaped).substr(off, len), naive, out, scratch);
    } else {
      pieces.clear();
      pre->split(f.text, pieces);
      // No word cache here: with ignore_merges most words are one lookup already, and
      // short words merge faster than a cache lookup (measured: the cache cost ~10%).
      for (auto [off, len] : pieces) encode_bpe_word(f.text.substr(off, len), naive, out, scratch);
    }
    after_literal = false;
  }
  if (add_special && v.add_eos) out.push_back(v.eos_id);
}

void Tokenizer::Impl::append_piece(std::string& out, int32_t id, bool skip_special,
                                   bool& strip_space) const {
  const char* p = flat.data() + flat_off[id];
  size_t len = flat_off[id + 1] - flat_off[id];
  if (literal[id]) {
    if (!(skip_special && literal[id] == 1)) out.append(p, len);
    strip_space = spm_prefix;  // encode put a "▁" after every literal token
    return;
  }
  if (strip_space && len > 0 && p[0] == ' ' && v.types[id] == TokenType::Normal) {
    ++p;
    --len;
  }
  out.append(p, len);
  strip_space = false;
}

// ---- public API ----

Tokenizer Tokenizer::from_vocab(Vocab vocab, const std::string& source) {
  return Tokenizer(std::make_shared<const Impl>(std::move(vocab), source));
}

Tokenizer Tokenizer::from_gguf(const GGUFFile& file) {
  return from_vocab(vocab_from_gguf(file), file.path());
}

Tokenizer Tokenizer::from_hf_folder(const std::string& dir) {
  return from_vocab(read_hf_tokenizer(dir), dir);
}

Tokenizer Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return from_hf_folder(path);
  if (!fs::exists(path, ec)) fail("{}: no such file or folder", path);
  if (fs::path(path).filename() == "tokenizer.json")
    return from_hf_folder(fs::path(path).parent_path().string());
  GGUFFile f(path);
  return from_gguf(f);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  impl_->encode(text, add_special, parse_special, false, out);
  return out;
}

std::vector<int32_t> Tokenizer::encode_naive(std::string_view text, bool add_special,
                                             bool parse_special) const {
  std::vector<int32_t> out;
  impl_->encode(text, add_special, parse_special, true, out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  bool strip = impl_->spm_prefix;
  size_t total = 0;
  for (int32_t id : ids) {  // validate everything first: a bad id leaves nothing half done
    impl_->check_id(id);
    total += impl_->flat_off[id + 1] - impl_->flat_off[id];
  }
  out.reserve(total);
  for (int32_t id : ids) impl_->append_piece(out, id, skip_special, strip);
  return out;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  impl_->check_id(id);
  return impl_->bytes[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->v.tokens[id];
}

int32_t Tokenizer::find_token(std::string_view text) const {
  return lookup(impl_->index, text);
}
size_t Tokenizer::vocab_size() const {
  return impl_->v.tokens.size();
}
VocabKind Tokenizer::kind() const {
  return impl_->v.kind;
}

TokenType Tokenizer::token_type(int32_t id) const {
  impl_->check_id(id);
  return impl_->v.types[id];
}

bool Tokenizer::is_special(int32_t id) const {
  TokenType t = token_type(id);
  return t == TokenType::Control || t == TokenType::Unknown;
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}

int32_t Tokenizer::bos_id() const {
  return impl_->v.bos_id;
}
int32_t Tokenizer::eos_id() const {
  return impl_->v.eos_id;
}
const std::vector<int32_t>& Tokenizer::eos_ids() const {
  return impl_->eog;
}
bool Tokenizer::add_bos() const {
  return impl_->v.add_bos;
}
std::string Tokenizer::bos_text() const {
  return bos_id() < 0 ? "" : impl_->v.tokens[bos_id()];
}
std::string Tokenizer::eos_text() const {
  return eos_id() < 0 ? "" : impl_->v.tokens[eos_id()];
}
const std::string& Tokenizer::chat_template() const {
  return impl_->v.chat_template;
}
const Vocab& Tokenizer::vocab() const {
  return impl_->v;
}

}  // namespace pith
