// Per-call host inputs (token ids, row maps, KV destinations, RoPE cos/sin) packed into one
// pinned buffer and uploaded with a single asynchronous copy into a device mirror. Before the
// pinned side is rewritten, the previous upload from it must have finished: begin() waits on
// the event recorded after that copy (it has almost always passed by then).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <span>

#include "common/error.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_memory.h"

namespace pith::cuda {

class Staging {
 public:
  // Starts packing up to `bytes` bytes (grows both sides when needed).
  void begin(size_t bytes) {
    consumed_.synchronize();
    const size_t cap = bytes + kArrays * kAlign;
    if (host_.bytes() < cap) {
      // The previous call's kernels may still read the device side: done before it is freed
      // (cudaFree's implicit wait is not a documented guarantee).
      if (stream_) PITH_CUDA_CHECK(cudaStreamSynchronize(stream_));
      host_.reserve(cap);
      device_.reserve(cap);
    }
    used_ = 0;
  }

  // Copies `values` into the pinned buffer; returns where they will be on the device.
  template <typename T>
  const T* put(std::span<const T> values) {
    T* host = alloc<T>(values.size());
    if (!values.empty()) std::memcpy(host, values.data(), values.size_bytes());
    return device_ptr(host);
  }

  // Reserves n elements to fill in place on the host (host pointer, device pointer).
  template <typename T>
  T* alloc(size_t n) {
    used_ = (used_ + kAlign - 1) / kAlign * kAlign;
    T* p = reinterpret_cast<T*>(host_.as<char>() + used_);
    used_ += n * sizeof(T);
    PITH_CHECK(used_ <= host_.bytes());
    return p;
  }
  template <typename T>
  const T* device_ptr(const T* host) const {
    return reinterpret_cast<const T*>(device_.as<char>() +
                                      (reinterpret_cast<const char*>(host) - host_.as<char>()));
  }

  void upload(cudaStream_t stream) {
    if (used_ > 0)
      PITH_CUDA_CHECK(
          cudaMemcpyAsync(device_.get(), host_.get(), used_, cudaMemcpyHostToDevice, stream));
    consumed_.record(stream);
    stream_ = stream;
  }

  size_t device_bytes() const { return device_.bytes(); }

 private:
  static constexpr size_t kAlign = 16;
  static constexpr size_t kArrays = 32;  // alignment padding between arrays (a forward has 22)
  PinnedBuffer host_;
  DeviceBuffer device_;
  Event consumed_;
  cudaStream_t stream_ = nullptr;  // of the last upload (its kernels read the device side)
  size_t used_ = 0;
};

}  // namespace pith::cuda
