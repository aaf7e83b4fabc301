// CUDA host simulation: what nvcc gives a .cu file implicitly, for the host compiler. The
// simulation targets force-include this header into the backend's .cu files (compiled as C++).
// A __global__ function becomes a host function run once per GPU thread, each on its own fiber
// (block_threads.h); shared memory (PITH_SHARED) is static per host thread, which holds because
// one host thread runs a block's threads and blocks run one after another, and is filled with
// 0xff bytes at each block's start. The warp intrinsics the
// kernels use exchange values through the fibers of one warp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/cuda/sim/block_threads.h"
#include "engine/cuda/sim/launch.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Shared memory is declared with PITH_SHARED (kernels/block.h), which the simulation poisons
// per block; a bare __shared__ would escape that.
// clang-format off
#define __shared__ ; static_assert(false, "declare shared memory with PITH_SHARED(Type, name)");
// clang-format on

inline void __syncthreads() {
  pith::cuda::sim::sync_block();
}

namespace pith::cuda::sim {

// Lane `lane`'s value of `v` after an exchange within the calling thread's warp.
template <class T>
T warp_value(const uint64_t* lanes, uint32_t lane) {
  T v;
  std::memcpy(&v, &lanes[lane], sizeof(T));
  return v;
}

template <class T>
const uint64_t* exchange(unsigned mask, T v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return exchange_in_warp(mask, bits);
}

inline uint32_t lane_id() {
  return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % kWarpLanes;
}

}  // namespace pith::cuda::sim

template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  const uint64_t* lanes = pith::cuda::sim::exchange(mask, v);
  return pith::cuda::sim::warp_value<T>(lanes, (pith::cuda::sim::lane_id() ^ lane_mask) % 32);
}

template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta) {
  const uint64_t* lanes = pith::cuda::sim::exchange(mask, v);
  const uint32_t lane = pith::cuda::sim::lane_id();
  return lane >= delta ? pith::cuda::sim::warp_value<T>(lanes, lane - delta) : v;
}

template <class T>
unsigned __match_any_sync(unsigned mask, T v) {  // lanes whose v has the same bits
  const uint64_t* lanes = pith::cuda::sim::exchange(mask, v);
  const uint64_t mine = lanes[pith::cuda::sim::lane_id()];
  unsigned same = 0;
  for (uint32_t l = 0; l < pith::cuda::sim::kWarpLanes; ++l)
    same |= static_cast<unsigned>(lanes[l] == mine) << l;
  return same;
}

inline int __ffs(int x) {
  return __builtin_ffs(x);
}
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}

// One host thread runs a block: a shared-memory atomic is a plain read-modify-write.
inline unsigned atomicAdd(unsigned* address, unsigned v) {
  const unsigned old = *address;
  *address = old + v;
  return old;
}
