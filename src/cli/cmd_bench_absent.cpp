// `pith bench` in a build configured with -DPITH_BUILD_BENCH=OFF (the sanitizer CI build): the
// subcommand stays, so asking for a benchmark is a clear error rather than "unknown command".
#include "cli/commands.h"
#include "common/error.h"

namespace pith::cli {

void add_bench_commands(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Performance benchmarks (not in this build)");
  bench->allow_extras();
  bench->callback([] {
    fail(
        "this pith was built without benchmarks (-DPITH_BUILD_BENCH=OFF); reconfigure with "
        "-DPITH_BUILD_BENCH=ON");
  });
}

}  // namespace pith::cli
