// The matmul benchmark suite (see bench_matmul.h).
#include "bench/bench_matmul.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "bench/machine_baselines.h"
#include "common/fp16.h"
#include "common/thread_pool.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/matmul_kernels.h"
#include "formats/iquants.h"
#include "formats/kquants.h"
#include "formats/legacy_quants.h"
#include "formats/mxfp4.h"

namespace pith::bench {

namespace {

using Clock = std::chrono::steady_clock;

// One random row of `cols` elements in `dtype` (values ~N(0, 0.05), like trained weights).
std::vector<uint8_t> random_row(DType dtype, size_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> v(cols);
  for (auto& x : v) x = nd(rng);
  std::vector<uint8_t> out(row_bytes(dtype, cols));
  switch (dtype) {
    case DType::F32:
      std::memcpy(out.data(), v.data(), cols * 4);
      break;
    case DType::F16:
      for (size_t i = 0; i < cols; ++i)
        reinterpret_cast<uint16_t*>(out.data())[i] = f32_to_f16(v[i]);
      break;
    case DType::BF16:
      for (size_t i = 0; i < cols; ++i)
        reinterpret_cast<uint16_t*>(out.data())[i] = f32_to_bf16(v[i]);
      break;
    case DType::Q8_0:
      for (size_t b = 0; b < cols / 32; ++b) {
        auto* blk = reinterpret_cast<BlockQ8_0*>(out.data()) + b;
        blk->d = f32_to_f16(0.15f / 127);
        for (size_t j = 0; j < 32; ++j)
          blk->qs[j] = static_cast<int8_t>(std::lround(v[b * 32 + j] * 127 / 0.15f));
      }
      break;
    case DType::Q4_0:
      for (size_t b = 0; b < cols / 32; ++b) {
        auto* blk = reinterpret_cast<BlockQ4_0*>(out.data()) + b;
        blk->d = f32_to_f16(0.02f);
        for (size_t j = 0; j < 16; ++j) blk->qs[j] = static_cast<uint8_t>(rng());
      }
      break;
    case DType::Q4_1:
      quantize_q4_1(v.data(), reinterpret_cast<BlockQ4_1*>(out.data()), cols);
      break;
    case DType::Q5_0:
      quantize_q5_0(v.data(), reinterpret_cast<BlockQ5_0*>(out.data()), cols);
      break;
    case DType::Q5_1:
      quantize_q5_1(v.data(), reinterpret_cast<BlockQ5_1*>(out.data()), cols);
      break;
    case DType::Q2_K:
      quantize_q2_k(v.data(), reinterpret_cast<BlockQ2_K*>(out.data()), cols);
      break;
    case DType::Q3_K:
      quantize_q3_k(v.data(), reinterpret_cast<BlockQ3_K*>(out.data()), cols);
      break;
    case DType::Q4_K:
      quantize_q4_k(v.data(), reinterpret_cast<BlockQ4_K*>(out.data()), cols);
      break;
    case DType::Q5_K:
      quantize_q5_k(v.data(), reinterpret_cast<BlockQ5_K*>(out.data()), cols);
      break;
    case DType::Q6_K:
      quantize_q6_k(v.data(), reinterpret_cast<BlockQ6_K*>(out.data()), cols);
      break;
    case DType::IQ4_NL:
      quantize_iq4_nl(v.data(), reinterpret_cast<BlockIQ4_NL*>(out.data()), cols);
      break;
    case DType::IQ4_XS:
      quantize_iq4_xs(v.data(), reinterpret_cast<BlockIQ4_XS*>(out.data()), cols);
      break;
    case DType::MXFP4:
      quantize_mxfp4(v.data(), reinterpret_cast<BlockMXFP4*>(out.data()), cols);
      break;
  }
  return out;
}

// A rows x cols matrix built from 64 distinct random rows (weights larger than the caches
// behave the same whatever their values; this keeps generation of 100M+ elements fast).
std::vector<uint8_t> random_matrix(DType dtype, size_t rows, size_t cols) {
  std::mt19937 rng(1234);
  std::vector<std::vector<uint8_t>> pool;
  for (int i = 0; i < 64; ++i) pool.push_back(random_row(dtype, cols, rng));
  const size_t rb = row_bytes(dtype, cols);
  std::vector<uint8_t> out(rows * rb);
  for (size_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + r * rb, pool[(r * 37) % 64].data(), rb);
  return out;
}

}  // namespace

std::vector<MatmulShape> llama32_1b_shapes() {
  return {
      {"attn_q/o", 2048, 2048}, {"attn_k/v", 512, 2048},  {"ffn_gate/up", 8192, 2048},
      {"ffn_down", 2048, 8192}, {"output", 128256, 2048},
  };
}

nlohmann::json run_matmul_bench(const MatmulBenchOptions& o) {
  ThreadPool pool(o.threads);
  const auto shapes = o.shapes.empty() ? llama32_1b_shapes() : o.shapes;
  fmt::print("matmul bench: {} threads, kernel isa {}, median of {} runs\n", o.threads,
             isa_name(o.isa), o.reps);
  const double bw = measure_read_bandwidth_gb_s(pool, size_t{2} << 30, 5);
  const double peak = measure_peak_gflop_s(pool, 5);
  fmt::print("baselines (same run): memory read {:.1f} GB/s, f32 FMA peak {:.1f} GFLOP/s\n", bw,
             peak);
  fmt::print("{:<6} {:<12} {:>7} {:>6} {:>10} {:>9} {:>10} {:>8}\n", "dtype", "matrix", "shape",
             "tokens", "ms", "GB/s", "GFLOP/s", "ratio");

  nlohmann::json results = nlohmann::json::array();
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (DType dtype : o.dtypes) {
    for (const auto& shape : shapes) {
      auto wbytes = random_matrix(dtype, shape.rows, shape.cols);
      WeightMatrix w{dtype, shape.rows, shape.cols, wbytes.data()};
      // As the CPU backend holds it: packed into panels at load where the kernel level reads
      // them (AVX-512: Q8_0 / Q4_K / BF16, the panel GEMM then serving every token count; AVX2:
      // Q4_K, for decode).
      std::shared_ptr<const void> panels;
      if (o.isa != KernelIsa::Scalar) {
        ScopedIsaCap cap(o.isa);
        if ((panels = pack_weight_panels(pool, w))) w.panels = panels.get();
      }
      for (size_t n : o.tokens) {
        if (shape.rows > 100000 && n > o.max_lm_head_tokens) continue;
        std::vector<float> x(n * shape.cols), y(n * shape.rows);
        for (auto& v : x) v = nd(rng);
        // Where an AVX-512 panel GEMM runs, the kernel it replaced is the baseline,
        // timed interleaved with it.
        const bool vs_tiles = o.isa == KernelIsa::Avx512 && kernels::uses_panel_gemm(w, n);
        const size_t gemm_from = kernels::panel_gemm_min_tokens();
        auto timed = [&](bool tiles) {
          if (tiles) kernels::set_panel_gemm_min_tokens(0);
          auto t0 = Clock::now();
          matmul(pool, w, x.data(), n, y.data(), o.isa);
          const double s = std::chrono::duration<double>(Clock::now() - t0).count();
          kernels::set_panel_gemm_min_tokens(gemm_from);
          return s;
        };
        timed(false);  // warm-up
        std::vector<double> times, tile_times;
        for (int r = 0; r < o.reps; ++r) {
          times.push_back(timed(false));
          if (vs_tiles) tile_times.push_back(timed(true));
        }
        const double s = median(times);
        const double tiles_s = vs_tiles ? median(tile_times) : 0.0;
        const double gb_s = double(wbytes.size()) / s / 1e9;
        const double gflop_s = 2.0 * shape.rows * shape.cols * n / s / 1e9;
        // Few tokens: bound by reading weights; many: by arithmetic.
        const bool decode = n <= 8;
        const double ratio = decode ? gb_s / bw : gflop_s / peak;
        fmt::print("{:<6} {:<12} {:>7} {:>6} {:>10.3f} {:>9.1f} {:>10.1f} {:>7.2f}{}{}\n",
                   dtype_info(dtype).name, shape.name, fmt::format("{}x{}", shape.rows, shape.cols),
                   n, s * 1e3, gb_s, gflop_s, ratio, decode ? " of bw" : " of peak",
                   vs_tiles ? fmt::format("  panel GEMM {:.2f}x the tiles ({:.3f} ms)", tiles_s / s,
                                          tiles_s * 1e3)
                            : "");
        results.push_back({{"dtype", dtype_info(dtype).name},
                           {"matrix", shape.name},
                           {"rows", shape.rows},
                           {"cols", shape.cols},
                           {"tokens", n},
                           {"ms", s * 1e3},
                           {"gb_s", gb_s},
                           {"gflop_s", gflop_s},
                           {"ratio", ratio},
                           {"ratio_of", decode ? "bandwidth" : "fma_peak"}});
        if (vs_tiles) {
          results.back()["tiles_ms"] = tiles_s * 1e3;
          results.back()["vs_tiles"] = tiles_s / s;
        }
      }
    }
  }
  return {{"suite", "matmul"},    {"threads", o.threads},     {"isa", isa_name(o.isa)},
          {"bandwidth_gb_s", bw}, {"fma_peak_gflop_s", peak}, {"results", results}};
}

}  // namespace pith::bench
