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

#include <cstddef>
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

// A shared-memory variable's declaration reached by a thread (PITH_SHARED, kernels/block.h):
// the first thread of each block to reach it fills the variable with 0xff bytes (NaN in F32
// and BF16, ~0 in integers), as a GPU gives a block shared memory whose contents are undefined,
// so a read of what the block has not written shows in the results instead of finding the
// previous block's value or a static's zero. `poisoned_in`: the variable's own record of the
// block that last did.
void poison_shared(void* variable, size_t bytes, uint64_t& poisoned_in);

// A vector load or store of `bytes` (PITH_VECTOR_ACCESS, kernels/block.h) at `p`: one not
// aligned to its size faults on a GPU, so here it stops the process, naming the thread.
[[noreturn]] void misaligned_vector(const void* p, size_t bytes);
inline void check_vector_aligned(const void* p, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) misaligned_vector(p, bytes);
}

// Every lane of the calling thread's warp offers `mine` (a full `mask` only: partial warps are
// not simulated); returns once all 32 have, the warp's 32 values, valid until the caller's next
// exchange.
const uint64_t* exchange_in_warp(uint32_t mask, uint64_t mine);

}  // namespace pith::cuda::sim
