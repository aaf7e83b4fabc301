// Runtime tests with real inferlets (inferlets/, built by the project with clang-14 for
// wasm32-wasi) compiled through the native tier (wasm2c + cc, cached in the build tree):
// args/messages/logs, every trap kind with its reason text, CPU limit, memory cap, stack
// overflow, isolation (other instances keep running), pub/sub, the key-value store, resource
// release over many launches, and rejection of modules with bad imports.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "built_inferlet.h"
#include "common/error.h"
#include "runtime/runtime.h"
#include "runtime/subprocess.h"

namespace pith::runtime {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string inferlet(const std::string& name) {
  return std::string(PITH_INFERLET_DIR) + "/" + name + ".wasm";
}

// Collects an instance's events; lets a test wait for a given message.
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> messages, logs;

  EventSink sink() {
    return [this](uint64_t, const InstanceEvent& e) {
      std::lock_guard lock(mu);
      if (e.kind == InstanceEvent::Kind::Message) messages.push_back(e.text);
      if (e.kind == InstanceEvent::Kind::Log) logs.push_back(e.text);
      cv.notify_all();
    };
  }
  bool wait_message(const std::string& m, std::chrono::milliseconds timeout = 20s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] {
      return std::find(messages.begin(), messages.end(), m) != messages.end();
    });
  }
  bool has_log_containing(const std::string& s) {
    std::lock_guard lock(mu);
    for (const auto& l : logs)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
};

// Every behaviour test runs on both tiers: native (wasm2c + cc) and interpreter (wabt).
class RuntimeTest : public ::testing::TestWithParam<TierPolicy> {
 protected:
  void SetUp() override { ASSERT_TRUE(inferlet_built(inferlet("echo"))); }
  RuntimeConfig test_config(int threads = 1) {
    RuntimeConfig c;
    c.compiler.cache_dir = PITH_TEST_NATIVE_CACHE;
    c.threads = threads;
    c.tiers = GetParam();
    return c;
  }
  bool native() const { return GetParam() == TierPolicy::NativeOnly; }
  std::shared_ptr<Program> load(Runtime& rt, const std::string& name) {
    return rt.load_program_file(inferlet(name));
  }
};

INSTANTIATE_TEST_SUITE_P(Tiers, RuntimeTest,
                         ::testing::Values(TierPolicy::NativeOnly, TierPolicy::InterpreterOnly),
                         [](const auto& info) {
                           return info.param == TierPolicy::NativeOnly ? "Native" : "Interpreter";
                         });

TEST_P(RuntimeTest, EchoesArgsMessagesAndLogs) {
  Runtime rt(test_config());
  Events ev;
  auto inst = rt.launch(load(rt, "echo"), {"echo", "alpha", "beta"}, ev.sink());
  EXPECT_STREQ(inst->tier(), native() ? "native" : "interpreter");
  ASSERT_TRUE(ev.wait_message("arg 2: beta"));
  EXPECT_TRUE(inst->push_message("hi there"));
  ASSERT_TRUE(ev.wait_message("echo: hi there"));
  inst->push_message("quit");
  ExitStatus st = inst->wait();
  EXPECT_EQ(st.kind, ExitStatus::Kind::Exited);
  EXPECT_EQ(st.reason, "exited with code 0");
  EXPECT_EQ(ev.messages[0], "arg 0: echo");
  EXPECT_EQ(ev.messages[1], "arg 1: alpha");
  EXPECT_TRUE(ev.has_log_containing(fmt::format("hello from instance {}", inst->id())));
}

TEST_P(RuntimeTest, ReceiveEndsWhenClientCloses) {
  Runtime rt(test_config());
  Events ev;
  auto inst = rt.launch(load(rt, "echo"), {"echo"}, ev.sink());
  ASSERT_TRUE(ev.wait_message("arg 0: echo"));
  inst->close_input();
  EXPECT_EQ(inst->wait().reason, "exited with code 0");
  EXPECT_TRUE(ev.has_log_containing("receive ended: closed"));
}

