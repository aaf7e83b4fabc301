// Metaspace BPE (see metaspace_bpe.h).
#include "tokenizer/metaspace_bpe.h"

#include "tokenizer/utf8.h"

namespace pith {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁" U+2581

}  // namespace

std::string escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out += kSpace;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void split_newline_runs(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& pieces) {
  size_t start = 0;
  while (start < text.size()) {
    const bool newlines = text[start] == '\n';
    size_t end = start + 1;
    while (end < text.size() && (text[end] == '\n') == newlines) ++end;
    pieces.emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(end - start));
    start = end;
  }
}

void MetaspaceBpe::encode(std::string_view piece, bool naive, std::vector<int32_t>& out,
                          std::vector<int32_t>& scratch) const {
  if (piece.find_first_not_of('\n') == std::string_view::npos) {
    if (int32_t whole = lookup(index, piece); whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  // A character missing from the vocabulary can be part of no merge, so the characters on
  // either side of it merge independently: merge each run of known characters on its own.
  std::vector<int32_t>& run = scratch;
  run.clear();
  auto flush = [&] {
    if (naive) {
      merger.merge_naive(run);
    } else {
      merger.merge(run);
    }
    out.insert(out.end(), run.begin(), run.end());
    run.clear();
  };
  for (size_t pos = 0; pos < piece.size();) {
    size_t len = utf8::valid_sequence_at(piece, pos);
    int32_t id = len > 0 ? lookup(index, piece.substr(pos, len)) : -1;
    if (len == 0) len = 1;  // a stray byte: its own byte token
    if (id >= 0) {
      run.push_back(id);
    } else {
      flush();
      for (size_t i = pos; i < pos + len; ++i)
        if (int32_t b = byte_tokens[static_cast<uint8_t>(piece[i])]; b >= 0) out.push_back(b);
    }
    pos += len;
  }
  flush();
}

}  // namespace pith
