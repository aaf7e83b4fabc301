// CUDA host simulation: the runtime API of include/cuda_runtime_api.h on the CPU.
//
// Work queued on a stream (kernels, async copies and sets, event records) waits in one FIFO
// until the host waits for it: a synchronising call runs the queue up to what it waits for and
// no further. So a host read of a result nobody waited for, or a pinned buffer rewritten while a
// queued copy still has to read it, gives a wrong result here as it may on a GPU. One FIFO for
// all streams orders them more strictly than a GPU does: a missing cross-stream wait goes
// unnoticed. Device memory is host memory the runtime tracks, so copies check their direction
// against it and kernels their pointer arguments; new allocations hold 0xff bytes (NaN in F32
// and BF16), so reading memory nothing wrote shows in the results. Graph capture follows the
// thread-local mode: a synchronising or allocating call from the capturing thread fails and
// breaks the capture, as the runtime does.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/cuda/sim/block_threads.h"
#include "engine/cuda/sim/launch.h"

constinit thread_local dim3 blockIdx;
constinit thread_local dim3 blockDim;
constinit thread_local dim3 gridDim;

using Clock = std::chrono::steady_clock;

struct CUevent_st {
  bool timing = true;
  bool recorded = false;
  bool done = false;
  bool in_capture = false;  // recorded into a graph being captured
  uint64_t seq = 0;         // the queue position of the last record
  Clock::time_point at;
};

namespace {

// A captured operation; an event record node re-arms its event when the graph is launched.
struct Node {
  std::function<void()> run;
  std::shared_ptr<CUevent_st> event;
};

}  // namespace

struct CUstream_st {
  uint64_t last = 0;  // the queue position of the stream's newest work
  bool capturing = false;
  bool invalidated = false;
  std::thread::id capture_thread;
  std::vector<Node> captured;
};
struct CUgraph_st {
  std::vector<Node> nodes;
};
struct CUgraphExec_st {
  std::vector<Node> nodes;
};

namespace pith::cuda::sim {
namespace {

struct State {
  std::recursive_mutex mu;
  std::deque<std::pair<uint64_t, std::function<void()>>> queue;
  uint64_t next_seq = 1;
  std::map<uintptr_t, size_t> device, pinned;  // start -> bytes
  size_t used = 0;
  size_t total = size_t{4} << 30;
  CUstream_st legacy;  // the default stream (nullptr)
  std::unordered_map<CUevent_st*, std::shared_ptr<CUevent_st>> events;
  std::vector<CUstream_st*> capturing;  // streams with a capture open
  Stats stats;

