#include "common/read_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace pith {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open ({})", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("{}: cannot read ({})", path, std::strerror(errno));
  return ss.str();
}

}  // namespace pith
