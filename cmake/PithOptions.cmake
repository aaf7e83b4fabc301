# Compiler flags shared by every project target. Project code is warning-free (-Werror);
# third-party headers come in as SYSTEM includes through their imported targets.
add_library(pith_options INTERFACE)
target_compile_options(pith_options INTERFACE
  -Wall -Wextra -Werror -Wno-unused-parameter)
target_compile_features(pith_options INTERFACE cxx_std_20)

if(PITH_SANITIZE)
  target_compile_options(pith_options INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(pith_options INTERFACE -fsanitize=address,undefined)
endif()
