// The inference backend: the seam between the control layer and whatever runs the model (paper
// §5.3, Table 1 handlers). The controller, the runtime bridge and the server see only this
// interface; the CPU engine (engine/engine.h), the CUDA backend (engine/cuda/) and a weightless
// fake (engine/fake_backend.h, for tests of everything above the seam) implement it.
//
// Contract shared by every implementation:
//  - Handlers are synchronous and called from one thread at a time (the controller's
//    dispatcher); a backend may use its own threads or device streams inside a call.
//  - Ids are physical: KV page ids and Embed slot ids handed out by page_slots() and
//    embed_slots(). The free lists are host-side bookkeeping, identical for every backend; the
//    storage behind an id (host or device memory) is the backend's.
//  - Bad input (a page that is not allocated, lengths that do not add up, a token out of the
//    vocabulary) throws pith::Error with a message naming what was wrong, before any KV state
//    changes. Any other exception (std::bad_alloc, a device fault) is a backend failure.
//  - Semantics are those of engine/forward_batch.h (page tables, explicit positions, run-length
//    masks, output kinds) and must agree across backends up to floating-point tolerance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/forward_batch.h"
#include "backend/kv_dtype.h"
#include "backend/model_config.h"
#include "backend/slot_pool.h"

namespace pith {

struct ModelWeights;
struct LoraAdapter;
struct ForwardProfile;  // backend/forward_profile.h

// CUDA: which kernel runs paged attention (--cuda-attention). Auto: FlashInfer's templates
// where the build has them and the pool's layout fits them (BF16, one head shape FlashInfer is
// instantiated for), the own kernel elsewhere and for layers with a soft-cap or a window; Pith:
// the own kernel for every layer (the A/B baseline, and a way around a FlashInfer problem);
// FlashInfer: as Auto, but a clear startup error where FlashInfer cannot run the model.
enum class CudaAttention : uint8_t { Auto, FlashInfer, Pith };
// "auto", "flashinfer", "pith".
std::string_view cuda_attention_name(CudaAttention a);
// The inverse of cuda_attention_name; throws pith::Error naming the accepted values.
CudaAttention parse_cuda_attention(std::string_view name);

// Options every backend understands; fields a backend has no use for are ignored.
struct BackendOptions {
  std::string device = "auto";  // cpu | cuda | cuda:N | auto (cuda when present) | fake (tests)
  uint32_t kv_page_size = 16;   // tokens per KV page (--kv-page-size)
  size_t kv_memory_bytes = size_t{256} << 20;  // KV pool budget (--kv-memory)
  KvDType kv_dtype = KvDType::Auto;            // KV element type (--kv-dtype, kv_dtype.h)
  // Recurrent state pool of hybrid models (--state-memory); 0: as much as the KV pool's budget.
  size_t state_memory_bytes = 0;
  uint32_t max_embeds = 4096;        // Embed slots
  size_t n_threads = 0;              // CPU: worker threads, 0 = one per core
  double gpu_memory_fraction = 0.9;  // CUDA: cap on weights + KV + scratch
  // CPU: Q8_0 / Q4_K / BF16 matrices repacked once into the AVX-512 panel layout
  // (pack_weight_panels) where the CPU has the dot instructions; off keeps only the mapped rows
  // (half the memory).
  bool cpu_weight_panels = true;
  // CUDA: pure decode steps replayed as CUDA graphs (engine/cuda/decode_graphs.h), one per
  // batch bucket; off launches every kernel of every step.
  bool cuda_graphs = true;
  // CUDA: products of at most 8 rows (decode) may run the own GEMV, and gate/up projections
  // with their activation fused, where each measured faster (engine/cuda/gemm.h); off keeps
  // every product on cuBLASLt (the A/B baseline).
  bool cuda_gemv = true;
  // CUDA, tests: the own GEMV and the fused gate wherever they fit, untimed (so tiny models,
  // whose matrices are never timed, run them too).
  bool cuda_gemv_always = false;
  CudaAttention cuda_attention = CudaAttention::Auto;
};

// What a backend reports about itself (startup log, /metrics, `pith bench` JSON).
struct BackendInfo {
  std::string name;    // "cpu", "cuda", "fake"
  std::string device;  // "AMD EPYC 7B13 (2 threads, AVX2)", "NVIDIA H100 80GB HBM3 (cuda:0)"
  size_t device_memory_bytes = 0;    // total memory of the device (0: host / unknown)
  size_t weight_bytes = 0;           // model weights as held by the backend
  size_t kv_bytes = 0;               // the KV page pool
  KvDType kv_dtype = KvDType::Auto;  // its element type (Auto: the backend does not say)
  size_t state_bytes = 0;            // the recurrent state pool (hybrid models)
  size_t workspace_bytes = 0;        // activations, scratch, Embed slots
  std::string attention;             // CUDA: the kernel of paged attention ("flashinfer", "pith")
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const ModelConfig& config() const = 0;
  virtual BackendInfo info() const = 0;
  virtual uint32_t page_size() const = 0;

