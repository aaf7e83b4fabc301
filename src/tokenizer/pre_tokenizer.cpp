// PCRE2-based pre-tokenizer (see pre_tokenizer.h). The patterns are the ones the models were
// trained with (GPT-2's encoder.py, Meta's Llama 3 tiktoken, Qwen2's tokenizer.json); the
// case-insensitive contraction group "(?i:'s|...)" is kept as PCRE2 supports it natively.
#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/error.h"

namespace pith {

namespace {

// GPT-2 (also the fallback for "default"): contractions, letters, digits, other, spaces.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 (tiktoken cl100k-style): digits in groups of up to 3, newline-aware punctuation.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but single digits.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace

std::string PreTokenizer::regex_for(std::string_view pre) {
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "dbrx" ||
      pre == "smaug-bpe" || pre == "falcon3" || pre == "pixtral")
    return kLlama3;
  if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "stablelm2") return kQwen2;
  if (pre == "default" || pre == "gpt2" || pre == "gpt-2" || pre == "phi-2" || pre == "mpt" ||
      pre == "olmo" || pre == "roberta-bpe")
    return kGpt2;
  fail(
      "unsupported pre-tokenizer '{}' (supported: llama-bpe/llama3, qwen2, gpt2/default and "
      "aliases; or give a tokenizer.json with an explicit Split regex)",
      pre);
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

PreTokenizer::PreTokenizer(const std::string& pattern) : pattern_(pattern), re_(new Compiled) {
  int err = 0;
  PCRE2_SIZE off = 0;
  re_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  if (!re_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail("pre-tokenizer regex does not compile at offset {}: {} (pattern: {})", off,
         reinterpret_cast<const char*>(msg), pattern);
  }
  re_->jit = pcre2_jit_compile(re_->code, PCRE2_JIT_COMPLETE) == 0;
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

void PreTokenizer::split(std::string_view text,
                         std::vector<std::pair<uint32_t, uint32_t>>& pieces) const {
  if (text.empty()) return;
  if (text.size() > UINT32_MAX) fail("text of {} bytes is too long to tokenize", text.size());
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re_->code, nullptr);
  if (!md) fail("out of memory creating regex match data");
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* jstack = nullptr;
  auto cleanup = [&] {
    pcre2_match_data_free(md);
    if (mctx) pcre2_match_context_free(mctx);
    if (jstack) pcre2_jit_stack_free(jstack);
  };
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;      // where the next search starts
  size_t emitted = 0;  // end of the last piece emitted
  while (pos < text.size()) {
    int rc = pcre2_match(re_->code, subject, text.size(), pos, 0, md, mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !jstack) {
      // Long backtracking runs (e.g. a megabyte of spaces) outgrow the default 32 KiB JIT
      // stack: retry this search with a larger one.
      jstack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
      mctx = pcre2_match_context_create(nullptr);
      if (!jstack || !mctx) {
        cleanup();
        fail("out of memory creating the regex JIT stack");
      }
      pcre2_jit_stack_assign(mctx, nullptr, jstack);
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      cleanup();
      fail("pre-tokenizer regex failed: {}", reinterpret_cast<const char*>(msg));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t ms = ov[0], me = ov[1];
    if (me == ms) {  // empty match (only possible with user patterns): step over one byte
      pos = ms + 1;
      continue;
    }
    if (ms > emitted) pieces.emplace_back(uint32_t(emitted), uint32_t(ms - emitted));
    pieces.emplace_back(uint32_t(ms), uint32_t(me - ms));
    emitted = pos = me;
  }
  if (emitted < text.size())
    pieces.emplace_back(uint32_t(emitted), uint32_t(text.size() - emitted));
  cleanup();
}

}  // namespace pith
