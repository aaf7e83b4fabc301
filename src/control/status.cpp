#include "control/status.h"

namespace pith {

const char* status_name(Status s) {
  switch (s) {
    case Status::Ok:
      return "ok";
    case Status::BadHandle:
      return "bad handle";
    case Status::OutOfKvPages:
      return "out of KV pages";
    case Status::QuotaExceeded:
      return "KV page quota exceeded";
    case Status::OutOfEmbeds:
      return "out of Embed slots";
    case Status::BadArgument:
      return "bad argument";
    case Status::NotFound:
      return "not found";
    case Status::AlreadyExists:
      return "already exists";
    case Status::Terminated:
      return "terminated";
    case Status::Unsupported:
      return "unsupported";
    case Status::BackendFailure:
      return "backend failure";
    case Status::Waiting:
      return "waiting";
    case Status::OutOfStates:
      return "out of recurrent states";
  }
  return "?";
}

}  // namespace pith
