// ControlModelApi: the runtime's ModelApi implemented over the control layer (Controller) and
// the model's tokenizer. It is the seam between the application layer and the control layer:
// it turns the guest-facing call shapes of abi.h (handles, bit masks, fire-and-forget queue
// commands, serialized futures) into Controller calls, and keeps the per-instance state the
// ABI implies but the controller does not need:
//  - the instance's queue handles (small integers) -> controller queue ids;
//  - the position each Embed was produced for (embed_txt / forward outputs), so a forward
//    over Embeds runs at their positions;
//  - per-page token masks set by mask_kvpage, applied to every forward that reads the page;
//  - execution-time errors of fire-and-forget commands, reported by the queue's next future.
// Every failure, synchronous or not, writes its reason to the instance's log (ModelSession's
// ErrorLog) as "<call>: <message> (<status>)" and returns or completes with the ABI code.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "control/controller.h"
#include "runtime/model_api.h"
#include "tokenizer/tokenizer.h"

namespace pith::runtime {

// Called when the contention policy terminates an instance to free KV memory; the server
// ends the instance with this reason.
using ContentionKillFn = std::function<void(uint64_t instance_id, const std::string& reason)>;

class ControlModelApi final : public ModelApi {
 public:
  ControlModelApi(Controller& controller, const Tokenizer& tokenizer, std::string model_name,
                  ContentionKillFn on_kill = {});

  std::vector<std::string> model_names() override { return {model_name_}; }
  std::unique_ptr<ModelSession> open_session(uint64_t instance_id) override;

  Controller& controller() { return controller_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const std::string& model_name() const { return model_name_; }
  const ContentionKillFn& on_kill() const { return on_kill_; }
  // The vocabulary's token trie (special tokens left out), built on first use and shared by
  // every instance: a grammar-constrained request then costs no trie build (~70 ms natively
  // for 128k tokens, seconds in the interpreter tier).
  std::shared_ptr<const TokenTrie> vocab_trie();

 private:
  Controller& controller_;
  const Tokenizer& tokenizer_;
  std::string model_name_;
  ContentionKillFn on_kill_;
  std::mutex trie_mutex_;
  std::shared_ptr<const TokenTrie> trie_;
};

// Maps a control-layer status to the ABI's code (the table is in control/status.h).
pith_status_t to_abi_status(Status s);

// abi.h's bit mask (row-major, ceil(context_len / 8) bytes a row, bit j of a row = slot j,
// least significant bit first, set = may attend) to the engine's run-length rows.
std::vector<std::vector<uint32_t>> bitmask_to_runs(std::span<const uint8_t> mask, size_t rows,
                                                   size_t context_len);

}  // namespace pith::runtime
