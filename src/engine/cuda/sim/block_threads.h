// CUDA host simulation: a block's threads as fibers. Every GPU thread of a simulated block runs
// the kernel on its own stack, one host thread switching between them, so the kernels run the
// GPU's own per-thread code: DeviceBlock's warp shuffles and shared atomics, code outside the
// per-thread phases executed by every thread, registers as locals. A thread runs until it
// reaches __syncthreads (every thread of the block must), a warp-wide exchange (every lane of
// its warp must) or its end; then the next thread runs. Threads take turns in ascending or
// descending order, alternating from block to block, so a thread that reads what another writes
// in the same phase (a missing barrier) sees a different value in one of the two orders. A
// barrier or exchange that not every thread reaches is a kernel bug (a hang or undefined on the
// GPU): the simulation prints which threads wait where and aborts.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

// The built-in index of the running thread within its block.
extern constinit thread_local dim3 threadIdx;

namespace pith::cuda::sim {

inline constexpr uint32_t kWarpLanes = 32;

// Runs `thread_main` once per thread of a block of blockDim threads, each on its own fiber with
// threadIdx set; returns when every thread has returned. `descending`: who runs first.
void run_block_threads(const std::function<void()>& thread_main, bool descending);

// __syncthreads: returns once every thread of the block has called it.
void sync_block();

// Every lane of the calling thread's warp offers `mine` (a full `mask` only: partial warps are
// not simulated); returns once all 32 have, the warp's 32 values, valid until the caller's next
// exchange.
const uint64_t* exchange_in_warp(uint32_t mask, uint64_t mine);

}  // namespace pith::cuda::sim
