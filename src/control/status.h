// Result codes of control-layer calls. They cross the guest boundary unchanged (the SDK's
// abi.h mirrors them), so an inferlet can branch on "out of KV pages" vs "bad handle".
#pragma once

#include <cstdint>

namespace pith {

enum class Status : int32_t {
  Ok = 0,
  BadHandle = 1,        // a page/embed/queue handle the inferlet does not own
  OutOfKvPages = 2,     // the pool cannot satisfy the allocation (after reclaiming)
  QuotaExceeded = 3,    // --max-kv-pages-per-inferlet would be exceeded
  OutOfEmbeds = 4,
  BadArgument = 5,      // malformed request (lengths, positions, masks, token ids)
  NotFound = 6,         // no export with that name
  AlreadyExists = 7,    // export name taken
  Terminated = 8,       // the instance was terminated; pending calls fail with this
  Unsupported = 9,      // trait not implemented by the loaded model
};

const char* status_name(Status s);

}  // namespace pith
