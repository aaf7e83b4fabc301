// Capture and replay of decode-step CUDA graphs. See decode_graphs.h.
#include "engine/cuda/decode_graphs.h"

#include <spdlog/spdlog.h>

#include "engine/cuda/cuda_check.h"

namespace pith::cuda {

namespace {

constexpr size_t kMaxGraphs = 256;  // keys are few in practice; a runaway mix is cleared
// Capture can also fail for a passing reason (another thread freeing device memory mid-capture
// invalidates it); graphs are given up only after this many failures.
constexpr int kMaxFailures = 3;

}  // namespace

DecodeGraphs::~DecodeGraphs() {
  clear();
}

void DecodeGraphs::clear() {
  for (auto& [key, e] : graphs_)
    if (e.exec) cudaGraphExecDestroy(e.exec);
  graphs_.clear();
}

void DecodeGraphs::note_failure(cudaError_t status) {
  broken_ = ++failures_ >= kMaxFailures;
  spdlog::warn("cuda: capturing a decode step's CUDA graph failed ({}){}",
               cudaGetErrorString(status),
               broken_ ? ": decode steps run without graphs from now on" : "; it runs eagerly");
  if (broken_) clear();
}

bool DecodeGraphs::run(uint64_t key, uint64_t fingerprint, cudaStream_t stream,
                       const std::function<void()>& enqueue) {
  if (broken_) return false;
  auto it = graphs_.find(key);
  if (it != graphs_.end() && it->second.fingerprint == fingerprint) {
    PITH_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream));
    ++replays_;
    return true;
  }
  // A key's first step runs eagerly: cuBLASLt picks and loads its kernels, lazily loaded
  // modules load, one-time allocations happen, none of which a capture may do.
  if (it == graphs_.end() && warmed_.insert(key).second) {
    if (warmed_.size() > 16 * kMaxGraphs) warmed_.clear();  // a runaway mix of keys
    return false;
  }
  // Thread-local mode: other threads (adapter uploads) may keep calling the runtime meanwhile.
  cudaError_t status = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (status != cudaSuccess) {
    spdlog::warn("cuda: decode steps run without CUDA graphs: capture did not start ({})",
                 cudaGetErrorString(status));
    cudaGetLastError();
    broken_ = true;
    return false;
  }
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    // An operation that invalidated the capture makes every later call on the stream fail, and
    // a launch check turns that into an exception: the capture failed, not the step, which then
    // runs eagerly. With the capture intact the error is the step's own and propagates.
    status = cudaStreamEndCapture(stream, &graph);  // leaves capture mode whatever happened
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    if (status == cudaSuccess) throw;
    note_failure(status);
    return false;
  }
  status = cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec = nullptr;
  if (status == cudaSuccess) status = cudaGraphInstantiate(&exec, graph, 0);
  if (graph) cudaGraphDestroy(graph);
  if (status != cudaSuccess) {
    cudaGetLastError();
    note_failure(status);
    return false;
  }
  if (it != graphs_.end()) {
    cudaGraphExecDestroy(it->second.exec);
    graphs_.erase(it);
  } else if (graphs_.size() >= kMaxGraphs) {
    clear();
  }
  graphs_.emplace(key, Entry{fingerprint, exec});
  ++captures_;
  PITH_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  return true;
}

}  // namespace pith::cuda
