# pith_add_inferlet(NAME [SOURCES...] [C_SOURCES files...] [INCLUDE_DIRS dirs...]
#                   [C_FLAGS flags...]): builds an inferlet to ${CMAKE_CURRENT_BINARY_DIR}/NAME.wasm
# with Debian's clang-14 for wasm32-wasi (wasi-libc, libc++ for wasm32), no exceptions, no SIMD
# (wasm2c 1.0.32 rejects SIMD). SOURCES default to NAME/NAME.cpp. C_SOURCES are third-party C
# files (e.g. an embedded JavaScript engine) compiled as C into objects of their own with C_FLAGS
# and without -Werror (their warnings are not ours), then linked in. INCLUDE_DIRS serve both (as
# -isystem for the C++ sources, so third-party headers do not trip -Werror). Creates target
# inferlet_NAME whose WASM_FILE property is the output path
# (use $<TARGET_PROPERTY:inferlet_NAME,WASM_FILE>).
# Without clang-14 / wasm-ld the inferlets are skipped with a message (tests needing them too).
# The same flags are used by `pith inferlet build` (src/cli/cmd_inferlet.cpp).
# PITH_INFERLETS_FROM=DIR: copy each NAME.wasm from the same place in another build folder of
# this tree instead of compiling it (CI's sanitizer build takes the release build's: the modules
# are the same bytes, nothing in them is sanitized, and compiling them is ~95 CPU-seconds).
set(PITH_INFERLETS_FROM "" CACHE PATH "Build folder whose inferlets to copy instead of compiling")
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
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "C_SOURCES;INCLUDE_DIRS;C_FLAGS")
  set(sources ${arg_UNPARSED_ARGUMENTS})
  if(NOT sources)
    set(sources ${CMAKE_CURRENT_SOURCE_DIR}/${name}/${name}.cpp)
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name}.wasm)
  if(PITH_INFERLETS_FROM)
    file(RELATIVE_PATH rel ${PROJECT_BINARY_DIR} ${out})
    add_custom_command(
      OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E copy ${PITH_INFERLETS_FROM}/${rel} ${out}
      DEPENDS ${PITH_INFERLETS_FROM}/${rel}
      COMMENT "Copying inferlet ${name}.wasm from ${PITH_INFERLETS_FROM}"
      VERBATIM)
  else()
    pith_compile_inferlet(${name} ${out} "${sources}" "${arg_C_SOURCES}" "${arg_INCLUDE_DIRS}"
                          "${arg_C_FLAGS}")
  endif()
  add_custom_target(inferlet_${name} ALL DEPENDS ${out})
  set_target_properties(inferlet_${name} PROPERTIES WASM_FILE ${out})
  set_property(GLOBAL APPEND PROPERTY PITH_INFERLET_TARGETS inferlet_${name})
endfunction()

# The commands that compile inferlet `name` into `out` (pith_add_inferlet's arguments).
function(pith_compile_inferlet name out sources c_sources include_dirs c_flags)
  file(GLOB sdk_headers ${PROJECT_SOURCE_DIR}/sdk/include/pith/*)
  set(objects)
  set(c_includes)
  set(cxx_includes)
  set(include_deps)
  foreach(d ${include_dirs})
    list(APPEND c_includes -I${d})
    list(APPEND cxx_includes -isystem ${d})
    file(GLOB d_headers ${d}/*.h)
    list(APPEND include_deps ${d_headers})
  endforeach()
  foreach(c ${c_sources})
    get_filename_component(stem ${c} NAME_WE)
    set(obj ${CMAKE_CURRENT_BINARY_DIR}/${name}.dir/${stem}.o)
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/${name}.dir
      COMMAND ${PITH_WASM_CLANG} -x c --target=wasm32-wasi --sysroot=/usr -O2 -std=c11 -w
              ${c_includes} ${c_flags} -c ${c} -o ${obj}
      DEPENDS ${c} ${include_deps}
      COMMENT "Building C object ${stem}.o for inferlet ${name}"
      VERBATIM)
    list(APPEND objects ${obj})
  endforeach()
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${PITH_WASM_CLANG} ${PITH_INFERLET_FLAGS} -I${PROJECT_SOURCE_DIR}/sdk/include
            ${cxx_includes} ${sources} ${objects} -o ${out}
    DEPENDS ${sources} ${objects} ${sdk_headers} ${include_deps}
    COMMENT "Building inferlet ${name}.wasm"
    VERBATIM)
endfunction()
