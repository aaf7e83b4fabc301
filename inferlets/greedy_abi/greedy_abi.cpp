// greedy_abi: greedy text completion written against the raw C ABI (pith/abi.h), with no SDK
// model classes: the paper's autoregressive listing, one fused forward per step. It is the
// reference for what the SDK's Context does under the hood, and the end-to-end test of the
// runtime -> control layer -> engine path.
//
// Usage: greedy_abi --tokens 1,2,3 | --prompt TEXT  [--max-tokens N]
// Sends one message per generated token: its id, then a final "done" message. Only the entry
// point and the launch arguments come from the SDK (pith/inferlet.hpp); every model call is raw.
#include <pith/abi.h>
#include <stdlib.h>
#include <string.h>

#include <pith/inferlet.hpp>
#include <string>
#include <vector>

namespace {

std::vector<uint32_t> parse_ids(const std::string& csv) {
  std::vector<uint32_t> ids;
  const char* p = csv.c_str();
  while (*p) {
    ids.push_back(static_cast<uint32_t>(strtoul(p, const_cast<char**>(&p), 10)));
    if (*p == ',') ++p;
  }
  return ids;
}

}  // namespace

pith::Status greedy_abi(pith::Flags& flags) {
  std::string prompt = flags.str("--prompt", "", "the text to complete");
  std::string token_csv = flags.str("--tokens", "", "the prompt as token ids, comma-separated");
  uint32_t max_tokens = flags.u32("--max-tokens", 16, "tokens to generate");
  PITH_TRY(flags.done());

  pith_model_t model;
  PITH_TRY(pith::check(pith_model_open("", 0, &model), "model_open"));
  pith_model_info_t info;
  PITH_TRY(pith::check(pith_model_info(model, &info), "model_info"));
  pith_queue_t queue;
  PITH_TRY(pith::check(pith_queue_create(model, &queue), "queue_create"));

  std::vector<uint32_t> tokens = parse_ids(token_csv);
  if (!prompt.empty()) {
    std::vector<uint32_t> buf(prompt.size() + 8);
    uint32_t n = 0;
    PITH_TRY(pith::check(pith_tokenize(model, prompt.data(), static_cast<uint32_t>(prompt.size()),
                                       buf.data(), static_cast<uint32_t>(buf.size()), &n),
                         "tokenize"));
    tokens.insert(tokens.end(), buf.begin(), buf.begin() + n);
  }
  if (tokens.empty()) return pith::Error(PITH_ERR_BAD_ARGUMENT, "empty prompt");

  const uint32_t page = info.tokens_per_page;
  std::vector<pith_kvpage_t> pages;
  uint32_t filled = 0;  // context slots holding K/V
  std::vector<uint32_t> input = tokens;
  std::string result;
  for (uint32_t step = 0; step < max_tokens; ++step) {
    // Grow the page table to hold the new inputs.
    uint32_t total = filled + static_cast<uint32_t>(input.size());
    while (pages.size() * page < total) {
      pith_kvpage_t p;
      PITH_TRY(pith::check(pith_kvpage_alloc(queue, 1, &p), "kvpage_alloc"));
      pages.push_back(p);
    }
    std::vector<uint32_t> positions(input.size());
    for (size_t i = 0; i < input.size(); ++i) positions[i] = filled + static_cast<uint32_t>(i);
    uint32_t last = static_cast<uint32_t>(input.size() - 1);
    pith_forward_tokens_args_t a{};
    a.tokens = input.data();
    a.positions = positions.data();
    a.token_count = static_cast<uint32_t>(input.size());
    a.kv_pages = pages.data();
    a.kv_page_count = static_cast<uint32_t>(pages.size());
    a.last_page_len = total - static_cast<uint32_t>(pages.size() - 1) * page;
    a.output_indices = &last;
    a.output_count = 1;
    a.top_k = 1;
    pith_future_t f;
    PITH_TRY(pith::check(pith_forward_tokens(queue, &a, &f), "forward_tokens"));
    pith::Result<std::string> r = pith::Future(f).get();
    if (!r) return r.error().context("forward_tokens result");
    uint32_t next;
    memcpy(&next, r->data() + 4, 4);  // layout: k, ids[k], probs[k]
    filled = total;
    PITH_TRY(pith::send(std::to_string(next)));
    if (next == info.eos_token) break;
    input.assign(1, next);
  }
  return pith::send("done");
}
PITH_INFERLET(greedy_abi)
