// Device and pinned buffers, streams and events. See device_memory.h.
#include "engine/cuda/device_memory.h"

#include "engine/cuda/cuda_check.h"

namespace pith::cuda {

void DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  release();
  PITH_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  bytes_ = bytes;
}

void DeviceBuffer::release() noexcept {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

void PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  release();
  PITH_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
  bytes_ = bytes;
}

void PinnedBuffer::release() noexcept {
  if (ptr_ != nullptr) cudaFreeHost(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

Stream::Stream() {
  PITH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}
Stream::~Stream() {
  cudaStreamDestroy(stream_);
}

Event::Event(bool timing) {
  PITH_CUDA_CHECK(
      cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
Event::~Event() {
  cudaEventDestroy(event_);
}
void Event::record(cudaStream_t stream) {
  PITH_CUDA_CHECK(cudaEventRecord(event_, stream));
}
void Event::synchronize() const {
  PITH_CUDA_CHECK(cudaEventSynchronize(event_));
}
float Event::elapsed_since(const Event& start) const {
  float ms = 0;
  PITH_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace pith::cuda
