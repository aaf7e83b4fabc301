#include "control/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace pith {

const char* status_name(Status s) {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::BadHandle: return "bad handle";
    case Status::OutOfKvPages: return "out of KV pages";
    case Status::QuotaExceeded: return "KV page quota exceeded";
    case Status::OutOfEmbeds: return "out of Embed slots";
    case Status::BadArgument: return "bad argument";
    case Status::NotFound: return "not found";
    case Status::AlreadyExists: return "already exists";
    case Status::Terminated: return "terminated";
    case Status::Unsupported: return "unsupported";
  }
  return "?";
}

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

thread_local std::string t_last_error;

Status reject(Status s, std::string why) {
  t_last_error = std::move(why);
  return s;
}

// Embeds share the conflict sets with pages, tagged so their ids never collide.
constexpr uint32_t kEmbedTag = 0x80000000u;

}  // namespace

const std::string& Controller::last_error() { return t_last_error; }

struct Controller::Payload {
  CallType type = CallType::Forward;
  InstanceId owner = 0;
  QueueId queue = 0;
  int64_t enqueued_ns = 0;
  SequenceInput seq;                       // Forward, physical ids
  std::vector<int32_t> tokens;             // EmbedTokens
  std::vector<uint32_t> positions;
  std::vector<uint32_t> slots;
  uint32_t embed_slot = 0, top_k = 0;      // NextDist
  uint32_t src = 0, dst = 0, src_off = 0, dst_off = 0, n = 0;  // CopyKv
  std::vector<uint32_t> held_pages, held_embeds;  // references released on completion
  Completion done;
  CallOutcome outcome;
  // Chunked prefill: a chunk runs the first inputs of `parent` (still queued) and hands its
  // outputs back; output_origin[i] is the parent output index of the chunk's output i.
  std::shared_ptr<Payload> parent;
  std::vector<uint32_t> output_origin;
  std::vector<OutputResult> gathered;  // parent: outputs delivered by earlier chunks
};

Controller::Controller(Backend& backend, const ControllerOptions& options)
    : backend_(backend),
      options_(options),
      policy_(make_dispatch_policy(options.policy)),
      page_refs_(backend.page_slots()),
      embed_refs_(backend.embed_slots()) {
  limits_.max_tokens = options.max_batch_tokens;
  limits_.max_seqs = options.max_batch_seqs;
  limits_.formation = options.batch_formation;
  limits_.long_prefill_threshold =
      options.long_prefill_threshold ? options.long_prefill_threshold : options.max_batch_tokens / 4;
  limits_ = policy_->limit(limits_);
  if (options.prefix_cache) prefix_cache_ = std::make_unique<PrefixCache>(page_refs_, page_size());
  dispatcher_ = std::thread([this] { dispatcher_loop(); });
}

Controller::~Controller() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  dispatcher_.join();
  // Fail whatever is still pending so no waiter hangs.
  std::vector<std::function<void()>> deferred;
  {
    std::lock_guard lock(mu_);
    std::vector<InstanceId> ids;
    for (auto& [id, _] : instances_) ids.push_back(id);
    for (auto id : ids) release_instance_locked(id, deferred);
    prefix_cache_.reset();
  }
  for (auto& f : deferred) f();
}

// ---------------------------------------------------------------- instances

void Controller::register_instance(InstanceId id, KillFn on_kill) {
  std::lock_guard lock(mu_);
  Instance& inst = instances_[id];
  inst.launch_seq = next_launch_seq_++;
  inst.on_kill = std::move(on_kill);
}

void Controller::release_instance(InstanceId id) {
  std::vector<std::function<void()>> deferred;
  {
    std::lock_guard lock(mu_);
    release_instance_locked(id, deferred);
  }
  for (auto& f : deferred) f();
}

void Controller::release_instance_locked(InstanceId id, std::vector<std::function<void()>>& deferred) {
  auto it = instances_.find(id);
  if (it == instances_.end()) return;
  Instance& inst = it->second;
  for (QueueId qid : inst.queues) {
    auto qit = queues_.find(qid);
    if (qit == queues_.end()) continue;
    drop_pending_locked(qit->second, "instance terminated", deferred);
    queues_.erase(qit);
  }
  inst.pages.for_each([&](uint32_t, uint32_t phys) { page_refs_.release(phys); });
  inst.embeds.for_each([&](uint32_t, uint32_t phys) { embed_refs_.release(phys); });
  for (const auto& name : inst.exports) {
    auto eit = exports_.find(name);
    if (eit != exports_.end() && eit->second.owner == id && !eit->second.persistent) {
      page_refs_.release(eit->second.pages);
      exports_.erase(eit);
    }
  }
  instances_.erase(it);
  // In-flight calls of this instance still hold their references; they are released when the
  // batch completes, and their completions see Status::Terminated there.
}

