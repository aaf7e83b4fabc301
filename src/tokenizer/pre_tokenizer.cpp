// PCRE2-based pre-tokenizer (see pre_tokenizer.h). The patterns are the ones the models were
// trained with (GPT-2's encoder.py, Meta's Llama 3 tiktoken, the `Split` regexes of Qwen2,
// DeepSeek, Falcon and StarCoder tokenizer.json files), in the order those files apply them;
// the case-insensitive contraction group "(?i:'s|...)" is kept as PCRE2 supports it natively.
// Code point ranges are written as \x{...} so the source stays ASCII.
#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/error.h"

namespace pith {

namespace {

// GPT-2 (also the second stage of Falcon and StarCoder): contractions, letters, digits,
// other, spaces.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 (tiktoken cl100k-style): digits in groups of up to 3, newline-aware punctuation.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but single digits.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: as Qwen2, with combining marks (\p{M}) kept inside words.
constexpr const char* kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-4o (o200k; Phi-4-mini, Llama 4): cased words (upper-case run, then lower case, marks kept
// inside) with case-insensitive contractions, digits in threes, punctuation taking trailing
// newlines and slashes. The tokenizer.json pattern as it is (PCRE2 has the classes and (?i:)).
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Mistral's Tekken (NeMo, Mistral Small 3, Ministral, Devstral): GPT-4o's cased words without
// the contraction suffixes, and single digits (the `pattern` of mistral-common's tekken JSON).
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Shared by both DeepSeek tokenizers: newlines alone, then CJK runs (the ranges DeepSeek's
// tokenizer.json lists: CJK ideographs, U+0800..U+4E00, Hangul).
constexpr const char* kNewline = R"([\r\n])";
constexpr const char* kCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// DeepSeek LLM: cased letters (an explicit list of ranges, not \p{L}: uncased scripts such as
// CJK fall through to their own rule), ASCII/full-width punctuation, trailing spaces, CJK,
// digit runs.
constexpr const char* kDeepSeekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3})"
    R"(\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D})"
    R"(\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184})"
    R"(\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})"
    R"(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF})"
    R"(\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
    R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr const char* kDeepSeekLlmPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

// Falcon and llama.cpp's "default": punctuation and ASCII symbols first, then GPT-2, then
// digits in threes.
constexpr const char* kPunctSymbols = R"([\p{P}\$\+<=>\^~\|`]+)";
constexpr const char* kPunctSymbolsNoBacktick = R"([\p{P}\$\+<=>\^~\|]+)";
constexpr const char* kThreeDigits = R"([0-9][0-9][0-9])";

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names)
    if (name == n) return true;
  return false;
}

}  // namespace

