// The CUDA backend against the CPU engine on hybrid models (qwen3.5 and qwen3.5 MoE: Gated
// DeltaNet layers with recurrent states in device memory beside attention layers with a query
// gate and partial rotary): prefill, chunked prefill, decode, forks, state images and decode
// steps as CUDA graphs. Tolerances are cuda_backend_test.cpp's BF16 ones. Needs a GPU (skips
// with 77) or the host simulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "backend_test_models.h"
#include "engine/cuda/cuda_backend.h"
#if PITH_CUDA_SIM
#include "engine/cuda/sim/launch.h"
#endif
#include "engine/engine.h"
#include "gpu_test_main.h"

namespace pith {
namespace {

constexpr uint32_t kPageSize = 4;  // small pages: many page boundaries

// Hybrid models (qwen3.5 and qwen3.5 MoE: Gated DeltaNet layers with recurrent states beside
// attention layers with a query gate and partial rotary), against the CPU engine.
class CudaHybrid : public ::testing::TestWithParam<const char*> {
 protected:
  struct Seq {
    std::vector<int32_t> tokens;
    std::vector<uint32_t> pages;
    uint32_t state = 0, len = 0;
  };

  void SetUp() override {
    w_ = load(generated_model(GetParam()));
    ASSERT_TRUE(w_->config.hybrid());
    EngineOptions eo;
    eo.kv_page_size = kPageSize;
    eo.kv_memory_bytes = size_t{16} << 20;
    eo.n_threads = 2;
    cpu_ = std::make_unique<Engine>(w_, eo);
    BackendOptions bo;
    bo.kv_page_size = kPageSize;
    bo.kv_memory_bytes = eo.kv_memory_bytes;
    gpu_ = make_cuda_backend(w_, bo, 0);
    ASSERT_EQ(gpu_->state_bytes(), cpu_->state_bytes());
    ASSERT_GT(gpu_->state_slots().capacity(), 7u);
  }

  int32_t vocab() const { return static_cast<int32_t>(w_->config.vocab_size); }

  // A sequence with its pages and a cleared state slot, the same ids in both.
  Seq start(std::vector<int32_t> tokens, uint32_t max_len = 40) {
    Seq q;
    q.tokens = std::move(tokens);
    q.pages = cpu_->page_slots().allocate(pages_for(max_len, kPageSize));
    EXPECT_EQ(gpu_->page_slots().allocate(q.pages.size()), q.pages);
    q.state = cpu_->state_slots().allocate(1)[0];
    EXPECT_EQ(gpu_->state_slots().allocate(1)[0], q.state);
    cpu_->clear_states(std::span<const uint32_t>(&q.state, 1));
    gpu_->clear_states(std::span<const uint32_t>(&q.state, 1));
    return q;
  }
  // The next n of q's tokens as one input, logits of its last.
  static SequenceInput input(Seq& q, uint32_t n) {
    SequenceInput s;
    for (uint32_t i = 0; i < n; ++i) {
      s.tokens.push_back(q.tokens[q.len + i]);
      s.positions.push_back(q.len + i);
    }
    q.len += n;
    s.kv_pages.assign(q.pages.begin(), q.pages.begin() + pages_for(q.len, kPageSize));
    s.last_page_len = last_len(q.len, kPageSize);
    s.state_slot = q.state;
    s.outputs = {{n - 1, OutputKind::Logits, 0, 0}};
    return s;
  }
  static void expect_close(const std::vector<float>& c, const std::vector<float>& g,
                           const std::string& where) {
    ASSERT_EQ(c.size(), g.size()) << where;
    float m = 0, worst = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      m = std::max(m, std::abs(c[i]));
      worst = std::max(worst, std::abs(c[i] - g[i]));
    }
    EXPECT_LE(worst, 2e-2f * (1 + m)) << where;
  }
  // The batch on both; every sequence's first output compared (logits, or a top-K's
  // probabilities id by id).
  std::vector<SequenceResult> step(const std::vector<SequenceInput>& batch,
                                   const std::string& where) {
    auto c = cpu_->forward(batch);
    auto g = gpu_->forward(batch);
    for (size_t i = 0; i < batch.size(); ++i) {
      const std::string at = where + ", sequence " + std::to_string(i);
      if (batch[i].outputs[0].kind == OutputKind::Logits) {
        expect_close(c[i].outputs[0].logits, g[i].outputs[0].logits, at);
        continue;
      }
      const TokenDistribution &cd = c[i].outputs[0].dist, &gd = g[i].outputs[0].dist;
      EXPECT_EQ(cd.ids.size(), gd.ids.size()) << at;
      for (size_t r = 0; r < cd.ids.size() && !gd.ids.empty(); ++r) {
        auto it = std::find(gd.ids.begin(), gd.ids.end(), cd.ids[r]);
        // An id the GPU ranks out of its list is one within noise of the last kept.
        if (it != gd.ids.end())
          EXPECT_NEAR(cd.probs[r], gd.probs[it - gd.ids.begin()], 2e-2f) << at << " rank " << r;
        else
          EXPECT_NEAR(cd.probs[r], gd.probs.back(), 2e-2f) << at << " rank " << r;
      }
    }
    return g;
  }

