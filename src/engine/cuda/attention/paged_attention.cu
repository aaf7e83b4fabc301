// PagedAttention: per-forward planning and upload, per-layer dispatch between FlashInfer (BF16,
// head_dim 64/128, when built with PITH_FLASHINFER) and the own kernel. See paged_attention.h.
//
// Staging: the plan's arrays are packed into one pinned host buffer and sent with one
// cudaMemcpyAsync per forward. An event recorded after the upload guards the pinned buffers:
// the next plan() waits on it before rewriting them, so the host may plan batch N+1 while the
// device still runs batch N.
#include "engine/cuda/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/cuda/attention/attention_error.h"
#include "engine/cuda/attention/attention_plan.h"
#include "engine/cuda/attention/own_attention.h"
#if PITH_HAVE_FLASHINFER
#include "engine/cuda/attention/flashinfer_prefill.h"
#endif

namespace pith::cuda {

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw_attention_error(std::string("paged attention: ") + what + ": " +
                          cudaGetErrorString(status));
}

size_t align16(size_t n) {
  return (n + 15) & ~size_t{15};
}

// A pinned host buffer and its device twin, grown on demand (never shrunk).
struct StagedBuffer {
  void* host = nullptr;
  void* device = nullptr;
  size_t capacity = 0;

  // Grows to `bytes`; the caller has made sure the old buffers are no longer in use.
  void reserve(size_t bytes) {
    if (bytes <= capacity) return;
    release();
    bytes = std::max(bytes * 3 / 2, size_t{4096});
    check(cudaMallocHost(&host, bytes), "pinned staging allocation");
    check(cudaMalloc(&device, bytes), "device plan allocation");
    capacity = bytes;
  }
  void release() {
    if (host) cudaFreeHost(host);
    if (device) cudaFree(device);
    host = device = nullptr;
    capacity = 0;
  }
};

}  // namespace

struct PagedAttention::Impl {
  KvPoolLayout layout;
  uint32_t n_heads = 0;
  bool flashinfer = false;  // BF16 layout FlashInfer is built for
  cudaEvent_t staged = nullptr;
  bool staged_pending = false;
  cudaStream_t last_stream = nullptr;

  AttentionPlan plan;
  StagedBuffer arrays;  // the plan's int32 arrays and mask bits
  // Device pointers into `arrays`, valid after plan().
  int32_t *qo_indptr = nullptr, *kv_page_indptr = nullptr, *kv_page_indices = nullptr,
          *kv_last_page_len = nullptr, *kv_len = nullptr, *mask_indptr = nullptr,
          *row_seq = nullptr, *row_q = nullptr, *row_pos = nullptr;
  uint8_t* mask_bits = nullptr;
  bool use_flashinfer_now = false;
  // Split-K of the own kernel: the GPU's SM count, the cap tests set, and scratch for the
  // largest split launch choose_kv_splits allows (fewer than 4 x SMs split blocks of at most
  // the widest layer's heads_per_block x head_dim), allocated once so its address never moves.
  uint32_t n_sms = 1;
  bool for_graph = false;      // this forward is captured or replayed as a CUDA graph
  uint32_t graph_longest = 0;  // for_graph: the context the split count is chosen for
  uint32_t max_splits = attn::kMaxSplits;
  bool rescan_chunk = false;
  float* split_scratch = nullptr;
  size_t split_scratch_floats = 0;

#if PITH_HAVE_FLASHINFER
  fi::PlanInfo fi_plan;
  StagedBuffer fi_ints;       // FlashInfer's work list (pinned + device)
  void* fi_floats = nullptr;  // split-KV partial outputs
  size_t fi_floats_bytes = 0;
#endif

  // Waits until the previous upload has read the pinned buffers.
  void wait_staging() {
    if (staged_pending) check(cudaEventSynchronize(staged), "waiting for the previous upload");
    staged_pending = false;
  }
  // Before growing device buffers: nothing queued may still read them.
  void drain() {
    if (last_stream) check(cudaStreamSynchronize(last_stream), "draining before growth");
  }

