// Per-operation GPU times of a profiled forward. See op_events.h.
#include "engine/cuda/op_events.h"

#include "common/error.h"

namespace pith::cuda {

Event& OpEvents::next() {
  if (used_ == events_.size()) events_.emplace_back(true);
  return events_[used_++];
}

void OpEvents::begin(cudaStream_t s) {
  used_ = 0;
  ops_.clear();
  next().record(s);
}

void OpEvents::mark(ForwardProfile::Op op, cudaStream_t s) {
  PITH_CHECK(used_ > 0);
  next().record(s);
  ops_.push_back(op);
}

void OpEvents::charge(ForwardProfile& profile) {
  PITH_CHECK(used_ == ops_.size() + 1);
  ++profile.forwards;
  for (size_t i = 0; i < ops_.size(); ++i)
    profile.ns[ops_[i]] +=
        static_cast<int64_t>(double(events_[i + 1].elapsed_since(events_[i])) * 1e6);
  used_ = 0;
  ops_.clear();
}

}  // namespace pith::cuda
