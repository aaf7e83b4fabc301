// How the __global__ wrappers are launched and address their threads, written once so the same
// .cu files also build for the host simulation of the CUDA backend (engine/cuda/sim,
// PITH_CUDA_SIM), where a launch is queued on the simulated stream and every GPU thread of a
// block runs the wrapper on its own fiber (sim/block_threads.h).
#pragma once

#include <cstdint>

#if PITH_CUDA_SIM
#include "engine/cuda/sim/device_syntax.h"
#endif

// kern::launch(grid, threads, stream, PITH_KERNEL(kernel))(args...) is
// kernel<<<grid, threads, 0, stream>>>(args...), template arguments deduced from args alike.
// PITH_EACH_THREAD(t) statement: the statement for this thread, t = threadIdx.x.
#if PITH_CUDA_SIM
#define PITH_KERNEL(...) [](auto... a) { __VA_ARGS__(a...); }
#else
#define PITH_KERNEL(...)                                           \
  [](dim3 grid_, dim3 threads_, cudaStream_t stream_, auto... a) { \
    __VA_ARGS__<<<grid_, threads_, 0, stream_>>>(a...);            \
  }
#endif
#define PITH_EACH_THREAD(t) if (const uint32_t t = threadIdx.x; true)

namespace pith::cuda::kern {

template <class Kernel>
auto launch(dim3 grid, dim3 threads, cudaStream_t stream, Kernel kernel) {
#if PITH_CUDA_SIM
  return sim::launch(grid, threads, stream, kernel);
#else
  return [=](auto... args) { kernel(grid, threads, stream, args...); };
#endif
}

// A thread's private state across a block's phases: a local (registers), addressed by the
// thread index as phase code written for a loop over threads expects.
template <class S>
class ThreadStates {
 public:
  __device__ S& operator()(uint32_t) { return state_; }

 private:
  S state_;
};

}  // namespace pith::cuda::kern