TEST_P(RuntimeTest, MessageRateIsLimitedPerInstance) {
  Runtime rt(test_config());
  auto echo = load(rt, "echo");
  std::vector<std::string> args = {"echo", "--no-wait"};
  for (int i = 0; i < 40; ++i) args.push_back("m" + std::to_string(i));
  InstanceLimits limits;
  limits.max_messages_per_second = 10;  // a burst of 10, then 10 a second
  Events ev;
  auto inst = rt.launch(echo, args, ev.sink(), limits);
  EXPECT_EQ(inst->wait().reason, "exited with code 1");  // its send failed with PITH_ERR_LIMIT
  {
    std::lock_guard lock(ev.mu);
    EXPECT_GE(ev.messages.size(), 10u);
    EXPECT_LT(ev.messages.size(), 20u);  // 40 sends take microseconds: no time to refill
  }
  limits.max_messages_per_second = 0;  // unlimited
  Events all;
  EXPECT_EQ(rt.launch(echo, args, all.sink(), limits)->wait().reason, "exited with code 0");
  std::lock_guard lock(all.mu);
  EXPECT_EQ(all.messages.size(), args.size());
}

TEST_P(RuntimeTest, StorePersistsAcrossInstances) {
  Runtime rt(test_config());
  auto prog = load(rt, "echo");
  for (int i = 0; i < 3; ++i) rt.launch(prog, {"echo", "--no-wait"})->wait();
  EXPECT_EQ(rt.store().get("echo.launches").value_or(""), "3");
}

struct TrapCase {
  const char* arg;
  const char* reason;
};

TEST_P(RuntimeTest, EachTrapKindEndsOnlyItsInstanceWithItsReason) {
  Runtime rt(test_config());
  Events bystander;
  auto echo = rt.launch(load(rt, "echo"), {"echo"}, bystander.sink());
  auto traps = load(rt, "traps");
  const TrapCase cases[] = {
      {"oob", "trap: out of bounds memory access"},
      {"div", "trap: integer divide by zero"},
      {"unreachable", "trap: unreachable executed"},
      {"abort", "trap: unreachable executed"},
      {"indirect", "trap: indirect call to a null or mistyped function"},
      {"conversion", "trap: invalid conversion to integer"},
      {"exit3", "exited with code 3"},
  };
  for (const auto& c : cases) {
    Events ev;
    auto inst = rt.launch(traps, {"traps", c.arg}, ev.sink());
    ExitStatus st = inst->wait();
    EXPECT_EQ(st.reason, c.reason) << c.arg;
    EXPECT_TRUE(ev.wait_message(std::string("doing ") + c.arg, 0ms)) << c.arg;
    // The bystander is unaffected.
    std::string m = std::string("still here after ") + c.arg;
    ASSERT_TRUE(echo->push_message(m));
    EXPECT_TRUE(bystander.wait_message("echo: " + m)) << c.arg;
  }
  EXPECT_EQ(rt.launch(traps, {"traps", "exit3"})->wait().code, 3);
  echo->push_message("quit");
  EXPECT_EQ(echo->wait().reason, "exited with code 0");
}

TEST_P(RuntimeTest, BadGuestPointerIsAStatusNotACrash) {
  Runtime rt(test_config());
  Events ev;
  auto inst = rt.launch(load(rt, "traps"), {"traps", "badptr"}, ev.sink());
  EXPECT_EQ(inst->wait().reason, "exited with code 0");
  EXPECT_TRUE(ev.wait_message("status bad pointer", 0ms));
}

TEST_P(RuntimeTest, StackOverflowTraps) {
  Runtime rt(test_config());
  auto inst = rt.launch(load(rt, "deep"), {"deep"});
  EXPECT_EQ(inst->wait().reason, "trap: call stack exhausted");
  // The thread is fine afterwards.
  EXPECT_EQ(rt.launch(load(rt, "echo"), {"echo", "--no-wait"})->wait().reason,
            "exited with code 0");
}

