// CUDA host simulation (engine/cuda/sim): the element type tags of CUDA's library_types.h that
// the backend passes to cuBLASLt, with CUDA's values.
#pragma once

enum cudaDataType_t {
  CUDA_R_16F = 2,
  CUDA_R_32F = 0,
  CUDA_R_16BF = 14,
};