  void upload(cudaStream_t stream) {
    struct Section {
      const void* src;
      size_t bytes;
      size_t offset;
    };
    auto ints = [](const std::vector<int32_t>& v) { return v.size() * sizeof(int32_t); };
    // Arrays sized by the sequence and row counts first, the page list last: a CUDA graph of a
    // decode step (same counts, no mask bits) then finds every array where it was captured.
    Section sections[] = {
        {plan.qo_indptr.data(), ints(plan.qo_indptr), 0},
        {plan.kv_page_indptr.data(), ints(plan.kv_page_indptr), 0},
        {plan.kv_last_page_len.data(), ints(plan.kv_last_page_len), 0},
        {plan.kv_len.data(), ints(plan.kv_len), 0},
        {plan.mask_indptr.data(), ints(plan.mask_indptr), 0},
        {plan.row_seq.data(), ints(plan.row_seq), 0},
        {plan.row_q.data(), ints(plan.row_q), 0},
        {plan.row_pos.data(), ints(plan.row_pos), 0},
        {plan.mask_bits.data(), plan.mask_bits.size(), 0},
        {plan.kv_page_indices.data(), ints(plan.kv_page_indices), 0},
    };
    size_t total = 0;
    for (Section& s : sections) {
      s.offset = total;
      total += align16(s.bytes);
    }
    if (total > arrays.capacity) {
      drain();
      arrays.reserve(total);
    }
    auto* host = static_cast<char*>(arrays.host);
    auto* dev = static_cast<char*>(arrays.device);
    for (const Section& s : sections)
      if (s.bytes) std::memcpy(host + s.offset, s.src, s.bytes);
    check(cudaMemcpyAsync(dev, host, total, cudaMemcpyHostToDevice, stream), "plan upload");
    auto at = [&](int i) { return reinterpret_cast<int32_t*>(dev + sections[i].offset); };
    qo_indptr = at(0);
    kv_page_indptr = at(1);
    kv_last_page_len = at(2);
    kv_len = at(3);
    mask_indptr = at(4);
    row_seq = at(5);
    row_q = at(6);
    row_pos = at(7);
    mask_bits = reinterpret_cast<uint8_t*>(dev + sections[8].offset);
    kv_page_indices = at(9);
  }

#if PITH_HAVE_FLASHINFER
  void plan_flashinfer(cudaStream_t stream) {
    const fi::PlanShape shape{plan.qo_indptr.data(),
                              plan.kv_page_indptr.data(),
                              plan.n_seqs(),
                              plan.n_rows(),
                              n_heads,
                              layout.n_kv_heads,
                              layout.head_dim,
                              layout.page_size};
    size_t float_bytes = 0, int_bytes = 0;
    fi::prefill_workspace_bytes(shape, float_bytes, int_bytes);
    if (int_bytes > fi_ints.capacity || float_bytes > fi_floats_bytes) {
      drain();
      fi_ints.reserve(int_bytes);
      if (float_bytes > fi_floats_bytes) {
        if (fi_floats) cudaFree(fi_floats);
        fi_floats = nullptr;
        fi_floats_bytes = 0;
        check(cudaMalloc(&fi_floats, float_bytes * 3 / 2), "FlashInfer workspace allocation");
        fi_floats_bytes = float_bytes * 3 / 2;
      }
    }
    fi::prefill_plan(shape, fi_floats, fi_floats_bytes, fi_ints.device, fi_ints.host,
                     fi_ints.capacity, fi_plan, stream);
  }

  void run_flashinfer(uint32_t layer, const void* q, const void* pool, void* out, float scale,
                      cudaStream_t stream) {
    const auto* base = static_cast<const uint16_t*>(pool);
    fi::PrefillArgs a{};
    a.q = q;
    a.out = out;
    a.k = base + layout.block_offset(0, layer, 0);
    a.v = base + layout.block_offset(0, layer, 1);
    a.page_stride = static_cast<int64_t>(layout.page_elems());
    a.n_heads = n_heads;
    a.n_kv_heads = layout.n_kv_heads;
    a.head_dim = layout.head_dim;
    a.page_size = layout.page_size;
    a.batch = plan.n_seqs();
    a.qo_indptr = qo_indptr;
    a.kv_page_indptr = kv_page_indptr;
    a.kv_page_indices = kv_page_indices;
    a.kv_last_page_len = kv_last_page_len;
    a.mask_bits = mask_bits;
    a.mask_indptr = mask_indptr;
    a.sm_scale = scale;
    a.float_ws = fi_floats;
    a.int_ws = fi_ints.device;
    if (plan.any_custom_mask)
      fi::prefill_run_custom(a, fi_plan, stream);
    else
      fi::prefill_run_causal(a, fi_plan, stream);
  }
#endif