void Controller::drop_pending_locked(Queue& queue, const char* why,
                                     std::vector<std::function<void()>>& deferred) {
  // Pending calls give back their references and complete with Status::Terminated; waiters
  // on synchronize are released too (after the completions, outside the lock).
  for (auto& p : queue.payloads) {
    page_refs_.release(p->held_pages);
    embed_refs_.release(p->held_embeds);
    if (p->done)
      deferred.push_back([done = std::move(p->done), why]() mutable {
        CallOutcome o;
        o.status = Status::Terminated;
        o.error = why;
        done(std::move(o));
      });
  }
  for (auto& [_, fn] : queue.sync_waiters) deferred.push_back(std::move(fn));
  queue.payloads.clear();
  queue.infos.clear();
  queue.sync_waiters.clear();
}

Controller::Instance* Controller::find_instance(InstanceId id) {
  auto it = instances_.find(id);
  return it == instances_.end() ? nullptr : &it->second;
}

Controller::Queue* Controller::find_queue(InstanceId id, QueueId q) {
  auto it = queues_.find(q);
  if (it == queues_.end() || it->second.owner != id) return nullptr;
  return &it->second;
}

// ---------------------------------------------------------------- queues

Status Controller::create_queue(InstanceId id, QueueId& out) {
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  out = next_queue_id_++;
  queues_[out].owner = id;
  inst->queues.push_back(out);
  return Status::Ok;
}

Status Controller::destroy_queue(InstanceId id, QueueId q) {
  std::vector<std::function<void()>> deferred;
  {
    std::lock_guard lock(mu_);
    Queue* queue = find_queue(id, q);
    if (!queue) return reject(Status::BadHandle, "unknown queue");
    drop_pending_locked(*queue, "queue destroyed", deferred);
    queues_.erase(q);
    auto& qs = instances_.at(id).queues;
    qs.erase(std::remove(qs.begin(), qs.end(), q), qs.end());
  }
  for (auto& f : deferred) f();
  return Status::Ok;
}

Status Controller::set_queue_priority(InstanceId id, QueueId q, int32_t priority) {
  std::lock_guard lock(mu_);
  Queue* queue = find_queue(id, q);
  if (!queue) return reject(Status::BadHandle, "unknown queue");
  queue->priority = priority;
  return Status::Ok;
}

Status Controller::synchronize(InstanceId id, QueueId q, std::function<void()> done) {
  {
    std::lock_guard lock(mu_);
    Queue* queue = find_queue(id, q);
    if (!queue) return reject(Status::BadHandle, "unknown queue");
    if (queue->completed < queue->submitted) {
      queue->sync_waiters.emplace_back(queue->submitted, std::move(done));
      return Status::Ok;
    }
  }
  done();
  return Status::Ok;
}

// ---------------------------------------------------------------- resources

bool Controller::make_room_locked(InstanceId requester, uint32_t n,
                                  std::vector<std::function<void()>>& deferred) {
  // First give back cached pages nobody uses (LRU leaves of the prefix cache); then the
  // contention policy (paper §5.2): terminate the most recently launched instances, newer
  // than the requester, until enough pages are free.
  if (prefix_cache_ && page_refs_.n_free() < n) prefix_cache_->evict(n - page_refs_.n_free());
  uint64_t requester_seq = instances_.at(requester).launch_seq;
  while (page_refs_.n_free() < n) {
    InstanceId victim = 0;
    uint64_t newest = requester_seq;
    for (auto& [id, inst] : instances_)
      if (inst.launch_seq > newest && inst.pages.size() > 0) {
        newest = inst.launch_seq;
        victim = id;
      }
    if (victim == 0) return false;
    KillFn kill = std::move(instances_.at(victim).on_kill);
    release_instance_locked(victim, deferred);
    ++counters_.instances_killed_for_memory;
    if (kill) deferred.push_back([kill = std::move(kill)] { kill("KV memory needed by an older inferlet"); });
  }
  return true;
}

