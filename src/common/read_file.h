// The whole content of a file, as bytes.
#pragma once

#include <string>

namespace pith {

// Throws pith::Error "PATH: cannot open (REASON)" when the file cannot be opened or read.
std::string read_file(const std::string& path);

}  // namespace pith
