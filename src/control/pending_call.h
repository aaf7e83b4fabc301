// A call in a command queue or in flight: the call itself plus what the controller tracks for it
// (owner, references held, its completion, and the pieces of a chunked prefill).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "control/calls.h"

namespace pith {

struct PendingCall {
  Call call;
  uint64_t owner = 0;  // InstanceId
  uint64_t queue = 0;  // QueueId
  int64_t enqueued_ns = 0;
  // References released on completion.
  std::vector<uint32_t> held_pages, held_embeds, held_states;
  CallCompletion done;
  CallOutcome outcome = CallOutput{};
  // Chunked prefill (chunked_prefill.h): a chunk runs the first inputs of `parent` (still
  // queued) and hands its outputs back by `output_origin`; the parent gathers them until its
  // last part completes.
  std::shared_ptr<PendingCall> parent;
  std::vector<uint32_t> output_origin;
  std::vector<OutputResult> gathered;
  bool chunked = false;  // the parent of chunks, or its last part

  ForwardCall& forward() { return std::get<ForwardCall>(call); }
};

}  // namespace pith
