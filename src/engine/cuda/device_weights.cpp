// Weight upload: layout, conversion to the compute type and streaming copy. See device_weights.h.
#include "engine/cuda/device_weights.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/error.h"
#include "common/fp16.h"
#include "engine/cuda/cuda_check.h"
#include "engine/kernels/matmul.h"

namespace pith::cuda {

namespace {

constexpr size_t kAlign = 256;
constexpr size_t kStagingBytes = size_t{16} << 20;  // per staging buffer

size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// A tied LM head is the embedding table itself (model_weights.h): upload it once.
bool tied(const ModelWeights& w) {
  return w.output.data == w.token_embd.data;
}

// Rows of experts stacked expert by expert (each expert's matrix of `a`, then of `b`), and the
// experts' common column count.
size_t stacked_rows(const std::vector<WeightMatrix>& a, const std::vector<WeightMatrix>& b) {
  size_t rows = 0;
  for (const WeightMatrix& m : a) rows += m.rows;
  for (const WeightMatrix& m : b) rows += m.rows;
  return rows;
}
size_t d_of(const std::vector<WeightMatrix>& experts) {
  return experts.empty() ? 0 : experts[0].cols;
}

// Walks the device layout in a fixed order; `place(bytes)` returns each tensor's offset.
// Used once to size the allocation and once to upload, so both always agree.
template <typename Place>
void for_each_tensor(const ModelWeights& w, DType mode, Place&& place) {
  const size_t e = elem_bytes(mode);
  auto matrix = [&](const WeightMatrix& m) { return place(m.rows * m.cols * e); };
  auto vector = [&](const std::vector<float>& v) { return place(v.size() * sizeof(float)); };
  matrix(w.token_embd);
  if (!tied(w)) matrix(w.output);
  vector(w.output_norm);
  matrix(w.per_layer.token_embd);
  matrix(w.per_layer.model_proj);
  vector(w.per_layer.proj_norm);
  for (const LayerWeights& l : w.layers) {
    vector(l.attn_norm);
    vector(l.ffn_norm);
    for (const std::vector<float>* v :
         {&l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm, &l.post_attn_norm, &l.post_ffn_norm})
      vector(*v);
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo}) matrix(*m);
    place((l.w_gate.rows + l.w_up.rows) * l.w_gate.cols * e);
    matrix(l.w_down);
    for (const WeightMatrix* m : {&l.ssm_qkv, &l.ssm_gate, &l.ssm_beta, &l.ssm_alpha, &l.ssm_out})
      matrix(*m);
    for (const std::vector<float>* v : {&l.ssm_conv_t, &l.ssm_dt_bias, &l.ssm_a, &l.ssm_norm})
      vector(*v);
    matrix(l.router);
    place(stacked_rows(l.exp_gate, l.exp_up) * d_of(l.exp_gate) * e);
    place(stacked_rows(l.exp_down, {}) * d_of(l.exp_down) * e);
    place((l.sh_gate.rows + l.sh_up.rows) * l.sh_gate.cols * e);
    matrix(l.sh_down);
    place(l.sh_gate_inp.size() * e);
    for (const std::vector<float>* v : {&l.router_scale, &l.expert_scale, &l.pre_ffn_norm2,
                                        &l.post_ffn_norm1, &l.post_ffn_norm2, &l.ple_post_norm})
      vector(*v);
    matrix(l.ple_gate);
    matrix(l.ple_proj);
  }
}

// Converts and copies row-chunks of host matrices into device memory through two pinned
// staging buffers, alternating so conversion of one chunk overlaps the copy of the other.
class Uploader {
 public:
  Uploader(DType mode, size_t total_bytes, cudaStream_t stream)
      : mode_(mode), total_(total_bytes), stream_(stream) {
    for (auto& b : staging_) b.reserve(kStagingBytes);
  }

  void matrix(const WeightMatrix& m, char* dst) {
    if (m.rows == 0 || m.cols == 0) return;  // a tensor this layer kind does not have
    const size_t out_row = m.cols * elem_bytes(mode_);
    if (out_row > kStagingBytes)
      fail("cuda: a weight row of {} elements does not fit the upload staging buffer", m.cols);
    const size_t rows_per_chunk = kStagingBytes / out_row;
    row_f32_.resize(m.cols);
    for (size_t r0 = 0; r0 < m.rows; r0 += rows_per_chunk) {
      const size_t n = std::min(rows_per_chunk, m.rows - r0);
      char* stage = next_buffer();
      for (size_t r = 0; r < n; ++r) convert_row(m, r0 + r, stage + r * out_row);
      copy(stage, dst + r0 * out_row, n * out_row);
    }
  }

