// LoRA adapters on the CUDA backend (engine/lora_adapter.h for the semantics): each adapter's A
// and B matrices uploaded once in the compute type, and the per-forward work that adds
// scale * B (A x) to an adapted projection's output rows for each adapter's tokens: a gather of
// those tokens' input rows, two cuBLASLt GEMMs (the same Gemm as the weights) and a scaled add
// back into the output rows (kernels/lora_body.h). The base weights are never merged.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "backend/forward_batch.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/staging.h"
#include "engine/lora_adapter.h"

namespace pith::cuda {

struct DeviceLoraPair {
  DeviceMatrix a;  // [rank][in]
  DeviceMatrix b;  // [out][rank]
  float scale = 1;
};

class DeviceLoraAdapter {
 public:
  // Converts every pair to `mode` (F32 or BF16) and uploads it (synchronously: a load happens
  // beside the forwards, not on their stream). Throws pith::Error on device memory exhaustion.
  DeviceLoraAdapter(const LoraAdapter& adapter, DType mode);
  const DeviceLoraPair* pair(uint32_t layer, LoraTarget t) const {
    const auto& p = layers_[layer][static_cast<size_t>(t)];
    return p ? &*p : nullptr;
  }
  uint32_t max_rank() const { return max_rank_; }
  size_t bytes() const { return memory_.bytes(); }

 private:
  std::vector<std::array<std::optional<DeviceLoraPair>, kLoraTargets>> layers_;
  DeviceBuffer memory_;
  uint32_t max_rank_ = 0;
};

// The LoRA part of one forward.
class LoraStep {
 public:
  // Groups the flattened tokens of `batch` by adapter; `adapters` holds every id the batch
  // names (checked by the caller). Returns the bytes the token indices need in the staging
  // buffer.
  size_t plan(const std::vector<SequenceInput>& batch,
              const std::map<uint32_t, std::shared_ptr<const DeviceLoraAdapter>>& adapters);
  bool empty() const { return groups_.empty(); }
  // Puts the token indices into `staging` (between begin and upload), and sizes the scratch
  // for inputs up to `max_in` wide and outputs up to `max_out` wide.
  void stage(Staging& staging, uint32_t max_in, uint32_t max_out, DType act);
  // y[token][col0 : col0 + out] += scale * B (A x[token]) for every token whose adapter adapts
  // `target` on `layer`. x: [T][in] of `act`; y: rows of ldy elements of y_type.
  void apply(Gemm& gemm, uint32_t layer, LoraTarget target, const void* x, uint32_t in, void* y,
             DType y_type, uint32_t out, uint32_t ldy, uint32_t col0, DType act,
             cudaStream_t stream);
  size_t scratch_bytes() const { return xg_.bytes() + u_.bytes() + v_.bytes(); }

 private:
  struct Group {
    const DeviceLoraAdapter* adapter;
    std::vector<uint32_t> rows;          // flattened token rows
    const uint32_t* rows_dev = nullptr;  // in the staging buffer
  };
  std::vector<Group> groups_;
  DeviceBuffer xg_, u_, v_;  // gathered inputs, A x, B (A x) (F32)
};

}  // namespace pith::cuda
