// The defaults of Backend's optional capabilities, and the names of CudaAttention (backend.h).
#include "backend/backend.h"

#include "common/error.h"

namespace pith {

std::string_view cuda_attention_name(CudaAttention a) {
  switch (a) {
    case CudaAttention::Auto:
      return "auto";
    case CudaAttention::FlashInfer:
      return "flashinfer";
    case CudaAttention::Pith:
      return "pith";
  }
  return "?";
}

CudaAttention parse_cuda_attention(std::string_view name) {
  for (CudaAttention a : {CudaAttention::Auto, CudaAttention::FlashInfer, CudaAttention::Pith})
    if (name == cuda_attention_name(a)) return a;
  fail("--cuda-attention: '{}' is not one of auto, flashinfer, pith", name);
}

void Backend::load_adapter(uint32_t id, std::shared_ptr<const LoraAdapter> adapter) {
  (void)id;
  (void)adapter;
  fail("LoRA adapters are not implemented by the {} backend", info().name);
}

void Backend::unload_adapter(uint32_t id) {
  (void)id;
}

bool Backend::set_profile(ForwardProfile* profile) {
  (void)profile;
  return false;
}

double Backend::weight_memory_bandwidth_gb_s(size_t bytes) {
  (void)bytes;
  return 0;
}

double Backend::matmul_peak_gflop_s() {
  return 0;
}

SlotPool& Backend::state_slots() {
  return no_states_;
}

void Backend::clear_states(std::span<const uint32_t> slots) {
  if (!slots.empty()) fail("the {} backend has no recurrent state slots", info().name);
}

void Backend::copy_state(uint32_t, uint32_t) {
  fail("the {} backend has no recurrent state slots", info().name);
}

void Backend::save_states(std::span<const uint32_t> slots, std::span<std::byte>) {
  if (!slots.empty()) fail("the {} backend has no recurrent state slots", info().name);
}

void Backend::load_states(std::span<const uint32_t> slots, std::span<const std::byte>) {
  if (!slots.empty()) fail("the {} backend has no recurrent state slots", info().name);
}

}  // namespace pith
