# The CUDA backend's small kernels and the LM-head reduction, relative to this folder;
# src/engine/cuda/CMakeLists.txt adds them to pith_engine_cuda. One .cu per kernel family;
# the bodies (*_body.h) are shared with tests/unit/cuda_kernels_host_test.cpp.
set(PITH_CUDA_KERNEL_SOURCES
  activation.cu
  delta_net.cu
  gemv.cu
  kv.cu
  launch_check.cpp
  lora.cu
  moe.cu
  norm.cu
  rope.cu
  rope_append.cu
  rows.cu
  topk.cu
)
