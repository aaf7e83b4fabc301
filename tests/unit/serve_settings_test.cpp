// `pith serve`'s option checking (server/serve_settings.h), which runs before the port opens:
// valid options become ServingOptions field by field; each invalid one is an error that names
// the option.
#include "server/serve_settings.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "backend/backend.h"
#include "common/cache_dir.h"
#include "common/error.h"

namespace pith::server {
namespace {

ServeConfig base() {
  ServeConfig c;
  c.model = "model.gguf";
  c.cache_dir = "/tmp/pith-settings-test";
  return c;
}

// The message of the error resolve_serve_config throws ("" when it accepts the config).
std::string rejection(const ServeConfig& c) {
  try {
    resolve_serve_config(c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ServeSettings, ConvertsEveryOption) {
  ServeConfig c = base();
  c.device = "cpu";
  c.gpu_memory_fraction = 0.5;
  c.cpu_weight_panels = false;
  c.threads = 3;
  c.kv_memory = "64M";
  c.kv_page_size = 32;
  c.batch_policy = "k:8";
  c.max_batch_tokens = 1024;
  c.batch_formation = "fcfs";
  c.no_prefix_cache = true;
  c.max_kv_pages_per_inferlet = 40;
  c.kv_pressure = "kill";
  c.swap_memory = "1G";
  c.preemption_mode = "recompute";
  c.kv_idle_suspend_s = 0.25;
  c.inferlet_http_allow_private = true;
  c.inferlet_max_message_bytes = 1000;
  c.inferlet_max_messages_per_second = 50;
  c.runtime_threads = 2;
  c.inferlet_cpu_limit_s = 1.5;
  c.inferlet_memory_mb = 32;
  c.inferlet_http_allow = {"example.com"};
  c.api_keys = {"a", "", "b"};
  c.lora = {"sql=/adapters/sql", "/adapters/chat-v2.gguf", "/adapters/style/"};
  c.max_loras = 3;
  c.itl_target_ms = 250;
  ServeSettings s = resolve_serve_config(c);
  const ServingOptions& so = s.serving;
  EXPECT_EQ(so.model_path, "model.gguf");
  EXPECT_EQ(so.engine.device, "cpu");
  EXPECT_DOUBLE_EQ(so.engine.gpu_memory_fraction, 0.5);
  EXPECT_FALSE(so.engine.cpu_weight_panels);
  EXPECT_EQ(so.engine.n_threads, 3u);
  EXPECT_EQ(so.engine.kv_memory_bytes, size_t{64} << 20);
  EXPECT_EQ(so.engine.kv_page_size, 32u);
  EXPECT_EQ(so.control.policy, "k:8");
  EXPECT_EQ(so.control.max_batch_tokens, 1024u);
  EXPECT_EQ(so.control.max_loras, 3u);
  EXPECT_EQ(so.control.itl_target_ns, 250'000'000);
  using Lora = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(so.lora, (Lora{{"sql", "/adapters/sql"},
                           {"chat-v2", "/adapters/chat-v2.gguf"},
                           {"style", "/adapters/style/"}}));
  EXPECT_EQ(so.control.batch_formation, BatchFormation::Fcfs);
  EXPECT_FALSE(so.control.prefix_cache);
  EXPECT_EQ(so.control.max_kv_pages_per_instance, 40u);
  EXPECT_EQ(so.control.kv_pressure, KvPressure::Kill);
  EXPECT_EQ(so.control.swap_bytes, size_t{1} << 30);
  EXPECT_EQ(so.control.preemption, Preemption::Recompute);
  EXPECT_EQ(so.control.idle_suspend_ns, 250'000'000);
  EXPECT_TRUE(so.runtime.http_allow_private);
  EXPECT_EQ(so.runtime.limits.max_message_bytes, 1000u);
  EXPECT_EQ(so.runtime.limits.max_messages_per_second, 50u);
  EXPECT_EQ(resolve_serve_config(base()).serving.control.kv_pressure, KvPressure::Suspend);
  EXPECT_EQ(resolve_serve_config(base()).serving.control.preemption, Preemption::Swap);
  EXPECT_EQ(so.runtime.compiler.cache_dir, "/tmp/pith-settings-test/native");
  EXPECT_EQ(so.runtime.threads, 2);
  EXPECT_EQ(so.runtime.limits.cpu_ns, 1'500'000'000u);
  EXPECT_EQ(so.runtime.limits.memory_pages, 32u * 16);
  EXPECT_EQ(so.runtime.http_allow, std::vector<std::string>{"example.com"});
  EXPECT_EQ(s.api_keys, (std::set<std::string>{"a", "b"}));
  EXPECT_FALSE(s.chat_template);
  EXPECT_EQ(resolve_serve_config(base()).serving.control.batch_formation,
            BatchFormation::DecodeFirst);
}

// Running streams are not held up by more than about half a second of prompt by default.
TEST(ServeSettings, ItlTargetIsOnByDefault) {
  EXPECT_EQ(resolve_serve_config(base()).serving.control.itl_target_ns, 500'000'000);
  ServeConfig off = base();
  off.itl_target_ms = 0;
  EXPECT_EQ(resolve_serve_config(off).serving.control.itl_target_ns, 0);
}

TEST(ServeSettings, DefaultCacheDirIsResolved) {
  ServeConfig c = base();
  c.cache_dir.clear();
  EXPECT_EQ(resolve_serve_config(c).config.cache_dir, default_cache_root());
}

// Native code may live apart from the programs (replicas sharing one compiled cache).
TEST(ServeSettings, NativeCacheDirOverridesTheDefault) {
  ServeConfig c = base();
  c.native_cache_dir = "/tmp/pith-shared-native";
  const ServeSettings s = resolve_serve_config(c);
  EXPECT_EQ(s.serving.runtime.compiler.cache_dir, "/tmp/pith-shared-native");
  EXPECT_EQ(s.config.cache_dir, "/tmp/pith-settings-test");  // programs stay under --cache-dir
}

TEST(ServeSettings, EachInvalidOptionIsNamed) {
  auto with = [](auto edit) {
    ServeConfig c = base();
    edit(c);
    return rejection(c);
  };
  EXPECT_NE(with([](ServeConfig& c) { c.model.clear(); }).find("no model"), std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.batch_formation = "lifo"; }).find("--batch-formation"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.batch_policy = "sometimes"; }).find("--batch-policy"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.kv_memory = "lots"; }).find("--kv-memory"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.kv_memory = "0"; }).find("--kv-memory"), std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.preemption_mode = "drop"; }).find("--preemption-mode"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.kv_pressure = "evict"; }).find("--kv-pressure"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.http_idle_timeout_s = 0; }).find("--http-idle-timeout"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) {
              c.inferlet_max_message_bytes = 0;
            }).find("--inferlet-max-message-bytes"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.swap_memory = "much"; }).find("--swap-memory"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.kv_idle_suspend_s = -1; }).find("--kv-idle-suspend"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.kv_page_size = 0; }).find("--kv-page-size"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.lora = {"bad name=/x"}; }).find("--lora bad name=/x"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.lora = {"a="}; }).find("--lora"), std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) {
              c.lora = {"a=/x", "a=/y"};
            }).find("given twice"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.max_loras = 0; }).find("--max-loras"), std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.itl_target_ms = -1; }).find("--itl-target-ms"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.pooling = "max"; }).find("--pooling"), std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.device = "tpu"; }).find("--device"), std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.device = "cuda:x"; }).find("--device"), std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.gpu_memory_fraction = 0; }).find("--gpu-memory-fraction"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.gpu_memory_fraction = 1.5; }).find("--gpu-memory-fraction"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.runtime_threads = 0; }).find("--runtime-threads"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.inferlet_cpu_limit_s = -1; }).find("--inferlet-cpu-limit"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.inferlet_memory_mb = 5000; }).find("--inferlet-memory-mb"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.max_instances = 0; }).find("--max-instances"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.event_buffer = 0; }).find("--event-buffer"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.max_body_bytes = 0; }).find("--max-body-bytes"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.orphan_grace_s = -0.5; }).find("--orphan-grace"),
            std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) { c.host.clear(); }).find("--host"), std::string::npos);
  EXPECT_NE(
      with([](ServeConfig& c) { c.api_keys_file = "/nonexistent/keys"; }).find("/nonexistent/keys"),
      std::string::npos);
  EXPECT_NE(with([](ServeConfig& c) {
              c.chat_template = "/nonexistent/t.jinja";
            }).find("/nonexistent/t.jinja"),
            std::string::npos);
}

