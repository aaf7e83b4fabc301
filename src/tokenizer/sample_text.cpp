// Mixed-text generator (see sample_text.h).
#include "tokenizer/sample_text.h"

#include <random>
#include <vector>

#include "tokenizer/utf8.h"

namespace pith {

namespace {

const char* const kWords[] = {"the",
                              "of",
                              "and",
                              "to",
                              "in",
                              "is",
                              "that",
                              "for",
                              "it",
                              "as",
                              "was",
                              "with",
                              "be",
                              "by",
                              "on",
                              "not",
                              "he",
                              "I'm",
                              "this",
                              "are",
                              "or",
                              "his",
                              "from",
                              "at",
                              "which",
                              "but",
                              "have",
                              "an",
                              "had",
                              "they",
                              "you're",
                              "were",
                              "their",
                              "one",
                              "all",
                              "we've",
                              "can",
                              "her",
                              "has",
                              "there",
                              "been",
                              "if",
                              "more",
                              "when",
                              "will",
                              "would",
                              "who",
                              "so",
                              "no",
                              "tokenizer",
                              "inference",
                              "programmable",
                              "serving",
                              "attention",
                              "probability",
                              "distribution",
                              "international",
                              "understanding",
                              "Hello",
                              "World",
                              "Llama",
                              "GPU",
                              "naïve",
                              "café",
                              "Führer",
                              "coöperation",
                              "don't",
                              "it's",
                              "they'll"};

const char* const kCode[] = {
    "for (int i = 0; i < n; ++i) {\n    sum += a[i] * b[i];\n}\n",
    "def tokenize(text: str) -> list[int]:\n\treturn [ord(c) for c in text]  # naive\n",
    "#include <vector>\nstd::vector<int32_t> ids;\nids.reserve(1024);\n",
    "if (x != nullptr && x->next) { return x->next->value; }\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
    "{\"model\": \"llama\", \"tokens\": [1, 15043, 3186], \"ok\": true}\n",
    "    let mut v: Vec<u8> = Vec::with_capacity(4096);\n"};

const char* const kOther[] = {
    "нещо на Български", "Ελληνικά κείμενα", "русский язык", "עברית",
    "العربية",           "हिन्दी भाषा",       "ภาษาไทย",      "Tiếng Việt có dấu"};

const char* const kEmoji[] = {
    "🦙", "🚀",      "😶‍🌫️", "👩‍👩‍👧‍👦", "👍🏽", "🇫🇷",
    "✅",    "❤️", "1️⃣"};

}  // namespace

std::string sample_mixed_text(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::string out;
  out.reserve(bytes + 4096);
  while (out.size() < bytes) {
    switch (pick(10)) {
      case 0:
      case 1:
      case 2:
      case 3: {  // prose
        size_t n = 20 + pick(80);
        for (size_t i = 0; i < n; ++i) {
          std::string w = kWords[pick(std::size(kWords))];
          if (i == 0 || pick(12) == 0)
            w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
          out += w;
          size_t p = pick(20);
          out += p == 0 ? ", " : p == 1 ? ". " : p == 2 ? "; " : " ";
        }
        out += "\n\n";
        break;
      }
      case 4:
      case 5:  // code
        for (size_t i = 0, n = 1 + pick(4); i < n; ++i) out += kCode[pick(std::size(kCode))];
        break;
      case 6: {  // CJK and kana
        for (size_t i = 0, n = 10 + pick(60); i < n; ++i) {
          uint32_t cp = pick(4) == 0 ? 0x3041 + pick(0x56) : 0x4E00 + pick(0x5000);
          utf8::append(out, cp);
          if (pick(15) == 0) out += "。";
        }
        out += "\n";
        break;
      }
      case 7:  // other scripts, emoji
        for (size_t i = 0, n = 3 + pick(10); i < n; ++i) {
          out += pick(2) ? kOther[pick(std::size(kOther))] : kEmoji[pick(std::size(kEmoji))];
          out += ' ';
        }
        out += '\n';
        break;
      case 8: {  // numbers and whitespace runs
        for (size_t i = 0, n = 5 + pick(20); i < n; ++i) {
          out += std::to_string(rng() % 1000000);
          out += pick(3) == 0 ? std::string(1 + pick(12), ' ') : pick(2) ? "\t" : ".";
        }
        out += std::string(1 + pick(4), '\n');
        break;
      }
      default: {  // a long unbroken word (base64-like blob)
        static const char kB64[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (size_t i = 0, n = 64 + pick(1024); i < n; ++i) out += kB64[pick(64)];
        out += "\n";
        break;
      }
    }
  }
  return out;
}

}  // namespace pith
