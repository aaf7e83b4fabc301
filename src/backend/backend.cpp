// The defaults of Backend's optional capabilities (backend.h).
#include "backend/backend.h"

#include "common/error.h"

namespace pith {

void Backend::load_adapter(uint32_t id, std::shared_ptr<const LoraAdapter> adapter) {
  (void)id;
  (void)adapter;
  fail("LoRA adapters are not implemented by the {} backend", info().name);
}

void Backend::unload_adapter(uint32_t id) {
  (void)id;
}

}  // namespace pith
