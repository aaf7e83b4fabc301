// The tokenizer benchmark suite (see bench_tokenizer.h).
#include "bench/bench_tokenizer.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "bench/machine_baselines.h"
#include "common/error.h"
#include "common/read_file.h"
#include "tokenizer/sample_text.h"
#include "tokenizer/tokenizer.h"

namespace pith::bench {

namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
double time_s(const Fn& fn) {
  auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

nlohmann::json run_tokenizer_bench(const TokenizerBenchOptions& o) {
  if (o.reps < 1) fail("--reps must be at least 1");
  std::optional<Tokenizer> loaded;
  double load_s = time_s([&] { loaded = Tokenizer::load(o.model); });
  const Tokenizer& tok = *loaded;
  std::string text;
  if (o.file.empty()) {
    text = sample_mixed_text(o.bytes);
  } else {
    text = read_file(o.file);
  }
  if (text.empty()) fail("nothing to tokenize (empty text)");
  const double mb = text.size() / 1e6;
  const bool bpe = tok.kind() == VocabKind::BytePairBPE;
  fmt::print("tokenizer bench: {} ({} tokens, {}), {:.2f} MB of {}, median of {} runs\n", o.model,
             tok.vocab_size(), bpe ? "byte-level BPE" : "SentencePiece", mb,
             o.file.empty() ? "generated mixed text" : o.file, o.reps);
  fmt::print("  load                {:8.3f} s\n", load_s);

  // Runs are interleaved (fast, decode, memcpy, naive) so that load from other processes
  // affects the tokenizer and its baselines alike.
  const bool with_naive = o.naive && bpe;
  std::vector<int32_t> ids, naive_ids;
  std::vector<double> enc, dec, naive, copy;
  std::string decoded;
  for (int r = 0; r < o.reps; ++r) {
    enc.push_back(time_s([&] { ids = tok.encode(text, false, false); }));
    dec.push_back(time_s([&] { decoded = tok.decode(ids); }));
    std::string dst(text.size(), '\0');
    copy.push_back(time_s([&] { std::memcpy(dst.data(), text.data(), text.size()); }));
    if (dst[text.size() / 2] != text[text.size() / 2]) fail("memcpy baseline went wrong");
    if (with_naive)
      naive.push_back(time_s([&] { naive_ids = tok.encode_naive(text, false, false); }));
  }
  if (decoded != text) fail("decode(encode(text)) != text: the tokenizer is broken on this input");
  if (with_naive && naive_ids != ids) fail("naive and fast encoders disagree");

  // One long word (8 KB of letters, no spaces): where the merge algorithm matters.
  std::string word;
  for (uint32_t x = 12345; word.size() < 8192; x = x * 1103515245u + 12345u)
    word += static_cast<char>('a' + (x >> 16) % 26);
  std::vector<double> long_fast, long_naive;
  for (int r = 0; r < o.reps; ++r) {
    long_fast.push_back(time_s([&] { ids = tok.encode(word, false, false); }));
    if (with_naive)
      long_naive.push_back(time_s([&] { naive_ids = tok.encode_naive(word, false, false); }));
  }
  if (with_naive && naive_ids != ids) fail("naive and fast encoders disagree on the long word");
  ids = tok.encode(text, false, false);
  const double enc_mb_s = mb / median(enc);
  const double dec_mb_s = mb / median(dec);
  const double copy_mb_s = mb / median(copy);
  fmt::print("  tokens              {:8d}  ({:.2f} bytes/token)\n", ids.size(),
             double(text.size()) / double(ids.size()));
  fmt::print("  encode              {:8.2f} MB/s  ({:.2f} M tokens/s)\n", enc_mb_s,
             ids.size() / median(enc) / 1e6);
  fmt::print("  decode              {:8.2f} MB/s\n", dec_mb_s);
  fmt::print("  memcpy (bound)      {:8.0f} MB/s  encode = {:.5f} of memcpy\n", copy_mb_s,
             enc_mb_s / copy_mb_s);
  nlohmann::json j = {{"suite", "tokenizer"},
                      {"model", o.model},
                      {"kind", bpe ? "bpe" : "spm"},
                      {"bytes", text.size()},
                      {"tokens", ids.size()},
                      {"reps", o.reps},
                      {"load_s", load_s},
                      {"encode_mb_s", enc_mb_s},
                      {"decode_mb_s", dec_mb_s},
                      {"memcpy_mb_s", copy_mb_s},
                      {"encode_vs_memcpy", enc_mb_s / copy_mb_s}};
  const double long_mb_s = word.size() / 1e6 / median(long_fast);
  fmt::print("  8 KB word encode    {:8.2f} MB/s\n", long_mb_s);
  j["long_word_encode_mb_s"] = long_mb_s;
  if (with_naive) {
    const double naive_mb_s = mb / median(naive);
    const double long_naive_mb_s = word.size() / 1e6 / median(long_naive);
    fmt::print("  naive encode (base) {:8.2f} MB/s  speedup {:.2f}x\n", naive_mb_s,
               enc_mb_s / naive_mb_s);
    fmt::print("  naive 8 KB word     {:8.2f} MB/s  speedup {:.1f}x\n", long_naive_mb_s,
               long_mb_s / long_naive_mb_s);
    j["naive_encode_mb_s"] = naive_mb_s;
    j["speedup_vs_naive"] = enc_mb_s / naive_mb_s;
    j["naive_long_word_encode_mb_s"] = long_naive_mb_s;
    j["long_word_speedup_vs_naive"] = long_mb_s / long_naive_mb_s;
  }
  return j;
}

}  // namespace pith::bench
