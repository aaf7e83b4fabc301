// Inferlets compiled into the pith binary (generated at build time from inferlets/; empty when
// the build had no wasm32 toolchain).
#pragma once

#include <string_view>

namespace pith::server {

std::string_view builtin_openai_completion_wasm();
std::string_view builtin_openai_embedding_wasm();

}  // namespace pith::server