TEST_P(RuntimeTest, MemoryIsCappedPerInstance) {
  Runtime rt(test_config());
  InstanceLimits limits;
  limits.memory_pages = 256;  // 16 MiB
  Events ev;
  auto inst = rt.launch(load(rt, "hog"), {"hog"}, ev.sink(), limits);
  ExitStatus st = inst->wait();
  if (native()) {
    EXPECT_EQ(st.reason,
              "trap: unreachable executed (after memory.grow was refused by the memory limit of "
              "16 MiB)");
  } else {  // the interpreter does not report refused grows; the reason may lack the note
    EXPECT_EQ(st.reason.rfind("trap: unreachable executed", 0), 0u) << st.reason;
  }
  std::lock_guard lock(ev.mu);
  ASSERT_EQ(ev.messages.size(), 1u);
  int mib = std::atoi(ev.messages[0].c_str() + std::strlen("allocated "));
  EXPECT_GE(mib, 12);
  EXPECT_LT(mib, 16);
}

TEST_P(RuntimeTest, CpuLimitKillsASpinnerWhileOthersKeepRunning) {
  Runtime rt(test_config(1));  // one thread: the spinner must be preempted for echo to answer
  InstanceLimits limits;
  limits.cpu_ns = 400'000'000;
  Events spin_ev, echo_ev;
  auto spin = rt.launch(load(rt, "spin"), {"spin"}, spin_ev.sink(), limits);
  ASSERT_TRUE(spin_ev.wait_message("spinning"));
  auto echo = rt.launch(load(rt, "echo"), {"echo"}, echo_ev.sink());
  echo->push_message("ping");
  ASSERT_TRUE(echo_ev.wait_message("echo: ping"));
  EXPECT_FALSE(spin->exit_status().has_value());  // answered while the spinner still runs
  ExitStatus st = spin->wait();
  EXPECT_EQ(st.kind, ExitStatus::Kind::Killed);
  EXPECT_EQ(st.reason, "killed: cpu time limit 0.4 s");
  echo->push_message("quit");
  EXPECT_EQ(echo->wait().reason, "exited with code 0");
}

TEST_P(RuntimeTest, KillEndsAParkedInstance) {
  Runtime rt(test_config());
  Events ev;
  auto inst = rt.launch(load(rt, "echo"), {"echo"}, ev.sink());
  ASSERT_TRUE(ev.wait_message("arg 0: echo"));
  inst->kill();
  EXPECT_EQ(inst->wait().reason, "killed: by request");
}

TEST_P(RuntimeTest, BroadcastReachesSubscribers) {
  Runtime rt(test_config(2));
  auto prog = load(rt, "pubsub");
  Events a, b;
  auto sa = rt.launch(prog, {"pubsub", "sub", "news", "2"}, a.sink());
  auto sb = rt.launch(prog, {"pubsub", "sub", "news", "1"}, b.sink());
  ASSERT_TRUE(a.wait_message("ready"));
  ASSERT_TRUE(b.wait_message("ready"));
  EXPECT_EQ(rt.launch(prog, {"pubsub", "pub", "news", "one"})->wait().code, 0);
  EXPECT_EQ(rt.launch(prog, {"pubsub", "pub", "news", "two"})->wait().code, 0);
  EXPECT_EQ(sa->wait().reason, "exited with code 0");
  EXPECT_EQ(sb->wait().reason, "exited with code 0");
  EXPECT_EQ(a.messages, (std::vector<std::string>{"ready", "got: one", "got: two"}));
  EXPECT_EQ(b.messages, (std::vector<std::string>{"ready", "got: one"}));
  EXPECT_EQ(rt.pubsub().subscribers("news"), 0u);  // released at exit
}

