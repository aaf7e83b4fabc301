// Helpers of the GPU kernel tests (cuda_kernels_test, delta_rule_gpu_test): a device copy of a
// host vector freed on scope exit, and (tests/unit/random_floats.h) seeded random inputs.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "../unit/random_floats.h"

namespace pith::cuda {

// A device copy of a host vector (or an uninitialised one of n elements), freed on scope exit.
template <class T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T)),
              cudaSuccess);
  }
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) {
    EXPECT_EQ(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  std::vector<T> read() const {
    std::vector<T> v(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

}  // namespace pith::cuda
