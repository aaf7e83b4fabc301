// Throws pith::Error from CUDA translation units: nvcc cannot compile fmt's consteval format
// strings (common/error.h), so the .cu files build their message and call this plain function.
#pragma once

#include <string>

namespace pith::cuda {

[[noreturn]] void throw_attention_error(const std::string& what);

}  // namespace pith::cuda
