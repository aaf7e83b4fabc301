// Which SIMD instruction sets this CPU has, and the kernel ISA levels pith builds for.
//
// The project compiles for baseline x86-64; each SIMD kernel is compiled for its own ISA
// (per-function target attributes) and chosen at run time from these flags, so one binary
// runs everywhere and uses AVX-512 (+BF16, VNNI) where present, AVX2+FMA+F16C otherwise,
// and portable scalar code as the last resort.
//
// The flags are read once from cpuid (immutable afterwards); kernels take an explicit
// KernelIsa so that tests and benchmarks can force any level the CPU supports. A cap
// (set_isa_cap) lowers what the ISA queries report, as if the CPU stopped at that level, so
// tests reach the lower-level dispatch and the "not supported" errors on any host.
#pragma once

#include <optional>
#include <string_view>

namespace pith {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512bf16 = false;  // vdpbf16ps, vcvtne2ps2bf16
  bool avx512vnni = false;  // vpdpbusd
};

// Detected on first use; the same object afterwards.
const CpuFeatures& cpu_features();

// Kernel levels, in increasing order of capability.
//   Scalar: portable C++ (any CPU).
//   Avx2:   AVX2 + FMA + F16C (Haswell, Zen 1 and later).
//   Avx512: AVX-512 F/BW/VL/DQ; uses AVX512_BF16 and AVX512_VNNI inside when present.
enum class KernelIsa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

// Both answer within the cap (default: none, i.e. Avx512).
bool isa_supported(KernelIsa isa);
// The most capable level this CPU supports.
KernelIsa best_isa();
std::string_view isa_name(KernelIsa isa);  // "scalar", "avx2", "avx512"
std::optional<KernelIsa> isa_from_name(std::string_view name);

// Caps isa_supported / best_isa at `cap` for the whole process (a cap above what the CPU has
// changes nothing). The environment variable PITH_ISA (scalar, avx2, avx512) sets the cap a
// process starts with. Meant for tests: set it before kernels run, not while they do; kernels that
// already chose an ISA keep it.
void set_isa_cap(KernelIsa cap);
KernelIsa isa_cap();

// Sets a cap for one scope and restores the previous one on exit.
class ScopedIsaCap {
 public:
  explicit ScopedIsaCap(KernelIsa cap) : previous_(isa_cap()) { set_isa_cap(cap); }
  ~ScopedIsaCap() { set_isa_cap(previous_); }
  ScopedIsaCap(const ScopedIsaCap&) = delete;
  ScopedIsaCap& operator=(const ScopedIsaCap&) = delete;

 private:
  KernelIsa previous_;
};

}  // namespace pith
