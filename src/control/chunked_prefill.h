// Chunked prefill, splitting and merging: a forward over many inputs runs as several batches when
// it does not fit the token budget (batch_scheduler.h). Pure functions over plain structs (the
// sequence in physical ids, the scheduler's CallInfo); the controller holds the references and
// the queue.
//
// A chunked call keeps `origin`: for each of its remaining outputs, the index of that output in
// the call as submitted. Chunks hand their outputs back by origin; the last part merges them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/forward_batch.h"
#include "control/batch_scheduler.h"

namespace pith {

struct PrefillChunk {
  SequenceInput seq;  // the first m inputs, a prefix of the page table, truncated mask rows
  std::vector<uint32_t> origin;  // seq.outputs[i] is output origin[i] of the submitted call
};

// Splits the first m inputs (0 < m < n) off `rest`, a forward over n inputs that writes slots
// [ctx - n, ctx). The chunk's context ends at ctx - n + m; `rest` keeps inputs [m, n), its page
// table and its context. `origin` is rest's output origins: empty before the first split (the
// identity), updated in place.
PrefillChunk split_prefill(SequenceInput& rest, std::vector<uint32_t>& origin, uint32_t m,
                           uint32_t page_size);

// The scheduling info of `rest` after m of its inputs went to a chunk: fewer tokens, and it now
// writes only the pages from the chunk's context end on (Embed reads and writes unchanged).
void narrow_after_split(CallInfo& info, const SequenceInput& rest, uint32_t m, uint32_t page_size);

// Moves `outputs` (of a chunk or the last part) into `gathered`, sized to the submitted call's
// outputs, at their origins.
void gather_outputs(std::vector<OutputResult>& gathered, std::span<const uint32_t> origin,
                    std::vector<OutputResult>& outputs);

}  // namespace pith
