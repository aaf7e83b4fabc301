// Per-step GPU time vs wall time of the CUDA backend's forward (CUDA events around the step's
// work on the backend's stream; wall from the handler's entry to its return), for decode
// batches of B sequences after a prefill of P tokens each, with decode CUDA graphs on and off and
// the own GEMV allowed or not (BackendOptions::cuda_gemv; a backend each). Prints one JSON line:
//   {"model":..., "device":..., "prompt":P, "steps":N,
//    "batches":[{"batch":B, "graphs":G, "gemv":V, "gpu_ms":median, "wall_ms":median,
//                "host_ms":wall-gpu, "tok_s":B/wall, ...the GEMM choices made}, ...]}
// Usage: cuda_step_timing MODEL [--batch 1,64] [--prompt 128] [--steps 32] [--graphs 1,0]
//                              [--gemv 1,0]
// Exits 77 without a GPU (like the GPU tests), 2 on bad arguments.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/model_loader.h"

namespace pith {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<uint32_t> parse_list(const char* s) {
  std::vector<uint32_t> out;
  for (const char* p = s; *p;) {
    out.push_back(static_cast<uint32_t>(std::strtoul(p, const_cast<char**>(&p), 10)));
    if (*p == ',')
      ++p;
    else if (*p)
      fail("bad number list '{}'", s);
  }
  return out;
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s MODEL [--batch 1,64] [--prompt 128] [--steps 32] [--graphs 1,0] "
                 "[--gemv 1,0]\n",
                 argv[0]);
    return 2;
  }
  std::vector<uint32_t> batches{1, 64}, graph_settings{1, 0}, gemv_settings{1, 0};
  uint32_t prompt = 128, steps = 32;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batch"))
      batches = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--prompt"))
      prompt = parse_list(argv[i + 1]).at(0);
    else if (!std::strcmp(argv[i], "--steps"))
      steps = parse_list(argv[i + 1]).at(0);
    else if (!std::strcmp(argv[i], "--gemv"))
      gemv_settings = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--graphs"))
      graph_settings = parse_list(argv[i + 1]);
    else
      fail("unknown option {}", argv[i]);
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "no CUDA device: skipped\n");
    return 77;
  }
  LoadOptions lo;
  lo.quiet = true;
  auto weights = load_model(argv[1], lo);
  const uint32_t vocab = weights->config.vocab_size;
  const uint32_t max_b = *std::max_element(batches.begin(), batches.end());
  BackendOptions bo;
  const uint32_t ps = bo.kv_page_size;
  const uint32_t pages_per_seq = (prompt + steps + ps - 1) / ps;
  const ModelConfig& c = weights->config;
  // F32 K/V of every layer at the widest head shape: an upper bound.
  const size_t page_bytes = size_t{c.n_layers} * 2 * ps * c.max_kv_dim() * 4;
  bo.kv_memory_bytes = page_bytes * pages_per_seq * max_b;
  // Hybrid models: a recurrent state per sequence of the largest batch.
  bo.state_memory_bytes = c.recurrent_state_floats() * sizeof(float) * max_b;
  std::string rows, device;
  for (uint32_t setting = 0; setting < graph_settings.size() * gemv_settings.size(); ++setting) {
    bo.cuda_graphs = graph_settings[setting / gemv_settings.size()] != 0;
    bo.cuda_gemv = gemv_settings[setting % gemv_settings.size()] != 0;
    auto backend = make_cuda_backend(weights, bo, 0);
    device = backend->info().device;
    for (uint32_t B : batches) {
      std::vector<std::vector<uint32_t>> pages(B);
      for (auto& p : pages) p = backend->page_slots().allocate(pages_per_seq);
      // A hybrid model's sequences each own a recurrent state (cleared: a fresh sequence).
      std::vector<uint32_t> states;
      if (c.hybrid()) {
        states = backend->state_slots().allocate(B);
        backend->clear_states(states);
      }
      std::vector<SequenceInput> batch(B);
      for (uint32_t b = 0; b < B; ++b) {  // prefill, one sequence at a time
        SequenceInput s;
        if (c.hybrid()) s.state_slot = batch[b].state_slot = states[b];
        for (uint32_t i = 0; i < prompt; ++i) {
          s.tokens.push_back(static_cast<int32_t>((7 + 131 * (i + b)) % vocab));
          s.positions.push_back(i);
        }
        s.kv_pages.assign(pages[b].begin(), pages[b].begin() + (prompt + ps - 1) / ps);
        s.last_page_len = prompt - (static_cast<uint32_t>(s.kv_pages.size()) - 1) * ps;
        backend->forward({s});
      }
      std::vector<double> gpu, wall;
      for (uint32_t step = 0; step < steps; ++step) {
        const uint32_t pos = prompt + step, ctx = pos + 1;
        for (uint32_t b = 0; b < B; ++b) {
          SequenceInput& s = batch[b];
          s.tokens = {static_cast<int32_t>((11 + 17 * step + b) % vocab)};
          s.positions = {pos};
          s.kv_pages.assign(pages[b].begin(), pages[b].begin() + (ctx + ps - 1) / ps);
          s.last_page_len = ctx - (static_cast<uint32_t>(s.kv_pages.size()) - 1) * ps;
          s.outputs = {{0, OutputKind::TopK, 256, 0}};
        }
        backend->forward(batch);
        const CudaStepTime t = cuda_last_step_time(*backend);
        if (step > 0) {  // the first step warms the GEMM plans
          gpu.push_back(t.gpu_ms);
          wall.push_back(t.wall_ms);
        }
      }
      for (auto& p : pages) backend->page_slots().free(p);
      if (!states.empty()) backend->state_slots().free(states);
      const double g = median(gpu), w = median(wall);
      const CudaGraphStats gs = cuda_graph_stats(*backend);
      const CudaGemmChoices gc = cuda_gemm_choices(*backend);
      rows += fmt::format(
          "{}{{\"batch\":{},\"graphs\":{},\"gemv\":{},\"gpu_ms\":{:.4f},\"wall_ms\":{:.4f},"
          "\"host_ms\":{:.4f},\"tok_s\":{:.1f},\"graph_replays\":{},"
          "\"gemv_shapes\":{},\"cublas_skinny_shapes\":{},\"fused_gate_shapes\":{},"
          "\"unfused_gate_shapes\":{}}}",
          rows.empty() ? "" : ",", B, gs.enabled ? "true" : "false",
          bo.cuda_gemv ? "true" : "false", g, w, w - g, B * 1e3 / w, gs.replays, gc.own_gemv,
          gc.cublas, gc.fused_gate, gc.unfused_gate);
    }
  }
  std::printf("{\"model\":\"%s\",\"device\":\"%s\",\"prompt\":%u,\"steps\":%u,\"batches\":[%s]}\n",
              argv[1], device.c_str(), prompt, steps, rows.c_str());
  return 0;
}

}  // namespace
}  // namespace pith

int main(int argc, char** argv) {
  try {
    return pith::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_step_timing: error: %s\n", e.what());
    return 1;
  }
}
