// scaffold_inferlet: the files of a new inferlet project (`pith inferlet new NAME`): NAME.cpp, a
// short working SDK program (prompt in, greedy completion out), and a README saying how to build,
// run and serve it.
#pragma once

#include <string>
#include <vector>

namespace pith::cli {

// Creates DIR/NAME/{NAME.cpp,README.md} and returns the paths written. NAME: a letter, then
// letters, digits, '_' or '-'. Throws pith::Error if NAME is invalid or a file already exists.
std::vector<std::string> scaffold_inferlet(const std::string& name, const std::string& dir);

}  // namespace pith::cli
