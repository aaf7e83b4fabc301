#include "server/responses_output.h"

#include <chrono>

#include "server/completion_session.h"

namespace pith::server {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

ojson output_text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}};
}

ojson reasoning_part(const std::string& text) {
  return {{"type", "reasoning_text"}, {"text", text}};
}

ojson reasoning_item(const std::string& text, const char* status) {
  return {{"id", "rs_" + random_hex(32)},
          {"type", "reasoning"},
          {"status", status},
          {"summary", ojson::array()},
          {"content", ojson::array({reasoning_part(text)})}};
}

}  // namespace

std::string sse_event(const ojson& event) {
  return "event: " + event["type"].get<std::string>() +
         "\ndata: " + event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

ResponseBuilder::ResponseBuilder(std::string id, std::string model, int64_t created_at, ojson echo)
    : id_(std::move(id)),
      model_(std::move(model)),
      created_at_(created_at),
      echo_(std::move(echo)) {}

ojson ResponseBuilder::event(const char* type, ojson fields) {
  ojson e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : fields.items()) e[key] = std::move(value);
  return e;
}

ojson ResponseBuilder::response() const {
  const char* status = !error_.empty() ? "failed"
                       : !finished_    ? "in_progress"
                       : incomplete_   ? "incomplete"
                                       : "completed";
  ojson r = {{"id", id_},
             {"object", "response"},
             {"created_at", created_at_},
             {"status", status},
             {"background", false},
             {"error", error_.empty() ? ojson(nullptr)
                                      : ojson{{"code", "server_error"}, {"message", error_}}},
             {"incomplete_details",
              incomplete_ && finished_ ? ojson{{"reason", "max_output_tokens"}} : ojson(nullptr)},
             {"model", model_},
             {"output", finished_ ? output_ : ojson::array()}};
  r["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};  // unless the request set it
  for (const auto& [key, value] : echo_.items()) r[key] = value;
  r["truncation"] = "disabled";
  if (finished_) {
    r["usage"] = {{"input_tokens", usage_.input_tokens},
                  {"input_tokens_details", {{"cached_tokens", usage_.cached_tokens}}},
                  {"output_tokens", usage_.output_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", usage_.input_tokens + usage_.output_tokens}};
  } else {
    r["usage"] = nullptr;
  }
  return r;
}

std::vector<ojson> ResponseBuilder::start() {
  std::vector<ojson> out;
  out.push_back(event("response.created", {{"response", response()}}));
  out.push_back(event("response.in_progress", {{"response", response()}}));
  return out;
}

void ResponseBuilder::reasoning_delta(const std::string& delta, std::vector<ojson>& out) {
  if (delta.empty()) return;
  if (reasoning_index_ < 0) {
    close_message(out);
    reasoning_index_ = static_cast<int>(output_.size());
    reasoning_.clear();
    ojson item = reasoning_item("", "in_progress");
    item["content"] = ojson::array();
    output_.push_back(item);
    out.push_back(
        event("response.output_item.added", {{"output_index", reasoning_index_}, {"item", item}}));
    out.push_back(event("response.content_part.added", {{"item_id", item["id"]},
                                                        {"output_index", reasoning_index_},
                                                        {"content_index", 0},
                                                        {"part", reasoning_part("")}}));
  }
  reasoning_ += delta;
  out.push_back(
      event("response.reasoning_text.delta", {{"item_id", output_[reasoning_index_]["id"]},
                                              {"output_index", reasoning_index_},
                                              {"content_index", 0},
                                              {"delta", delta}}));
}

void ResponseBuilder::close_reasoning(std::vector<ojson>& out) {
  if (reasoning_index_ < 0) return;
  ojson& item = output_[reasoning_index_];
  const ojson item_id = item["id"];
  out.push_back(event("response.reasoning_text.done", {{"item_id", item_id},
                                                       {"output_index", reasoning_index_},
                                                       {"content_index", 0},
                                                       {"text", reasoning_}}));
  out.push_back(event("response.content_part.done", {{"item_id", item_id},
                                                     {"output_index", reasoning_index_},
                                                     {"content_index", 0},
                                                     {"part", reasoning_part(reasoning_)}}));
  item["content"] = ojson::array({reasoning_part(reasoning_)});
  item["status"] = item_status();
  out.push_back(
      event("response.output_item.done", {{"output_index", reasoning_index_}, {"item", item}}));
  reasoning_index_ = -1;
}

void ResponseBuilder::open_message(std::vector<ojson>& out) {
  close_reasoning(out);
  saw_message_ = true;
  message_index_ = static_cast<int>(output_.size());
  text_.clear();
  output_.push_back({{"id", "msg_" + random_hex(32)},
                     {"type", "message"},
                     {"status", "in_progress"},
                     {"role", "assistant"},
                     {"content", ojson::array()}});
  const ojson& item = output_[message_index_];
  out.push_back(
      event("response.output_item.added", {{"output_index", message_index_}, {"item", item}}));
  out.push_back(event("response.content_part.added", {{"item_id", item["id"]},
                                                      {"output_index", message_index_},
                                                      {"content_index", 0},
                                                      {"part", output_text_part("")}}));
}

void ResponseBuilder::text_delta(const std::string& delta, std::vector<ojson>& out) {
  if (delta.empty()) return;
  if (message_index_ < 0) open_message(out);
  text_ += delta;
  out.push_back(event("response.output_text.delta", {{"item_id", output_[message_index_]["id"]},
                                                     {"output_index", message_index_},
                                                     {"content_index", 0},
                                                     {"delta", delta},
                                                     {"logprobs", ojson::array()}}));
}

void ResponseBuilder::close_message(std::vector<ojson>& out) {
  if (message_index_ < 0) return;
  ojson& item = output_[message_index_];
  const ojson item_id = item["id"];
  out.push_back(event("response.output_text.done", {{"item_id", item_id},
                                                    {"output_index", message_index_},
                                                    {"content_index", 0},
                                                    {"text", text_},
                                                    {"logprobs", ojson::array()}}));
  out.push_back(event("response.content_part.done", {{"item_id", item_id},
                                                     {"output_index", message_index_},
                                                     {"content_index", 0},
                                                     {"part", output_text_part(text_)}}));
  item["content"] = ojson::array({output_text_part(text_)});
  item["status"] = item_status();
  out.push_back(
      event("response.output_item.done", {{"output_index", message_index_}, {"item", item}}));
  message_index_ = -1;
}

void ResponseBuilder::add_function_call(const json& call, std::vector<ojson>* out) {
  saw_tool_calls_ = true;
  const int index = static_cast<int>(output_.size());
  const std::string arguments = call["function"].value("arguments", "");
  ojson item = {{"id", "fc_" + random_hex(32)},
                {"type", "function_call"},
                {"status", "in_progress"},
                {"call_id", call.value("id", "")},
                {"name", call["function"].value("name", "")},
                {"arguments", ""}};
  if (out) {
    out->push_back(event("response.output_item.added", {{"output_index", index}, {"item", item}}));
    out->push_back(event("response.function_call_arguments.delta",
                         {{"item_id", item["id"]}, {"output_index", index}, {"delta", arguments}}));
    out->push_back(event("response.function_call_arguments.done", {{"item_id", item["id"]},
                                                                   {"output_index", index},
                                                                   {"name", item["name"]},
                                                                   {"arguments", arguments}}));
  }
  item["arguments"] = arguments;
  item["status"] = "completed";
  if (out)
    out->push_back(event("response.output_item.done", {{"output_index", index}, {"item", item}}));
  output_.push_back(std::move(item));
}

std::vector<ojson> ResponseBuilder::on_chunk(const json& chunk) {
  std::vector<ojson> out;
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return out;
  const json& choice = (*choices)[0];
  const json& delta = choice.value("delta", json::object());
  if (auto r = delta.find("reasoning_content"); r != delta.end() && r->is_string())
    reasoning_delta(r->get<std::string>(), out);
  if (auto c = delta.find("content"); c != delta.end() && c->is_string())
    text_delta(c->get<std::string>(), out);
  if (auto calls = delta.find("tool_calls"); calls != delta.end() && calls->is_array()) {
    close_reasoning(out);
    close_message(out);  // the text before the calls
    for (const auto& call : *calls) add_function_call(call, &out);
  }
  if (auto fr = choice.find("finish_reason"); fr != choice.end() && fr->is_string())
    incomplete_ = *fr == "length";
  return out;
}

std::vector<ojson> ResponseBuilder::finish(const ResponsesUsage& usage) {
  std::vector<ojson> out;
  // An answer with neither text nor calls is still a message (with empty text).
  close_reasoning(out);
  if (!saw_message_ && !saw_tool_calls_) open_message(out);
  close_message(out);
  usage_ = usage;
  finished_ = true;
  out.push_back(event(incomplete_ ? "response.incomplete" : "response.completed",
                      {{"response", response()}}));
  return out;
}

std::vector<ojson> ResponseBuilder::fail(const std::string& message) {
  error_ = message.empty() ? "generation failed" : message;
  return {event("response.failed", {{"response", response()}})};
}

void ResponseBuilder::set_chat_completion(const json& completion, const ResponsesUsage& usage) {
  const json& choice = completion.at("choices").at(0);
  const json& message = choice.at("message");
  incomplete_ = choice.value("finish_reason", "") == "length";
  const json calls = message.value("tool_calls", json::array());
  const std::string text = message.value("content", json()).is_string()
                               ? message["content"].get<std::string>()
                               : std::string();
  if (auto r = message.find("reasoning_content"); r != message.end() && r->is_string())
    output_.push_back(reasoning_item(r->get<std::string>(), item_status()));
  if (!text.empty() || calls.empty()) {
    output_.push_back({{"id", "msg_" + random_hex(32)},
                       {"type", "message"},
                       {"status", item_status()},
                       {"role", "assistant"},
                       {"content", ojson::array({output_text_part(text)})}});
  }
  for (const auto& call : calls) add_function_call(call, nullptr);
  usage_ = usage;
  finished_ = true;
}

}  // namespace pith::server