std::vector<std::string> PreTokenizer::regexes_for(std::string_view pre) {
  if (one_of(pre, {"llama-bpe", "llama3", "llama-v3", "dbrx", "smaug-bpe", "falcon3", "pixtral"}))
    return {kLlama3};
  if (one_of(pre, {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"})) return {kQwen2};
  if (pre == "qwen35") return {kQwen35};
  if (pre == "tekken") return {kTekken};
  if (one_of(pre, {"gpt-4o", "llama4", "kanana2", "talkie"})) return {kGpt4o};
  if (one_of(pre, {"gpt2", "gpt-2", "phi-2", "mpt", "olmo", "roberta-bpe", "jais", "exaone4"}))
    return {kGpt2};
  if (pre == "deepseek-llm")
    return {kNewline, kDeepSeekLlmLetters, kDeepSeekLlmPunct, R"(\s+\z)", kCjk, R"(\p{N}+)"};
  if (pre == "deepseek-coder") return {kNewline, R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"};
  if (pre == "falcon") return {kPunctSymbols, kGpt2, kThreeDigits};
  // StarCoder-style: every digit alone, then GPT-2.
  if (one_of(pre,
             {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}))
    return {R"(\p{N})", kGpt2};
  // llama.cpp's choice for byte-level vocabularies that name no pre-tokenizer.
  if (pre == "default") return {kPunctSymbolsNoBacktick, kGpt2, R"(\p{N}+)", kThreeDigits};
  fail(
      "unsupported pre-tokenizer '{}' (supported: llama-bpe/llama3, qwen2, qwen35, gpt-4o, tekken, "
      "gpt2, "
      "deepseek-llm, deepseek-coder, falcon, starcoder/command-r/refact, default and aliases; or "
      "give a tokenizer.json with explicit Split regexes)",
      pre);
}

struct PreTokenizer::Compiled {
  std::vector<pcre2_code*> codes;  // owned
  ~Compiled() {
    for (pcre2_code* c : codes) pcre2_code_free(c);
  }
};

PreTokenizer::PreTokenizer(std::vector<std::string> patterns)
    : patterns_(std::move(patterns)), re_(new Compiled) {
  if (patterns_.empty()) fail("pre-tokenizer needs at least one regex");
  for (const std::string& pattern : patterns_) {
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("pre-tokenizer regex does not compile at offset {}: {} (pattern: {})", off,
           reinterpret_cast<const char*>(msg), pattern);
    }
    re_->codes.push_back(code);
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

namespace {

// Per-call matching state: match data and, once a search needs it, a larger JIT stack.
class Matcher {
 public:
  Matcher() {
    md_ = pcre2_match_data_create(1, nullptr);  // only the whole match is read
    if (!md_) fail("out of memory creating regex match data");
  }
  ~Matcher() {
    pcre2_match_data_free(md_);
    if (mctx_) pcre2_match_context_free(mctx_);
    if (jstack_) pcre2_jit_stack_free(jstack_);
  }
  Matcher(const Matcher&) = delete;
  Matcher& operator=(const Matcher&) = delete;

  // Splits text[begin, end) with `code`, the regex seeing only that range (so lookaheads and
  // \z stop at its end), appending matches and the gaps between them to `out`.
  void split(const pcre2_code* code, std::string_view text, uint32_t begin, uint32_t end,
             std::vector<std::pair<uint32_t, uint32_t>>& out) {
    auto subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
    const size_t size = end - begin;
    size_t pos = 0;      // where the next search starts
    size_t emitted = 0;  // end of the last piece emitted
    while (pos < size) {
      int rc = pcre2_match(code, subject, size, pos, 0, md_, mctx_);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !jstack_) {
        // Long backtracking runs (e.g. a megabyte of spaces) outgrow the default 32 KiB JIT
        // stack: retry this search with a larger one.
        jstack_ = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
        mctx_ = pcre2_match_context_create(nullptr);
        if (!jstack_ || !mctx_) fail("out of memory creating the regex JIT stack");
        pcre2_jit_stack_assign(mctx_, nullptr, jstack_);
        continue;
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        fail("pre-tokenizer regex failed: {}", reinterpret_cast<const char*>(msg));
      }
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
      size_t ms = ov[0], me = ov[1];
      if (me == ms) {  // empty match (only possible with user patterns): step over one byte
        pos = ms + 1;
        continue;
      }
      if (ms > emitted) out.emplace_back(uint32_t(begin + emitted), uint32_t(ms - emitted));
      out.emplace_back(uint32_t(begin + ms), uint32_t(me - ms));
      emitted = pos = me;
    }
    if (emitted < size) out.emplace_back(uint32_t(begin + emitted), uint32_t(size - emitted));
  }

 private:
  pcre2_match_data* md_ = nullptr;
  pcre2_match_context* mctx_ = nullptr;
  pcre2_jit_stack* jstack_ = nullptr;
};

}  // namespace

void PreTokenizer::split(std::string_view text,
                         std::vector<std::pair<uint32_t, uint32_t>>& pieces) const {
  if (text.empty()) return;
  if (text.size() > UINT32_MAX) fail("text of {} bytes is too long to tokenize", text.size());
  Matcher m;
  const size_t first = pieces.size();
  m.split(re_->codes[0], text, 0, uint32_t(text.size()), pieces);
  std::vector<std::pair<uint32_t, uint32_t>> next;
  for (size_t r = 1; r < re_->codes.size(); ++r) {
    next.clear();
    for (size_t i = first; i < pieces.size(); ++i)
      m.split(re_->codes[r], text, pieces[i].first, pieces[i].first + pieces[i].second, next);
    pieces.resize(first);
    pieces.insert(pieces.end(), next.begin(), next.end());
  }
}

}  // namespace pith
