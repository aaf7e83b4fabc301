// CPU feature detection through GCC's cpuid-backed builtins (they also check that the OS
// saves the wide registers, XGETBV), cached in a function-local constant.
#include "engine/kernels/cpu_features.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace pith {

namespace {
CpuFeatures detect() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  // GCC 12's __builtin_cpu_supports("f16c") answers 0 even where the CPU has it, so read
  // cpuid leaf 1 (ECX bit 29) directly; AVX2's OS-support check above covers the registers.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) f.f16c = f.avx2 && (ecx & bit_F16C) != 0;
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  return f;
}

bool hardware_supports(KernelIsa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case KernelIsa::Scalar:
      return true;
    case KernelIsa::Avx2:
      return f.avx2 && f.fma && f.f16c;
    case KernelIsa::Avx512:
      return f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  }
  return false;
}

KernelIsa hardware_best() {
  static const KernelIsa best = hardware_supports(KernelIsa::Avx512) ? KernelIsa::Avx512
                                : hardware_supports(KernelIsa::Avx2) ? KernelIsa::Avx2
                                                                     : KernelIsa::Scalar;
  return best;
}

// The cap a process starts with: PITH_ISA (scalar, avx2, avx512) if set, so a whole test suite or
// server can run the lower levels' kernels on a host that has more.
KernelIsa initial_cap() {
  const char* env = std::getenv("PITH_ISA");
  if (env == nullptr || *env == '\0') return KernelIsa::Avx512;
  if (auto isa = isa_from_name(env)) return *isa;
  std::fprintf(stderr, "pith: PITH_ISA=%s is not scalar, avx2 or avx512; ignored\n", env);
  return KernelIsa::Avx512;
}

// Relaxed: the cap is set by tests between kernel runs, never raced against them.
std::atomic<KernelIsa> g_isa_cap{initial_cap()};
}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool isa_supported(KernelIsa isa) {
  return isa <= isa_cap() && hardware_supports(isa);
}

KernelIsa best_isa() {
  return std::min(hardware_best(), isa_cap());
}

void set_isa_cap(KernelIsa cap) {
  g_isa_cap.store(cap, std::memory_order_relaxed);
}

KernelIsa isa_cap() {
  return g_isa_cap.load(std::memory_order_relaxed);
}

std::string_view isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::Scalar:
      return "scalar";
    case KernelIsa::Avx2:
      return "avx2";
    case KernelIsa::Avx512:
      return "avx512";
  }
  return "?";
}

std::optional<KernelIsa> isa_from_name(std::string_view name) {
  for (KernelIsa isa : {KernelIsa::Scalar, KernelIsa::Avx2, KernelIsa::Avx512})
    if (isa_name(isa) == name) return isa;
  return std::nullopt;
}

}  // namespace pith