TEST(ServeSettings, DeviceNames) {
  for (const char* ok : {"auto", "cpu"}) EXPECT_NO_THROW(check_device(ok)) << ok;
  for (const char* bad : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:1a", "cuda:0:1", "cpu:0"}) {
    try {
      check_device(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--device"), std::string::npos) << e.what();
    }
  }
  // A CUDA device is refused up front exactly when there is no GPU at all.
  const bool have_gpu = device_is_cuda("auto");
  for (const char* cuda : {"cuda", "cuda:0"}) {
    if (have_gpu) {
      EXPECT_NO_THROW(check_device(cuda));
    } else {
      try {
        check_device(cuda);
        ADD_FAILURE() << "accepted '" << cuda << "' without a GPU";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(ServeSettings, KeyAndTemplateFilesAreReadUpFront) {
  const auto dir = std::filesystem::temp_directory_path() / "pith-serve-settings-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "keys") << "# comment\n  k1  \n\nk2\n";
  std::ofstream(dir / "empty-keys") << "# nothing here\n";
  std::ofstream(dir / "t.jinja") << "{{ messages }}";
  ServeConfig c = base();
  c.api_keys_file = (dir / "keys").string();
  c.chat_template = (dir / "t.jinja").string();
  ServeSettings s = resolve_serve_config(c);
  EXPECT_EQ(s.api_keys, (std::set<std::string>{"k1", "k2"}));
  ASSERT_TRUE(s.chat_template);
  EXPECT_EQ(*s.chat_template, "{{ messages }}");
  c.api_keys_file = (dir / "empty-keys").string();
  EXPECT_NE(rejection(c).find("holds no key"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pith::server
