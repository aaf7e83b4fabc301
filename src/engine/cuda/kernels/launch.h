// How the __global__ wrappers are launched and address their threads, written once so the same
// .cu files also build for the host simulation of the CUDA backend (engine/cuda/sim,
// PITH_CUDA_SIM). On the GPU a wrapper runs once per thread; in the simulation a launch is
// queued on the simulated stream and the wrapper runs once per block, its per-thread code
// looping over the block's threads (the bodies' HostBlock contract, kernels/block.h).
#pragma once

#include <cstdint>

#if PITH_CUDA_SIM
#include <vector>

#include "engine/cuda/sim/launch.h"
#endif

// kern::launch(grid, threads, stream, PITH_KERNEL(kernel))(args...) is
// kernel<<<grid, threads, 0, stream>>>(args...), template arguments deduced from args alike.
// PITH_EACH_THREAD(t) statement: the statement for this thread (GPU) or every thread (host).
#if PITH_CUDA_SIM
#define PITH_KERNEL(...) [](auto... a) { __VA_ARGS__(a...); }
#define PITH_EACH_THREAD(t) for (uint32_t t = 0; t < blockDim.x; ++t)
#else
#define PITH_KERNEL(...)                                           \
  [](dim3 grid_, dim3 threads_, cudaStream_t stream_, auto... a) { \
    __VA_ARGS__<<<grid_, threads_, 0, stream_>>>(a...);            \
  }
#define PITH_EACH_THREAD(t) if (const uint32_t t = threadIdx.x; true)
#endif

namespace pith::cuda::kern {

template <class Kernel>
auto launch(dim3 grid, dim3 threads, cudaStream_t stream, Kernel kernel) {
#if PITH_CUDA_SIM
  return sim::launch(grid, threads, stream, kernel);
#else
  return [=](auto... args) { kernel(grid, threads, stream, args...); };
#endif
}

// A thread's private state across a block's phases: a local (registers) on the GPU, one per
// thread in the simulation, where a block's threads take turns within each phase.
template <class S>
class ThreadStates {
 public:
#if PITH_CUDA_SIM
  ThreadStates() : states_(blockDim.x) {}
  S& operator()(uint32_t t) {
    return states_[t];
  }

 private:
  std::vector<S> states_;
#else
  __device__ S& operator()(uint32_t) {
    return state_;
  }

 private:
  S state_;
#endif
};

}  // namespace pith::cuda::kern