  void vector(const std::vector<float>& v, char* dst) {
    char* stage = next_buffer();
    std::memcpy(stage, v.data(), v.size() * sizeof(float));
    copy(stage, dst, v.size() * sizeof(float));
  }

  void finish() { PITH_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  char* next_buffer() {
    current_ ^= 1;
    if (used_[current_]) events_[current_].synchronize();  // its last copy is done
    used_[current_] = true;
    return staging_[current_].as<char>();
  }

  void copy(const char* stage, char* dst, size_t bytes) {
    PITH_CUDA_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, stream_));
    events_[current_].record(stream_);
    report(bytes);
  }

  void convert_row(const WeightMatrix& m, size_t r, char* out) {
    const uint8_t* src = m.row(r);
    if (mode_ == DType::F32) {  // F32 mode: every matrix is F32 (compute_mode)
      std::memcpy(out, src, m.cols * sizeof(float));
      return;
    }
    if (m.dtype == pith::DType::BF16) {
      std::memcpy(out, src, m.cols * 2);
      return;
    }
    // Exact in F32; the BF16 rounding below then costs F16 and the quantised types their low
    // mantissa bits (the BF16 mode's tolerance, docs/gpu.md "Numerics").
    dequantize_row(m.dtype, src, row_f32_.data(), m.cols);
    auto* o = reinterpret_cast<uint16_t*>(out);
    for (size_t i = 0; i < m.cols; ++i) o[i] = f32_to_bf16(row_f32_[i]);
  }

  void report(size_t bytes) {
    done_ += bytes;
    const int pct = total_ ? static_cast<int>(100 * done_ / total_) : 100;
    if (pct >= next_pct_) {
      spdlog::info("cuda: uploading weights {}% ({} of {} MiB)", pct, done_ >> 20, total_ >> 20);
      while (next_pct_ <= pct) next_pct_ += 25;
    }
  }

  DType mode_;
  size_t total_, done_ = 0;
  int next_pct_ = 25;
  cudaStream_t stream_;
  PinnedBuffer staging_[2];
  Event events_[2];
  bool used_[2] = {false, false};
  int current_ = 1;
  std::vector<float> row_f32_;
};

}  // namespace

DType compute_mode(const ModelWeights& w) {
  bool all_f32 = w.token_embd.dtype == pith::DType::F32 && w.output.dtype == pith::DType::F32;
  for (const LayerWeights& l : w.layers) {
    for (const WeightMatrix* m :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.ssm_qkv, &l.ssm_gate,
          &l.ssm_beta, &l.ssm_alpha, &l.ssm_out, &l.router, &l.sh_gate, &l.sh_up, &l.sh_down,
          &l.ple_gate, &l.ple_proj})
      all_f32 = all_f32 && (m->rows == 0 || m->dtype == pith::DType::F32);
    for (const auto* experts : {&l.exp_gate, &l.exp_up, &l.exp_down})
      for (const WeightMatrix& m : *experts) all_f32 = all_f32 && m.dtype == pith::DType::F32;
  }
  for (const WeightMatrix* m : {&w.per_layer.token_embd, &w.per_layer.model_proj})
    all_f32 = all_f32 && (m->rows == 0 || m->dtype == pith::DType::F32);
  return all_f32 ? DType::F32 : DType::BF16;
}

size_t device_weight_bytes(const ModelWeights& w, DType mode) {
  size_t total = 0;
  for_each_tensor(w, mode, [&](size_t bytes) {
    size_t at = total;
    total += align_up(bytes);
    return at;
  });
  return total;
}

