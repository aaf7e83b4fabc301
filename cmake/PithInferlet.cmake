# pith_add_inferlet(NAME [SOURCES...]): builds an inferlet to ${CMAKE_CURRENT_BINARY_DIR}/NAME.wasm
# with Debian's clang-14 for wasm32-wasi (wasi-libc, libc++ for wasm32), no exceptions, no SIMD
# (wasm2c 1.0.32 rejects SIMD). SOURCES default to NAME/NAME.cpp. Creates target inferlet_NAME
# whose WASM_FILE property is the output path (use $<TARGET_PROPERTY:inferlet_NAME,WASM_FILE>).
# Without clang-14 / wasm-ld the inferlets are skipped with a message (tests needing them too).
# The same flags are used by `pith inferlet build` (src/cli/cmd_inferlet.cpp).
find_program(PITH_WASM_CLANG NAMES clang++-14 clang++)
find_program(PITH_WASM_LD NAMES wasm-ld-14 wasm-ld)
set(PITH_INFERLETS_ENABLED OFF)
if(PITH_WASM_CLANG AND PITH_WASM_LD AND EXISTS /usr/lib/wasm32-wasi/libc.a)
  set(PITH_INFERLETS_ENABLED ON)
else()
  message(STATUS "pith: clang++-14, wasm-ld-14 or wasi-libc missing: inferlets and their tests are skipped")
endif()

set(PITH_INFERLET_FLAGS
  --target=wasm32-wasi --sysroot=/usr -O2 -std=c++20 -fno-exceptions
  -Wall -Wextra -Werror
  -Wl,--stack-first -Wl,-z,stack-size=131072 -Wl,--strip-debug)

function(pith_add_inferlet name)
  if(NOT PITH_INFERLETS_ENABLED)
    return()
  endif()
  set(sources ${ARGN})
  if(NOT sources)
    set(sources ${CMAKE_CURRENT_SOURCE_DIR}/${name}/${name}.cpp)
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name}.wasm)
  file(GLOB sdk_headers ${PROJECT_SOURCE_DIR}/sdk/include/pith/*)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${PITH_WASM_CLANG} ${PITH_INFERLET_FLAGS} -I${PROJECT_SOURCE_DIR}/sdk/include
            ${sources} -o ${out}
    DEPENDS ${sources} ${sdk_headers}
    COMMENT "Building inferlet ${name}.wasm"
    VERBATIM)
  add_custom_target(inferlet_${name} ALL DEPENDS ${out})
  set_target_properties(inferlet_${name} PROPERTIES WASM_FILE ${out})
endfunction()