Status Controller::alloc_pages(InstanceId id, uint32_t n, std::vector<uint32_t>& handles) {
  std::vector<std::function<void()>> deferred;
  Status st = Status::Ok;
  {
    std::lock_guard lock(mu_);
    Instance* inst = find_instance(id);
    if (!inst) return reject(Status::Terminated, "unknown instance");
    if (options_.max_kv_pages_per_instance &&
        inst->pages.size() + n > options_.max_kv_pages_per_instance) {
      return reject(Status::QuotaExceeded,
                    fmt::format("holding {} pages, quota {}", inst->pages.size(),
                                options_.max_kv_pages_per_instance));
    }
    std::vector<uint32_t> phys;
    if (page_refs_.n_free() < n && !make_room_locked(id, n, deferred)) {
      st = reject(Status::OutOfKvPages, fmt::format("{} pages requested, {} free of {}", n,
                                                    page_refs_.n_free(), backend_.page_slots().capacity()));
    } else if (!page_refs_.allocate(n, phys)) {
      st = reject(Status::OutOfKvPages, "pages still held by in-flight calls");
    } else {
      inst = find_instance(id);
      handles.clear();
      for (uint32_t p : phys) handles.push_back(inst->pages.insert(p));
    }
  }
  for (auto& f : deferred) f();
  return st;
}

Status Controller::dealloc_pages(InstanceId id, std::span<const uint32_t> handles) {
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  for (uint32_t h : handles)
    if (!inst->pages.lookup(h)) return reject(Status::BadHandle, fmt::format("page handle {}", h));
  for (uint32_t h : handles) {
    auto phys = inst->pages.erase(h);
    if (phys) page_refs_.release(*phys);  // a duplicate handle in the list erases once
  }
  return Status::Ok;
}

Status Controller::alloc_embeds(InstanceId id, uint32_t n, std::vector<uint32_t>& handles) {
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  std::vector<uint32_t> phys;
  if (!embed_refs_.allocate(n, phys))
    return reject(Status::OutOfEmbeds, fmt::format("{} embeds requested, {} free", n, embed_refs_.n_free()));
  handles.clear();
  for (uint32_t p : phys) handles.push_back(inst->embeds.insert(p));
  return Status::Ok;
}

Status Controller::dealloc_embeds(InstanceId id, std::span<const uint32_t> handles) {
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  for (uint32_t h : handles)
    if (!inst->embeds.lookup(h)) return reject(Status::BadHandle, fmt::format("embed handle {}", h));
  for (uint32_t h : handles) {
    auto phys = inst->embeds.erase(h);
    if (phys) embed_refs_.release(*phys);
  }
  return Status::Ok;
}

Status Controller::export_pages(InstanceId id, const std::string& name,
                                std::span<const uint32_t> handles, bool persistent) {
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  if (exports_.count(name)) return reject(Status::AlreadyExists, "export '" + name + "' exists");
  Export ex;
  ex.owner = id;
  ex.persistent = persistent;
  for (uint32_t h : handles) {
    auto p = inst->pages.lookup(h);
    if (!p) return reject(Status::BadHandle, fmt::format("page handle {}", h));
    ex.pages.push_back(*p);
  }
  page_refs_.retain(ex.pages);
  if (!persistent) inst->exports.push_back(name);
  exports_.emplace(name, std::move(ex));
  return Status::Ok;
}

Status Controller::import_pages(InstanceId id, const std::string& name, std::vector<uint32_t>& handles) {
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  auto it = exports_.find(name);
  if (it == exports_.end()) return reject(Status::NotFound, "no export '" + name + "'");
  handles.clear();
  for (uint32_t p : it->second.pages) {
    page_refs_.retain(p);
    handles.push_back(inst->pages.insert(p));
  }
  return Status::Ok;
}

Status Controller::remove_export(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = exports_.find(name);
  if (it == exports_.end()) return reject(Status::NotFound, "no export '" + name + "'");
  page_refs_.release(it->second.pages);
  exports_.erase(it);
  return Status::Ok;
}

std::vector<std::string> Controller::list_exports() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, _] : exports_) names.push_back(name);
  return names;
}

Status Controller::prefix_match(InstanceId id, std::span<const int32_t> tokens,
                                std::vector<uint32_t>& handles, size_t& matched) {
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  handles.clear();
  matched = 0;
  if (!prefix_cache_) return Status::Ok;
  std::vector<uint32_t> phys;
  matched = prefix_cache_->match(tokens, phys);
  for (uint32_t p : phys) handles.push_back(inst->pages.insert(p));  // takes match's reference
  return Status::Ok;
}

