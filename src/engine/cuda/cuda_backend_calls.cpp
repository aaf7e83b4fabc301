// The CUDA backend's Backend calls besides forward: token embeddings into Embed slots, KV page
// copies and images, recurrent states, LoRA adapters, next_dist, the bandwidth probe; and the
// factory functions of cuda_backend.h. See cuda_backend_impl.h.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

#include "engine/cuda/cuda_backend_impl.h"

namespace pith {
namespace cuda {

void CudaBackend::embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> positions,
                               std::span<const uint32_t> slots) {
  const ModelConfig& c = config();
  validate_embed_tokens(tokens, positions, slots, c, *embeds_);
  if (tokens.empty()) return;
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  const auto n = static_cast<uint32_t>(tokens.size());
  ws_.ensure(c, act_, n, 0);
  cudaStream_t s = stream_.get();
  staging_.begin(2 * tokens.size() * 4);
  const int32_t* tok = staging_.put(tokens);
  const uint32_t* slot = staging_.put(slots);
  staging_.upload(s);
  embed_rows(dev_weights_->token_embd.data, act_, tok, n, c.d_model, ws_.tmp.as<float>(), s);
  if (c.embed_scale != 1.0f)
    scale_rows(ws_.tmp.as<float>(), size_t{n} * c.d_model, c.embed_scale, s);
  scatter_rows(ws_.tmp.as<float>(), slot, n, c.d_model, embed_store_.as<float>(), s);
  for (size_t i = 0; i < tokens.size(); ++i) embed_tokens_[slots[i]] = tokens[i];
}

void CudaBackend::copy_kv(uint32_t src_page, uint32_t dst_page, uint32_t src_offset,
                          uint32_t dst_offset, uint32_t n) {
  validate_copy_kv(src_page, dst_page, src_offset, dst_offset, n, layout_.page_size, *pages_);
  if (n == 0) return;
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  kv_copy(src_page, dst_page, src_offset, dst_offset, n, layout_, kv_pool_.get(), stream_.get());
}

void CudaBackend::save_kv_pages(std::span<const uint32_t> pages, std::span<std::byte> out) {
  const size_t bytes = kv_page_bytes();
  validate_kv_images("save_kv_pages", pages, out.size(), bytes, *pages_);
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  const auto* pool = static_cast<const std::byte*>(kv_pool_.get());
  for (size_t i = 0; i < pages.size(); ++i)
    PITH_CUDA_CHECK(cudaMemcpyAsync(out.data() + i * bytes, pool + size_t{pages[i]} * bytes, bytes,
                                    cudaMemcpyDeviceToHost, stream_.get()));
  PITH_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
}

void CudaBackend::load_kv_pages(std::span<const uint32_t> pages, std::span<const std::byte> in) {
  const size_t bytes = kv_page_bytes();
  validate_kv_images("load_kv_pages", pages, in.size(), bytes, *pages_);
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  auto* pool = static_cast<std::byte*>(kv_pool_.get());
  for (size_t i = 0; i < pages.size(); ++i)
    PITH_CUDA_CHECK(cudaMemcpyAsync(pool + size_t{pages[i]} * bytes, in.data() + i * bytes, bytes,
                                    cudaMemcpyHostToDevice, stream_.get()));
  PITH_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));  // `in` is released by the caller
}

void CudaBackend::clear_states(std::span<const uint32_t> slots) {
  validate_state_slots("clear_states", slots, states_->slots());
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  states_->clear(slots, stream_.get());
}

void CudaBackend::copy_state(uint32_t src, uint32_t dst) {
  const uint32_t ids[] = {src, dst};
  validate_state_slots("copy_state", ids, states_->slots());
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  states_->copy(src, dst, stream_.get());
}

void CudaBackend::save_states(std::span<const uint32_t> slots, std::span<std::byte> out) {
  validate_state_slots("save_states", slots, states_->slots());
  if (out.size() != slots.size() * state_bytes())
    fail("save_states: buffer of {} bytes for {} states of {} bytes", out.size(), slots.size(),
         state_bytes());
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  states_->save(slots, out, stream_.get());
}

void CudaBackend::load_states(std::span<const uint32_t> slots, std::span<const std::byte> in) {
  validate_state_slots("load_states", slots, states_->slots());
  if (in.size() != slots.size() * state_bytes())
    fail("load_states: buffer of {} bytes for {} states of {} bytes", in.size(), slots.size(),
         state_bytes());
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  states_->load(slots, in, stream_.get());
}

void CudaBackend::load_adapter(uint32_t id, std::shared_ptr<const LoraAdapter> adapter) {
  PITH_CHECK(id != 0 && adapter != nullptr);
  check_adapter_fits(*adapter, config());
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  size_t free_bytes = 0, total = 0;
  PITH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  // At most twice the file's bytes (F16 or BF16 pairs held as F32), plus headroom.
  const size_t need = 2 * adapter->weight_bytes() + (size_t{64} << 20);
  if (need > free_bytes)
    fail("{}: the adapter needs about {} MiB of device memory, {} MiB are free", adapter->source,
         mib(need), mib(free_bytes));
  auto dev = std::make_shared<const DeviceLoraAdapter>(*adapter, act_);
  std::lock_guard lock(adapters_mu_);
  adapters_[id] = std::move(dev);
}

