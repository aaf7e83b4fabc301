// Kernel ISA levels: names round-trip, the best level is supported, levels are nested (a CPU
// with AVX-512 kernels also runs the AVX2 ones), the flags agree with the compiler's view, and a
// cap lowers what the queries report but never raises it.
#include "engine/kernels/cpu_features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace pith {

TEST(CpuFeatures, NamesRoundTrip) {
  for (KernelIsa isa : {KernelIsa::Scalar, KernelIsa::Avx2, KernelIsa::Avx512})
    EXPECT_EQ(isa_from_name(isa_name(isa)), isa);
  EXPECT_FALSE(isa_from_name("sse9").has_value());
}

TEST(CpuFeatures, LevelsAreNestedAndBestIsSupported) {
  EXPECT_TRUE(isa_supported(KernelIsa::Scalar));
  EXPECT_TRUE(isa_supported(best_isa()));
  if (isa_supported(KernelIsa::Avx512)) {
    EXPECT_TRUE(isa_supported(KernelIsa::Avx2));
  }
  if (best_isa() == KernelIsa::Avx2) {
    EXPECT_FALSE(isa_supported(KernelIsa::Avx512));
  }
}

TEST(CpuFeatures, FlagsAreConsistent) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(&f, &cpu_features());  // detected once
  EXPECT_EQ(f.avx2, __builtin_cpu_supports("avx2") != 0);
  if (f.avx2) {
    EXPECT_TRUE(f.f16c);  // every AVX2 CPU has F16C; the cpuid read must see it
  }
  if (f.avx512bw || f.avx512vl || f.avx512dq) {
    EXPECT_TRUE(f.avx512f);
  }
}

TEST(CpuFeatures, CapLowersTheReportedLevels) {
  KernelIsa hardware;
  {
    ScopedIsaCap none(KernelIsa::Avx512);
    hardware = best_isa();
  }
  // No cap unless a test sets one or the suite runs under PITH_ISA.
  const char* env = std::getenv("PITH_ISA");
  const KernelIsa start =
      env && *env ? isa_from_name(env).value_or(KernelIsa::Avx512) : KernelIsa::Avx512;
  ASSERT_EQ(isa_cap(), start);
  {
    ScopedIsaCap cap(KernelIsa::Scalar);
    EXPECT_EQ(isa_cap(), KernelIsa::Scalar);
    EXPECT_EQ(best_isa(), KernelIsa::Scalar);
    EXPECT_TRUE(isa_supported(KernelIsa::Scalar));
    EXPECT_FALSE(isa_supported(KernelIsa::Avx2));
    EXPECT_FALSE(isa_supported(KernelIsa::Avx512));
    {
      ScopedIsaCap inner(KernelIsa::Avx2);
      EXPECT_EQ(best_isa(), hardware == KernelIsa::Scalar ? KernelIsa::Scalar : KernelIsa::Avx2);
      EXPECT_FALSE(isa_supported(KernelIsa::Avx512));
    }
    EXPECT_EQ(best_isa(), KernelIsa::Scalar);  // the inner scope restored the outer cap
  }
  EXPECT_EQ(isa_cap(), start);
  EXPECT_EQ(best_isa(), std::min(hardware, start));
  // A cap at or above the hardware's level changes nothing: it never reports a missing ISA.
  set_isa_cap(KernelIsa::Avx512);
  for (KernelIsa isa : {KernelIsa::Scalar, KernelIsa::Avx2, KernelIsa::Avx512})
    EXPECT_EQ(isa_supported(isa), isa <= hardware) << isa_name(isa);
  set_isa_cap(start);
}

}  // namespace pith
