// What every kernel body shares so it compiles both for the GPU and, in the unit tests, for the
// CPU without nvcc: the __host__ __device__ marker, element types (F32 and BF16) with their
// conversions, and the "block" a body runs in.
//
// A body is a function template over a Block: it reads its indices from blk.block_x/block_y,
// runs per-thread code in blk.threads([&](uint32_t t) { ... }) and separates phases with
// blk.sync(). On the GPU (DeviceBlock) threads() runs the lambda once in the calling thread and
// sync() is __syncthreads(); on the CPU (HostBlock) threads() loops over every thread of the
// block one after another and sync() is nothing, which is the same computation as long as
// state that lives across a sync() is kept in the body's shared-memory struct, code outside
// threads() only reads (it runs in every GPU thread) and control flow outside threads() is
// uniform over the block. Reductions and scans are Block members: warp shuffles on the GPU,
// the same butterfly in the same order on the CPU, so both give bit-identical results. The
// backend's host simulation (engine/cuda/sim) runs DeviceBlock, every GPU thread on a fiber.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#define PITH_HD __host__ __device__ __forceinline__
#define PITH_UNROLL _Pragma("unroll")
#else
#include "common/fp16.h"
#define PITH_HD inline
#define PITH_UNROLL
#endif
#if PITH_CUDA_SIM
#include "engine/cuda/sim/device_syntax.h"  // DeviceBlock's built-ins, simulated
#endif