TEST_P(RuntimeTest, WaitAnyReturnsWhicheverCompletesFirst) {
  Runtime rt(test_config());
  auto prog = load(rt, "pubsub");
  Events ev;
  auto inst = rt.launch(prog, {"pubsub", "any", "t", "3"}, ev.sink());
  ASSERT_TRUE(ev.wait_message("ready"));
  inst->push_message("one");
  ASSERT_TRUE(ev.wait_message("client: one"));
  rt.launch(prog, {"pubsub", "pub", "t", "two"})->wait();
  ASSERT_TRUE(ev.wait_message("topic: two"));
  inst->push_message("three");
  EXPECT_EQ(inst->wait().reason, "exited with code 0");
  EXPECT_EQ(ev.messages,
            (std::vector<std::string>{"ready", "client: one", "topic: two", "client: three"}));
}

TEST_P(RuntimeTest, HundredsOfParkedInstancesShareTwoThreads) {
  Runtime rt(test_config(2));
  auto prog = load(rt, "echo");
  constexpr int kInstances = 500;
  Events ev;
  std::vector<std::shared_ptr<Instance>> insts;
  for (int i = 0; i < kInstances; ++i) insts.push_back(rt.launch(prog, {"echo"}, ev.sink()));
  for (int i = 0; i < kInstances; ++i) insts[i]->push_message(fmt::format("m{}", i));
  for (int i = 0; i < kInstances; ++i) ASSERT_TRUE(ev.wait_message(fmt::format("echo: m{}", i)));
  EXPECT_EQ(rt.live_instances(), static_cast<size_t>(kInstances));  // all parked in receive
  for (auto& inst : insts) inst->push_message("quit");
  for (auto& inst : insts) EXPECT_EQ(inst->wait().reason, "exited with code 0");
}

TEST_P(RuntimeTest, HandlesArePerInstance) {
  Runtime rt(test_config());
  Events ea, eb;
  auto a = rt.launch(load(rt, "echo"), {"echo"}, ea.sink());
  auto b = rt.launch(load(rt, "echo"), {"echo"}, eb.sink());
  ASSERT_TRUE(ea.wait_message("arg 0: echo"));
  ASSERT_TRUE(eb.wait_message("arg 0: echo"));
  uint32_t f = 0;
  ASSERT_EQ(a->new_future(&f), PITH_OK);
  bool ready = false;
  EXPECT_EQ(a->poll_future(f, &ready), PITH_OK);
  EXPECT_EQ(b->poll_future(f + 1000, &ready), PITH_ERR_BAD_HANDLE);
  a->kill();
  b->kill();
  a->wait();
  b->wait();
}

size_t address_space_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stoul(line.substr(7));
  return 0;
}

TEST_P(RuntimeTest, TwentyThousandLaunchesReleaseEverything) {
  Runtime rt(test_config());
  auto prog = load(rt, "echo");
  rt.launch(prog, {"echo", "--no-wait"})->wait();  // warm up
  size_t before = address_space_kib();
  const int kLaunches = native() ? 20000 : 2000;
  for (int i = 0; i < kLaunches; ++i) {
    ExitStatus st = rt.launch(prog, {"echo", "--no-wait"})->wait();
    ASSERT_EQ(st.reason, "exited with code 0") << "launch " << i;
  }
  size_t after = address_space_kib();
  // Each instance reserves 8 GiB + a 1 MiB stack; a leak of either would show as terabytes.
  EXPECT_LT(after, before + 256 * 1024) << "address space grew from " << before << " KiB";
  EXPECT_EQ(rt.live_instances(), 0u);
}

