#include "engine/cuda/lora.h"

#include <cstring>

#include "common/error.h"
#include "common/fp16.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"
#include "engine/kernels/matmul.h"

namespace pith::cuda {

namespace {

size_t aligned(size_t n) {
  return (n + 255) / 256 * 256;
}

size_t matrix_bytes(const WeightMatrix& m, DType mode) {
  return aligned(m.rows * m.cols * elem_bytes(mode));
}

}  // namespace

DeviceLoraAdapter::DeviceLoraAdapter(const LoraAdapter& adapter, DType mode) {
  size_t total = 0;
  for (const auto& layer : adapter.layers)
    for (const auto& p : layer)
      if (p) total += matrix_bytes(p->a, mode) + matrix_bytes(p->b, mode);
  memory_.reserve(total);
  layers_.resize(adapter.layers.size());
  std::vector<float> row;
  std::vector<uint8_t> host;
  size_t at = 0;
  auto upload = [&](const WeightMatrix& m) {
    const size_t eb = elem_bytes(mode);
    host.resize(m.rows * m.cols * eb);
    row.resize(m.cols);
    for (size_t r = 0; r < m.rows; ++r) {
      dequantize_row(m.dtype, m.row(r), row.data(), m.cols);
      uint8_t* dst = host.data() + r * m.cols * eb;
      if (mode == DType::F32) {
        std::memcpy(dst, row.data(), m.cols * 4);
      } else {
        for (size_t c = 0; c < m.cols; ++c) {
          const uint16_t b = f32_to_bf16(row[c]);
          std::memcpy(dst + 2 * c, &b, 2);
        }
      }
    }
    void* dev = memory_.as<char>() + at;
    PITH_CUDA_CHECK(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice));
    at += matrix_bytes(m, mode);
    return DeviceMatrix{dev, mode, static_cast<uint32_t>(m.rows), static_cast<uint32_t>(m.cols)};
  };
  for (size_t l = 0; l < adapter.layers.size(); ++l)
    for (size_t t = 0; t < kLoraTargets; ++t)
      if (const auto& p = adapter.layers[l][t]) {
        layers_[l][t] = DeviceLoraPair{upload(p->a), upload(p->b), p->scale};
        max_rank_ = std::max(max_rank_, p->rank());
      }
}

size_t LoraStep::plan(
    const std::vector<SequenceInput>& batch,
    const std::map<uint32_t, std::shared_ptr<const DeviceLoraAdapter>>& adapters) {
  groups_.clear();
  uint32_t row = 0;
  for (const SequenceInput& seq : batch) {
    const auto n = static_cast<uint32_t>(seq.n_inputs());
    if (seq.adapter != 0) {
      const DeviceLoraAdapter* a = adapters.at(seq.adapter).get();
      auto g = std::find_if(groups_.begin(), groups_.end(),
                            [&](const Group& x) { return x.adapter == a; });
      if (g == groups_.end()) g = groups_.insert(groups_.end(), Group{a, {}, nullptr});
      for (uint32_t i = 0; i < n; ++i) g->rows.push_back(row + i);
    }
    row += n;
  }
  size_t bytes = 0;
  for (const Group& g : groups_) bytes += g.rows.size() * 4 + 16;
  return bytes;
}

void LoraStep::stage(Staging& staging, uint32_t max_in, uint32_t max_out, DType act) {
  size_t n_max = 0;
  uint32_t r_max = 0;
  for (Group& g : groups_) {
    g.rows_dev = staging.put<uint32_t>(g.rows);
    n_max = std::max(n_max, g.rows.size());
    r_max = std::max(r_max, g.adapter->max_rank());
  }
  const size_t eb = elem_bytes(act);
  xg_.reserve(n_max * max_in * eb);
  u_.reserve(n_max * r_max * eb);
  v_.reserve(n_max * max_out * 4);
}

void LoraStep::apply(Gemm& gemm, uint32_t layer, LoraTarget target, const void* x, uint32_t in,
                     void* y, DType y_type, uint32_t out, uint32_t ldy, uint32_t col0, DType act,
                     cudaStream_t stream) {
  for (const Group& g : groups_) {
    const DeviceLoraPair* p = g.adapter->pair(layer, target);
    if (p == nullptr) continue;
    const auto n = static_cast<uint32_t>(g.rows.size());
    lora_gather_rows(x, act, g.rows_dev, n, in, xg_.get(), stream);
    gemm.run(p->a, xg_.get(), n, u_.get(), act, stream);
    gemm.run(p->b, u_.get(), n, v_.get(), DType::F32, stream);
    lora_add_rows(v_.as<float>(), g.rows_dev, n, out, p->scale, y, y_type, ldy, col0, stream);
  }
}

}  // namespace pith::cuda
