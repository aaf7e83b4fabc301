// The CUDA Gated DeltaNet kernel bodies (src/engine/cuda/kernels/delta_net_body.h) run on the
// CPU over every (block, thread) of their launch grids, against the CPU engine's functions
// (engine/delta_rule.h): the causal convolution and its carried window, the query/key L2 norms,
// the write strengths and decays, the recurrent and the chunked delta rule over several sequences
// and heads (outputs and the states left behind), and the hybrid attention's query gate.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "cuda_kernels_host_util.h"
#include "delta_batch.h"
#include "engine/cuda/kernels/delta_chunked_body.h"
#include "engine/cuda/kernels/delta_net_body.h"
#include "engine/delta_rule.h"

namespace pith::cuda {
namespace {

// Two sequences of a batch (3 and 5 inputs, rows 0..2 and 3..7) in slots 2 and 0 of a pool of
// three slots, each slot holding two layers' blocks of `layer_floats`; the kernels work on
// layer 1.
struct Batch {
  std::vector<uint32_t> first{0, 3}, count{3, 5}, slot{2, 0};
  uint32_t T = 8;
  size_t layer_floats, slot_floats;
  std::vector<float> states;

  explicit Batch(size_t layer) : layer_floats(layer), slot_floats(2 * layer) {
    states = random_floats(3 * slot_floats, 70);
  }
  kern::DeltaSequences seqs() {
    return {first.data(), count.data(), slot.data(), 2, states.data(), slot_floats, layer_floats};
  }
  float* state(uint32_t s) { return states.data() + slot[s] * slot_floats + layer_floats; }
};

template <class T>
void check_conv(uint32_t C, uint32_t K) {
  const size_t window = size_t{K - 1} * C;
  Batch b(window + 16);
  const std::vector<float> w = random_floats(size_t{K} * C, 71);
  const std::vector<float> x = random_floats(size_t{b.T} * C, 72, 2.0f);
  std::vector<T> xd(x.size());
  for (size_t i = 0; i < x.size(); ++i) kern::store_f32(&xd[i], x[i]);
  std::vector<float> xr(x.size());  // the values the kernel sees
  for (size_t i = 0; i < x.size(); ++i) xr[i] = f(xd[i]);

  Batch want = b;
  std::vector<float> want_out(x.size());
  for (uint32_t s = 0; s < 2; ++s)
    causal_conv_silu(w.data(), want.state(s), C, xr.data() + size_t{b.first[s]} * C, C,
                     want_out.data() + size_t{b.first[s]} * C, C, b.count[s], C, K);

  std::vector<float> out(x.size());
  for (uint32_t blocks : grids(size_t{2} * C, kern::kActivationThreads)) {
    Batch run = b;
    const auto rs = run.seqs();
    run_grid(blocks, kern::kActivationThreads, [&](uint32_t bl, uint32_t nb, uint32_t t) {
      kern::causal_conv_silu_body(bl, nb, t, rs, w.data(), xd.data(), out.data(), C, K);
    });
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], want_out[i], 1e-6f * (1 + std::fabs(want_out[i]))) << i;
    for (size_t i = 0; i < run.states.size(); ++i)
      ASSERT_EQ(run.states[i], want.states[i]) << "state float " << i;
    // The prefill form: a thread per (row, channel), then the windows; the same bits.
    Batch rows = b;
    const auto rr = rows.seqs();
    std::vector<float> out_rows(x.size(), NAN);
    run_grid(blocks, kern::kActivationThreads, [&](uint32_t bl, uint32_t nb, uint32_t t) {
      kern::causal_conv_silu_rows_body(bl, nb, t, rr, w.data(), xd.data(), out_rows.data(), b.T, C,
                                       K);
    });
    run_grid(blocks, kern::kActivationThreads, [&](uint32_t bl, uint32_t nb, uint32_t t) {
      kern::causal_conv_window_body(bl, nb, t, rr, xd.data(), C, K);
    });
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out_rows[i], out[i]) << "rows form " << i;
    for (size_t i = 0; i < rows.states.size(); ++i)
      ASSERT_EQ(rows.states[i], want.states[i]) << "rows form, state float " << i;
  }
}

TEST(CudaDeltaNetHost, CausalConvCarriesTheWindow) {
  check_conv<float>(96, 4);
  check_conv<float>(33, 2);
  check_conv<float>(40, 6);  // a window longer than the first sequence's 3 inputs
  check_conv<Bf16>(64, 4);
}