Status Controller::prefix_insert(InstanceId id, std::span<const int32_t> tokens,
                                 std::span<const uint32_t> handles) {
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  if (tokens.size() < handles.size() * size_t{page_size()})
    return reject(Status::BadArgument, fmt::format("{} pages need {} tokens, got {}", handles.size(),
                                                   handles.size() * size_t{page_size()}, tokens.size()));
  std::vector<uint32_t> phys;
  for (uint32_t h : handles) {
    auto p = inst->pages.lookup(h);
    if (!p) return reject(Status::BadHandle, fmt::format("page handle {}", h));
    phys.push_back(*p);
  }
  if (prefix_cache_) prefix_cache_->insert(tokens, phys);
  return Status::Ok;
}

bool Controller::has_page(InstanceId id, uint32_t handle) const {
  std::lock_guard lock(mu_);
  auto it = instances_.find(id);
  return it != instances_.end() && it->second.pages.lookup(handle).has_value();
}

uint32_t Controller::pages_held(InstanceId id) const {
  std::lock_guard lock(mu_);
  auto it = instances_.find(id);
  return it == instances_.end() ? 0 : static_cast<uint32_t>(it->second.pages.size());
}

// ---------------------------------------------------------------- queued calls

Status Controller::enqueue(InstanceId id, QueueId q, CallInfo info, std::shared_ptr<Payload> payload) {
  // Caller holds mu_ and has validated the payload.
  Queue* queue = find_queue(id, q);
  info.id = next_call_id_++;
  info.enqueued_ns = payload->enqueued_ns = now_ns();
  payload->owner = id;
  payload->queue = q;
  page_refs_.retain(payload->held_pages);
  embed_refs_.retain(payload->held_embeds);
  queue->infos.push_back(std::move(info));
  queue->payloads.push_back(std::move(payload));
  ++queue->submitted;
  work_cv_.notify_one();
  return Status::Ok;
}

Status Controller::forward(InstanceId id, QueueId q, SequenceInput seq, Completion done) {
  const ModelConfig& cfg = backend_.config();
  const uint32_t ps = page_size();
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  if (!find_queue(id, q)) return reject(Status::BadHandle, "unknown queue");

  const bool by_tokens = !seq.tokens.empty();
  if (by_tokens == !seq.embed_slots.empty())
    return reject(Status::BadArgument, "forward needs either input tokens or input embeds");
  const size_t n = seq.n_inputs();
  if (seq.positions.size() != n)
    return reject(Status::BadArgument, fmt::format("{} inputs but {} positions", n, seq.positions.size()));
  if (seq.kv_pages.empty()) return reject(Status::BadArgument, "forward needs at least one KV page");
  if (seq.last_page_len == 0 || seq.last_page_len > ps)
    return reject(Status::BadArgument, fmt::format("last_page_len {} not in [1, {}]", seq.last_page_len, ps));
  const size_t ctx = (seq.kv_pages.size() - 1) * ps + seq.last_page_len;
  if (n > ctx)
    return reject(Status::BadArgument, fmt::format("{} inputs do not fit a context of {} slots", n, ctx));
  for (int32_t t : seq.tokens)
    if (t < 0 || static_cast<uint32_t>(t) >= cfg.vocab_size)
      return reject(Status::BadArgument, fmt::format("token id {} outside vocabulary of {}", t, cfg.vocab_size));
  if (!seq.mask.empty()) {
    if (seq.mask.size() != n)
      return reject(Status::BadArgument, fmt::format("mask has {} rows for {} inputs", seq.mask.size(), n));
    for (const auto& runs : seq.mask) {
      uint64_t sum = 0;
      for (uint32_t r : runs) sum += r;
      if (sum != ctx)
        return reject(Status::BadArgument, fmt::format("mask runs cover {} slots, context has {}", sum, ctx));
    }
  }

  auto payload = std::make_shared<Payload>();
  payload->type = CallType::Forward;
  CallInfo info;
  info.type = CallType::Forward;
  info.n_tokens = static_cast<uint32_t>(n);
  info.splittable = n > 1;
  const size_t first_write_page = (ctx - n) / ps;
  for (size_t i = 0; i < seq.kv_pages.size(); ++i) {
    auto p = inst->pages.lookup(seq.kv_pages[i]);
    if (!p) return reject(Status::BadHandle, fmt::format("page handle {}", seq.kv_pages[i]));
    seq.kv_pages[i] = *p;
    payload->held_pages.push_back(*p);
    (i >= first_write_page ? info.writes : info.reads).push_back(*p);
  }
  for (auto& e : seq.embed_slots) {
    auto p = inst->embeds.lookup(e);
    if (!p) return reject(Status::BadHandle, fmt::format("embed handle {}", e));
    e = *p;
    payload->held_embeds.push_back(*p);
    info.reads.push_back(*p | kEmbedTag);
  }
  for (auto& o : seq.outputs) {
    if (o.input_index >= n)
      return reject(Status::BadArgument, fmt::format("output for input {} of {}", o.input_index, n));
    if (o.kind == OutputKind::TopK && (o.top_k == 0 || o.top_k > cfg.vocab_size))
      return reject(Status::BadArgument, fmt::format("top_k {} not in [1, {}]", o.top_k, cfg.vocab_size));
    if (o.kind == OutputKind::Embed) {
      auto p = inst->embeds.lookup(o.embed_slot);
      if (!p) return reject(Status::BadHandle, fmt::format("output embed handle {}", o.embed_slot));
      o.embed_slot = *p;
      payload->held_embeds.push_back(*p);
      info.writes.push_back(*p | kEmbedTag);
    }
  }
  payload->seq = std::move(seq);
  payload->done = std::move(done);
  return enqueue(id, q, std::move(info), std::move(payload));
}

