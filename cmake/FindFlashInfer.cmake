# Finds FlashInfer's header-only attention templates as scripts/setup-flashinfer.sh unpacks them
# from the pinned PyPI wheel flashinfer-python==0.7.2.post1 (include/, cccl/, cutlass/ under
# ${PITH_DEPS_DIR:-$HOME/.cache/pith}/flashinfer-0.7.2.post1, or FLASHINFER_ROOT).
#
# Sets FlashInfer_FOUND, FlashInfer_VERSION, FlashInfer_ROOT and FlashInfer_INCLUDE_DIRS. The
# include order matters: the wheel's CCCL (newer than CUDA 13.0's, for cuda::fast_mod_div) must
# come before the toolkit's headers, so add them with `BEFORE` and not as SYSTEM directories
# (nvcc searches its own toolkit directory before -isystem ones).
set(FlashInfer_VERSION 0.7.2.post1)

set(_fi_hints "")
if(FLASHINFER_ROOT)
  list(APPEND _fi_hints ${FLASHINFER_ROOT})
endif()
if(DEFINED ENV{PITH_DEPS_DIR})
  list(APPEND _fi_hints $ENV{PITH_DEPS_DIR}/flashinfer-${FlashInfer_VERSION})
endif()
if(DEFINED ENV{HOME})
  list(APPEND _fi_hints $ENV{HOME}/.cache/pith/flashinfer-${FlashInfer_VERSION})
endif()

find_path(FlashInfer_ROOT
  NAMES include/flashinfer/attention/prefill.cuh
  HINTS ${_fi_hints}
  NO_DEFAULT_PATH)

if(FlashInfer_ROOT)
  set(FlashInfer_INCLUDE_DIRS
    ${FlashInfer_ROOT}/cccl/libcudacxx/include
    ${FlashInfer_ROOT}/cccl/cub
    ${FlashInfer_ROOT}/cccl/thrust
    ${FlashInfer_ROOT}/include)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(FlashInfer
  REQUIRED_VARS FlashInfer_ROOT FlashInfer_INCLUDE_DIRS
  VERSION_VAR FlashInfer_VERSION
  REASON_FAILURE_MESSAGE "run scripts/setup-flashinfer.sh (or set FLASHINFER_ROOT)")
mark_as_advanced(FlashInfer_ROOT)