DeviceWeights::DeviceWeights(const ModelWeights& w, DType mode, cudaStream_t stream)
    : dtype_(mode) {
  const auto start = std::chrono::steady_clock::now();
  const size_t total = device_weight_bytes(w, mode);
  memory_.reserve(total);
  char* base = memory_.as<char>();
  size_t at = 0;
  auto take = [&](size_t bytes) {
    char* p = base + at;
    at += align_up(bytes);
    return p;
  };
  Uploader up(mode, total, stream);
  auto matrix = [&](const WeightMatrix& m) {
    char* p = take(m.rows * m.cols * elem_bytes(mode));
    up.matrix(m, p);
    return DeviceMatrix{p, mode, static_cast<uint32_t>(m.rows), static_cast<uint32_t>(m.cols)};
  };
  // Matrices stacked in one block: expert by expert, each one's `a` matrix, then its `b` one
  // (a dense FFN's gate and up are the one-expert case).
  auto stacked = [&](const std::vector<WeightMatrix>& a, const std::vector<WeightMatrix>& b) {
    const size_t cols = d_of(a), rows = stacked_rows(a, b);
    char* p = take(rows * cols * elem_bytes(mode));
    size_t at_row = 0;
    for (size_t e = 0; e < a.size(); ++e)
      for (const WeightMatrix* m : {&a[e], e < b.size() ? &b[e] : nullptr}) {
        if (!m) continue;
        up.matrix(*m, p + at_row * cols * elem_bytes(mode));
        at_row += m->rows;
      }
    return DeviceMatrix{p, mode, static_cast<uint32_t>(rows), static_cast<uint32_t>(cols)};
  };
  auto vector = [&](const std::vector<float>& v) -> const float* {
    char* p = take(v.size() * sizeof(float));
    if (v.empty()) return nullptr;  // the family has no such vector
    up.vector(v, p);
    return reinterpret_cast<const float*>(p);
  };

  // Same order as for_each_tensor.
  token_embd = matrix(w.token_embd);
  output = tied(w) ? token_embd : matrix(w.output);
  output_norm = vector(w.output_norm);
  ple_token_embd = matrix(w.per_layer.token_embd);
  ple_model_proj = matrix(w.per_layer.model_proj);
  ple_proj_norm = vector(w.per_layer.proj_norm);
  layers.reserve(w.layers.size());
  for (const LayerWeights& l : w.layers) {
    DeviceLayer d;
    d.attn_norm = vector(l.attn_norm);
    d.ffn_norm = vector(l.ffn_norm);
    d.bq = vector(l.bq);
    d.bk = vector(l.bk);
    d.bv = vector(l.bv);
    d.q_norm = vector(l.q_norm);
    d.k_norm = vector(l.k_norm);
    d.post_attn_norm = vector(l.post_attn_norm);
    d.post_ffn_norm = vector(l.post_ffn_norm);
    d.wq = matrix(l.wq);
    d.wk = matrix(l.wk);
    d.wv = matrix(l.wv);
    auto end_of = [&](const DeviceMatrix& m) {
      return static_cast<const char*>(m.data) + size_t{m.rows} * m.cols * elem_bytes(mode);
    };
    if (d.wq.rows > 0 && d.wk.rows > 0 && d.wv.rows > 0 && d.wk.cols == d.wq.cols &&
        d.wv.cols == d.wq.cols && end_of(d.wq) == d.wk.data && end_of(d.wk) == d.wv.data)
      d.wqkv = DeviceMatrix{d.wq.data, mode, d.wq.rows + d.wk.rows + d.wv.rows, d.wq.cols};
    d.wo = matrix(l.wo);
    d.w_gate_up = stacked({l.w_gate}, {l.w_up});
    d.w_down = matrix(l.w_down);
    d.ssm_qkv = matrix(l.ssm_qkv);
    d.ssm_gate = matrix(l.ssm_gate);
    d.ssm_beta = matrix(l.ssm_beta);
    d.ssm_alpha = matrix(l.ssm_alpha);
    d.ssm_out = matrix(l.ssm_out);
    d.ssm_conv_t = vector(l.ssm_conv_t);
    d.ssm_dt_bias = vector(l.ssm_dt_bias);
    d.ssm_a = vector(l.ssm_a);
    d.ssm_norm = vector(l.ssm_norm);
    d.router = matrix(l.router);
    d.exp_gate_up = stacked(l.exp_gate, l.exp_up);
    d.exp_down = stacked(l.exp_down, {});
    d.sh_gate_up = stacked({l.sh_gate}, {l.sh_up});
    d.sh_down = matrix(l.sh_down);
    WeightMatrix gate_inp;  // the shared expert's gate vector as a one-row matrix
    gate_inp.rows = l.sh_gate_inp.empty() ? 0 : 1;
    gate_inp.cols = l.sh_gate_inp.size();
    gate_inp.data = l.sh_gate_inp.data();
    d.sh_gate_inp = matrix(gate_inp);
    d.router_scale = vector(l.router_scale);
    d.expert_scale = vector(l.expert_scale);
    d.pre_ffn_norm2 = vector(l.pre_ffn_norm2);
    d.post_ffn_norm1 = vector(l.post_ffn_norm1);
    d.post_ffn_norm2 = vector(l.post_ffn_norm2);
    d.ple_post_norm = vector(l.ple_post_norm);
    d.ple_gate = matrix(l.ple_gate);
    d.ple_proj = matrix(l.ple_proj);
    d.layer_scale = l.layer_scale;
    layers.push_back(d);
  }
  up.finish();
  PITH_CHECK(at == total);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("cuda: weights on the device: {} MiB {} in {:.1f} s", total >> 20,
               mode == DType::F32 ? "f32" : "bf16", s);
}

}  // namespace pith::cuda
