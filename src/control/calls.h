// The backend calls the controller queues, one struct per kind, over physical ids (handles are
// translated when the call is built, call_builder.h). A queued call is a `Call` variant, so
// each kind carries only its own fields.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include "backend/forward_batch.h"
#include "control/adapter_registry.h"
#include "control/batch_scheduler.h"
#include "control/status.h"

namespace pith {

struct ForwardCall {
  SequenceInput seq;
  // Keeps seq.adapter loaded until the call is done (chunks reach it through their parent).
  std::shared_ptr<const AdapterLease> adapter_lease;
};

struct EmbedTokensCall {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> positions;
  std::vector<uint32_t> slots;  // one Embed slot per token
};

struct NextDistCall {
  uint32_t embed_slot = 0;
  uint32_t top_k = 0;
};

struct CopyKvCall {
  uint32_t src = 0, dst = 0;  // pages
  uint32_t src_offset = 0, dst_offset = 0, n = 0;
};

// Hybrid models: dst's recurrent state becomes a copy of src's (fork).
struct CopyStateCall {
  uint32_t src = 0, dst = 0;  // state slots
};

using Call = std::variant<ForwardCall, EmbedTokensCall, NextDistCall, CopyKvCall, CopyStateCall>;

CallType call_type(const Call& call);

// What a completed call returns: `forward` for ForwardCall, `dist` for NextDistCall, nothing for
// the others.
struct CallOutput {
  SequenceResult forward;
  TokenDistribution dist;
};
using CallOutcome = Result<CallOutput>;
// Runs on the dispatcher thread: keep it short.
using CallCompletion = std::function<void(CallOutcome&&)>;

// Embeds share the batch scheduler's conflict sets with pages, tagged so their ids never
// collide with page ids.
inline constexpr uint32_t kEmbedTag = 0x80000000u;
// Recurrent states likewise: a forward writes its sequence's state, a copy reads one and writes
// another.
inline constexpr uint32_t kStateTag = 0x40000000u;

}  // namespace pith
