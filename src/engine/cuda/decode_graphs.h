// CUDA graphs of decode steps: a batch-1 step of a 1B model is ~250 small launches, and
// launching them one by one costs about as much host time as the GPU spends running them.
// A graph replays the whole step with one launch.
//
// One executable graph per key (the backend's: batch bucket, k of the top-K, context class;
// graph_plan.h says which steps qualify), captured the second time a step of that key runs (the
// first runs eagerly as a warm-up) and replayed while the step's launch fingerprint (every device
// address and by-value argument its launches take) equals the captured one. A step with another
// fingerprint (a buffer that grew and moved) recaptures. A capture that fails is logged and that
// step launched eagerly, as without graphs; after a few failures (an operation a graph cannot hold)
// graphs are off.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace pith::cuda {

class DecodeGraphs {
 public:
  DecodeGraphs() = default;
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Runs enqueue()'s launches on `stream` through the graph of `key`: replays it if it was
  // captured with `fingerprint`, else (after one eager warm-up step per key, for which it
  // returns false) captures enqueue() (replacing the key's old graph) and launches the capture.
  // enqueue() must only enqueue device work on `stream` (no host-side effects: a replay does not
  // run it). Returns false, having enqueued nothing, when graphs are off or capture failed; the
  // caller then runs enqueue() itself. An exception from enqueue() ends the capture; it
  // propagates unless the capture had been invalidated (then the step is a failed capture).
  bool run(uint64_t key, uint64_t fingerprint, cudaStream_t stream,
           const std::function<void()>& enqueue);

  uint64_t captures() const { return captures_; }
  uint64_t replays() const { return replays_; }
  bool usable() const { return !broken_; }

 private:
  struct Entry {
    uint64_t fingerprint = 0;
    cudaGraphExec_t exec = nullptr;
  };
  void clear();
  void note_failure(cudaError_t status);

  std::unordered_map<uint64_t, Entry> graphs_;
  std::unordered_set<uint64_t> warmed_;  // keys whose first step ran eagerly
  uint64_t captures_ = 0, replays_ = 0;
  int failures_ = 0;
  bool broken_ = false;
};

// FNV-1a over 64-bit words: launch fingerprints.
struct Fingerprint {
  uint64_t h = 1469598103934665603ull;
  void mix(uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  }
  void mix(const void* p) { mix(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p))); }
};

}  // namespace pith::cuda