Status Controller::embed_tokens(InstanceId id, QueueId q, std::vector<int32_t> tokens,
                                std::vector<uint32_t> positions, std::vector<uint32_t> embed_handles,
                                Completion done) {
  const ModelConfig& cfg = backend_.config();
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  if (!find_queue(id, q)) return reject(Status::BadHandle, "unknown queue");
  if (tokens.size() != positions.size() || tokens.size() != embed_handles.size())
    return reject(Status::BadArgument, "embed_tokens needs one position and one embed per token");
  for (int32_t t : tokens)
    if (t < 0 || static_cast<uint32_t>(t) >= cfg.vocab_size)
      return reject(Status::BadArgument, fmt::format("token id {} outside vocabulary", t));
  auto payload = std::make_shared<Payload>();
  payload->type = CallType::EmbedTokens;
  CallInfo info;
  info.type = CallType::EmbedTokens;
  info.n_tokens = static_cast<uint32_t>(tokens.size());
  for (uint32_t h : embed_handles) {
    auto p = inst->embeds.lookup(h);
    if (!p) return reject(Status::BadHandle, fmt::format("embed handle {}", h));
    payload->slots.push_back(*p);
    payload->held_embeds.push_back(*p);
    info.writes.push_back(*p | kEmbedTag);
  }
  payload->tokens = std::move(tokens);
  payload->positions = std::move(positions);
  payload->done = std::move(done);
  return enqueue(id, q, std::move(info), std::move(payload));
}

Status Controller::next_dist(InstanceId id, QueueId q, uint32_t embed_handle, uint32_t top_k, Completion done) {
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  if (!find_queue(id, q)) return reject(Status::BadHandle, "unknown queue");
  auto p = inst->embeds.lookup(embed_handle);
  if (!p) return reject(Status::BadHandle, fmt::format("embed handle {}", embed_handle));
  if (top_k == 0 || top_k > backend_.config().vocab_size)
    return reject(Status::BadArgument, fmt::format("top_k {} out of range", top_k));
  auto payload = std::make_shared<Payload>();
  payload->type = CallType::NextDist;
  payload->embed_slot = *p;
  payload->top_k = top_k;
  payload->held_embeds.push_back(*p);
  payload->done = std::move(done);
  CallInfo info;
  info.type = CallType::NextDist;
  info.n_tokens = 1;
  info.reads.push_back(*p | kEmbedTag);
  return enqueue(id, q, std::move(info), std::move(payload));
}

Status Controller::copy_kv(InstanceId id, QueueId q, uint32_t src_handle, uint32_t dst_handle,
                           uint32_t src_offset, uint32_t dst_offset, uint32_t n, Completion done) {
  const uint32_t ps = page_size();
  std::lock_guard lock(mu_);
  Instance* inst = find_instance(id);
  if (!inst) return reject(Status::Terminated, "unknown instance");
  if (!find_queue(id, q)) return reject(Status::BadHandle, "unknown queue");
  auto src = inst->pages.lookup(src_handle);
  auto dst = inst->pages.lookup(dst_handle);
  if (!src || !dst) return reject(Status::BadHandle, "copy_kv page handle");
  if (n == 0 || src_offset + n > ps || dst_offset + n > ps)
    return reject(Status::BadArgument, fmt::format("copy of {} slots from {} to {} exceeds page size {}", n,
                                                   src_offset, dst_offset, ps));
  auto payload = std::make_shared<Payload>();
  payload->type = CallType::CopyKv;
  payload->src = *src;
  payload->dst = *dst;
  payload->src_off = src_offset;
  payload->dst_off = dst_offset;
  payload->n = n;
  payload->held_pages = {*src, *dst};
  payload->done = std::move(done);
  CallInfo info;
  info.type = CallType::CopyKv;
  info.n_tokens = 0;
  info.n_seqs = 0;
  info.reads.push_back(*src);
  info.writes.push_back(*dst);
  return enqueue(id, q, std::move(info), std::move(payload));
}

