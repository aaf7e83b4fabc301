// Runtime state shared through Redis. See shared_state.h.
#include "runtime/shared_state.h"

#include "common/error.h"

namespace pith::runtime {

namespace {

std::string with_prefix(std::string_view prefix, std::string_view rest) {
  std::string k(prefix);
  k += rest;
  return k;
}

constexpr std::string_view kKv = "pith:kv:";
constexpr std::string_view kTopic = "pith:topic:";
constexpr std::string_view kProgram = "pith:program:";
constexpr std::string_view kProgramName = "pith:program-name:";
constexpr std::string_view kExport = "pith:export:";

}  // namespace

SharedState::SharedState(const std::string& url, KvStoreLimits limits, std::string replica)
    : limits_(limits), replica_(std::move(replica)), client_(RedisUrl::parse(url)) {}

SharedState::~SharedState() = default;

void SharedState::deliver_to(PubSub* local) {
  subscriber_ = std::make_unique<RedisSubscriber>(
      client_.url(), std::string(kTopic) + "*",
      [local](std::string_view channel, std::string_view payload) {
        if (channel.substr(0, kTopic.size()) != kTopic) return;
        local->deliver(channel.substr(kTopic.size()), std::string(payload));
      });
}

bool SharedState::wait_subscribed(std::chrono::milliseconds timeout) {
  return subscriber_ && subscriber_->wait_subscribed(timeout);
}

std::optional<std::string> SharedState::get(std::string_view key) const {
  RedisReply r = client_.command({"GET", with_prefix(kKv, key)});
  if (r.type != RedisReply::Type::String) return std::nullopt;
  return std::move(r.str);
}

pith_status_t SharedState::set(std::string_view key, std::string_view value) {
  if (key.size() > limits_.max_key || value.size() > limits_.max_value) return PITH_ERR_LIMIT;
  client_.command({"SET", with_prefix(kKv, key), value});
  return PITH_OK;
}

bool SharedState::erase(std::string_view key) {
  return client_.command({"DEL", with_prefix(kKv, key)}).integer > 0;
}

bool SharedState::contains(std::string_view key) const {
  return client_.command({"EXISTS", with_prefix(kKv, key)}).integer > 0;
}

void SharedState::publish(std::string_view topic, const std::string& message) {
  client_.command({"PUBLISH", with_prefix(kTopic, topic), message});
}

void SharedState::put_program(const std::string& hash, std::string_view wasm,
                              const std::string& name) {
  client_.command({"SET", with_prefix(kProgram, hash), wasm});
  if (!name.empty()) client_.command({"SET", with_prefix(kProgramName, hash), name});
}

std::optional<std::pair<std::string, std::string>> SharedState::get_program(
    const std::string& hash) {
  RedisReply r =
      client_.command({"MGET", with_prefix(kProgram, hash), with_prefix(kProgramName, hash)});
  if (r.elements.size() != 2 || r.elements[0].type != RedisReply::Type::String) return std::nullopt;
  return std::make_pair(std::move(r.elements[0].str), std::move(r.elements[1].str));
}

void SharedState::forget_program(const std::string& hash) {
  client_.command({"DEL", with_prefix(kProgram, hash), with_prefix(kProgramName, hash)});
}

void SharedState::note_export(std::string_view name) {
  client_.command({"SET", with_prefix(kExport, name), replica_});
}

void SharedState::forget_export(std::string_view name) {
  // Only this replica's record: another replica may hold an export of the same name.
  RedisReply r = client_.command({"GET", with_prefix(kExport, name)});
  if (r.type == RedisReply::Type::String && r.str == replica_)
    client_.command({"DEL", with_prefix(kExport, name)});
}

std::optional<std::string> SharedState::export_owner(std::string_view name) {
  RedisReply r = client_.command({"GET", with_prefix(kExport, name)});
  if (r.type != RedisReply::Type::String) return std::nullopt;
  return std::move(r.str);
}

}  // namespace pith::runtime
