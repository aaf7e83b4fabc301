// The cold tier on wabt's interpreter. See interp_module.h.
#include "runtime/interp_module.h"

#include <wabt/binary-reader.h>
#include <wabt/error-formatter.h>
#include <wabt/feature.h>
#include <wabt/interp/binary-reader-interp.h>
#include <wabt/interp/interp.h>

#include <map>
#include <type_traits>
#include <utility>

#include "common/error.h"
#include "runtime/api/host_imports.h"
#include "runtime/instance.h"

namespace pith::runtime {

namespace wi = wabt::interp;

namespace {

// ---- reaching two private members of wi::Thread ----------------------------------------------
// wabt's public Func::Call runs a function to completion; the tier needs to run in batches to
// enforce CPU limits and preempt. DefinedFunc::DoCall is PushValues + PushCall + Run, all on
// Thread, the first two private. Explicit instantiation may name private members ([temp.spec]
// access rule), which this uses to get their addresses; the header is pinned to wabt 1.0.32.
template <typename Tag, typename Tag::type M>
struct Rob {
  friend typename Tag::type get(Tag) { return M; }
};
struct PushCallTag {
  using type = wi::RunResult (wi::Thread::*)(const wi::DefinedFunc&, wi::Trap::Ptr*);
  friend type get(PushCallTag);
};
template struct Rob<PushCallTag, &wi::Thread::PushCall>;

constexpr int kBatch = 20000;  // instructions between limit checks (~0.1-0.5 ms)
constexpr const char* kKillTrap = "pith: instance ended by the host";

// ---- host-import adapters ---------------------------------------------------------------------

template <typename T>
constexpr wabt::Type wasm_type() {
  if constexpr (std::is_same_v<T, u64>) {
    return wabt::Type::I64;
  } else {
    static_assert(std::is_same_v<T, u32>);
    return wabt::Type::I32;
  }
}

// Shadow view of the interpreter memory for the host functions (GuestMemory reads
// exec().memory). Refreshed before every host call: memory.grow may move the data.
struct InterpState {
  Instance* instance = nullptr;
  wi::Store* store = nullptr;
  wi::Memory::Ptr memory;
  wasm_rt_memory_t shadow{};
};

void refresh_shadow(InterpState& s) {
  if (!s.memory) return;
  s.shadow.data = s.memory->UnsafeData();
  uint64_t bytes = s.memory->ByteSize();
  s.shadow.pages = static_cast<uint32_t>(bytes / 65536);
  s.shadow.size = static_cast<uint32_t>(bytes);
  s.shadow.max_pages =
      s.memory->type().limits.has_max ? static_cast<uint32_t>(s.memory->type().limits.max) : 65536;
  s.instance->exec().memory = &s.shadow;
}

template <auto Fn>
struct Adapter;

template <typename R, typename C, typename... A, R (*Fn)(C*, A...)>
struct Adapter<Fn> {
  static wi::FuncType type() {
    wi::ValueTypes params = {wasm_type<A>()...};
    wi::ValueTypes results;
    if constexpr (!std::is_void_v<R>) results.push_back(wasm_type<R>());
    return wi::FuncType(params, results);
  }
  template <size_t... I>
  static wabt::Result call(InterpState* s, const wi::Values& params, wi::Values& results,
                           wi::Trap::Ptr* trap, std::index_sequence<I...>) {
    if (*trap) return wabt::Result::Error;  // a trap wabt swallowed (see run()): stop here
    refresh_shadow(*s);
    C* ctx = reinterpret_cast<C*>(s->instance);
    if constexpr (std::is_void_v<R>) {
      Fn(ctx, params[I].template Get<A>()...);
    } else {
      R r = Fn(ctx, params[I].template Get<A>()...);
      if (results.size() != 1) results.resize(1);
      results[0] = wi::Value::Make(r);
    }
    if (s->instance->exec().kill_pending) {
      *trap = wi::Trap::New(*s->store, kKillTrap);
      return wabt::Result::Error;
    }
    return wabt::Result::Ok;
  }
  static wi::HostFunc::Callback callback(InterpState* s) {
    return [s](wi::Thread&, const wi::Values& params, wi::Values& results,
               wi::Trap::Ptr* trap) -> wabt::Result {
      return call(s, params, results, trap, std::index_sequence_for<A...>{});
    };
  }
};

struct HostImport {
  wi::FuncType (*type)();
  wi::HostFunc::Callback (*callback)(InterpState*);
};

const std::map<std::pair<std::string, std::string>, HostImport>& host_imports() {
  static const auto* table = [] {
    auto* t = new std::map<std::pair<std::string, std::string>, HostImport>;
#define PITH_INTERP_HOST(name, ret, params) \
  (*t)[{"pith", #name}] = {&Adapter<&Z_pithZ_##name>::type, &Adapter<&Z_pithZ_##name>::callback};
#define PITH_INTERP_WASI(name, ret, params)              \
  (*t)[{"wasi_snapshot_preview1", #name}] = {            \
      &Adapter<&Z_wasi_snapshot_preview1Z_##name>::type, \
      &Adapter<&Z_wasi_snapshot_preview1Z_##name>::callback};
    PITH_HOST_IMPORTS(PITH_INTERP_HOST)
    PITH_WASI_IMPORTS(PITH_INTERP_WASI)
#undef PITH_INTERP_HOST
#undef PITH_INTERP_WASI
    return t;
  }();
  return *table;
}

TrapCode trap_code(const std::string& msg) {
  auto starts = [&](const char* p) { return msg.rfind(p, 0) == 0; };
  if (starts("out of bounds")) return TrapCode::OutOfBounds;
  if (starts("integer divide by zero")) return TrapCode::DivByZero;
  if (starts("integer overflow")) return TrapCode::IntOverflow;
  if (starts("invalid conversion to integer")) return TrapCode::InvalidConversion;
  if (starts("unreachable")) return TrapCode::Unreachable;
  if (starts("indirect call") || starts("uninitialized table element") ||
      starts("undefined table index"))
    return TrapCode::CallIndirect;
  if (starts("call stack exhausted")) return TrapCode::StackExhausted;
  if (starts("uncaught exception")) return TrapCode::UncaughtException;
  return TrapCode::HostError;
}

}  // namespace

struct InterpModule::Impl {
  wi::ModuleDesc desc;
  wabt::Features features;
  uint32_t start_export = 0;  // index into desc.exports
};

InterpModule::InterpModule() : impl_(std::make_unique<Impl>()) {}
InterpModule::~InterpModule() = default;

std::shared_ptr<InterpModule> InterpModule::load(std::string_view wasm) {
  std::shared_ptr<InterpModule> m(new InterpModule);
  Impl& d = *m->impl_;
  wabt::Errors errors;
  wabt::ReadBinaryOptions options(d.features, nullptr, /*read_debug_names=*/false,
                                  /*stop_on_first_error=*/true,
                                  /*fail_on_custom_section_error=*/false);
  if (wabt::Failed(wi::ReadBinaryInterp("module.wasm", wasm.data(), wasm.size(), options, &errors,
                                        &d.desc))) {
    std::string text = wabt::FormatErrorsToString(errors, wabt::Location::Type::Binary);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    fail("invalid WebAssembly module: {}", text);
  }
  for (const auto& imp : d.desc.imports) {
    const std::string& mod = imp.type.module;
    const std::string& name = imp.type.name;
    if (imp.type.type->kind != wabt::ExternalKind::Func)
      fail("module imports {}.{} as a non-function, which pith does not provide", mod, name);
    auto it = host_imports().find({mod, name});
    if (it == host_imports().end())
      fail("module imports {}.{}, which pith does not provide", mod, name);
    const auto& got = *wabt::cast<wi::FuncType>(imp.type.type.get());
    wi::FuncType want = it->second.type();
    if (got.params != want.params || got.results != want.results)
      fail("module imports {}.{} with the wrong signature", mod, name);
  }
  bool found = false;
  for (uint32_t i = 0; i < d.desc.exports.size(); ++i) {
    const auto& e = d.desc.exports[i];
    if (e.type.name == "_start" && e.type.type->kind == wabt::ExternalKind::Func) {
      const auto& ft = *wabt::cast<wi::FuncType>(e.type.type.get());
      if (!ft.params.empty() || !ft.results.empty())
        fail("module's _start takes or returns values");
      d.start_export = i;
      found = true;
    }
  }
  if (!found)
    fail(
        "module exports no _start function: build the inferlet as a WASI command "
        "(a main function)");
  return m;
}

TrapCode InterpModule::run(Instance& instance) const {
  const Impl& d = *impl_;
  GuestExecution& exec = instance.exec();
  exec.interpreted = true;
  exec.in_host = 1;  // all of this is host code as far as the signal handlers are concerned

  // The instance's copy of the module with its memory capped.
  wi::ModuleDesc desc = d.desc;
  uint32_t cap = exec.memory_limit_pages ? exec.memory_limit_pages : 65536;
  for (auto& mem : desc.memories) {
    wabt::Limits& l = mem.type.limits;
    if (l.initial > cap) return TrapCode::MemoryLimit;
    if (!l.has_max || l.max > cap) {
      l.max = cap;
      l.has_max = true;
    }
  }

  wi::Store store(d.features);
  InterpState state;
  state.instance = &instance;
  state.store = &store;
  wi::Module::Ptr module = wi::Module::New(store, std::move(desc));
  wi::RefVec imports;
  for (const auto& imp : module->desc().imports) {
    const HostImport& h = host_imports().at({imp.type.module, imp.type.name});
    imports.push_back(wi::HostFunc::New(store, h.type(), h.callback(&state)).ref());
  }

  TrapCode end = TrapCode::None;
  wi::Trap::Ptr trap;
  wi::Instance::Ptr inst = wi::Instance::Instantiate(store, module.ref(), imports, &trap);
  if (!inst) {
    end = exec.kill_pending ? static_cast<TrapCode>(exec.kill_pending)
          : trap            ? trap_code(trap->message())
                            : TrapCode::HostError;
  } else {
    if (!inst->memories().empty()) {
      state.memory = store.UnsafeGet<wi::Memory>(inst->memories()[0]);
      refresh_shadow(state);
    }
    const auto& exp = module->desc().exports[d.start_export];
    wi::DefinedFunc::Ptr start = store.UnsafeGet<wi::DefinedFunc>(inst->funcs()[exp.index]);
    wi::Thread thread(store);
    wi::RunResult r = (thread.*get(PushCallTag{}))(*start, &trap);
    while (r == wi::RunResult::Ok) {
      r = thread.Run(kBatch, &trap);
      // wabt 1.0.32 sets the trap but returns Ok when a call overflows its frame stack
      // (Thread::DoCall): a set trap ends the guest whatever the result says.
      if (trap) r = wi::RunResult::Trap;
      if (exec.kill_pending) break;
      if (exec.slice_limit_ns && exec.slice_ns >= exec.slice_limit_ns) {
        exec.slice_ns = 0;
        instance.yield_now();
      }
    }
    if (trap && trap->message() != kKillTrap) {  // a guest trap wins over a later exit
      end = trap_code(trap->message());
    } else if (exec.kill_pending) {
      end = static_cast<TrapCode>(exec.kill_pending);
    } else if (r == wi::RunResult::Trap) {
      end = trap ? trap_code(trap->message()) : TrapCode::HostError;
    } else if (r == wi::RunResult::Exception) {
      end = TrapCode::UncaughtException;
    }
    if (end == TrapCode::HostError && trap)
      instance.emit({InstanceEvent::Kind::Log, PITH_LOG_ERROR, "interpreter: " + trap->message()});
    if (state.memory && state.memory->ByteSize() / 65536 >= cap && end != TrapCode::None)
      exec.grow_refused = true;  // it ran into the cap (the interpreter does not report grows)
  }
  exec.memory = nullptr;
  return end;
}

}  // namespace pith::runtime