// ---------------------------------------------------------------- chunked prefill

std::shared_ptr<Controller::Payload> Controller::split_chunk_locked(std::shared_ptr<Payload>& rest,
                                                                   CallInfo& info, uint32_t m) {
  // `rest` runs inputs [0, n) into slots [ctx - n, ctx). The chunk takes inputs [0, m): its
  // context ends at slot ctx - n + m, so it sees a prefix of the page table. `rest` keeps
  // inputs [m, n) and its page table (its context still ends at ctx).
  const uint32_t ps = page_size();
  SequenceInput& seq = rest->seq;
  const size_t n = seq.n_inputs();
  const size_t ctx = (seq.kv_pages.size() - 1) * ps + seq.last_page_len;
  const size_t chunk_ctx = ctx - n + m;
  PITH_CHECK(m > 0 && m < n);

  auto chunk = std::make_shared<Payload>();
  chunk->type = CallType::Forward;
  chunk->owner = rest->owner;
  chunk->queue = rest->queue;
  chunk->enqueued_ns = rest->enqueued_ns;
  chunk->parent = rest;
  SequenceInput& c = chunk->seq;
  if (!seq.tokens.empty()) {
    c.tokens.assign(seq.tokens.begin(), seq.tokens.begin() + m);
    seq.tokens.erase(seq.tokens.begin(), seq.tokens.begin() + m);
  } else {
    c.embed_slots.assign(seq.embed_slots.begin(), seq.embed_slots.begin() + m);
    seq.embed_slots.erase(seq.embed_slots.begin(), seq.embed_slots.begin() + m);
  }
  c.positions.assign(seq.positions.begin(), seq.positions.begin() + m);
  seq.positions.erase(seq.positions.begin(), seq.positions.begin() + m);
  const size_t chunk_pages = (chunk_ctx + ps - 1) / ps;
  c.kv_pages.assign(seq.kv_pages.begin(), seq.kv_pages.begin() + chunk_pages);
  c.last_page_len = static_cast<uint32_t>(chunk_ctx - (chunk_pages - 1) * ps);
  if (!seq.mask.empty()) {
    for (size_t i = 0; i < m; ++i) {
      // Truncate the row's runs to the chunk's context.
      std::vector<uint32_t> runs;
      size_t covered = 0;
      for (uint32_t r : seq.mask[i]) {
        if (covered >= chunk_ctx) break;
        uint32_t keep = static_cast<uint32_t>(std::min<size_t>(r, chunk_ctx - covered));
        runs.push_back(keep);
        covered += keep;
      }
      c.mask.push_back(std::move(runs));
    }
    seq.mask.erase(seq.mask.begin(), seq.mask.begin() + m);
  }
  // Outputs: those of inputs < m move to the chunk; the rest are re-indexed.
  if (rest->gathered.empty()) {
    rest->gathered.resize(seq.outputs.size());
    rest->output_origin.resize(seq.outputs.size());
    for (size_t i = 0; i < seq.outputs.size(); ++i) rest->output_origin[i] = static_cast<uint32_t>(i);
  }
  std::vector<OutputSpec> keep;
  std::vector<uint32_t> keep_origin;
  for (size_t i = 0; i < seq.outputs.size(); ++i) {
    OutputSpec o = seq.outputs[i];
    if (o.input_index < m) {
      c.outputs.push_back(o);
      chunk->output_origin.push_back(rest->output_origin[i]);
    } else {
      o.input_index -= m;
      keep.push_back(o);
      keep_origin.push_back(rest->output_origin[i]);
    }
  }
  seq.outputs = std::move(keep);
  rest->output_origin = std::move(keep_origin);

  // The chunk holds its own references (the rest may be released while it runs).
  chunk->held_pages = c.kv_pages;
  chunk->held_embeds = c.embed_slots;
  for (const auto& o : c.outputs)
    if (o.kind == OutputKind::Embed) chunk->held_embeds.push_back(o.embed_slot);
  page_refs_.retain(chunk->held_pages);
  embed_refs_.retain(chunk->held_embeds);

  // The rest's scheduling info: fewer tokens; it writes only the pages after the chunk.
  info.n_tokens -= m;
  info.splittable = info.n_tokens > 1;
  std::vector<uint32_t> reads, writes;
  const size_t first_write_page = chunk_ctx / ps;
  for (size_t i = 0; i < seq.kv_pages.size(); ++i)
    (i >= first_write_page ? writes : reads).push_back(seq.kv_pages[i]);
  for (uint32_t e : info.reads)
    if (e & kEmbedTag) reads.push_back(e);
  for (uint32_t e : info.writes)
    if (e & kEmbedTag) writes.push_back(e);
  info.reads = std::move(reads);
  info.writes = std::move(writes);
  return chunk;
}

