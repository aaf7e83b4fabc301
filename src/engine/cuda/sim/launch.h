// CUDA host simulation: kernel launches. kern::launch (kernels/launch.h) calls launch(), which
// checks the launch configuration as the runtime does (an invalid one sets the sticky error
// cudaGetLastError reports), checks that every pointer argument is null or device memory, copies
// the arguments and queues the grid on the stream. When the queue runs, the kernel function runs
// once per thread of every block, blockIdx/blockDim/gridDim/threadIdx set (block_threads.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>

#include "engine/cuda/sim/block_threads.h"  // threadIdx

// The built-in index variables, per host thread (the queue runs on the thread that waits;
// threadIdx: block_threads.h).
extern constinit thread_local dim3 blockIdx;
extern constinit thread_local dim3 blockDim;
extern constinit thread_local dim3 gridDim;

namespace pith::cuda::sim {

// Queues `work` on `stream` (or on the graph it is capturing).
void enqueue(cudaStream_t stream, std::function<void()> work);
// Records `error` as the sticky launch error unless one is pending.
void set_launch_error(cudaError_t error);
// Whether [p, p + bytes) lies in one live device allocation.
bool is_device(const void* p, size_t bytes = 0);
// Runs `thread_main` for every thread of every block of `grid` with the index variables set.
void run_grid(dim3 grid, dim3 threads, const std::function<void()>& thread_main);

// Graph captures since the process started, for tests that check the backend's use of the
// runtime (no capture broken by a synchronising call).
struct Stats {
  uint64_t captures = 0;              // captures ended with a graph
  uint64_t invalidated_captures = 0;  // captures a prohibited call broke
};
Stats stats();

template <class A>
bool argument_ok(const A& a) {
  if constexpr (std::is_pointer_v<A>)
    return a == nullptr || is_device(a);
  else
    return true;
}

// `kernel` calls the __global__ function with the launch's arguments (template arguments
// deduced from them, as in a <<<>>> launch).
template <class Kernel>
auto launch(dim3 grid, dim3 threads, cudaStream_t stream, Kernel kernel) {
  return [=](const auto&... args) {
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 ||
        grid.x > 0x7fffffffu || threads.x == 0 || threads.x * threads.y * threads.z > 1024) {
      set_launch_error(cudaErrorInvalidConfiguration);
      return;
    }
    if (!(argument_ok(args) && ...)) {
      set_launch_error(cudaErrorIllegalAddress);
      return;
    }
    std::tuple<std::decay_t<decltype(args)>...> copied(args...);
    enqueue(stream, [=] { run_grid(grid, threads, [&] { std::apply(kernel, copied); }); });
  };
}

}  // namespace pith::cuda::sim
