// Files that are either fully present or absent: the bytes go to a temporary file beside the
// target (unique per call), are flushed to disk, and the temporary is renamed over the target,
// so a process killed mid-write (or a full disk) never leaves a partial target for a reader.
// Leftover temporaries of a killed writer end in ".tmp" and can be swept at startup.
#pragma once

#include <string>
#include <string_view>

namespace pith {

// Throws pith::Error naming the path and the system's reason ("No space left on device"); the
// temporary is removed and the target left as it was.
void write_file_atomically(const std::string& path, std::string_view bytes);

// Removes `dir`'s files ending in ".tmp" (a killed writer's leftovers); returns how many.
size_t remove_temporaries(const std::string& dir);

}  // namespace pith
