// pith::jinja::TemplateException: what a chat template's own `raise_exception(msg)` throws.
// what() is exactly the template's message (e.g. "Conversation roles must alternate
// user/assistant/user/assistant/..."), so a server can hand it to the client unchanged.
// Template bugs and unsupported constructs are plain pith::Error instead.
#pragma once

#include "common/error.h"

namespace pith::jinja {

class TemplateException : public Error {
 public:
  using Error::Error;
};

}  // namespace pith::jinja