// ---------------------------------------------------------------- dispatch

void Controller::set_batch_observer(std::function<void(const BatchStats&)> fn) {
  std::lock_guard lock(mu_);
  batch_observer_ = std::move(fn);
}

ControllerGauges Controller::gauges() const {
  std::lock_guard lock(mu_);
  ControllerGauges g = counters_;
  g.pages_total = backend_.page_slots().capacity();
  g.pages_free = page_refs_.n_free();
  g.embeds_total = backend_.embed_slots().capacity();
  g.embeds_free = embed_refs_.n_free();
  g.instances = static_cast<uint32_t>(instances_.size());
  uint32_t depth = 0;
  for (const auto& [_, q] : queues_) depth += static_cast<uint32_t>(q.infos.size());
  g.queue_depth = depth;
  if (prefix_cache_) {
    g.pages_cached = prefix_cache_->stats().cached_pages;
    g.prefix_hit_tokens = prefix_cache_->stats().hit_tokens;
    g.prefix_miss_tokens = prefix_cache_->stats().miss_tokens;
  }
  return g;
}

void Controller::dispatcher_loop() {
  std::vector<QueueView> views;
  std::unique_lock lock(mu_);
  for (;;) {
    // Wait for eligible work (no busy-waiting: an idle server sleeps here).
    int64_t oldest = 0;
    size_t eligible = 0;
    for (;;) {
      if (stop_) return;
      views.clear();
      oldest = INT64_MAX;
      for (auto& [qid, q] : queues_) {
        if (q.infos.empty()) continue;
        views.push_back({qid, q.priority, q.infos});
        oldest = std::min(oldest, q.infos.front().enqueued_ns);
      }
      eligible = views.size();
      if (eligible == 0) {
        work_cv_.wait(lock);
        continue;
      }
      DispatchState ds;
      ds.n_eligible = eligible;
      const int64_t now = now_ns();
      ds.oldest_wait_ns = now - oldest;
      ds.since_last_batch_ns = now - last_batch_end_ns_;
      ds.last_backend_ns = last_backend_ns_;
      for (QueueId q : last_batch_queues_) {
        auto it = queues_.find(q);
        if (it != queues_.end() && it->second.infos.empty()) ++ds.returning;
      }
      DispatchDecision d = policy_->decide(ds);
      if (d.dispatch) break;
      work_cv_.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(d.recheck_after_ns, 1000)));
    }

    BatchPlan plan = form_batch(views, limits_);
    std::vector<std::shared_ptr<Payload>> calls;
    calls.reserve(plan.n_calls);
    const int64_t dispatch_ns = now_ns();
    int64_t max_wait = 0;
    for (const QueueTake& take : plan.takes) {
      Queue& q = queues_.at(take.queue_id);
      for (uint32_t i = 0; i < take.calls; ++i) {
        max_wait = std::max(max_wait, dispatch_ns - q.infos[i].enqueued_ns);
        calls.push_back(std::move(q.payloads.front()));
        q.payloads.pop_front();
      }
      q.infos.erase(q.infos.begin(), q.infos.begin() + take.calls);
      if (take.partial_tokens > 0) {
        max_wait = std::max(max_wait, dispatch_ns - q.infos.front().enqueued_ns);
        calls.push_back(split_chunk_locked(q.payloads.front(), q.infos.front(), take.partial_tokens));
      }
    }

    uint32_t prefill_tokens = 0, decode_tokens = 0;
    if (plan.type == CallType::Forward)
      for (const auto& c : calls) {
        const size_t n = c->seq.n_inputs();
        (n == 1 && !c->parent && c->gathered.empty() ? decode_tokens : prefill_tokens) += static_cast<uint32_t>(n);
      }

    lock.unlock();
    const int64_t t0 = now_ns();
    execute(plan.type, calls);
    const int64_t backend_ns = now_ns() - t0;
    lock.lock();

    // Release references, advance queue counters, collect completions.
    std::vector<std::function<void()>> deferred;
    for (auto& c : calls) {
      page_refs_.release(c->held_pages);
      embed_refs_.release(c->held_embeds);
      if (c->parent) {
        // A prefill chunk: hand its outputs (and any failure) to the rest of the call.
        Payload& parent = *c->parent;
        for (size_t i = 0; i < c->output_origin.size() && i < c->outcome.forward.outputs.size(); ++i)
          parent.gathered[c->output_origin[i]] = std::move(c->outcome.forward.outputs[i]);
        if (c->outcome.status != Status::Ok && parent.outcome.status == Status::Ok)
          parent.outcome = std::move(c->outcome);
        continue;
      }
      if (!c->gathered.empty()) {
        // The last chunk of a chunked call: merge earlier chunks' outputs back in order.
        auto& outs = c->outcome.forward.outputs;
        for (size_t i = 0; i < c->output_origin.size() && i < outs.size(); ++i)
          c->gathered[c->output_origin[i]] = std::move(outs[i]);
        outs = std::move(c->gathered);
      }
      auto qit = queues_.find(c->queue);
      if (qit == queues_.end()) {
        c->outcome.status = Status::Terminated;  // released while in flight
      } else {
        Queue& q = qit->second;
        ++q.completed;
        auto& waiters = q.sync_waiters;
        for (auto it = waiters.begin(); it != waiters.end();) {
          if (it->first <= q.completed) {
            deferred.push_back(std::move(it->second));
            it = waiters.erase(it);
          } else {
            ++it;
          }
        }
      }
    }
    last_batch_queues_.clear();
    for (const QueueTake& t : plan.takes) last_batch_queues_.push_back(t.queue_id);
    last_batch_end_ns_ = now_ns();
    last_backend_ns_ = backend_ns;
    ++counters_.batches;
    counters_.calls += plan.n_calls;
    counters_.tokens += plan.n_tokens;
    counters_.prefill_tokens += prefill_tokens;
    counters_.decode_tokens += decode_tokens;
    auto observer = batch_observer_;
    lock.unlock();

    // Statistics, then completions (they carry results), then the synchronize waiters that
    // follow them.
    if (observer)
      observer({plan.type, plan.n_calls, plan.n_tokens, plan.n_seqs, prefill_tokens, decode_tokens, max_wait, backend_ns});
    for (auto& c : calls)
      if (c->done && !c->parent) c->done(std::move(c->outcome));
    for (auto& f : deferred) f();
    lock.lock();
  }
}

