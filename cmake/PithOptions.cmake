# Compiler flags shared by every project target. Project code is warning-free (-Werror);
# third-party headers come in as SYSTEM includes through their imported targets.
add_library(pith_options INTERFACE)
target_compile_options(pith_options INTERFACE
  -Wall -Wextra -Werror -Wno-unused-parameter)
target_compile_features(pith_options INTERFACE cxx_std_20)
# GCC 12 reports -Wrestrict false positives from inside libstdc++'s std::string code (GCC bugs
# 105329 / 105651), more of them with the sanitizers on; keep -Werror for everything else.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(pith_options INTERFACE -Wno-restrict)
endif()

if(PITH_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "PITH_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++")
  endif()
  # Coverage instrumentation everywhere; the fuzz targets link the libFuzzer driver themselves.
  target_compile_options(pith_options INTERFACE -fsanitize=fuzzer-no-link,address,undefined
    -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(pith_options INTERFACE -fsanitize=address,undefined)
elseif(PITH_SANITIZE)
  # Without UBSan's pointer-overflow check: it reports pointer arithmetic that wraps around the
  # address space, which here could only precede an out-of-bounds access that ASan reports, and
  # it costs about a tenth of the compile time (GCC 12, openai_routes.cpp: 36 -> 33 CPU-s, two
  # runs each, alternated).
  target_compile_options(pith_options INTERFACE
    -fsanitize=address,undefined -fno-sanitize=pointer-overflow -fno-omit-frame-pointer
    -fno-sanitize-recover=undefined)
  target_link_options(pith_options INTERFACE -fsanitize=address,undefined)
endif()