// Builds a module from text with wat2wasm (wabt).
std::string wat_module(const std::string& wat) {
  std::string dir = fs::temp_directory_path() / ("pith-wat-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir + "/m.wat") << wat;
  ProcessResult r = run_limited({"wat2wasm", "m.wat", "-o", "m.wasm"}, dir, {});
  EXPECT_TRUE(r.ok()) << r.output;
  std::ifstream in(dir + "/m.wasm", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove_all(dir);
  return ss.str();
}

// The compiler child inherits stdin/stdout/stderr only: no socket, file or pipe of the server.
TEST(Subprocess, ChildInheritsOnlyTheStandardDescriptors) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);  // not close-on-exec: would leak without the child's close_range
  std::string dir = fs::temp_directory_path() / ("pith-fds-" + std::to_string(getpid()));
  fs::create_directories(dir);
  ProcessResult r = run_limited({"ls", "/proc/self/fd"}, dir, {});
  close(fds[0]);
  close(fds[1]);
  fs::remove_all(dir);
  ASSERT_TRUE(r.ok()) << r.output;
  std::istringstream in(r.output);
  std::vector<int> open_fds;
  for (int fd; in >> fd;) open_fds.push_back(fd);
  // 0-2, plus the one `ls` opens to read the directory.
  EXPECT_LE(open_fds.size(), 4u) << r.output;
  for (int fd : open_fds) EXPECT_TRUE(fd <= 3) << "inherited fd " << fd << ": " << r.output;
}

// A stopping server ends the tools still running, their children too, and starts no new ones.
// In a forked child: end_running_tools() closes the process-wide registry for good.
bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