void Controller::execute(CallType type, std::vector<std::shared_ptr<Payload>>& calls) {
  auto fail_call = [](Payload& p, const std::exception& e) {
    p.outcome.status = Status::BadArgument;
    p.outcome.error = e.what();
  };
  switch (type) {
    case CallType::Forward: {
      std::vector<SequenceInput> batch;
      batch.reserve(calls.size());
      for (auto& c : calls) batch.push_back(std::move(c->seq));
      try {
        auto results = backend_.forward(batch);
        for (size_t i = 0; i < calls.size(); ++i) calls[i]->outcome.forward = std::move(results[i]);
      } catch (const std::exception& e) {
        // Validation above should make this unreachable; if the backend still rejects the
        // batch, run the sequences one by one so only the offending call fails.
        spdlog::warn("forward batch of {} rejected ({}); retrying one by one", calls.size(), e.what());
        for (size_t i = 0; i < calls.size(); ++i) {
          try {
            auto r = backend_.forward({batch[i]});
            calls[i]->outcome.forward = std::move(r[0]);
          } catch (const std::exception& e2) {
            fail_call(*calls[i], e2);
          }
        }
      }
      break;
    }
    case CallType::EmbedTokens:
      for (auto& c : calls) {
        try {
          backend_.embed_tokens(c->tokens, c->positions, c->slots);
        } catch (const std::exception& e) {
          fail_call(*c, e);
        }
      }
      break;
    case CallType::NextDist:
      for (auto& c : calls) {
        try {
          c->outcome.dist = backend_.next_dist(c->embed_slot, c->top_k);
        } catch (const std::exception& e) {
          fail_call(*c, e);
        }
      }
      break;
    case CallType::CopyKv:
      for (auto& c : calls) {
        try {
          backend_.copy_kv(c->src, c->dst, c->src_off, c->dst_off, c->n);
        } catch (const std::exception& e) {
          fail_call(*c, e);
        }
      }
      break;
  }
}

}  // namespace pith