  State() {
    if (const char* env = std::getenv("PITH_CUDA_SIM_MEMORY"))
      total = std::strtoull(env, nullptr, 10);
  }
};

State& state() {
  static State* s = new State;  // never destroyed: backends held by other statics outlive it
  return *s;
}

thread_local cudaError_t last_error = cudaSuccess;
thread_local int captures_here = 0;  // streams this thread is capturing

using Lock = std::lock_guard<std::recursive_mutex>;

CUstream_st* resolve(cudaStream_t s) {
  return s ? s : &state().legacy;
}

void run_until(uint64_t seq) {
  State& st = state();
  while (!st.queue.empty() && st.queue.front().first <= seq) {
    auto work = std::move(st.queue.front().second);
    st.queue.pop_front();
    work();
  }
}

void run_all() {
  run_until(UINT64_MAX);
}

cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

// A call the capture mode forbids while this thread captures: it fails and breaks every
// capture this thread has open.
bool breaks_capture() {
  if (captures_here == 0) return false;
  const auto me = std::this_thread::get_id();
  for (CUstream_st* s : state().capturing)
    if (s->capture_thread == me) s->invalidated = true;
  return true;
}

uint64_t push(cudaStream_t stream, std::function<void()> work) {
  State& st = state();
  CUstream_st* s = resolve(stream);
  if (s->capturing) {
    s->captured.push_back({std::move(work), nullptr});
    return 0;
  }
  const uint64_t seq = st.next_seq++;
  st.queue.emplace_back(seq, std::move(work));
  s->last = seq;
  return seq;
}

// The allocation holding p, if any: (start, bytes).
const std::pair<const uintptr_t, size_t>* find(const std::map<uintptr_t, size_t>& m,
                                               const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) return nullptr;
  --it;
  return a <= it->first + it->second ? &*it : nullptr;
}

bool in_range(const std::map<uintptr_t, size_t>& m, const void* p, size_t bytes) {
  const auto* a = find(m, p);
  return a && reinterpret_cast<uintptr_t>(p) + bytes <= a->first + a->second;
}

bool pinned(const void* p, size_t bytes) {
  return in_range(state().pinned, p, bytes);
}

// Whether a copy's pointers agree with its kind (device sides inside one allocation, host
// sides outside every device allocation).
bool copy_ok(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const auto& dev = state().device;
  const bool dst_dev = find(dev, dst) != nullptr, src_dev = find(dev, src) != nullptr;
  if (kind == cudaMemcpyDefault)
    kind = src_dev ? (dst_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                   : (dst_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  const bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_dev != want_dst || src_dev != want_src) return false;
  if (want_dst && !in_range(dev, dst, bytes)) return false;
  if (want_src && !in_range(dev, src, bytes)) return false;
  return true;
}

cudaError_t allocate(std::map<uintptr_t, size_t>& m, void** ptr, size_t bytes, bool device) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (breaks_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  State& st = state();
  if (bytes == 0) return cudaSuccess;
  if (device && st.used + bytes > st.total) return fail(cudaErrorMemoryAllocation);
  void* p = nullptr;
  // Exactly `bytes`, so AddressSanitizer sees a kernel reading past the end.
  if (posix_memalign(&p, 256, bytes) != 0) return fail(cudaErrorMemoryAllocation);
  if (device) {
    std::memset(p, 0xff, bytes);
    st.used += bytes;
  }
  m[reinterpret_cast<uintptr_t>(p)] = bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t release(std::map<uintptr_t, size_t>& m, void* ptr, bool device) {
  if (!ptr) return cudaSuccess;
  if (breaks_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  State& st = state();
  auto it = m.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == m.end()) return fail(cudaErrorInvalidValue);
  run_all();  // freeing waits for the device, as cudaFree does
  if (device) st.used -= it->second;
  m.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  Lock lock(state().mu);
  push(stream, std::move(work));
}

void set_launch_error(cudaError_t error) {
  if (last_error == cudaSuccess) last_error = error;
}

bool is_device(const void* p, size_t bytes) {
  Lock lock(state().mu);
  return in_range(state().device, p, bytes);
}

// Blocks run one after another, in reverse order every other grid (a block that reads what
// another block of the same grid writes sees it in one order only), and a block's threads take
// turns in ascending and descending order alternately (block_threads.h).
void run_grid(dim3 grid, dim3 threads, const std::function<void()>& thread_main) {
  static thread_local uint64_t grids = 0;
  const bool reversed = grids++ % 2 == 1;
  gridDim = grid;
  blockDim = threads;
  const uint64_t n = uint64_t{grid.x} * grid.y * grid.z;
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t b = reversed ? n - 1 - k : k;
    blockIdx = dim3(static_cast<uint32_t>(b % grid.x), static_cast<uint32_t>(b / grid.x % grid.y),
                    static_cast<uint32_t>(b / (uint64_t{grid.x} * grid.y)));
    run_block_threads(thread_main, (k + reversed) % 2 == 1);
  }
}

Stats stats() {
  Lock lock(state().mu);
  return state().stats;
}

}  // namespace pith::cuda::sim

using namespace pith::cuda::sim;

// ---- device and errors ------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *prop = {};
  std::snprintf(prop->name, sizeof prop->name, "CUDA host simulation");
  prop->totalGlobalMem = state().total;
  prop->multiProcessorCount = 8;  // few SMs: the split-K attention path runs at small batches
  prop->l2CacheSize = 1 << 20;
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp prop;
  if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) return e;
  if (attr == cudaDevAttrMultiProcessorCount)
    *value = prop.multiProcessorCount;
  else if (attr == cudaDevAttrL2CacheSize)
    *value = prop.l2CacheSize;
  else
    return fail(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  Lock lock(state().mu);
  *total_bytes = state().total;
  *free_bytes = state().total - state().used;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  Lock lock(state().mu);
  if (breaks_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  run_all();
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  return std::exchange(last_error, cudaSuccess);
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureWrongThread:
      return "cudaErrorStreamCaptureWrongThread";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
  }
  return "unknown error";
}

// ---- memory -------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  Lock lock(state().mu);
  return allocate(state().device, ptr, bytes, true);
}

cudaError_t cudaFree(void* ptr) {
  Lock lock(state().mu);
  return release(state().device, ptr, true);
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  Lock lock(state().mu);
  return allocate(state().pinned, ptr, bytes, false);
}