void CudaBackend::unload_adapter(uint32_t id) {
  std::lock_guard lock(adapters_mu_);
  adapters_.erase(id);
}

TokenDistribution CudaBackend::next_dist(uint32_t embed_slot, uint32_t top_k) {
  const ModelConfig& c = config();
  validate_next_dist(embed_slot, top_k, *embeds_);
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  const uint32_t k = std::min(top_k, c.vocab_size);
  const bool on_device = k <= kTopKMax;
  cudaStream_t s = stream_.get();
  ws_.ensure(c, act_, 1, 1);
  staging_.begin(2 * 4);
  const uint32_t* slot = staging_.put(std::span<const uint32_t>(&embed_slot, 1));
  const uint32_t* ks = staging_.put(std::span<const uint32_t>(&k, 1));
  staging_.upload(s);
  gather_rows(embed_store_.as<float>(), slot, 1, c.d_model, ws_.out_x.as<float>(), s);
  StepInputs in;
  in.n_topk = on_device ? 1 : 0;
  in.n_logits = on_device ? 0 : 1;
  in.ks = ks;
  in.k_max = on_device ? k : 0;
  lm_head(in);
  done_.record(s);
  done_.synchronize();
  if (!on_device) return top_k_distribution(host_logits(0, 0), c.vocab_size, k);
  TokenDistribution dist;
  dist.ids.assign(host_topk_ids(), host_topk_ids() + k);
  dist.probs.assign(host_topk_probs(1, k), host_topk_probs(1, k) + k);
  return dist;
}

double CudaBackend::weight_memory_bandwidth_gb_s(size_t bytes) {
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  const size_t half = std::max<size_t>(bytes / 2, size_t{1} << 20) & ~size_t{255};
  DeviceBuffer src(half), dst(half);
  cudaStream_t s = stream_.get();
  PITH_CUDA_CHECK(cudaMemsetAsync(src.get(), 1, half, s));
  PITH_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), half, cudaMemcpyDeviceToDevice, s));
  Event start(true), end(true);
  std::vector<double> samples;
  for (int r = 0; r < 5; ++r) {
    start.record(s);
    PITH_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), half, cudaMemcpyDeviceToDevice, s));
    end.record(s);
    end.synchronize();
    samples.push_back(2.0 * double(half) / (double(end.elapsed_since(start)) * 1e-3) / 1e9);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double CudaBackend::matmul_peak_gflop_s() {
  PITH_CUDA_CHECK(cudaSetDevice(device_));
  constexpr uint32_t kN = 4096;
  const size_t bytes = size_t{kN} * kN * elem_bytes(act_);
  DeviceBuffer w(bytes), x(bytes), y(bytes);
  cudaStream_t s = stream_.get();
  // Nonzero inputs (0x3c3c: ~0.0115 in BF16 and F32): all-zero operands run cooler and faster.
  PITH_CUDA_CHECK(cudaMemsetAsync(w.get(), 0x3c, bytes, s));
  PITH_CUDA_CHECK(cudaMemsetAsync(x.get(), 0x3c, bytes, s));
  const DeviceMatrix m{w.get(), act_, kN, kN};
  gemm_->run(m, x.get(), kN, y.get(), act_, s);  // the plan, and a warm-up
  Event start(true), end(true);
  std::vector<double> samples;
  for (int r = 0; r < 5; ++r) {
    start.record(s);
    gemm_->run(m, x.get(), kN, y.get(), act_, s);
    end.record(s);
    end.synchronize();
    samples.push_back(2.0 * double(kN) * kN * kN / (double(end.elapsed_since(start)) * 1e-3) / 1e9);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace cuda

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const ModelWeights> weights,
                                           const BackendOptions& options, int device_index) {
  const int n = cuda_device_count();
  if (device_index < 0 || device_index >= n)
    fail("cuda:{}: no such GPU ({} CUDA device{} found)", device_index, n, n == 1 ? "" : "s");
  return std::make_unique<cuda::CudaBackend>(std::move(weights), options, device_index);
}

CudaStepTime cuda_last_step_time(const Backend& backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
  if (cuda == nullptr)
    fail("step timing: backend '{}' is not the CUDA backend", backend.info().name);
  return cuda->last_step_time();
}

CudaGraphStats cuda_graph_stats(const Backend& backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
  if (cuda == nullptr)
    fail("graph statistics: backend '{}' is not the CUDA backend", backend.info().name);
  return cuda->graph_stats();
}

CudaGemmChoices cuda_gemm_choices(const Backend& backend) {
  const auto* cuda = dynamic_cast<const cuda::CudaBackend*>(&backend);
  if (cuda == nullptr)
    fail("GEMM choices: backend '{}' is not the CUDA backend", backend.info().name);
  return cuda->gemm_choices();
}

}  // namespace pith
