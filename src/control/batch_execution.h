// Runs one planned batch on the backend and records each call's outcome. Backend exceptions
// become Failures here and nowhere else: pith::Error (a request the backend rejects) is
// BadArgument with its message; anything else (std::bad_alloc, a device error) is
// BackendFailure with its message. A forward batch the backend rejects is retried one sequence
// at a time, so only the offending call fails.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "control/pending_call.h"

namespace pith {

// Every call in `calls` has the same kind. Called without the controller's lock.
void execute_batch(Backend& backend, std::vector<std::shared_ptr<PendingCall>>& calls);

}  // namespace pith