// PITH_SHARED(Type, name); declares a block's shared-memory variable (`__shared__ Type name;`).
// A GPU leaves its contents undefined at each block's start; the host simulation fills it with
// 0xff bytes then (sim::poison_shared), so a read before the block's first write shows.
#if defined(__CUDACC__)
#define PITH_SHARED(Type, name) __shared__ Type name
#elif PITH_CUDA_SIM
#define PITH_SHARED(Type, name)                    \
  static thread_local Type name;                   \
  static thread_local uint64_t name##_poisoned_in; \
  ::pith::cuda::sim::poison_shared(&name, sizeof(name), name##_poisoned_in)
#endif

// PITH_VECTOR_ACCESS(p, bytes): a GPU faults on a vector load or store that is not aligned to
// its size (cudaErrorMisalignedAddress); the host, which moves the elements one by one, does
// not, so the simulation checks each vector access's address.
#if PITH_CUDA_SIM
#define PITH_VECTOR_ACCESS(p, bytes) ::pith::cuda::sim::check_vector_aligned(p, bytes)
#else
#define PITH_VECTOR_ACCESS(p, bytes) ((void)0)
#endif

namespace pith::cuda::kern {

inline constexpr uint32_t kWarp = 32;
inline constexpr uint32_t kNoBin = 0xffffffffu;  // Block::count's "nothing to count"

// ---- element types ------------------------------------------------------------------------

PITH_HD float to_f32(float x) {
  return x;
}
PITH_HD void store_f32(float* dst, float v) {
  *dst = v;
}

#if defined(__CUDACC__)
using Bf16 = __nv_bfloat16;
PITH_HD float to_f32(Bf16 x) {
  return __bfloat162float(x);
}
PITH_HD void store_f32(Bf16* dst, float v) {
  *dst = __float2bfloat16_rn(v);
}
#else
// The host stand-in for __nv_bfloat16: the same bits, converted by the CPU engine's rounding
// (round to nearest even, as __float2bfloat16_rn).
struct Bf16 {
  uint16_t bits;
};
inline float to_f32(Bf16 x) {
  return bf16_to_f32(x.bits);
}
inline void store_f32(Bf16* dst, float v) {
  dst->bits = f32_to_bf16(v);
}
#endif

// N consecutive elements moved as one vector (16 bytes for the launchers' choice of N): the
// caller guarantees alignment to N * sizeof(T). The CPU build moves them one by one.
template <uint32_t N, class T>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <uint32_t N, class T>
PITH_HD void load_n(const T* p, float* out) {
#if defined(__CUDA_ARCH__)
  Pack<N, T> pk = *reinterpret_cast<const Pack<N, T>*>(p);
  for (uint32_t i = 0; i < N; ++i) out[i] = to_f32(pk.v[i]);
#else
  PITH_VECTOR_ACCESS(p, sizeof(Pack<N, T>));
  for (uint32_t i = 0; i < N; ++i) out[i] = to_f32(p[i]);
#endif
}

template <uint32_t N, class T>
PITH_HD void store_n(T* p, const float* in) {
#if defined(__CUDA_ARCH__)
  Pack<N, T> pk;
  for (uint32_t i = 0; i < N; ++i) store_f32(&pk.v[i], in[i]);
  *reinterpret_cast<Pack<N, T>*>(p) = pk;
#else
  PITH_VECTOR_ACCESS(p, sizeof(Pack<N, T>));
  for (uint32_t i = 0; i < N; ++i) store_f32(p + i, in[i]);
#endif
}

// N consecutive elements moved as they are (bits kept: a NaN's payload too), a vector at once
// on the GPU.
template <uint32_t N, class T>
PITH_HD void copy_n(const T* src, T* dst) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<Pack<N, T>*>(dst) = *reinterpret_cast<const Pack<N, T>*>(src);
#else
  PITH_VECTOR_ACCESS(src, sizeof(Pack<N, T>));
  PITH_VECTOR_ACCESS(dst, sizeof(Pack<N, T>));
  for (uint32_t i = 0; i < N; ++i) dst[i] = src[i];
#endif
}

// Elements per vector of T in a 16-byte access.
template <class T>
inline constexpr uint32_t kVec = 16 / sizeof(T);

// Whether rows of `len` elements (row starts `ld` apart) at `p` allow vectors of N elements.
template <uint32_t N, class T>
inline bool vector_ok(const T* p, size_t len, size_t ld) {
  return len % N == 0 && ld % N == 0 && reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0;
}

PITH_HD float exp_f32(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}

PITH_HD float tanh_f32(float x) {
#if defined(__CUDA_ARCH__)
  return tanhf(x);
#else
  return std::tanh(x);
#endif
}

PITH_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

PITH_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// Key order = float order (-inf lowest; -0 is +0, equal as the CPU compares them); the sign
// bit flips the rest for negatives. A NaN (a broken model) ranks below everything, as it never
// wins a comparison on the CPU: ranked above +inf it would pass a greedy top-K row's threshold
// (the max, which skips NaN) and overflow the row's one candidate slot.
PITH_HD uint32_t order_key(float f) {
  if (f != f) return 0;
  uint32_t u = f == 0.0f ? 0u : float_bits(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
PITH_HD float key_logit(uint32_t key) {
  return bits_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// A ranking key of (value, id): larger values first, equal values by ascending id (the CPU's
// (value desc, id asc) sort order), distinct for distinct ids; 0 ranks below every key.
PITH_HD uint64_t rank_key(float value, uint32_t id) {
  return uint64_t{order_key(value)} << 32 | ~id;
}
PITH_HD uint32_t rank_id(uint64_t key) {
  return ~static_cast<uint32_t>(key);
}
PITH_HD float rank_value(uint64_t key) {
  return key_logit(static_cast<uint32_t>(key >> 32));
}

// The last i in [0, n) with sorted[i] <= v (0 when none is): the group that holds item v when
// sorted[] are the groups' ascending first items (a sequence's first row, an expert's first
// slot); empty groups share their successor's first item and lose to it.
PITH_HD uint32_t last_at_most(const uint32_t* sorted, uint32_t n, uint32_t v) {
  uint32_t lo = 0, hi = n;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (sorted[mid] <= v)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// ---- launch geometry ----------------------------------------------------------------------

PITH_HD uint32_t ceil_div(size_t a, uint32_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}

// Grid of an element-wise kernel over `total` elements: enough blocks of `threads` to cover
// them, capped so that a grid-stride loop takes the rest.
PITH_HD uint32_t elementwise_blocks(size_t total, uint32_t threads) {
  uint32_t blocks = ceil_div(total, threads);
  constexpr uint32_t kMaxBlocks = 132 * 32;  // a few waves of an H100; the loop strides on
  return blocks == 0 ? 1 : (blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// Grid-stride loop: thread t of block b visits b * threads + t, then every grid's width on.
template <class F>
PITH_HD void grid_stride(uint32_t block, uint32_t n_blocks, uint32_t t, uint32_t threads,
                         size_t total, F&& f) {
  size_t stride = size_t{n_blocks} * threads;
  for (size_t i = size_t{block} * threads + t; i < total; i += stride) f(i);
}

// ---- blocks -------------------------------------------------------------------------------

#if defined(__CUDACC__) || PITH_CUDA_SIM
struct DeviceBlock {
  uint32_t block_x = 0, block_y = 0, n_threads = 0;

  __device__ static DeviceBlock current() { return {blockIdx.x, blockIdx.y, blockDim.x}; }

  template <class F>
  __device__ void threads(F&& f) const {
    f(threadIdx.x);
  }
  __device__ void sync() const { __syncthreads(); }

  // values[t] of every thread summed (max'ed) into values[0]; n_threads a multiple of 32.
  __device__ void reduce_sum(float* values) const { reduce(values, Sum{}); }
  __device__ void reduce_max(float* values) const { reduce(values, Max{}); }
  __device__ void reduce_max(uint64_t* values) const { reduce(values, MaxU64{}); }
  // Each warp's 32 values[t] summed into its first lane's slot (values[32 w]); the others keep
  // theirs. No barrier: a thread reads only its own slot, and lane 0 writes only its own.
  __device__ void warp_sum(float* values) const {
    const uint32_t t = threadIdx.x;
    float v = values[t];
    for (uint32_t m = kWarp / 2; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    if (t % kWarp == 0) values[t] = v;
  }

  // ++hist[bin] unless bin == kNoBin. Every lane of the warp calls it (a uniform loop): lanes
  // with the same bin add together, one shared atomic per distinct bin (logits crowd a few
  // exponent bins, and same-address atomics serialise).
  __device__ void count(uint32_t* hist, uint32_t bin) const {
    uint32_t same = __match_any_sync(0xffffffffu, bin);
    uint32_t lane = threadIdx.x % kWarp;
    if (bin != kNoBin && lane == static_cast<uint32_t>(__ffs(same) - 1))
      atomicAdd(hist + bin, static_cast<uint32_t>(__popc(same)));
  }

  // In place exclusive prefix sum over values[0..n_threads); values[n_threads] = the total.
  __device__ void exclusive_scan(uint32_t* values) const {
    uint32_t t = threadIdx.x, lane = t % kWarp, warp = t / kWarp;
    uint32_t v = values[t], inclusive = v;
    for (uint32_t off = 1; off < kWarp; off <<= 1) {
      uint32_t up = __shfl_up_sync(0xffffffffu, inclusive, off);
      if (lane >= off) inclusive += up;
    }
    __syncthreads();  // everyone has read values[] before the warp totals overwrite it
    using WarpTotals = uint32_t[kWarp + 1];
    PITH_SHARED(WarpTotals, warp_totals);
    if (lane == kWarp - 1) warp_totals[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
      uint32_t n_warps = n_threads / kWarp;
      uint32_t w = lane < n_warps ? warp_totals[lane] : 0, winc = w;
      for (uint32_t off = 1; off < kWarp; off <<= 1) {
        uint32_t up = __shfl_up_sync(0xffffffffu, winc, off);
        if (lane >= off) winc += up;
      }
      warp_totals[lane] = winc - w;
      if (lane == kWarp - 1) warp_totals[kWarp] = winc;
    }
    __syncthreads();
    values[t] = warp_totals[warp] + inclusive - v;
    if (t == 0) values[n_threads] = warp_totals[kWarp];
    __syncthreads();
  }

 private:
  struct Sum {
    __device__ float operator()(float a, float b) const { return a + b; }
  };
  struct Max {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  };
  struct MaxU64 {
    __device__ uint64_t operator()(uint64_t a, uint64_t b) const { return a > b ? a : b; }
  };
  template <class V, class Op>
  __device__ void reduce(V* values, Op op) const {
    uint32_t t = threadIdx.x, lane = t % kWarp, warp = t / kWarp;
    V v = values[t];
    for (uint32_t m = kWarp / 2; m > 0; m >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, m));
    __syncthreads();
    if (lane == 0) values[warp] = v;
    __syncthreads();
    if (warp == 0) {
      uint32_t n_warps = n_threads / kWarp;
      // Lanes past the last warp repeat warp 0's value: neutral for max, and for the sum the
      // butterfly below only ever reads lanes < n_warps (a power of two) into lane 0's total.
      V w = values[lane < n_warps ? lane : 0];
      for (uint32_t m = n_warps / 2; m > 0; m >>= 1) w = op(w, __shfl_xor_sync(0xffffffffu, w, m));
      if (lane == 0) values[0] = w;
    }
    __syncthreads();
  }
};
#endif  // __CUDACC__ || PITH_CUDA_SIM

// The CPU's version of a block, for the unit tests: threads run one after another.
struct HostBlock {
  uint32_t block_x = 0, block_y = 0, n_threads = 0;

  template <class F>
  void threads(F&& f) const {
    for (uint32_t t = 0; t < n_threads; ++t) f(t);
  }
  void sync() const {}

  void count(uint32_t* hist, uint32_t bin) const {
    if (bin != kNoBin) ++hist[bin];
  }

  void reduce_sum(float* values) const {
    reduce(values, [](float a, float b) { return a + b; });
  }
  void reduce_max(float* values) const {
    reduce(values, [](float a, float b) { return a > b ? a : (b > a ? b : a); });
  }
  void reduce_max(uint64_t* values) const {
    reduce(values, [](uint64_t a, uint64_t b) { return a > b ? a : b; });
  }
  void warp_sum(float* values) const {
    for (uint32_t w = 0; w < n_threads / kWarp; ++w) {
      float lanes[kWarp];
      for (uint32_t l = 0; l < kWarp; ++l) lanes[l] = values[w * kWarp + l];
      values[w * kWarp] = butterfly(lanes, kWarp, [](float a, float b) { return a + b; });
    }
  }

  void exclusive_scan(uint32_t* values) const {
    uint32_t total = 0;
    for (uint32_t t = 0; t < n_threads; ++t) {
      uint32_t v = values[t];
      values[t] = total;
      total += v;
    }
    values[n_threads] = total;
  }

 private:
  // The xor butterfly of DeviceBlock::reduce: lane l adds lane l ^ m, for m = 16, 8, 4, 2, 1.
  template <class V, class Op>
  static V butterfly(V* lanes, uint32_t width, Op op) {
    for (uint32_t m = width / 2; m > 0; m >>= 1) {
      V next[kWarp];
      for (uint32_t l = 0; l < width; ++l) next[l] = op(lanes[l], lanes[l ^ m]);
      for (uint32_t l = 0; l < width; ++l) lanes[l] = next[l];
    }
    return lanes[0];
  }
  template <class V, class Op>
  void reduce(V* values, Op op) const {
    uint32_t n_warps = n_threads / kWarp;
    V warp_totals[kWarp] = {};
    for (uint32_t w = 0; w < n_warps; ++w)
      warp_totals[w] = butterfly(values + w * kWarp, kWarp, op);
    values[0] = butterfly(warp_totals, n_warps, op);
  }
};

}  // namespace pith::cuda::kern