TEST(CudaDeltaNetHost, L2NormOfQueryAndKeyHeads) {
  const uint32_t T = 3, k_heads = 2, dk = 128, C = 2 * k_heads * dk + 256;
  std::vector<float> mixed = random_floats(size_t{T} * C, 73, 3.0f), want = mixed;
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t h = 0; h < 2 * k_heads; ++h)
      l2_normalize(want.data() + t * C + h * dk, dk, 1e-6f);
  auto sh = std::make_unique<kern::NormShared>();
  for (uint32_t row = 0; row < T * 2 * k_heads; ++row)
    kern::l2norm_heads_body(kern::HostBlock{row, 0, kern::kHeadNormThreads}, *sh, mixed.data(), C,
                            2 * k_heads, dk, 1e-6f);
  for (size_t i = 0; i < mixed.size(); ++i)
    ASSERT_NEAR(mixed[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << i;  // v heads untouched
}

TEST(CudaDeltaNetHost, WriteStrengthsAndDecays) {
  const uint32_t Hv = 4;
  const size_t total = 5 * Hv;
  const std::vector<float> b = random_floats(total, 74, 3.0f), a = random_floats(total, 75, 10.f);
  const std::vector<float> dt = random_floats(Hv, 76), A = {-0.5f, -1.0f, -2.0f, -0.01f};
  std::vector<float> beta(total), g(total);
  run_grid(1, kern::kActivationThreads, [&](uint32_t bl, uint32_t nb, uint32_t t) {
    kern::delta_gates_body(bl, nb, t, b.data(), a.data(), dt.data(), A.data(), total, Hv,
                           beta.data(), g.data());
  });
  for (size_t i = 0; i < total; ++i) {
    const float x = a[i] + dt[i % Hv];
    const float sp = x > 20 ? x : std::log1p(std::exp(x));
    ASSERT_FLOAT_EQ(beta[i], 1.0f / (1.0f + std::exp(-b[i])));
    ASSERT_FLOAT_EQ(g[i], sp * A[i % Hv]);
    ASSERT_LE(g[i], 0.0f);
  }
}

// The kernel's outputs (T) and states against the CPU's, within `tol` (F32; BF16 outputs
// within one BF16 rounding more).
template <class T>
void expect_delta_match(const std::vector<T>& out, const std::vector<float>& want_out,
                        const std::vector<float>& states, const std::vector<float>& want_states,
                        float tol) {
  for (size_t i = 0; i < out.size(); ++i) {
    if constexpr (std::is_same_v<T, float>)
      ASSERT_NEAR(out[i], want_out[i], tol * (1 + std::fabs(want_out[i]))) << i;
    else
      ASSERT_NEAR(f(out[i]), want_out[i], tol + std::fabs(want_out[i]) / 128) << i;
  }
  for (size_t i = 0; i < states.size(); ++i)
    ASSERT_NEAR(states[i], want_states[i], tol * (1 + std::fabs(want_states[i])))
        << "state float " << i;
}

// The recurrent kernel on two sequences of 3 and 5 inputs in slots 2 and 0 of three.
template <class T>
void check_delta_rule(uint32_t dk, uint32_t dv, uint32_t k_heads, uint32_t Hv) {
  const DeltaBatch b({3, 5}, {2, 0}, 3, dk, dv, k_heads, Hv, 77);
  std::vector<float> want_states = b.states, states = b.states;
  const std::vector<float> want_out = b.cpu(want_states);
  std::vector<T> out(want_out.size());
  const kern::DeltaRuleParams p = b.params(b.host(states), out.data());
  auto sh = std::make_unique<kern::DeltaShared>();
  std::vector<kern::DeltaThread> threads(kern::kDeltaThreads);
  for (uint32_t bx = 0; bx < 2 * Hv; ++bx)
    for (uint32_t by = 0; by < (dv + kern::kDeltaRows - 1) / kern::kDeltaRows; ++by)
      kern::delta_rule_block<T>(
          p, bx, by, *sh,
          [&](auto&& phase) {
            for (uint32_t t = 0; t < kern::kDeltaThreads; ++t) phase(t);
          },
          [&](uint32_t t) -> kern::DeltaThread& { return threads[t]; });
  expect_delta_match(out, want_out, states, want_states, 2e-5f);
}

TEST(CudaDeltaNetHost, RecurrentDeltaRuleMatchesTheCpu) {
  check_delta_rule<float>(128, 128, 2, 4);  // qwen3.5's head sizes, two value heads per key head
  check_delta_rule<float>(48, 20, 1, 3);    // ragged: partial lanes, a partial row group
  check_delta_rule<Bf16>(128, 64, 2, 2);
}

// The chunked delta rule (delta_chunked_body.h: the prep pass over every chunk, then the state
// pass) against the CPU's recurrent one, on sequences of 1, 63, 64, 65 and 150 inputs (a single
// decode step, chunk boundaries, three chunks) in a shuffled pool.
template <class T>
void check_delta_chunked(uint32_t dk, uint32_t dv, uint32_t k_heads, uint32_t Hv) {
  const DeltaBatch b({1, 65, 150, 64, 63}, {3, 0, 4, 1, 2}, 5, dk, dv, k_heads, Hv, 90);
  std::vector<float> want_states = b.states, states = b.states;
  const std::vector<float> want_out = b.cpu(want_states);
  std::vector<T> out(want_out.size());
  const kern::DeltaRuleParams p = b.params(b.host(states), out.data());
  // The prep pass's results [T][Hv], [T][Hv][kDeltaChunk] x2, NaN where it writes nothing.
  const size_t rows = size_t{b.T} * Hv;
  std::vector<float> scratch;
  scratch.assign(rows * (1 + 2 * kern::kDeltaChunk), NAN);
  const kern::DeltaChunkScratch x{scratch.data(), scratch.data() + rows,
                                  scratch.data() + rows * (1 + kern::kDeltaChunk)};
  auto phases = [](auto&& phase) {
    for (uint32_t t = 0; t < kern::kChunkThreads; ++t) phase(t);
  };
  const uint32_t n_blocks = static_cast<uint32_t>(b.count.size()) * Hv;
  auto prep = std::make_unique<kern::DeltaPrepShared>();
  for (uint32_t bx = 0; bx < n_blocks; ++bx)
    for (uint32_t by = 0; by < 4; ++by)  // one more chunk than the longest sequence has
      kern::delta_chunk_prep_block(p, x, bx, by, *prep, phases);
  auto sh = std::make_unique<kern::DeltaChunkShared>();
  for (uint32_t bx = 0; bx < n_blocks; ++bx)
    for (uint32_t by = 0; by < (dv + kern::kChunkRows - 1) / kern::kChunkRows; ++by)
      kern::delta_chunk_state_block<T>(p, x, bx, by, *sh, phases);
  expect_delta_match(out, want_out, states, want_states, 1e-4f);
}

TEST(CudaDeltaNetHost, ChunkedDeltaRuleMatchesTheCpu) {
  check_delta_chunked<float>(128, 128, 2, 4);  // qwen3.5's head sizes
  check_delta_chunked<float>(48, 20, 1, 3);    // ragged: a partial row group
  check_delta_chunked<Bf16>(128, 64, 2, 2);
}

TEST(CudaDeltaNetHost, QueryGateSplitAndSigmoid) {
  const uint32_t T = 3, heads = 2, hd = 8;
  const std::vector<float> src = random_floats(size_t{T} * heads * 2 * hd, 80);
  std::vector<float> q(size_t{T} * heads * hd), gate(q.size());
  run_grid(1, kern::kActivationThreads, [&](uint32_t bl, uint32_t nb, uint32_t t) {
    kern::split_query_gate_body(bl, nb, t, src.data(), size_t{T} * heads, hd, q.data(),
                                gate.data());
  });
  std::vector<float> x = random_floats(q.size(), 81), gated = x;
  run_grid(1, kern::kActivationThreads, [&](uint32_t bl, uint32_t nb, uint32_t t) {
    kern::sigmoid_gate_body(bl, nb, t, gated.data(), gate.data(), gated.size());
  });
  for (uint32_t r = 0; r < T * heads; ++r)
    for (uint32_t j = 0; j < hd; ++j) {
      const size_t i = size_t{r} * hd + j;
      ASSERT_EQ(q[i], src[r * 2 * hd + j]);
      ASSERT_EQ(gate[i], src[r * 2 * hd + hd + j]);
      ASSERT_FLOAT_EQ(gated[i], x[i] / (1.0f + std::exp(-gate[i])));
    }
}

}  // namespace
}  // namespace pith::cuda
