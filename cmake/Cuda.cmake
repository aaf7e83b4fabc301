# The CUDA backend (src/engine/cuda, docs/gpu.md). PITH_CUDA:
#   AUTO (default): build it when nvcc is found; otherwise the CPU build is unchanged.
#   ON:  require nvcc (configure fails without it).  OFF: never build it.
#   SIM: no nvcc; `--device cuda` runs the backend's host simulation (src/engine/cuda/sim), a
#        developer build for running the e2e suite through the backend's host logic on a CPU.
# Sets PITH_CUDA_ENABLED. Device code is built for Hopper (sm_90a) and one portable target
# (sm_80 SASS + compute_80 PTX, which newer GPUs JIT-compile). The CUDA runtime is linked
# statically (one binary copies to a GPU machine); cuBLASLt is found there at run time.
set(PITH_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO, ON, OFF or SIM")
set_property(CACHE PITH_CUDA PROPERTY STRINGS AUTO ON OFF SIM)
string(TOUPPER "${PITH_CUDA}" _pith_cuda)
set(PITH_CUDA_ENABLED OFF)
set(PITH_CUDA_SIM_BACKEND OFF)

if(_pith_cuda STREQUAL "SIM")
  set(PITH_CUDA_SIM_BACKEND ON)
  message(STATUS "CUDA backend: the host simulation serves --device cuda (PITH_CUDA=SIM)")
elseif(NOT _pith_cuda STREQUAL "OFF")
  # The toolkit's default location is not on every PATH.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(PITH_CUDA_ENABLED ON)
  elseif(_pith_cuda STREQUAL "ON")
    message(FATAL_ERROR "PITH_CUDA=ON but no CUDA compiler (nvcc) was found; set CUDACXX")
  else()
    message(STATUS "CUDA backend: nvcc not found, building without it (PITH_CUDA=AUTO)")
  endif()
endif()

if(PITH_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90a-real 80-real 80-virtual)
  endif()
  enable_language(CUDA)
  # CMake 3.25 does not know that nvcc 12+ takes C++20; the project's C++ targets require it
  # (cxx_std_20 carries over to CUDA sources), so tell CMake the flag.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  if(PITH_CCACHE)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${PITH_CCACHE})
  endif()
  # pith_options' flags are g++'s (-Wall -Werror ...), which nvcc rejects: keep them for C++
  # sources only, so .cu files may link the project's libraries.
  get_target_property(_pith_opts pith_options INTERFACE_COMPILE_OPTIONS)
  set(_pith_cxx_opts "")
  foreach(_opt IN LISTS _pith_opts)
    list(APPEND _pith_cxx_opts "$<$<COMPILE_LANGUAGE:CXX>:${_opt}>")
  endforeach()
  set_target_properties(pith_options PROPERTIES INTERFACE_COMPILE_OPTIONS "${_pith_cxx_opts}")
  # Flags for every .cu file.
  add_library(pith_cuda_options INTERFACE)
  target_compile_options(pith_cuda_options INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr --extended-lambda -lineinfo>)
  message(STATUS "CUDA backend: on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
endif()
