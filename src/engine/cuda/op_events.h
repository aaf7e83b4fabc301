// Per-operation GPU times of a profiled forward (Backend::set_profile, backend/forward_profile.h):
// an event is recorded on the stream after each op; once the step has completed, the time between
// two consecutive events is charged to the op that ended at the later one. Kernels of one op
// finish before the next op's start on a single stream, so the charges add up to the step's GPU
// time, less the gaps the events themselves open (about a microsecond each).
#pragma once

#include <cuda_runtime_api.h>

#include <deque>
#include <vector>

#include "backend/forward_profile.h"
#include "engine/cuda/device_memory.h"

namespace pith::cuda {

class OpEvents {
 public:
  // The step's first event (before its inputs are uploaded: the upload counts as Embed).
  void begin(cudaStream_t s);
  // The op that has just been enqueued ends here.
  void mark(ForwardProfile::Op op, cudaStream_t s);
  // After the stream has passed the last mark: adds the step to `profile` (one forward).
  void charge(ForwardProfile& profile);

 private:
  Event& next();

  std::deque<Event> events_;  // a deque: events never move once created
  size_t used_ = 0;
  std::vector<ForwardProfile::Op> ops_;  // ops_[i] ends at events_[i + 1]
};

}  // namespace pith::cuda