TEST(Subprocess, EndRunningToolsKillsTheWholeGroupAndRefusesNewOnes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::string dir = fs::temp_directory_path() / ("pith-end-" + std::to_string(getpid()));
        fs::create_directories(dir);
        ProcessResult r;
        std::thread tool([&] {
          r = run_limited({"sh", "-c", "sleep 60 & echo $! > bg.pid; wait"}, dir, {});
        });
        pid_t bg = 0;
        for (int i = 0; i < 500 && bg == 0; ++i) {
          std::this_thread::sleep_for(10ms);
          std::ifstream in(dir + "/bg.pid");
          in >> bg;
        }
        auto t0 = std::chrono::steady_clock::now();
        size_t ended = end_running_tools(5s);
        tool.join();
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        bool refused = false;
        try {
          run_limited({"true"}, dir, {});
        } catch (const Error& e) {
          refused = std::string(e.what()).find("stopping") != std::string::npos;
        }
        bool bg_gone = false;
        for (int i = 0; i < 200 && !bg_gone; ++i, std::this_thread::sleep_for(10ms))
          bg_gone = bg > 0 && process_gone(bg);
        fs::remove_all(dir);
        bool ok = bg > 0 && ended == 1 && r.ended && s < 2 && refused && bg_gone &&
                  r.describe().find("stopping") != std::string::npos;
        if (!ok)
          fprintf(stderr, "bg=%d ended=%zu r.ended=%d s=%.2f refused=%d bg_gone=%d\n", bg, ended,
                  r.ended, s, refused, bg_gone);
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

std::string launch_error(Runtime& rt, const std::string& wasm) {
  try {
    rt.launch(rt.load_program(wasm), {"m"})->wait();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_P(RuntimeTest, RejectsUnknownImportsAndWrongSignatures) {
  Runtime rt(test_config());
  EXPECT_NE(launch_error(rt, wat_module(R"((module (import "pith" "nonexistent" (func))
                                               (func (export "_start"))))"))
                .find("module imports pith.nonexistent, which pith does not provide"),
            std::string::npos);
  std::string err =
      launch_error(rt, wat_module(R"((module (import "pith" "yield" (func (param i32)))
                                                    (func (export "_start"))))"));
  if (native()) {  // the C compiler catches the mismatch against the host prototypes
    EXPECT_NE(err.find("native compile failed"), std::string::npos) << err;
    EXPECT_NE(err.find("Z_pithZ_yield"), std::string::npos) << err;
  } else {
    EXPECT_NE(err.find("module imports pith.yield with the wrong signature"), std::string::npos)
        << err;
  }
  EXPECT_NE(
      launch_error(rt, wat_module("(module (func (export \"main\")))")).find("exports no _start"),
      std::string::npos);
  EXPECT_THROW(rt.load_program("not wasm at all"), Error);
}

TEST_P(RuntimeTest, TrapInsideInstantiationIsReported) {
  Runtime rt(test_config());
  // An active data segment past the end of a one-page memory traps during instantiation.
  std::string wasm = wat_module(R"((module (memory 1) (data (i32.const 65535) "xy")
                                          (func (export "_start"))))");
  EXPECT_EQ(rt.launch(rt.load_program(wasm), {"m"})->wait().reason,
            "trap: out of bounds memory access");
  std::string too_big = wat_module(R"((module (memory 2000) (func (export "_start"))))");
  EXPECT_EQ(rt.launch(rt.load_program(too_big), {"m"})->wait().reason,
            "killed: memory limit 64 MiB (the module's initial memory is larger)");
}

TEST(RuntimeTiers, AutoStartsInTheInterpreterAndSwitchesToNative) {
  ASSERT_TRUE(inferlet_built(inferlet("echo")));
  std::string cache = fs::temp_directory_path() / ("pith-tier-test-" + std::to_string(getpid()));
  fs::remove_all(cache);
  {
    RuntimeConfig c;
    c.compiler.cache_dir = cache;
    Runtime rt(c);
    auto prog = rt.load_program_file(inferlet("echo"));
    auto first = rt.launch(prog, {"echo", "--no-wait"});
    EXPECT_STREQ(first->tier(), "interpreter");  // the native build takes seconds
    EXPECT_EQ(first->wait().reason, "exited with code 0");
    prog->native();  // wait for the background build
    EXPECT_GT(prog->compile_seconds(), 0);
    auto later = rt.launch(prog, {"echo", "--no-wait"});
    EXPECT_STREQ(later->tier(), "native");
    EXPECT_EQ(later->wait().reason, "exited with code 0");
    // A new program object finds the cached object and starts native at once.
    auto again = rt.launch(rt.load_program_file(inferlet("echo")), {"echo", "--no-wait"});
    EXPECT_STREQ(again->tier(), "native");
    again->wait();
  }
  fs::remove_all(cache);
}

// PITH_WASM2C and PITH_CC name the native tier's tools where the configuration keeps the plain
// names (a machine whose wabt or C compiler is not where the build machine's was); a configured
// path wins over them.
TEST(RuntimeToolchain, TheEnvironmentNamesTheToolsTheConfigurationLeavesPlain) {
  const std::string cache =
      fs::temp_directory_path() / ("pith-toolchain-test-" + std::to_string(getpid()));
  RuntimeConfig c;
  c.compiler.cache_dir = cache;
  const std::string built_wasm2c = Runtime(c).compiler().config().wasm2c;
  ASSERT_EQ(setenv("PITH_WASM2C", "/opt/wabt/bin/wasm2c", 1), 0);
  ASSERT_EQ(setenv("PITH_CC", "/opt/gcc/bin/gcc", 1), 0);
  {
    Runtime rt(c);
    EXPECT_EQ(rt.compiler().config().wasm2c, "/opt/wabt/bin/wasm2c");
    EXPECT_EQ(rt.compiler().config().cc, "/opt/gcc/bin/gcc");
  }
  RuntimeConfig named = c;
  named.compiler.wasm2c = "/usr/local/bin/wasm2c";
  EXPECT_EQ(Runtime(named).compiler().config().wasm2c, "/usr/local/bin/wasm2c");
  unsetenv("PITH_WASM2C");
  unsetenv("PITH_CC");
  EXPECT_EQ(Runtime(c).compiler().config().wasm2c, built_wasm2c);
  EXPECT_NE(built_wasm2c, "/opt/wabt/bin/wasm2c");
  fs::remove_all(cache);
}

TEST(RuntimeSignals, HostFaultsAreNotTurnedIntoTraps) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        install_signal_handlers();
        volatile int* p = nullptr;
        *p = 1;
      },
      "");
}

}  // namespace
}  // namespace pith::runtime
