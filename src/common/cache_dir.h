// Where pith keeps what it can rebuild (uploaded programs, native code of inferlets): one
// definition, so `pith serve`, `pith run` and the runtime agree on the same folder.
#pragma once

#include <string>

namespace pith {

// $XDG_CACHE_HOME/pith, else $HOME/.cache/pith, else /tmp/pith-cache-<uid> (a per-user folder,
// so two users of one machine never share compiled code).
std::string default_cache_root();

}  // namespace pith
