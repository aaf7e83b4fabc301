// Human byte sizes on command lines and in config files: "512M", "2G", "65536".
#pragma once

#include <cstddef>
#include <string>

namespace pith {

// K, M, G are binary (KiB, MiB, GiB). Throws pith::Error for anything else.
size_t parse_byte_size(const std::string& text);

}  // namespace pith