  // Free lists of the KV pages and Embed slots (capacity() is the pool size).
  virtual SlotPool& page_slots() = 0;
  virtual SlotPool& embed_slots() = 0;

  // One batched forward over all sequences (engine/forward_batch.h). Results in batch order.
  virtual std::vector<SequenceResult> forward(const std::vector<SequenceInput>& batch) = 0;

  // Token embeddings (embedding-table rows) into Embed slots, with their positions.
  virtual void embed_tokens(std::span<const int32_t> tokens, std::span<const uint32_t> positions,
                            std::span<const uint32_t> slots) = 0;

  // Copies n tokens' K/V (all layers) from src page/offset to dst page/offset; overlapping
  // ranges of one page behave like memmove.
  virtual void copy_kv(uint32_t src_page, uint32_t dst_page, uint32_t src_offset,
                       uint32_t dst_offset, uint32_t n) = 0;

  // Next-token distribution from an output Embed (output norm + LM head), top_k entries.
  virtual TokenDistribution next_dist(uint32_t embed_slot, uint32_t top_k) = 0;

  // Swap (control/kv_suspension.cpp): when KV pages run short the controller suspends an
  // instance by saving its private pages to host memory and later loads them back into any free
  // pages. A page image is the page's K/V for every layer in the backend's own layout,
  // kv_page_bytes() bytes, opaque above the seam. save writes pages.size() images to `out` in
  // order; load reads them into `pages` (allocated ids). Throws pith::Error on an id that is not
  // allocated or a buffer of the wrong size.
  virtual size_t kv_page_bytes() const = 0;
  virtual void save_kv_pages(std::span<const uint32_t> pages, std::span<std::byte> out) = 0;
  virtual void load_kv_pages(std::span<const uint32_t> pages, std::span<const std::byte> in) = 0;

  // Recurrent state of hybrid models (SequenceInput::state_slot; engine/state_pool.h): slots of
  // state_bytes() each, none (capacity 0) for a model without recurrent layers. clear_states
  // empties slots for new sequences; copy_state forks one (dst continues exactly as src would);
  // save/load move state images like KV page images. The defaults serve backends without
  // recurrent layers: no slots, and every handler throws pith::Error.
  virtual SlotPool& state_slots();
  virtual size_t state_bytes() const { return 0; }
  virtual void clear_states(std::span<const uint32_t> slots);
  virtual void copy_state(uint32_t src, uint32_t dst);
  virtual void save_states(std::span<const uint32_t> slots, std::span<std::byte> out);
  virtual void load_states(std::span<const uint32_t> slots, std::span<const std::byte> in);

  // LoRA adapters (engine/lora_adapter.h). load_adapter makes `adapter` usable as
  // SequenceInput::adapter == id (id > 0, chosen by the caller and never reused); unload_adapter
  // forgets it (a forward already running finishes with it). Unlike the handlers these may be
  // called from any thread, concurrently with a forward. A backend without LoRA kernels throws
  // pith::Error saying so (the default); a forward naming an id not loaded is a bad batch.
  virtual void load_adapter(uint32_t id, std::shared_ptr<const LoraAdapter> adapter);
  virtual void unload_adapter(uint32_t id);

  // Measurement hooks of `pith bench`, called while no handler runs (between forwards, or on an
  // idle stack).
  // set_profile: every later forward adds its time per operation to *profile (nullptr: off);
  // false when the backend cannot break its forwards down (the default). A backend may run its
  // forwards differently while profiled (the CUDA backend launches every kernel, no graphs).
  virtual bool set_profile(ForwardProfile* profile);
  // The read bandwidth of the memory the weights live in (GB/s), measured now by streaming about
  // `bytes` through it; 0 when the backend leaves that to the caller (the host's memory, which
  // `pith bench` probes with its own threads).
  virtual double weight_memory_bandwidth_gb_s(size_t bytes);
  // The multiply-add rate of the backend's own matrix products in its compute type (GFLOP/s, 2
  // per multiply-add), measured now on a large square product; 0 when the backend leaves that to
  // the caller (the CPU, whose kernels `pith bench` probes per weight format).
  virtual double matmul_peak_gflop_s();

 private:
  SlotPool no_states_{0, "recurrent states"};
};

// Whether `device` names a CUDA device ("cuda", "cuda:N", or "auto" on a machine with a GPU).
bool device_is_cuda(const std::string& device);

// Builds the backend `options.device` names. Throws pith::Error on an unknown device, a CUDA
// device in a build without CUDA or on a machine without that GPU, or a KV pool that does not fit.
std::unique_ptr<Backend> make_backend(std::shared_ptr<const ModelWeights> weights,
                                      const BackendOptions& options);

}  // namespace pith
