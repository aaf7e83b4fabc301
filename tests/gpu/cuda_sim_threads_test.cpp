// The CUDA host simulation's GPU threads (src/engine/cuda/sim/block_threads.h): every thread of a
// block runs the kernel on its own fiber. Checked here: DeviceBlock's warp-shuffle reductions,
// scan and histogram, run thread by thread, give the bits of the CPU's HostBlock (which the
// kernels' unit tests check against plain loops); a missing barrier changes a result, and so
// does a block reading what another block of the grid writes; a barrier or shuffle that not
// every thread reaches stops the process with the threads' whereabouts; shared memory holds
// 0xff bytes at each block's start.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cuda/kernels/block.h"
#include "engine/cuda/sim/launch.h"

namespace {

using pith::cuda::kern::DeviceBlock;
using pith::cuda::kern::HostBlock;
using pith::cuda::kern::kNoBin;
using pith::cuda::sim::launch;

constexpr uint32_t kBins = 16;

struct Results {
  float sum, max, warp_sums[32];
  uint32_t scan[1025], hist[kBins];
};

struct CollectiveShared {
  float sums[1024], maxes[1024], warp[1024];
  uint32_t scan[1025], hist[kBins];
};

// One block's collectives over in[block][t] and bins[block][t], written to out[block].
void collectives_kernel(const float* in, const uint32_t* bins, Results* out) {
  PITH_SHARED(CollectiveShared, sh);
  const DeviceBlock blk = DeviceBlock::current();
  const uint32_t t = threadIdx.x, at = blockIdx.x * blk.n_threads + t;
  sh.sums[t] = sh.maxes[t] = sh.warp[t] = in[at];
  sh.scan[t] = bins[at] == kNoBin ? 0 : bins[at];
  if (t < kBins) sh.hist[t] = 0;
  __syncthreads();
  blk.reduce_sum(sh.sums);
  blk.reduce_max(sh.maxes);
  blk.warp_sum(sh.warp);
  blk.exclusive_scan(sh.scan);
  blk.count(sh.hist, bins[at]);
  __syncthreads();
  Results& r = out[blockIdx.x];
  if (t == 0) {
    r.sum = sh.sums[0];
    r.max = sh.maxes[0];
    r.scan[blk.n_threads] = sh.scan[blk.n_threads];
    for (uint32_t b = 0; b < kBins; ++b) r.hist[b] = sh.hist[b];
  }
  if (t % 32 == 0) r.warp_sums[t / 32] = sh.warp[t];
  r.scan[t] = sh.scan[t];
}

TEST(SimThreads, WarpShuffleCollectivesGiveTheHostBlocksBits) {
  for (uint32_t threads : {32u, 64u, 128u, 256u, 512u, 1024u}) {
    constexpr uint32_t kBlocks = 3;
    std::mt19937 rng(threads);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> in(kBlocks * threads);
    std::vector<uint32_t> bins(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = normal(rng);
      bins[i] = rng() % 5 == 0 ? kNoBin : rng() % 3;  // a few crowded bins, as logits' are
    }
    float* d_in;
    uint32_t* d_bins;
    Results* d_out;
    ASSERT_EQ(cudaMalloc(&d_in, in.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_bins, bins.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, kBlocks * sizeof(Results)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_in, in.data(), in.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_bins, bins.data(), bins.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    launch(dim3(kBlocks), dim3(threads), nullptr, [](auto... a) { collectives_kernel(a...); })(
        d_in, d_bins, d_out);
    std::vector<Results> got(kBlocks);
    ASSERT_EQ(cudaMemcpy(got.data(), d_out, kBlocks * sizeof(Results), cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (uint32_t b = 0; b < kBlocks; ++b) {
      const HostBlock host{b, 0, threads};
      std::vector<float> sums(in.begin() + b * threads, in.begin() + (b + 1) * threads);
      std::vector<float> maxes = sums, warp = sums;
      std::vector<uint32_t> scan(threads + 1), hist(kBins, 0);
      for (uint32_t t = 0; t < threads; ++t) {
        const uint32_t bin = bins[b * threads + t];
        scan[t] = bin == kNoBin ? 0 : bin;
        host.count(hist.data(), bin);
      }
      host.reduce_sum(sums.data());
      host.reduce_max(maxes.data());
      host.warp_sum(warp.data());
      host.exclusive_scan(scan.data());
      const std::string where = std::to_string(threads) + " threads, block " + std::to_string(b);
      EXPECT_EQ(std::memcmp(&got[b].sum, &sums[0], 4), 0)
          << where << ": " << got[b].sum << " vs " << sums[0];
      EXPECT_EQ(got[b].max, maxes[0]) << where;
      for (uint32_t w = 0; w < threads / 32; ++w)
        EXPECT_EQ(std::memcmp(&got[b].warp_sums[w], &warp[w * 32], 4), 0) << where << " warp " << w;
      for (uint32_t t = 0; t <= threads; ++t)
        ASSERT_EQ(got[b].scan[t], scan[t]) << where << " t " << t;
      for (uint32_t k = 0; k < kBins; ++k)
        EXPECT_EQ(got[b].hist[k], hist[k]) << where << " bin " << k;
    }
    cudaFree(d_in);
    cudaFree(d_bins);
    cudaFree(d_out);
  }
}

// Thread t publishes stamp + t, then reads its neighbour's slot: right only after a barrier.
using Slots = uint32_t[64];

void neighbour_kernel(uint32_t* out, uint32_t stamp, bool barrier) {
  PITH_SHARED(Slots, slots);
  const uint32_t t = threadIdx.x;
  slots[t] = stamp + t;
  if (barrier) __syncthreads();
  out[t] = slots[(t + 1) % blockDim.x];
}

TEST(SimThreads, AMissingBarrierChangesTheResultInEitherOrder) {
  uint32_t* d_out;
  ASSERT_EQ(cudaMalloc(&d_out, 64 * 4), cudaSuccess);
  // Consecutive launches take turns in opposite orders: each case runs in both.
  uint32_t stamp = 1000;
  for (bool barrier : {true, true, false, false}) {
    stamp += 1000;
    launch(dim3(1), dim3(64), nullptr, [](auto... a) { neighbour_kernel(a...); })(d_out, stamp,
                                                                                  barrier);
    std::vector<uint32_t> out(64);
    ASSERT_EQ(cudaMemcpy(out.data(), d_out, 64 * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    uint32_t wrong = 0;
    for (uint32_t t = 0; t < 64; ++t) wrong += out[t] != stamp + (t + 1) % 64;
    if (barrier)
      EXPECT_EQ(wrong, 0u) << "stamp " << stamp;
    else
      EXPECT_GT(wrong, 0u) << "stamp " << stamp << ": the race went unseen";
  }
  cudaFree(d_out);
}

// Block b adds 1 to its own slot and copies its left neighbour's: a race between blocks.
void left_neighbour_kernel(uint32_t* slots, uint32_t* copies) {
  if (threadIdx.x != 0) return;
  slots[blockIdx.x] += 1;
  if (blockIdx.x > 0) copies[blockIdx.x] = slots[blockIdx.x - 1];
}

TEST(SimThreads, BlocksRunInBothOrders) {
  uint32_t *d_slots, *d_copies;
  ASSERT_EQ(cudaMalloc(&d_slots, 8 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_copies, 8 * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_slots, 0, 8 * 4), cudaSuccess);
  std::vector<uint32_t> seen;
  for (int run = 1; run <= 2; ++run) {
    launch(dim3(8), dim3(32), nullptr, [](auto... a) { left_neighbour_kernel(a...); })(d_slots,
                                                                                       d_copies);
    std::vector<uint32_t> copies(8);
    ASSERT_EQ(cudaMemcpy(copies.data(), d_copies, 8 * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    // Ascending: every left neighbour has already counted this run; descending: none has.
    uint32_t updated = 0;
    for (uint32_t b = 1; b < 8; ++b) updated += copies[b] == static_cast<uint32_t>(run);
    seen.push_back(updated);
  }
  EXPECT_EQ(std::min(seen[0], seen[1]), 0u);
  EXPECT_EQ(std::max(seen[0], seen[1]), 7u);
  cudaFree(d_slots);
  cudaFree(d_copies);
}

// Thread t reads its slot before any thread of the block wrote it (undefined on a GPU), then
// after writing it.
void read_before_write_kernel(uint32_t* out) {
  PITH_SHARED(Slots, slots);
  const uint32_t t = threadIdx.x, at = blockIdx.x * 2 * blockDim.x;
  out[at + t] = slots[t];
  __syncthreads();
  slots[t] = blockIdx.x * 100 + t;
  __syncthreads();
  out[at + blockDim.x + t] = slots[t];
}

// A shared variable declared in a device function keeps its contents from one call to the next
// within a block; only a new block starts undefined.
__device__ uint32_t add_to_block_total(uint32_t v) {
  PITH_SHARED(uint32_t, total);
  if (threadIdx.x == 0) total = (total == 0xffffffffu ? 0 : total) + v;
  __syncthreads();
  const uint32_t seen = total;
  __syncthreads();
  return seen;
}

void block_total_kernel(uint32_t* out) {
  add_to_block_total(5);
  const uint32_t second = add_to_block_total(7);
  if (threadIdx.x == 0) out[blockIdx.x] = second;
}

TEST(SimThreads, SharedMemoryStartsEachBlockPoisoned) {
  constexpr uint32_t kBlocks = 3, kThreads = 64;
  uint32_t* d_out;
  ASSERT_EQ(cudaMalloc(&d_out, kBlocks * 2 * kThreads * 4), cudaSuccess);
  for (int run = 0; run < 2; ++run) {  // the second launch would find the first one's values
    launch(dim3(kBlocks), dim3(kThreads), nullptr,
           [](auto... a) { read_before_write_kernel(a...); })(d_out);
    std::vector<uint32_t> out(kBlocks * 2 * kThreads);
    ASSERT_EQ(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (uint32_t b = 0; b < kBlocks; ++b)
      for (uint32_t t = 0; t < kThreads; ++t) {
        EXPECT_EQ(out[b * 2 * kThreads + t], 0xffffffffu) << "run " << run << " block " << b;
        EXPECT_EQ(out[b * 2 * kThreads + kThreads + t], b * 100 + t);
      }
  }
  launch(dim3(kBlocks), dim3(kThreads), nullptr,
         [](auto... a) { block_total_kernel(a...); })(d_out);
  std::vector<uint32_t> totals(kBlocks);
  ASSERT_EQ(cudaMemcpy(totals.data(), d_out, kBlocks * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (uint32_t b = 0; b < kBlocks; ++b) EXPECT_EQ(totals[b], 12u) << "block " << b;
  cudaFree(d_out);
}

void divergent_barrier_kernel() {
  if (threadIdx.x < 16) __syncthreads();
}

void partial_warp_shuffle_kernel(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

void partial_mask_shuffle_kernel(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, 1.0f, 1);
}

// Thread t reads 4 floats at in + offset + 4t: 16-byte vectors, aligned only for offset % 4 == 0.
void vector_load_kernel(const float* in, uint32_t offset, float* out) {
  float v[4];
  pith::cuda::kern::load_n<4>(in + offset + 4 * threadIdx.x, v);
  out[threadIdx.x] = v[0] + v[1] + v[2] + v[3];
}

TEST(SimThreads, AlignedVectorAccessesRun) {
  float *d_in, *d_out;
  ASSERT_EQ(cudaMalloc(&d_in, 260 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, 64 * 4), cudaSuccess);
  std::vector<float> in(260);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), in.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  launch(dim3(1), dim3(64), nullptr, [](auto... a) { vector_load_kernel(a...); })(d_in, 4u, d_out);
  std::vector<float> out(64);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out, 64 * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (uint32_t t = 0; t < 64; ++t) EXPECT_EQ(out[t], 16.0f * t + 22.0f) << t;
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST(SimThreadsDeathTest, AMisalignedVectorAccessStopsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        float* d_in = nullptr;
        float* d_out = nullptr;
        cudaMalloc(&d_in, 260 * 4);
        cudaMalloc(&d_out, 64 * 4);
        launch(dim3(1), dim3(64), nullptr, [](auto... a) { vector_load_kernel(a...); })(d_in, 2u,
                                                                                        d_out);
        cudaDeviceSynchronize();
      },
      "thread \\(0,0,0\\): a 16-byte vector access at .*, not 16-byte aligned");
}

TEST(SimThreadsDeathTest, BarriersAndShufflesNotEveryThreadReachesStopTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        launch(dim3(1), dim3(64), nullptr, [](auto... a) { divergent_barrier_kernel(a...); })();
        cudaDeviceSynchronize();
      },
      "threads wait where others never arrive: 16 \\(thread 0 first\\) waits at __syncthreads; "
      "48 \\(thread 16 first\\) has returned");
  EXPECT_DEATH(
      {
        float* d_out = nullptr;
        cudaMalloc(&d_out, 48 * 4);
        launch(dim3(1), dim3(48), nullptr,
               [](auto... a) { partial_warp_shuffle_kernel(a...); })(d_out);
        cudaDeviceSynchronize();
      },
      "a warp shuffle in the block's partial last warp");
  EXPECT_DEATH(
      {
        float* d_out = nullptr;
        cudaMalloc(&d_out, 32 * 4);
        launch(dim3(1), dim3(32), nullptr,
               [](auto... a) { partial_mask_shuffle_kernel(a...); })(d_out);
        cudaDeviceSynchronize();
      },
      "a warp shuffle with a partial mask");
}

}  // namespace
