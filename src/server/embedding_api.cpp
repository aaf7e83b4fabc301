#include "server/embedding_api.h"

#include <algorithm>

#include <pith/embedding_protocol.hpp>

#include "tokenizer/tokenizer.h"

namespace pith::server {

using nlohmann::json;

namespace {

// One input: a non-empty string, or non-empty token ids inside the vocabulary.
std::vector<int32_t> input_tokens(const json& v, const Tokenizer& tok, bool add_special,
                                  size_t index) {
  if (v.is_string()) {
    const std::string& text = v.get_ref<const std::string&>();
    if (text.empty()) refuse_request("input", "input {} is an empty string", index);
    return tok.encode(text, add_special, /*parse_special=*/false);
  }
  if (!v.is_array() || v.empty())
    refuse_request("input", "input {} must be a non-empty string or non-empty token ids", index);
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& t : v) {
    if (!t.is_number_integer())
      refuse_request("input", "input {} must hold integer token ids, not {}", index, t.dump());
    const int64_t id = t.get<int64_t>();
    if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size())
      refuse_request("input", "token {} in input {} is outside the vocabulary of {} tokens", id,
                     index, tok.vocab_size());
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace

EmbeddingRequest parse_embedding_request(const json& body, const Tokenizer& tokenizer,
                                         uint32_t context_length, uint32_t hidden_size) {
  if (!body.is_object()) refuse_request("", "the body must be a JSON object");
  static const char* const kFields[] = {"input",
                                        "model",
                                        "encoding_format",
                                        "dimensions",
                                        "user",
                                        "truncate_prompt_tokens",
                                        "normalize",
                                        "add_special_tokens"};
  for (const auto& [key, value] : body.items())
    if (std::find(std::begin(kFields), std::end(kFields), key) == std::end(kFields))
      refuse_request(key,
                     "unknown field '{}' (input, model, encoding_format, dimensions, user, "
                     "truncate_prompt_tokens, normalize, add_special_tokens)",
                     key);
  EmbeddingRequest r;
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) refuse_request("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  if (auto u = body.find("user"); u != body.end() && !u->is_null() && !u->is_string())
    refuse_request("user", "'user' must be a string");
  if (auto e = body.find("encoding_format"); e != body.end() && !e->is_null()) {
    if (!e->is_string() || (*e != "float" && *e != "base64"))
      refuse_request("encoding_format", "'encoding_format' must be \"float\" or \"base64\", not {}",
                     e->dump());
    r.base64 = *e == "base64";
  }
  if (auto d = body.find("dimensions"); d != body.end() && !d->is_null()) {
    if (!d->is_number_integer() || d->get<int64_t>() < 1 || d->get<int64_t>() > hidden_size)
      refuse_request("dimensions",
                     "'dimensions' must be an integer between 1 and {} (the model's), not {}",
                     hidden_size, d->dump());
    r.dimensions = d->get<uint32_t>();
  }
  r.normalize = bool_field(body, "normalize").value_or(true);
  const bool add_special = bool_field(body, "add_special_tokens").value_or(true);
  uint32_t keep = 0;  // truncate_prompt_tokens: keep each input's last `keep` tokens (0: all)
  if (auto t = body.find("truncate_prompt_tokens"); t != body.end() && !t->is_null()) {
    if (!t->is_number_integer() || t->get<int64_t>() < -1 || t->get<int64_t>() == 0 ||
        t->get<int64_t>() > context_length)
      refuse_request(
          "truncate_prompt_tokens",
          "'truncate_prompt_tokens' must be -1 (the context length) or between 1 and {}, not "
          "{}",
          context_length, t->dump());
    keep = t->get<int64_t>() == -1 ? context_length : t->get<uint32_t>();
  }

  auto it = body.find("input");
  if (it == body.end() || it->is_null()) refuse_request("input", "'input' is required");
  const json& in = *it;
  // A string, token ids, or an array of either.
  const bool batch = in.is_array() && !in.empty() && (in[0].is_string() || in[0].is_array());
  if (batch) {
    if (in.size() > kMaxEmbeddingInputs)
      refuse_request("input", "at most {} inputs in one request, not {}", kMaxEmbeddingInputs,
                     in.size());
    for (size_t i = 0; i < in.size(); ++i)
      r.inputs.push_back(input_tokens(in[i], tokenizer, add_special, i));
  } else {
    r.inputs.push_back(input_tokens(in, tokenizer, add_special, 0));
  }
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    auto& ids = r.inputs[i];
    if (keep > 0 && ids.size() > keep) ids.erase(ids.begin(), ids.end() - keep);
    if (ids.size() > context_length)
      refuse_request(
          "input",
          "input {} is {} tokens, over the model's context of {} (truncate_prompt_tokens keeps "
          "the last ones)",
          i, ids.size(), context_length);
  }
  return r;
}

std::vector<std::string> EmbeddingRequest::inferlet_args() const {
  std::vector<std::string> a;
  for (const auto& ids : inputs) {
    std::string s;
    s.reserve(ids.size() * 6);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(ids[i]);
    }
    a.insert(a.end(), {"--tokens", std::move(s)});
  }
  a.insert(a.end(), {"--pooling", pooling, "--normalize", normalize ? "1" : "0"});
  if (dimensions) a.insert(a.end(), {"--dimensions", std::to_string(dimensions)});
  if (!adapter.empty()) a.insert(a.end(), {"--adapter", adapter});
  return a;
}

json embedding_response(const std::vector<std::vector<float>>& vectors, bool base64,
                        const std::string& model, uint64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json e = {{"object", "embedding"}, {"index", i}};
    if (base64)
      e["embedding"] = embedding_protocol::base64_floats(vectors[i]);
    else
      e["embedding"] = vectors[i];
    data.push_back(std::move(e));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace pith::server
