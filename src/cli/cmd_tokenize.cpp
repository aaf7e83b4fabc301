// pith tokenize / pith detokenize: the model's tokenizer from the command line.
//   pith tokenize -m MODEL [--parse-special] [--no-bos] [--json] TEXT   (TEXT "-" = stdin)
//       prints the ids space-separated (or a JSON array with --json);
//   pith detokenize -m MODEL [--skip-special] [-n] IDS...
//       prints the text (ids may also be given comma- or space-separated in one argument).
// MODEL is a .gguf file (full model or vocab-only), a Hugging Face folder or its
// tokenizer.json.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace pith::cli {

namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool parse_special = false;
  bool no_bos = false;
  bool json = false;
};

struct DetokenizeArgs {
  std::string model;
  std::vector<std::string> ids;
  bool skip_special = false;
  bool no_newline = false;
};

void run_tokenize(const TokenizeArgs& a) {
  Tokenizer tok = Tokenizer::load(a.model);
  std::string text = a.text;
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), {});
  auto ids = tok.encode(text, !a.no_bos, a.parse_special);
  std::string out = a.json ? "[" : "";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += a.json ? "," : " ";
    out += std::to_string(ids[i]);
  }
  if (a.json) out += "]";
  fmt::print("{}\n", out);
}

std::vector<int32_t> parse_ids(const std::vector<std::string>& args, size_t vocab_size) {
  std::vector<int32_t> ids;
  for (const auto& arg : args) {
    std::string cur;
    auto flush = [&] {
      if (cur.empty()) return;
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(cur, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != cur.size()) fail("'{}' is not a token id", cur);
      if (v < 0 || static_cast<unsigned long long>(v) >= vocab_size)
        fail("token id {} is out of range (vocab size {})", v, vocab_size);
      ids.push_back(static_cast<int32_t>(v));
      cur.clear();
    };
    for (char c : arg) {
      if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '[' || c == ']') {
        flush();
      } else {
        cur += c;
      }
    }
    flush();
  }
  return ids;
}

void run_detokenize(const DetokenizeArgs& a) {
  Tokenizer tok = Tokenizer::load(a.model);
  auto ids = parse_ids(a.ids, tok.vocab_size());
  std::string text = tok.decode(ids, a.skip_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!a.no_newline) std::fputc('\n', stdout);
}

}  // namespace

void add_tokenize_commands(CLI::App& app) {
  static TokenizeArgs t;
  auto* tc = app.add_subcommand("tokenize", "Print the token ids of a text");
  tc->add_option("-m,--model", t.model, "GGUF file, Hugging Face folder or tokenizer.json")
      ->required();
  tc->add_flag("--parse-special", t.parse_special, "Recognise special tokens written in the text");
  tc->add_flag("--no-bos", t.no_bos, "Do not add BOS/EOS even if the model asks for them");
  tc->add_flag("--json", t.json, "Print a JSON array");
  tc->add_option("text", t.text, "Text to tokenize; '-' reads standard input")->required();
  tc->callback([] { run_tokenize(t); });

  static DetokenizeArgs d;
  auto* dc = app.add_subcommand("detokenize", "Print the text of token ids");
  dc->add_option("-m,--model", d.model, "GGUF file, Hugging Face folder or tokenizer.json")
      ->required();
  dc->add_flag("--skip-special", d.skip_special, "Leave out control tokens (BOS, EOS, ...)");
  dc->add_flag("-n,--no-newline", d.no_newline, "Do not end the output with a newline");
  dc->add_option("ids", d.ids, "Token ids (space- or comma-separated)")->required();
  dc->callback([] { run_detokenize(d); });
}

}  // namespace pith::cli