cudaError_t cudaFreeHost(void* ptr) {
  Lock lock(state().mu);
  return release(state().pinned, ptr, false);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  Lock lock(state().mu);
  if (breaks_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  if (bytes == 0) return cudaSuccess;
  if (!copy_ok(dst, src, bytes, kind)) return fail(cudaErrorInvalidValue);
  run_all();
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  Lock lock(state().mu);
  if (bytes == 0) return cudaSuccess;
  if (!copy_ok(dst, src, bytes, kind)) return fail(cudaErrorInvalidValue);
  const bool host_src = !is_device(src), host_dst = !is_device(dst);
  const bool pageable = (host_src && !pinned(src, bytes)) || (host_dst && !pinned(dst, bytes));
  CUstream_st* s = resolve(stream);
  if (pageable && s->capturing) {
    breaks_capture();
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  if (host_src && pageable) {
    // The runtime stages pageable memory before returning: the caller may reuse it at once.
    auto copy = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                    static_cast<const char*>(src) + bytes);
    push(stream, [dst, copy] { std::memcpy(dst, copy->data(), copy->size()); });
    return cudaSuccess;
  }
  const uint64_t seq = push(stream, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  if (host_dst && pageable) run_until(seq);  // into pageable memory the call returns when done
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  Lock lock(state().mu);
  if (breaks_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  if (bytes == 0) return cudaSuccess;
  if (!is_device(dst, bytes)) return fail(cudaErrorInvalidValue);
  run_all();
  std::memset(dst, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  Lock lock(state().mu);
  if (bytes == 0) return cudaSuccess;
  if (!is_device(dst, bytes)) return fail(cudaErrorInvalidValue);
  push(stream, [dst, value, bytes] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

// ---- streams and capture ------------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = new CUstream_st;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return fail(cudaErrorInvalidResourceHandle);
  Lock lock(state().mu);
  if (stream->capturing) return fail(cudaErrorStreamCaptureUnsupported);
  delete stream;  // queued work holds no reference to its stream
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Lock lock(state().mu);
  if (breaks_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  run_until(resolve(stream)->last);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  Lock lock(state().mu);
  if (!stream) return fail(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot
  if (stream->capturing) return fail(cudaErrorInvalidValue);
  stream->capturing = true;
  stream->invalidated = false;
  stream->capture_thread = std::this_thread::get_id();
  stream->captured.clear();
  state().capturing.push_back(stream);
  ++captures_here;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  Lock lock(state().mu);
  *graph = nullptr;
  if (!stream || !stream->capturing) return fail(cudaErrorInvalidValue);
  if (stream->capture_thread != std::this_thread::get_id())
    return fail(cudaErrorStreamCaptureWrongThread);
  stream->capturing = false;
  std::erase(state().capturing, stream);
  --captures_here;
  if (stream->invalidated) {
    stream->captured.clear();
    ++state().stats.invalidated_captures;
    return fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = new CUgraph_st{std::move(stream->captured)};
  stream->captured.clear();
  ++state().stats.captures;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  Lock lock(state().mu);
  CUstream_st* s = resolve(stream);
  *status = !s->capturing    ? cudaStreamCaptureStatusNone
            : s->invalidated ? cudaStreamCaptureStatusInvalidated
                             : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

// ---- events -------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  Lock lock(state().mu);
  auto e = std::make_shared<CUevent_st>();
  e->timing = (flags & cudaEventDisableTiming) == 0;
  *event = e.get();
  state().events.emplace(e.get(), std::move(e));
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Lock lock(state().mu);
  // Queued records keep their own reference, as the runtime releases a pending event later.
  return state().events.erase(event) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Lock lock(state().mu);
  auto it = state().events.find(event);
  if (it == state().events.end()) return fail(cudaErrorInvalidResourceHandle);
  std::shared_ptr<CUevent_st> e = it->second;
  auto mark = [e] {
    e->done = true;
    e->at = Clock::now();
  };
  CUstream_st* s = resolve(stream);
  if (s->capturing) {
    s->captured.push_back({mark, e});
    e->in_capture = true;
    return cudaSuccess;
  }
  e->in_capture = false;
  e->recorded = true;
  e->done = false;
  e->seq = push(stream, mark);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Lock lock(state().mu);
  if (!state().events.count(event)) return fail(cudaErrorInvalidResourceHandle);
  // (Waiting for an event recorded into a capture is never allowed.)
  if (breaks_capture() || event->in_capture) return fail(cudaErrorStreamCaptureUnsupported);
  if (event->recorded) run_until(event->seq);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Lock lock(state().mu);
  if (!state().events.count(start) || !state().events.count(end))
    return fail(cudaErrorInvalidResourceHandle);
  if (!start->timing || !end->timing) return fail(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded || !start->done || !end->done)
    return fail(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

// ---- graphs -------------------------------------------------------------------------------

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!graph) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  Lock lock(state().mu);
  if (!exec) return fail(cudaErrorInvalidValue);
  for (const Node& n : exec->nodes) {
    const uint64_t seq = push(stream, n.run);
    if (n.event && seq) {
      n.event->recorded = true;
      n.event->done = false;
      n.event->in_capture = false;
      n.event->seq = seq;
    }
  }
  return cudaSuccess;
}
