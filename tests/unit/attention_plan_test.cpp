// The CUDA backend's host-side attention pieces on the CPU: the plan (index arrays, BRLE masks
// turned into FlashInfer-layout bits) and the own paged-attention kernel body, run on the host
// for every (block, thread) of its launch grid and compared with the CPU engine's attention
// over the same K/V (F32 exactly up to summation order, BF16 up to output rounding).
#include "engine/cuda/attention/attention_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "common/error.h"
#include "engine/attention.h"
#include "engine/cuda/attention/paged_attention_kernel.h"

namespace pith::cuda {
namespace {

using Mask = std::vector<std::vector<uint32_t>>;

// Visibility of slot j for input i according to BRLE runs (the definition, written plainly).
bool brle_visible(const std::vector<uint32_t>& runs, uint32_t j) {
  uint32_t at = 0;
  bool visible = true;
  for (uint32_t r : runs) {
    if (j < at + r) return visible;
    at += r;
    visible = !visible;
  }
  return false;
}

TEST(AttentionPlan, CausalMultiPageTables) {
  const std::vector<uint32_t> a{7, 3, 9}, b{4};
  // a: 35 slots over 3 pages of 16 (last page 3 slots), 5 inputs; b: 1 decode input, 16 slots.
  std::vector<AttentionSequence> seqs{{0, 5, a, 35, nullptr}, {5, 1, b, 16, nullptr}};
  AttentionPlan plan;
  build_attention_plan(seqs, 16, false, plan);
  EXPECT_EQ(plan.qo_indptr, (std::vector<int32_t>{0, 5, 6}));
  EXPECT_EQ(plan.kv_page_indptr, (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(plan.kv_page_indices, (std::vector<int32_t>{7, 3, 9, 4}));
  EXPECT_EQ(plan.kv_last_page_len, (std::vector<int32_t>{3, 16}));
  EXPECT_EQ(plan.kv_len, (std::vector<int32_t>{35, 16}));
  EXPECT_EQ(plan.mask_indptr, (std::vector<int32_t>{-1, -1}));
  EXPECT_EQ(plan.row_seq, (std::vector<int32_t>{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(plan.row_q, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(plan.row_pos, (std::vector<int32_t>{0, 1, 2, 3, 4, 0}));
  EXPECT_TRUE(plan.mask_bits.empty());
  EXPECT_TRUE(plan.rows_packed);
  EXPECT_FALSE(plan.any_custom_mask);
  EXPECT_FALSE(plan.all_single_query);
  EXPECT_EQ(plan.max_kv_len, 35u);
  EXPECT_EQ(plan.max_n_q, 5u);
}

TEST(AttentionPlan, DecodeBatchSkipsEmptySequencesAndTracksRowOrder) {
  const std::vector<uint32_t> a{1}, b{2, 5};
  std::vector<AttentionSequence> seqs{
      {3, 1, b, 20, nullptr}, {9, 0, a, 4, nullptr}, {0, 1, a, 4, nullptr}};
  AttentionPlan plan;
  build_attention_plan(seqs, 16, false, plan);
  EXPECT_EQ(plan.n_seqs(), 2u);
  EXPECT_TRUE(plan.all_single_query);
  EXPECT_FALSE(plan.rows_packed);  // rows 3 then 0: FlashInfer cannot address them by indptr
  EXPECT_EQ(plan.row_q, (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(plan.q_begin, (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(plan.kv_last_page_len, (std::vector<int32_t>{4, 4}));
}

TEST(AttentionPlan, BrleRowsBecomeBitsOnByteBoundaries) {
  // Context of 13 slots, 3 inputs: 39 bits = 5 bytes; the next sequence starts at byte 5.
  const uint32_t c = 13;
  const Mask m1{{0, 2, 11},       // leading visible run of 0: slots 0-1 hidden
                {3, 4, 2, 1, 3},  // visible 0-2, hidden 3-6, visible 7-8, hidden 9, vis 10-12
                {c}};             // everything
  const Mask m2{{1, 5, 1}, {7}};  // 7 slots, 2 inputs: 14 bits = 2 bytes
  const std::vector<uint32_t> p1{0}, p2{1};
  std::vector<AttentionSequence> seqs{{0, 3, p1, c, &m1}, {3, 2, p2, 7, &m2}};
  AttentionPlan plan;
  build_attention_plan(seqs, 16, false, plan);
  ASSERT_EQ(plan.mask_indptr, (std::vector<int32_t>{0, 5}));
  ASSERT_EQ(plan.mask_bits.size(), 7u);
  EXPECT_TRUE(plan.any_custom_mask);
  const Mask* masks[] = {&m1, &m2};
  for (uint32_t s = 0; s < 2; ++s) {
    const uint32_t ctx = plan.kv_len[s];
    const uint8_t* seg = plan.mask_bits.data() + plan.mask_indptr[s];
    for (uint32_t i = 0; i < masks[s]->size(); ++i)
      for (uint32_t j = 0; j < ctx; ++j)
        EXPECT_EQ(mask_bit(seg, ctx, i, j), brle_visible((*masks[s])[i], j))
            << "seq " << s << " input " << i << " slot " << j;
  }
  // The bytes themselves (bit b of a segment = byte b/8, bit b%8): row 0 hides slots 0-1.
  EXPECT_EQ(plan.mask_bits[0], 0xfc);
  // Padding bits after the last row (bits 39) stay clear.
  EXPECT_EQ(plan.mask_bits[4] >> 7, 0);
  EXPECT_EQ(plan.mask_bits[6] >> 6, 0);
}

TEST(AttentionPlan, MixedCausalAndMaskedWithCausalBits) {
  const std::vector<uint32_t> pa{4, 2}, pb{6};
  const Mask tree{{5, 2, 1}, {5, 1, 2}, {6, 2}};  // 8 slots, 3 inputs: a tree draft
  std::vector<AttentionSequence> seqs{{0, 4, pa, 20, nullptr}, {4, 3, pb, 8, &tree}};
  AttentionPlan plan;
  build_attention_plan(seqs, 16, false, plan);
  EXPECT_EQ(plan.mask_indptr, (std::vector<int32_t>{-1, 0}));
  EXPECT_EQ(plan.mask_bits.size(), 3u);

  build_attention_plan(seqs, 16, true, plan);                  // every sequence gets bits
  ASSERT_EQ(plan.mask_indptr, (std::vector<int32_t>{0, 10}));  // 4 * 20 bits = 10 bytes
  for (uint32_t i = 0; i < 4; ++i)
    for (uint32_t j = 0; j < 20; ++j)
      EXPECT_EQ(mask_bit(plan.mask_bits.data(), 20, i, j), j <= 20 - 4 + i) << i << "," << j;
  for (uint32_t i = 0; i < 3; ++i)
    for (uint32_t j = 0; j < 8; ++j)
      EXPECT_EQ(mask_bit(plan.mask_bits.data() + 10, 8, i, j), brle_visible(tree[i], j));
}

TEST(AttentionPlan, RejectsInconsistentSequences) {
  AttentionPlan plan;
  const std::vector<uint32_t> one{0}, two{0, 1};
  const Mask short_run{{3, 2}};
  const Mask two_rows{{5}, {5}};
  auto bad = [&](AttentionSequence s) {
    std::vector<AttentionSequence> v{s};
    EXPECT_THROW(build_attention_plan(v, 16, false, plan), Error);
  };
  bad({0, 1, two, 16, nullptr});    // 16 slots fit one page
  bad({0, 1, one, 17, nullptr});    // 17 slots need two
  bad({0, 6, one, 5, nullptr});     // more inputs than slots
  bad({0, 1, one, 0, nullptr});     // empty context
  bad({0, 1, one, 6, &short_run});  // runs sum to 5
  bad({0, 1, one, 5, &two_rows});   // two rows for one input
  std::vector<AttentionSequence> ok{{0, 1, one, 5, &short_run}};
  EXPECT_NO_THROW(build_attention_plan(ok, 16, false, plan));
}

// ---- the own kernel, run on the host, against the CPU engine ----

struct KernelCase {
  uint32_t head_dim, n_heads, n_kv_heads, page_size;
  bool bf16;
  AttentionOptions options{};  // the families' query scale, soft-cap and sliding window
  // The pool's other layer has another shape (gemma4's sliding and global layers), so the
  // tested layer's blocks sit at a per-layer offset in each page.
  bool mixed_layers = false;
};

// Runs every block of the launch grid on the host, threads one after another per phase, then
// (p.n_splits > 1) the merge launch's blocks, as own_attention.cu launches them.
template <class T, uint32_t D>
void run_kernel_on_host_with(const attn::KernelParams& p, uint32_t n_rows) {
  const uint32_t groups = p.n_heads / p.heads_per_block;
  auto tile = std::make_unique<attn::SharedTile<D>>();
  std::vector<attn::ThreadState<D>> states(attn::kThreads);
  for (uint32_t bz = 0; bz < p.n_splits; ++bz)
    for (uint32_t bx = 0; bx < n_rows; ++bx)
      for (uint32_t by = 0; by < groups; ++by)
        attn::attention_block<T, D>(
            p, bx, by, bz, *tile,
            [&](auto&& phase) {
              for (uint32_t t = 0; t < attn::kThreads; ++t) phase(t);
            },
            [&](uint32_t t) -> attn::ThreadState<D>& { return states[t]; });
  if (p.n_splits > 1)
    for (uint32_t bx = 0; bx < n_rows; ++bx)
      for (uint32_t head = 0; head < p.n_heads; ++head)
        for (uint32_t t = 0; t < attn::kThreads; ++t) attn::merge_splits<T>(p, bx, head, t);
}

// The instantiation the launcher (own_attention.cu) picks for the head size.
template <class T>
void run_kernel_on_host(const attn::KernelParams& p, uint32_t n_rows) {
  if (attn::dims_per_thread(p.head_dim) == 2)
    run_kernel_on_host_with<T, 2>(p, n_rows);
  else
    run_kernel_on_host_with<T, 4>(p, n_rows);
}

float round_bf16(float x) {
  return attn::to_float(attn::from_float<attn::Bf16>(x));
}

class OwnKernelParity : public ::testing::TestWithParam<KernelCase> {};

TEST_P(OwnKernelParity, MatchesCpuAttention) {
  const KernelCase kc = GetParam();
  const uint32_t n_layers = 2, layer = 1, hd = kc.head_dim;
  KvShape ks{n_layers, kc.n_kv_heads, hd, kc.page_size, {}};
  KvPoolLayout layout{
      kc.bf16 ? DType::BF16 : DType::F32, n_layers, kc.n_kv_heads, hd, kc.page_size, {}};
  if (kc.mixed_layers) {  // layer 0 as a sliding layer of gemma4 beside the tested global one
    ks.layers = {{2 * kc.n_kv_heads, 32}, {kc.n_kv_heads, hd}};
    layout.layers = {{2 * kc.n_kv_heads, 32}, {kc.n_kv_heads, hd}};
  }
  KvPool cpu_kv(ks, ks.page_bytes() * 64);
  std::vector<float> dev_f32(layout.page_elems() * cpu_kv.n_pages());
  std::vector<attn::Bf16> dev_bf16(kc.bf16 ? dev_f32.size() : 0);
  std::mt19937 rng(hd * 7 + kc.n_heads * 3 + kc.n_kv_heads + kc.bf16);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto value = [&] { return kc.bf16 ? round_bf16(nd(rng)) : nd(rng); };

  // A prefill over 3+ pages (causal), two decodes, a tree-masked draft and a masked prefill
  // whose masks hide whole chunks of the own kernel (context over 128 slots).
  struct Spec {
    uint32_t ctx, n_q;
    int mask;  // 0 causal, 1 tree, 2 window-like runs
  };
  const std::vector<Spec> specs{{45, 9, 0}, {30, 1, 0}, {1, 1, 0}, {21, 4, 1}, {300, 3, 2}};
  std::vector<std::vector<uint32_t>> pages;
  std::vector<Mask> masks(specs.size());
  uint32_t n_tokens = 0;
  for (const Spec& s : specs) n_tokens += s.n_q;
  const uint32_t q_dim = kc.n_heads * hd;
  std::vector<float> q(size_t{n_tokens} * q_dim);
  for (float& x : q) x = value();
  std::vector<float> cpu_out(q.size(), -7.f);

  std::vector<pith::AttentionSequence> cpu_seqs;
  std::vector<AttentionSequence> seqs;
  uint32_t row = 0;
  for (size_t si = 0; si < specs.size(); ++si) {
    const Spec& s = specs[si];
    auto p = cpu_kv.allocate((s.ctx + kc.page_size - 1) / kc.page_size);
    std::shuffle(p.begin(), p.end(), rng);
    pages.push_back(p);
    for (uint32_t slot = 0; slot < s.ctx; ++slot) {
      const uint32_t page = p[slot / kc.page_size], in_page = slot % kc.page_size;
      for (uint32_t l = 0; l < n_layers; ++l) {
        const size_t kv_dim = layout.kv_dim_of(l);
        std::vector<float> k(kv_dim), v(kv_dim);
        for (float& x : k) x = value();
        for (float& x : v) x = value();
        cpu_kv.write(page, in_page, l, k.data(), v.data());
        for (uint32_t kv = 0; kv < 2; ++kv) {
          const size_t at = layout.block_offset(page, l, kv) + size_t{in_page} * kv_dim;
          std::copy_n(kv == 0 ? k.data() : v.data(), kv_dim, dev_f32.begin() + at);
        }
      }
    }
    if (s.mask == 1) {  // a tree: input 0 sees the prefix, others see prefix + their branch
      const uint32_t prefix = s.ctx - s.n_q;
      masks[si] = {{prefix + 1, 3}, {prefix + 2, 2}, {prefix + 1, 1, 1, 1}, {prefix, 1, 2, 1}};
    } else if (s.mask == 2) {  // sink of 4, hidden middle (whole chunks), recent window
      for (uint32_t i = 0; i < s.n_q; ++i) {
        const uint32_t visible_end = s.ctx - s.n_q + i + 1;
        masks[si].push_back({4, visible_end - 4 - 20, 20, s.ctx - visible_end});
      }
    }
    pith::AttentionSequence cs;
    cs.q = q.data() + size_t{row} * q_dim;
    cs.out = cpu_out.data() + size_t{row} * q_dim;
    cs.n_inputs = s.n_q;
    cs.context_len = s.ctx;
    cs.pages = pages.back();
    cs.mask = s.mask ? &masks[si] : nullptr;
    cpu_seqs.push_back(cs);
    seqs.push_back({row, s.n_q, pages.back(), s.ctx, s.mask ? &masks[si] : nullptr});
    row += s.n_q;
  }
  ThreadPool threads(1);
  AttentionScratch scratch;
  pith::attention(threads, cpu_kv, layer, kc.n_heads, cpu_seqs, scratch,
                  AttentionParams{kc.options.scale, kc.options.softcap, kc.options.window});

  AttentionPlan plan;
  build_attention_plan(seqs, kc.page_size, false, plan);
  attn::KernelParams p{};
  std::vector<float> out_f32(q.size(), -7.f);
  std::vector<attn::Bf16> q_bf16(q.size()), out_bf16(q.size(), attn::Bf16{0x7fc0});
  if (kc.bf16) {
    for (size_t i = 0; i < q.size(); ++i) q_bf16[i] = attn::from_float<attn::Bf16>(q[i]);
    for (size_t i = 0; i < dev_f32.size(); ++i)
      dev_bf16[i] = attn::from_float<attn::Bf16>(dev_f32[i]);
    p.q = q_bf16.data();
    p.out = out_bf16.data();
    p.pool = dev_bf16.data();
  } else {
    p.q = q.data();
    p.out = out_f32.data();
    p.pool = dev_f32.data();
  }
  p.page_stride = layout.page_elems();
  p.k_offset = layout.block_offset(0, layer, 0);
  p.v_offset = layout.block_offset(0, layer, 1);
  p.n_heads = kc.n_heads;
  p.n_kv_heads = kc.n_kv_heads;
  p.head_dim = hd;
  p.heads_per_block = attn::heads_per_block(kc.n_heads, kc.n_kv_heads);
  p.page_size = kc.page_size;
  p.scale = kc.options.scale > 0 ? kc.options.scale : 1.f / std::sqrt(float(hd));
  p.softcap = kc.options.softcap;
  p.window = kc.options.window;
  p.row_seq = plan.row_seq.data();
  p.row_q = plan.row_q.data();
  p.row_pos = plan.row_pos.data();
  p.qo_indptr = plan.qo_indptr.data();
  p.kv_page_indptr = plan.kv_page_indptr.data();
  p.kv_page_indices = plan.kv_page_indices.data();
  p.kv_len = plan.kv_len.data();
  p.mask_indptr = plan.mask_indptr.data();
  p.mask_bits = plan.mask_bits.data();
  // Unsplit, then split-K: 2 and 3 shares of the 300-slot row's 3 chunks (equal and unequal),
  // and 7 where most shares of every row are empty; K rows read one element or 8 at a time
  // (where the shapes allow it, as the launcher decides).
  // The chunk's max and sum from partials, or rescanned by every thread (the former form).
  const bool vec8 = attn::rows_vectorizable(p.pool, p.page_stride, p.k_offset, hd);
  for (const auto& [n_splits, wide, rescan] :
       {std::tuple{1u, false, false}, std::tuple{1u, vec8, false}, std::tuple{2u, vec8, false},
        std::tuple{3u, false, false}, std::tuple{7u, vec8, false}, std::tuple{1u, vec8, true},
        std::tuple{3u, false, true}}) {
    SCOPED_TRACE("n_splits " + std::to_string(n_splits) + (wide ? ", 8-element loads" : "") +
                 (rescan ? ", rescans" : ", partials"));
    p.vec8 = wide;
    p.rescan_chunk = rescan;
    std::vector<float> scratch(attn::split_scratch_floats(plan.n_rows(), kc.n_heads, hd, n_splits),
                               std::nanf(""));
    p.n_splits = n_splits;
    p.split_acc = scratch.data();
    p.split_ml = scratch.data() + size_t{plan.n_rows()} * kc.n_heads * n_splits * hd;
    std::fill(out_f32.begin(), out_f32.end(), -7.f);
    std::fill(out_bf16.begin(), out_bf16.end(), attn::Bf16{0x7fc0});
    if (kc.bf16)
      run_kernel_on_host<attn::Bf16>(p, plan.n_rows());
    else
      run_kernel_on_host<float>(p, plan.n_rows());

    // Rounding of the scores grows with their size: unscaled head_dim-512 scores (gemma4's
    // global layers) spread ~20x wider than 1/sqrt(head_dim)-scaled ones.
    const float spread = std::max(1.f, p.scale * std::sqrt(float(hd)));
    for (size_t i = 0; i < q.size(); ++i) {
      const float got = kc.bf16 ? attn::to_float(out_bf16[i]) : out_f32[i];
      // BF16 output is rounded to 8 bits of mantissa: half an ulp relative, plus summation noise.
      const float tol =
          kc.bf16 ? 1e-5f * spread + std::abs(cpu_out[i]) * (1.f / 256) : 2e-5f * spread;
      ASSERT_NEAR(got, cpu_out[i], tol) << "element " << i << " (row " << i / q_dim << ")";
    }
  }
}

TEST(OwnKernelSplits, ChoiceFillsTheGpuOnlyWhereTheGridIsSmallAndTheContextLong) {
  // Batch-1 decode of a Llama-3 8B shape (8 groups) on 132 SMs at 32k context: 33 splits wanted
  // for two blocks per SM, capped at 32.
  EXPECT_EQ(attn::choose_kv_splits(1, 8, 32768, 132), 32u);
  // 4k context: 32 chunks allow 16 shares of two chunks.
  EXPECT_EQ(attn::choose_kv_splits(1, 8, 4096, 132), 16u);
  // 32 decodes x 8 groups = 256 blocks: 2 shares fill 264 SM slots twice.
  EXPECT_EQ(attn::choose_kv_splits(32, 8, 4096, 132), 2u);
  // A full grid (a prefill, or a big decode batch) and short contexts keep one split.
  EXPECT_EQ(attn::choose_kv_splits(512, 8, 4096, 132), 1u);
  EXPECT_EQ(attn::choose_kv_splits(33, 8, 32768, 132), 1u);
  EXPECT_EQ(attn::choose_kv_splits(1, 8, 300, 132), 1u);
  EXPECT_EQ(attn::choose_kv_splits(1, 8, 512, 132), 2u);
  EXPECT_EQ(attn::choose_kv_splits(0, 8, 4096, 132), 1u);
  // The scratch PagedAttention allocates (4 x SMs x widest split block) holds every choice.
  for (uint32_t rows : {1u, 2u, 3u, 5u, 8u, 17u, 32u, 33u, 64u})
    for (uint32_t groups : {1u, 2u, 4u, 8u, 16u})
      for (uint32_t sms : {1u, 2u, 78u, 108u, 132u}) {
        const uint32_t n = attn::choose_kv_splits(rows, groups, 1u << 20, sms);
        if (n > 1) {
          ASSERT_LT(uint64_t{rows} * groups * n, uint64_t{4} * sms)
              << rows << " rows, " << groups << " groups, " << sms << " SMs";
        }
      }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, OwnKernelParity,
    ::testing::Values(KernelCase{64, 8, 2, 16, false},    // GQA group 4
                      KernelCase{128, 8, 8, 16, false},   // MHA
                      KernelCase{128, 32, 8, 16, true},   // Llama-3 8B-like GQA, BF16
                      KernelCase{64, 4, 1, 8, true},      // MQA, small pages
                      KernelCase{256, 16, 1, 16, false},  // MQA, group 16 (two blocks per KV head)
                      KernelCase{96, 6, 2, 32, true},     // head_dim not a power of two
                      // gemma2: query scale 1/sqrt(224) on head_dim 256, soft-cap 50, and a
                      // 16-slot window (its sliding layers) over multi-chunk contexts
                      KernelCase{256, 8, 4, 16, false, {0.0668f, 50.f, 0}},
                      KernelCase{256, 8, 4, 16, true, {0.0668f, 50.f, 16}},
                      // gemma3 / mistral sliding layers: windows shorter and longer than a chunk
                      KernelCase{128, 8, 2, 16, false, {0, 0, 5}},
                      KernelCase{64, 4, 1, 8, true, {0, 0, 200}},
                      // a small cap that bends most scores
                      KernelCase{64, 8, 2, 16, false, {0, 2.f, 0}},
                      // gemma4's global layers: head_dim 512 (4 dims per thread), no score
                      // scaling, beside a sliding layer of another shape in the same pages
                      KernelCase{512, 8, 1, 16, false, {1.f, 0, 0}, true},
                      KernelCase{512, 16, 2, 16, true, {1.f, 0, 0}, true},
                      KernelCase{256, 8, 2, 16, false, {1.f, 0, 0}, true}),
    [](const ::testing::TestParamInfo<KernelCase>& info) {
      const KernelCase& c = info.param;
      std::string name = "hd" + std::to_string(c.head_dim) + "_h" + std::to_string(c.n_heads) +
                         "_kv" + std::to_string(c.n_kv_heads) + "_p" + std::to_string(c.page_size) +
                         (c.bf16 ? "_bf16" : "_f32");
      if (c.options.scale > 0) name += "_scaled";
      if (c.options.softcap > 0) name += "_cap" + std::to_string(int(c.options.softcap));
      if (c.options.window > 0) name += "_win" + std::to_string(c.options.window);
      if (c.mixed_layers) name += "_mixed";
      return name;
    });

}  // namespace
}  // namespace pith::cuda
