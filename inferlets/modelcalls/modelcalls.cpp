// modelcalls: exercises the model-facing ABI end to end against whatever ModelApi the runtime
// has (the runtime tests attach a fake one): model list, open, traits, tokenize, queue, KV pages,
// a fused forward whose future carries a distribution, and error codes. Reports each step as a
// message "step: result" so the test can check the decoding in both directions.
#include <string.h>

#include <pith/pith.hpp>

static std::string status(pith_status_t s) {
  return pith::status_name(s);
}

int main() {
  auto models = pith::available_models();
  if (!models) {
    return pith::send("models: " + status(models.status())) ? 0 : 1;
  }
  if (!pith::send("models: " + (*models)[0] + "," + (*models)[1])) return 1;
  auto model = pith::Model::open((*models)[0]);
  if (!model) return 1;
  auto missing = pith::Model::open("no-such-model");
  if (!pith::send("open missing: " + status(missing.status()))) return 1;

  auto ids = model->tokenize("hello");
  std::string t;
  for (uint32_t id : *ids) t += std::to_string(id) + " ";
  if (!pith::send("tokens: " + t)) return 1;
  if (!pith::send("text: " + model->detokenize(*ids).value_or("?"))) return 1;

  auto queue = pith::Queue::create(*model);
  auto pages = queue->alloc_kvpages(3);
  if (!pith::send("pages: " + std::to_string((*pages)[0]) + "," + std::to_string((*pages)[2])))
    return 1;
  auto too_many = queue->alloc_kvpages(1000);
  if (!pith::send("too many: " + status(too_many.status()))) return 1;

  uint32_t positions[5] = {0, 1, 2, 3, 4};
  uint32_t out_index = 4;
  pith_forward_tokens_args_t args;
  memset(&args, 0, sizeof args);
  args.tokens = ids->data();
  args.positions = positions;
  args.token_count = static_cast<uint32_t>(ids->size());
  args.kv_pages = pages->data();
  args.kv_page_count = 1;
  args.last_page_len = args.token_count;
  args.output_indices = &out_index;
  args.output_count = 1;
  args.top_k = 2;
  pith::Future f = queue->forward_tokens(args);
  auto dist = f.get();
  if (!dist) return (void)pith::send("forward: " + status(dist.status())), 1;  // failing already
  uint32_t k = 0, top = 0;
  float p = 0;
  memcpy(&k, dist->data(), 4);
  memcpy(&top, dist->data() + 4, 4);
  memcpy(&p, dist->data() + 4 + 4 * k, 4);
  if (!pith::send("dist: k=" + std::to_string(k) + " top=" + std::to_string(top) +
                  " p=" + std::to_string(static_cast<int>(p * 100))))
    return 1;

  // The same forward with a token mask per output (3 words here; the fake checks them).
  const uint64_t allowed[3] = {0x5, 0, 0x8000000000000000ull};
  pith_future_t af = 0;
  pith_status_t s = pith_forward_tokens_allowed(queue->handle(), &args, allowed, 3, &af);
  if (s != PITH_OK) return (void)pith::send("allowed: " + status(s)), 1;
  auto masked = pith::Future(af).get();
  if (!masked) return (void)pith::send("allowed: " + status(masked.status())), 1;
  memcpy(&top, masked->data() + 4, 4);
  if (!pith::send("allowed: top=" + std::to_string(top))) return 1;
  s = pith_forward_tokens_allowed(queue->handle(), &args,
                                  reinterpret_cast<const uint64_t*>(0xfffffff0u), 3, &af);
  if (!pith::send("allowed out of memory: " + status(s))) return 1;

  // With logit adjustments (no masks); the fake reports the fields it received.
  const pith_logit_adjust_t adjusts[2] = {{0, 7, 1.5f, 2.0f, 0.25f}, {0, 9, -1.0f, 1.0f, 3.0f}};
  s = pith_forward_tokens_adjusted(queue->handle(), &args, nullptr, 0, adjusts, 2, &af);
  if (s != PITH_OK) return (void)pith::send("adjusted: " + status(s)), 1;
  auto adjusted = pith::Future(af).get();
  if (!adjusted) return (void)pith::send("adjusted: " + status(adjusted.status())), 1;
  memcpy(&top, adjusted->data() + 4, 4);
  if (!pith::send("adjusted: top=" + std::to_string(top))) return 1;
  s = pith_forward_tokens_adjusted(queue->handle(), &args, nullptr, 0,
                                   reinterpret_cast<const pith_logit_adjust_t*>(0xfffffff0u), 2,
                                   &af);
  if (!pith::send("adjusted out of memory: " + status(s))) return 1;

  s = pith_kvpage_dealloc(queue->handle(), pages->data(), 3);
  if (!pith::send("dealloc: " + status(s))) return 1;
  s = pith_kvpage_dealloc(queue->handle(), pages->data(), 1);  // already freed
  if (!pith::send("double dealloc: " + status(s))) return 1;
  s = pith_kvpage_alloc(queue->handle(), 1, reinterpret_cast<pith_kvpage_t*>(0xfffffff0u));
  return pith::send("bad pointer: " + status(s)) ? 0 : 1;
}
