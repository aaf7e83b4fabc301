// EmbedPool: preallocated Embed slots (the free list is a SlotPool). See embed_pool.h.
#include "engine/embed_pool.h"

#include "common/error.h"

namespace pith {

namespace {

uint32_t checked_capacity(uint32_t d_model, uint32_t capacity) {
  if (d_model == 0 || capacity == 0)
    fail("Embed pool: empty shape (d_model {}, capacity {})", d_model, capacity);
  return capacity;
}

}  // namespace

EmbedPool::EmbedPool(uint32_t d_model, uint32_t capacity)
    : d_model_(d_model),
      capacity_(checked_capacity(d_model, capacity)),
      data_(size_t{capacity} * d_model, 0.0f),
      positions_(capacity, 0),
      tokens_(capacity, -1),
      slots_(capacity, "Embed slots") {}

}  // namespace pith
