// A batch of Gated DeltaNet inputs for the delta-rule kernel tests (cuda_delta_net_host_test on
// the CPU, delta_rule_gpu_test on a GPU), with the CPU engine's recurrent form as the reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cuda/kernels/delta_net_body.h"
#include "engine/delta_rule.h"
#include "random_floats.h"

namespace pith::cuda {

// A batch of sequences for the delta rule: sequence s has count[s] inputs (rows from first[s])
// and its state in pool slot slot[s] (each slot holds two layers' blocks of layer_floats: the conv
// floats, then the matrices; the kernels work on layer 1), with L2-normed queries and keys,
// write strengths in (0, 1) and decays below 0.
struct DeltaBatch {
  uint32_t dk, dv, k_heads, Hv, key_dim, C, T = 0;
  std::vector<uint32_t> first, count, slot;
  size_t conv = 24, layer_floats, slot_floats;
  std::vector<float> states, mixed, beta, g;

  DeltaBatch(std::vector<uint32_t> counts, std::vector<uint32_t> slots, uint32_t n_slots,
             uint32_t dk_, uint32_t dv_, uint32_t kh, uint32_t hv, uint32_t seed)
      : dk(dk_),
        dv(dv_),
        k_heads(kh),
        Hv(hv),
        key_dim(kh * dk_),
        C(2 * kh * dk_ + hv * dv_),
        count(std::move(counts)),
        slot(std::move(slots)),
        layer_floats(conv + size_t{hv} * dv_ * dk_),
        slot_floats(2 * layer_floats) {
    for (uint32_t n : count) {
      first.push_back(T);
      T += n;
    }
    states = random_floats(n_slots * slot_floats, seed);
    for (float& x : states) x *= 0.1f;
    mixed = random_floats(size_t{T} * C, seed + 1);
    for (uint32_t t = 0; t < T; ++t)
      for (uint32_t h = 0; h < 2 * k_heads; ++h) l2_normalize(mixed.data() + t * C + h * dk, dk, 0);
    beta = random_floats(size_t{T} * Hv, seed + 2);
    g = random_floats(size_t{T} * Hv, seed + 3);
    for (float& x : beta) x = 1.0f / (1.0f + std::exp(-x));
    for (float& x : g) x = -std::fabs(x) * 0.3f;
  }

  // The CPU's recurrent form over `pool` (a copy of states): per (sequence, value head), value
  // head h reading key head h % k_heads; returns the outputs [T][Hv][dv].
  std::vector<float> cpu(std::vector<float>& pool) const {
    std::vector<float> out(size_t{T} * Hv * dv);
    for (uint32_t s = 0; s < count.size(); ++s)
      for (uint32_t hv = 0; hv < Hv; ++hv) {
        const uint32_t hk = hv % k_heads;
        const float* row0 = mixed.data() + size_t{first[s]} * C;
        DeltaRuleInputs in;
        in.q = row0 + hk * dk;
        in.k = row0 + key_dim + hk * dk;
        in.v = row0 + 2 * key_dim + hv * dv;
        in.q_stride = in.k_stride = in.v_stride = C;
        in.g = g.data() + size_t{first[s]} * Hv + hv;
        in.beta = beta.data() + size_t{first[s]} * Hv + hv;
        in.g_stride = Hv;
        in.out = out.data() + size_t{first[s]} * Hv * dv + hv * dv;
        in.out_stride = size_t{Hv} * dv;
        float* layer = pool.data() + slot[s] * slot_floats + layer_floats;
        delta_rule_recurrent(layer + conv + size_t{hv} * dv * dk, in, count[s], dk, dv);
      }
    return out;
  }

  // Where the kernels read the batch: the host arrays here, or their device copies.
  struct Arrays {
    const uint32_t *first, *count, *slot;
    float* states;
    const float *mixed, *beta, *g;
  };
  Arrays host(std::vector<float>& pool) const {
    return {first.data(), count.data(), slot.data(), pool.data(),
            mixed.data(), beta.data(),  g.data()};
  }

  // The kernels' parameters over `a`, outputs into `out`.
  kern::DeltaRuleParams params(const Arrays& a, void* out) const {
    kern::DeltaRuleParams p;
    p.seqs = {a.first,  a.count,     a.slot,      static_cast<uint32_t>(count.size()),
              a.states, slot_floats, layer_floats};
    p.conv_floats = conv;
    p.mixed = a.mixed;
    p.beta = a.beta;
    p.g = a.g;
    p.out = out;
    p.C = C;
    p.key_dim = key_dim;
    p.Hv = Hv;
    p.k_heads = k_heads;
    p.dk = dk;
    p.dv = dv;
    return p;
  }
};

}  // namespace pith::cuda