  void run_own(uint32_t layer, const void* q, const void* pool, void* out, float scale,
               const AttentionOptions& options, cudaStream_t stream) {
    attn::KernelParams p{};
    p.q = q;
    p.out = out;
    p.pool = pool;
    p.page_stride = layout.page_elems();
    p.k_offset = layout.block_offset(0, layer, 0);
    p.v_offset = layout.block_offset(0, layer, 1);
    p.n_heads = n_heads;
    p.n_kv_heads = layout.heads_of(layer);
    p.head_dim = layout.head_dim_of(layer);
    p.heads_per_block = attn::heads_per_block(n_heads, p.n_kv_heads);
    p.page_size = layout.page_size;
    p.scale = scale;
    p.softcap = options.softcap;
    p.window = options.window;
    p.row_seq = row_seq;
    p.row_q = row_q;
    p.row_pos = row_pos;
    p.qo_indptr = qo_indptr;
    p.kv_page_indptr = kv_page_indptr;
    p.kv_page_indices = kv_page_indices;
    p.kv_len = kv_len;
    p.mask_indptr = mask_indptr;
    p.mask_bits = mask_bits;
    p.vec8 = attn::rows_vectorizable(pool, p.page_stride, p.k_offset, p.head_dim);
    p.rescan_chunk = rescan_chunk;
    // A window bounds what a row walks, whatever the context. A graph's split count depends on
    // the step's contexts only through their power-of-two class (graph_context_class), part of
    // the launch fingerprint: a graph serves every step of its class, shares past a row's end
    // cost an empty block.
    const uint32_t longest = for_graph ? graph_longest : plan.max_kv_len;
    const uint32_t visible = options.window > 0 ? std::min(longest, options.window) : longest;
    p.n_splits = std::min(
        max_splits,
        attn::choose_kv_splits(plan.n_rows(), n_heads / p.heads_per_block, visible, n_sms));
    if (p.n_splits > 1) {
      const size_t acc = size_t{plan.n_rows()} * n_heads * p.n_splits * p.head_dim;
      if (attn::split_scratch_floats(plan.n_rows(), n_heads, p.head_dim, p.n_splits) >
          split_scratch_floats)  // choose_kv_splits' bound broken: a bug, not an input
        throw_attention_error("paged attention: split-K scratch too small");
      p.split_acc = split_scratch;
      p.split_ml = split_scratch + acc;
    }
    launch_own_attention(p, plan.n_rows(), layout.dtype, stream);
  }

  ~Impl() {
    // Shutdown only: the caller's stream may already be gone, so wait for the whole device.
    if (last_stream) cudaDeviceSynchronize();
    arrays.release();
#if PITH_HAVE_FLASHINFER
    fi_ints.release();
    if (fi_floats) cudaFree(fi_floats);
#endif
    if (split_scratch) cudaFree(split_scratch);
    if (staged) cudaEventDestroy(staged);
  }
};

PagedAttention::PagedAttention(const KvPoolLayout& layout, uint32_t n_heads, uint32_t max_tokens,
                               uint32_t max_seqs, bool allow_flashinfer)
    : impl_(std::make_unique<Impl>()) {
  if (!layout.uniform() && layout.layers.size() != layout.n_layers)
    throw_attention_error("paged attention: " + std::to_string(layout.layers.size()) +
                          " layer shapes for " + std::to_string(layout.n_layers) + " layers");
  for (uint32_t l = 0; l < std::max(layout.n_layers, 1u); ++l) {
    const uint32_t kv_heads = layout.heads_of(l), head_dim = layout.head_dim_of(l);
    if (kv_heads == 0 || n_heads == 0 || n_heads % kv_heads != 0)
      throw_attention_error("paged attention: " + std::to_string(n_heads) +
                            " query heads are not a multiple of " + std::to_string(kv_heads) +
                            " KV heads");
    if (head_dim == 0 || head_dim > attn::kMaxHeadDim)
      throw_attention_error("paged attention: head_dim " + std::to_string(head_dim) +
                            " is not supported (1.." + std::to_string(attn::kMaxHeadDim) + ")");
  }
  if (layout.page_size == 0) throw_attention_error("paged attention: page size 0");
  Impl& m = *impl_;
  m.layout = layout;
  m.n_heads = n_heads;
  m.flashinfer = allow_flashinfer && flashinfer_unsuitable(layout, n_heads).empty();
  check(cudaEventCreateWithFlags(&m.staged, cudaEventDisableTiming), "event creation");
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "device query");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count query");
  m.n_sms = static_cast<uint32_t>(std::max(sms, 1));
  size_t per_block = 0;  // floats of one split block of the widest layer
  for (uint32_t l = 0; l < std::max(layout.n_layers, 1u); ++l)
    per_block = std::max(per_block, size_t{attn::heads_per_block(n_heads, layout.heads_of(l))} *
                                        (layout.head_dim_of(l) + 2));
  m.split_scratch_floats = size_t{4} * m.n_sms * per_block;
  check(cudaMalloc(&m.split_scratch, m.split_scratch_floats * sizeof(float)),
        "split-K scratch allocation");
  // Room for a full batch of single-page sequences; plan() grows beyond that.
  const size_t ints = size_t{max_seqs} * 8 + size_t{max_tokens} * 4 + 64;
  m.arrays.reserve(ints * sizeof(int32_t));
}