  std::shared_ptr<const ModelWeights> w_;
  std::unique_ptr<Engine> cpu_;
  std::unique_ptr<Backend> gpu_;
};

// Two sequences prefilled and decoded together at different positions, a long prefill in the
// chunked form, a fork (copy_state + copy_kv) continuing exactly as its source, and state
// images saved and loaded.
TEST_P(CudaHybrid, StatesPrefillDecodeForkAndImagesMatchTheCpu) {
  Engine& cpu = *cpu_;
  Backend* gpu = gpu_.get();
  const int32_t V = vocab();
  Seq a = start(random_tokens(40, 11, V)), b = start(random_tokens(40, 12, V));
  step({input(a, 19), input(b, 7)}, "prefill");  // multi-token chunks of different lengths
  step({input(a, 1), input(b, 5)}, "decode beside a chunk");
  for (int i = 0; i < 4; ++i) step({input(a, 1), input(b, 1)}, "decode " + std::to_string(i));
  // A long prompt: three chunks of the chunked delta rule (kernels/delta_chunked_body.h) beside
  // a decode step, then decodes of both from the states it left.
  Seq c = start(random_tokens(160, 13, V), 160);
  step({input(c, 150), input(b, 1)}, "a 150-token prefill beside a decode");
  for (int i = 0; i < 2; ++i)
    step({input(c, 1), input(b, 1)}, "decode after it " + std::to_string(i));

  // Fork a: its state and its KV pages into a fresh sequence; both then take the same token.
  Seq f = start(a.tokens);
  f.len = a.len;
  cpu.copy_state(a.state, f.state);
  gpu->copy_state(a.state, f.state);
  for (uint32_t p = 0; p < pages_for(a.len, kPageSize); ++p) {
    cpu.copy_kv(a.pages[p], f.pages[p], 0, 0, kPageSize);
    gpu->copy_kv(a.pages[p], f.pages[p], 0, 0, kPageSize);
  }
  auto g = step({input(a, 1), input(f, 1)}, "fork");
  EXPECT_EQ(g[0].outputs[0].logits, g[1].outputs[0].logits) << "the fork diverged on the GPU";

  // State images: what save_states wrote, load_states brings back bit for bit.
  std::vector<std::byte> image(gpu->state_bytes()), again(gpu->state_bytes());
  gpu->save_states(std::span<const uint32_t>(&a.state, 1), image);
  const uint32_t spare = gpu->state_slots().allocate(1)[0];
  gpu->load_states(std::span<const uint32_t>(&spare, 1), image);
  gpu->save_states(std::span<const uint32_t>(&spare, 1), again);
  EXPECT_EQ(image, again);
  std::vector<std::byte> cpu_image(cpu.state_bytes());
  cpu.save_states(std::span<const uint32_t>(&a.state, 1), cpu_image);
  const auto* gs = reinterpret_cast<const float*>(image.data());
  const auto* cs = reinterpret_cast<const float*>(cpu_image.data());
  float worst = 0;
  for (size_t i = 0; i < image.size() / 4; ++i) worst = std::max(worst, std::abs(gs[i] - cs[i]));
  EXPECT_LE(worst, 5e-2f) << "states of the same sequence on the CPU and the GPU";
}

// Pure decode steps of a hybrid model run as CUDA graphs: the recurrent layers read their
// state slots from the staged inputs, padding rows advance a spare slot outside the pool.
// Batches of changing size (3 of them padded to bucket 4: the spare slot is advanced beside
// real ones), a prefill that grows the staging in between (a recapture), a fork taken between
// graph steps, each step against the CPU engine; then the states the graphs left equal the
// CPU's (a padding row that advanced a real slot fails that).
TEST_P(CudaHybrid, DecodeStepsAsCudaGraphs) {
  const int32_t V = vocab();
  std::vector<Seq> seqs;
  for (uint32_t i = 0; i < 5; ++i) {
    seqs.push_back(start(random_tokens(60, 20 + i, V), 60));
    step({input(seqs[i], 3 + 2 * i)}, "prefill " + std::to_string(i));
  }
  auto decode = [&](const std::vector<size_t>& which, const std::string& where) {
    std::vector<SequenceInput> batch;
    for (size_t i : which) {
      SequenceInput s = input(seqs[i], 1);
      s.outputs = {{0, OutputKind::TopK, 8, 0}};
      batch.push_back(std::move(s));
    }
    step(batch, where);
  };
  const std::vector<std::vector<size_t>> steps{{0, 1, 2}, {0, 1, 2}, {3, 4},       {0, 2, 4},
                                               {},        {0, 1, 2}, {1, 3, 4},    {0, 1, 2, 3, 4},
                                               {0},       {0},       {4, 2, 0, 1}, {4, 2, 0, 1}};
  for (size_t si = 0; si < steps.size(); ++si) {
    if (steps[si].empty()) {  // a long prefill: eager, and the staging grows
      seqs.push_back(start(random_tokens(160, 30, V), 160));
      step({input(seqs.back(), 150)}, "a 150-token prefill");
      continue;
    }
    decode(steps[si], "step " + std::to_string(si));
  }
  // A fork of sequence 1 (its state and KV pages), then both in graph steps.
  Seq f = start(seqs[1].tokens, 60);
  f.len = seqs[1].len;
  cpu_->copy_state(seqs[1].state, f.state);
  gpu_->copy_state(seqs[1].state, f.state);
  for (uint32_t p = 0; p < pages_for(f.len, kPageSize); ++p) {
    cpu_->copy_kv(seqs[1].pages[p], f.pages[p], 0, 0, kPageSize);
    gpu_->copy_kv(seqs[1].pages[p], f.pages[p], 0, 0, kPageSize);
  }
  seqs.push_back(std::move(f));
  const size_t fork = seqs.size() - 1;
  for (int i = 0; i < 3; ++i) decode({1, fork, 3}, "with the fork " + std::to_string(i));

  const CudaGraphStats stats = cuda_graph_stats(*gpu_);
  EXPECT_TRUE(stats.enabled);
  EXPECT_GE(stats.captures, 3u);  // buckets 4 and 2 and 8 at least
  EXPECT_GE(stats.replays, 3u);
#if PITH_CUDA_SIM
  EXPECT_EQ(cuda::sim::stats().invalidated_captures, 0u);
#endif

  // Every real sequence's state as the CPU's: the padding rows touched none of them.
  const size_t bytes = gpu_->state_bytes();
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::vector<std::byte> g(bytes), c(bytes);
    gpu_->save_states(std::span<const uint32_t>(&seqs[i].state, 1), g);
    cpu_->save_states(std::span<const uint32_t>(&seqs[i].state, 1), c);
    const auto* gs = reinterpret_cast<const float*>(g.data());
    const auto* cs = reinterpret_cast<const float*>(c.data());
    float worst = 0;
    for (size_t j = 0; j < bytes / 4; ++j) worst = std::max(worst, std::abs(gs[j] - cs[j]));
    EXPECT_LE(worst, 5e-2f) << "state of sequence " << i;
  }
}

// qwen3.5 and its MoE variant (routed experts and a shared expert beside the recurrent layers).
INSTANTIATE_TEST_SUITE_P(Families, CudaHybrid, ::testing::Values("qwen35", "qwen35moe"));

}  // namespace
}  // namespace pith

PITH_GPU_TEST_MAIN()