PagedAttention::~PagedAttention() = default;

uint64_t PagedAttention::launch_fingerprint() const {
  const Impl& m = *impl_;
  // FNV-1a over what run() passes by value besides the layer's constants.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  };
  const void* arrays[] = {m.qo_indptr, m.kv_page_indptr, m.kv_page_indices, m.kv_last_page_len,
                          m.kv_len,    m.mask_indptr,    m.row_seq,         m.row_q,
                          m.row_pos,   m.mask_bits,      m.split_scratch};
  for (const void* p : arrays) mix(reinterpret_cast<uintptr_t>(p));
  mix(m.plan.n_rows());
  mix(m.max_splits);
  mix(m.rescan_chunk);
  mix(m.for_graph);
  mix(m.for_graph ? m.graph_longest : 0);
  mix(m.use_flashinfer_now);
  return h;
}

void PagedAttention::set_max_kv_splits(uint32_t n) {
  impl_->max_splits = std::clamp(n, 1u, attn::kMaxSplits);
}

void PagedAttention::set_chunk_rescan(bool on) {
  impl_->rescan_chunk = on;
}

std::string PagedAttention::flashinfer_unsuitable(const KvPoolLayout& layout, uint32_t n_heads) {
#if PITH_HAVE_FLASHINFER
  // FlashInfer is planned for one head shape and keeps the page stride in 32 bits.
  if (layout.dtype != DType::BF16)
    return "FlashInfer is instantiated for BF16 and this model runs in F32";
  if (!layout.uniform()) return "the layers' head shapes differ (FlashInfer is planned for one)";
  if (!fi::prefill_supports(layout.head_dim, n_heads, layout.n_kv_heads))
    return "head_dim " + std::to_string(layout.head_dim) +
           " is not one FlashInfer is instantiated for (64, 128)";
  if (layout.page_elems() > UINT32_MAX) return "a KV page holds more than 2^32 elements";
  return {};
#else
  (void)layout;
  (void)n_heads;
  return "this build has no FlashInfer (scripts/setup-flashinfer.sh, then configure with "
         "-DPITH_FLASHINFER=ON)";
#endif
}

const char* PagedAttention::implementation() const {
  return impl_->flashinfer ? "flashinfer" : "pith";
}

void PagedAttention::plan(std::span<const AttentionSequence> seqs, cudaStream_t stream,
                          bool for_graph) {
  Impl& m = *impl_;
  m.for_graph = for_graph;
  m.wait_staging();
  bool any_mask = false;
  for (const AttentionSequence& s : seqs)
    any_mask = any_mask || (s.n_q > 0 && s.mask != nullptr && !s.mask->empty());
  // A FlashInfer custom-mask launch needs bits for the causal sequences beside masked ones.
  build_attention_plan(seqs, m.layout.page_size, m.flashinfer && any_mask, m.plan);
  m.graph_longest = for_graph ? graph_context_class(m.plan.max_kv_len) : 0;
  m.last_stream = stream;
  m.upload(stream);
  // FlashInfer addresses query rows by qo_indptr, so it needs them packed in plan order.
  // FlashInfer's plan (its split schedule, grid) changes with the contexts: graphs take the
  // own kernel, whose launch depends only on the row count.
  m.use_flashinfer_now = !for_graph && m.flashinfer && m.plan.rows_packed && m.plan.n_rows() > 0;
#if PITH_HAVE_FLASHINFER
  if (m.use_flashinfer_now) m.plan_flashinfer(stream);
#endif
  check(cudaEventRecord(m.staged, stream), "event record");
  m.staged_pending = true;
}

void PagedAttention::run(uint32_t layer, const void* q, const void* pool, void* out,
                         cudaStream_t stream, const AttentionOptions& options) {
  Impl& m = *impl_;
  if (layer >= m.layout.n_layers)
    throw_attention_error("paged attention: layer " + std::to_string(layer) + " of " +
                          std::to_string(m.layout.n_layers));
  if (m.plan.n_rows() == 0) return;
  m.last_stream = stream;
  const float scale =
      options.scale > 0 ? options.scale : 1.f / std::sqrt(float(m.layout.head_dim_of(layer)));
#if PITH_HAVE_FLASHINFER
  if (m.use_flashinfer_now && options.softcap == 0 && options.window == 0)
    return m.run_flashinfer(layer, q, pool, out, scale, stream);
#endif
  m.run_own(layer, q, pool, out, scale, options, stream);
}

}  // namespace pith::cuda
