// Planning (rungs/attention/plan.hpp): split choice, workspace sizes, argument validation and
// the per-step metadata writers, with exact expectations.
#include <rungs/attention/plan.hpp>
#include <rungs/kv/block_table.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_cases.hpp"  // at(): fake device addresses

namespace ra = rungs::attention;
using rungs_test::at;

namespace {

ra::attention_config config(int hq, int hkv, int d, int b, std::int64_t blocks = 1000) {
  return {ra::dtype::bf16, {.num_qo_heads = hq, .num_kv_heads = hkv, .head_dim = d, .block_size = b, .num_blocks = blocks}};
}

const ra::device_info h100{.num_sms = 132, .sm = 90};

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no exception";
}

}  // namespace

TEST_CASE("decode plan: no split when the batch alone fills the GPU") {
  const auto p = ra::plan_decode(config(32, 8, 128, 16), {.max_batch = 64, .max_context = 4096}, h100);
  CHECK(p.num_splits == 1);
  CHECK_FALSE(p.split());
  CHECK(p.split_tokens == 4096);
  CHECK(p.max_blocks_per_seq == 256);
  CHECK(p.workspace.bytes == 0);
}

TEST_CASE("decode plan: splits by waves of the instance's CTA slots (H100, 32/8 heads, D 128, bf16, 4096 tokens)") {
  // Group 4 holds 4 query rows per thread: geometry::ctas_per_sm(90, 4) = 4 CTAs per SM, so
  // P = 132 x 4 = 528 CTA slots; a batch of b runs 8b CTAs unsplit. The model's cost
  // (detail::split_time, in slot-tokens): waves x (split tokens + 32, one tile of D 128), and
  // when split the merge: 32 + 2 x rows x n x 516 B / (528 x 512 B), rows = 32b, n splits.
  // Splits cut 4096 tokens evenly, rounded up to 32-token tiles, at least 256: n = 1-13, 15, 16
  // of 4096, 2048, 1376, 1024, 832, 704, 608, 512, 480, 416, 384, 352, 320, 288, 256 tokens
  // (n = 14 gives 13 of 320); the model tries n up to 4 x 528 / 8b (4 waves) and 16.
  const auto cfg = config(32, 8, 128, 16);
  const auto splits = [&](int batch) { return ra::plan_decode(cfg, {.max_batch = batch, .max_context = 4096}, h100).num_splits; };
  // b = 1: 16 x 8 = 128 CTAs, one wave: 288 + 32 + 1.95 = 322 (unsplit 4128).
  CHECK(splits(1) == 16);
  // b = 8, 64 CTAs: 8 splits, 512 CTAs, one wave: 544 + 32 + 7.8 = 583.8; 16 splits take 2
  // waves: 576 + 32 + 15.6 = 623.6; 7 splits, one wave: 672 + ...; 5 (the old plan): 928 + ...
  CHECK(splits(8) == 8);
  // b = 33, 264 CTAs, n <= 8: 2 splits, 528 CTAs, one wave: 2080 + 32 + 8.1 = 2120; 4 splits,
  // 2 waves: 2112 + 32 + 16.1 = 2160; 8 splits, 4 waves: 2176 + ...; unsplit 4128.
  CHECK(splits(33) == 2);
  // b = 40, 320 CTAs, n <= 6: 3 splits of 1376 (4096 / 3 = 1365.3 rounded up to 32; 3 x 1376 =
  // 4128 tokens), 960 CTAs, 2 waves: 2816 + 32 + 14.7 = 2862.7; 6 splits, 4 waves: 2944 + ...;
  // 4, 3 waves: 3168 + ...; unsplit 4128. Splits rounded up to 128 tokens took 3 of 1408 (4224).
  CHECK(splits(40) == 3);
  CHECK(ra::plan_decode(cfg, {.max_batch = 40, .max_context = 4096}, h100).split_tokens == 1376);
  // b = 48, 384 CTAs (73% of the slots), n <= 5: unsplit 4128; 2 splits, 2 waves: 4160 + ...;
  // 3, 3 waves: 4320 + ...; 4 splits, 1536 CTAs, 3 waves (97% full): 3168 + 32 + 23.5 = 3223.5;
  // 5, 4 waves: 3712 + ...
  CHECK(splits(48) == 4);
  CHECK(ra::detail::split_time({.ctas = 384, .rows = 1536, .context = 4096, .head_dim = 128, .kv_bytes = 2,
                                .ctas_per_sm = 4},
                               528, 1024, 4) == Approx(3168 + 32 + 2.0 * 1536 * 4 * 516 / (528 * 512)));
  // b = 63, 504 CTAs, n <= 4: unsplit, one wave: 4128; 2 splits, 2 waves: 4160 + ...; 3, 3
  // waves: 4320 + ...; 4, 4 waves: 4224 + ... b = 64 (512 CTAs) alike.
  CHECK(splits(63) == 1);
  CHECK(splits(64) == 1);
  // b = 128, 1024 CTAs, n <= 2: unsplit, 2 waves: 8256; 2 splits, 4 waves: 8320 + ...
  CHECK(splits(128) == 1);
  // The previous planner aimed at a fixed 2 CTAs per SM (264 slots) and split only below them:
  // 16, 5, 1, 1, 1, 1, 1. Its occupancy, as an override: b = 33 fills the 264 slots unsplit
  // (4128); 2 splits take 2 waves (4160 + ...).
  CHECK(ra::plan_decode(cfg, {.max_batch = 33, .max_context = 4096}, h100, {.ctas_per_sm = 2}).num_splits == 1);
  // The SIMT decode's groups of 8 hold 8 rows per thread: 2 CTAs per SM on sm_90 (264 slots).
  // b = 33, 264 CTAs: one wave unsplit (4128); 2 splits take 2 waves (4160 + ...).
  CHECK(ra::plan_decode(config(64, 8, 128, 16), {.max_batch = 33, .max_context = 4096}, h100,
                        {.kernel = ra::decode_kernel::simt})
            .num_splits == 1);
  // The tensor-core decode (the planner's choice at group 8) is built for 4 CTAs per SM (528
  // slots), as group 4: 2 splits, one wave: 2080 + 32 + 16.2 (rows = 64b) = 2128; 4 splits, 2
  // waves: 2112 + 32 + 32.3; unsplit 4128.
  CHECK(ra::plan_decode(config(64, 8, 128, 16), {.max_batch = 33, .max_context = 4096}, h100).num_splits == 2);
  // The 2 splits of b = 33 (group 4): 2048 tokens each.
  CHECK(ra::plan_decode(cfg, {.max_batch = 33, .max_context = 4096}, h100).split_tokens == 2048);
  // Short contexts stop at min_split_tokens: 1 x 1 CTA of 300 tokens (head dim 64: 64-token
  // tiles): unsplit 300 + 64 = 364; 2 splits of 256: 256 + 64 + 64 + 0.03 = 384.
  CHECK(ra::plan_decode(config(4, 1, 64, 8), {.max_batch = 1, .max_context = 300}, h100).num_splits == 1);
  CHECK(ra::plan_decode(config(4, 1, 64, 8), {.max_batch = 1, .max_context = 255}, h100).split_tokens == 255);
}

TEST_CASE("decode plan: split workspace layout") {
  // Workspace: rows (batch x query heads) x splits x head_dim floats, 256-byte aligned, then
  // rows x splits floats.
  const auto c = ra::plan_decode(config(4, 1, 64, 8), {.max_batch = 1, .max_context = 300}, h100, {.split_tokens = 256});
  CHECK(c.num_splits == 2);
  CHECK(c.workspace.partial_out_offset == 0);
  CHECK(c.workspace.partial_lse_offset == 4 * 2 * 64 * 4);
  CHECK(c.workspace.bytes == 4 * 2 * 64 * 4 + 4 * 2 * 4);
  const auto d =
      ra::plan_decode(config(3, 3, 80, 8), {.max_batch = 1, .max_context = 300}, h100, {.split_tokens = 256});  // 3 x 2 x 80 x 4 = 1920
  CHECK(d.workspace.partial_lse_offset == 2048);
  CHECK(d.workspace.bytes == 2048 + 3 * 2 * 4);
}

TEST_CASE("decode plan: forced split sizes, including splits past every sequence") {
  const auto p = ra::plan_decode(config(8, 2, 64, 16), {.max_batch = 4, .max_context = 1000}, h100, {.split_tokens = 48});
  CHECK(p.split_tokens == 48);
  CHECK(p.num_splits == 21);
  const auto one = ra::plan_decode(config(8, 2, 64, 16), {.max_batch = 4, .max_context = 100}, h100, {.split_tokens = 4096});
  CHECK(one.num_splits == 1);
}

TEST_CASE("decode_workspace_bound covers every smaller batch and context") {
  // 8/2 heads, head dim 64 (64-token tiles), H100: 528 slots. Splits cut the context evenly,
  // rounded up to whole tiles. 53 sequences, 106 CTAs. Of 4096 tokens: 4 splits of 1024, 424
  // CTAs, one wave: 1088 + 64 + 6.5 (merge) = 1158.5, against e.g. 16 of 256, 4 waves: 1280 + ...
  // Of 2049 tokens: 4 splits of 576 (2049 / 4 rounded up to 64; the last of 321), one wave:
  // 640 + 64 + 6.5 = 710.5, against 9 of 256 (the last of 1 token), 954 CTAs, 2 waves:
  // 640 + 64 + 14.7 = 718.7, which splits rounded up to 128 tokens chose (4 of 640 took 774.5).
  const auto cfg = config(8, 2, 64, 16);
  CHECK(ra::plan_decode(cfg, {.max_batch = 53, .max_context = 4096}, h100).num_splits == 4);
  const auto even = ra::plan_decode(cfg, {.max_batch = 53, .max_context = 2049}, h100);
  CHECK(even.num_splits == 4);
  CHECK(even.split_tokens == 576);
  CHECK(even.workspace.bytes == 424 * 4 * 64 * 4 + 424 * 4 * 4);  // 424 rows; 434176 is 256-aligned
  // The case that planning at the largest context misses: 27 sequences, 54 CTAs. Of 4096
  // tokens: 8 splits of 512, 432 CTAs, one wave: 576 + 64 + 6.6 = 646.6 (16 of 256 take 2
  // waves: 640 + 64 + 13.3; 10 of 448, 540 CTAs, 2 waves: 1024 + ...). Of 2049: 9 splits of 256
  // (the last of 1 token), 486 CTAs, one wave: 320 + 64 + 7.5 = 391.5, against 7 of 320:
  // 384 + 64 + 5.8 = 453.8. The shorter context splits into more pieces.
  CHECK(ra::plan_decode(cfg, {.max_batch = 27, .max_context = 4096}, h100).num_splits == 8);
  const auto shorter = ra::plan_decode(cfg, {.max_batch = 27, .max_context = 2049}, h100);
  CHECK(shorter.num_splits == 9);
  CHECK(shorter.workspace.bytes == 216 * 9 * 64 * 4 + 216 * 9 * 4);  // 216 rows; 497664 is 256-aligned
  // The bound takes per batch the most splits the model tries, min(ceil(4096 / 256) = 16,
  // 4 x 528 / 2b), here 16 for every b <= 53, at the largest batch: 424 rows x 16 splits.
  CHECK(ra::decode_workspace_bound(cfg, {.max_batch = 53, .max_context = 4096}, h100) == 424 * 16 * 64 * 4 + 424 * 16 * 4);
  CHECK(ra::decode_workspace_bound(cfg, {.max_batch = 27, .max_context = 4096}, h100) == 216 * 16 * 64 * 4 + 216 * 16 * 4);

  // Exhaustively: no plan within the limits asks for more than the bound. The bound counts
  // the model's largest candidate, which it need not pick: here at most 1.6 times the largest
  // plan (and 33 KB where no plan splits).
  for (const ra::device_info dev : {ra::device_info{1, 90}, ra::device_info{108, 80}, h100}) {
    for (const auto& c : {cfg, config(32, 8, 128, 16), config(32, 32, 128, 16), config(4, 1, 256, 8)}) {
      for (const ra::plan_options opt : {ra::plan_options{}, ra::plan_options{.split_tokens = 100}}) {
        const std::size_t bound = ra::decode_workspace_bound(c, {.max_batch = 8, .max_context = 2048}, dev, opt);
        std::size_t worst = 0;
        for (int b = 1; b <= 8; ++b)
          for (int ctx = 1; ctx <= 2048; ++ctx)
            worst = std::max(worst, ra::plan_decode(c, {.max_batch = b, .max_context = ctx}, dev, opt).workspace.bytes);
        INFO("sms " << dev.num_sms << ", heads " << c.shape.num_qo_heads << "/" << c.shape.num_kv_heads
                    << ", split_tokens " << opt.split_tokens);
        CHECK(worst <= bound);
        CHECK(bound <= std::max<std::size_t>(worst + worst * 6 / 10, 33024));  // engines allocate it
      }
    }
  }
  CHECK_THROWS_WITH(ra::decode_workspace_bound(cfg, {.max_batch = 0, .max_context = 16}, h100),
                    Catch::Contains("decode_bucket.max_batch = 0"));
}

TEST_CASE("decode plan: bad shapes and buckets name the value and the rule") {
  CHECK(error_of([] { ra::plan_decode(config(32, 8, 72, 16), {1, 10}, h100); }) ==
        "head_dim = 72 is not supported by this build; supported: 64, 80, 96, 128, 256");
  CHECK(error_of([] { ra::plan_decode(config(32, 8, 128, 12), {1, 10}, h100); }) ==
        "block_size = 12 is not supported by this build; supported: 8, 16, 32, 64, 128");
  CHECK(error_of([] { ra::plan_decode(config(32, 1, 128, 16), {1, 10}, h100); }) ==
        "group_size = 32 is not supported by this build; supported: 1, 2, 3, 4, 5, 6, 7, 8, 16");
  CHECK(error_of([] { ra::plan_decode(config(32, 8, 128, 16), {0, 10}, h100); }) ==
        "decode_bucket.max_batch = 0 must be in [1, 65535] (the grid's z limit)");
  CHECK(error_of([] { ra::plan_decode(config(32, 8, 128, 16), {70000, 10}, h100); }) ==
        "decode_bucket.max_batch = 70000 must be in [1, 65535] (the grid's z limit)");
  CHECK(error_of([] { ra::plan_decode(config(32, 8, 128, 16), {1, 0}, h100); }) ==
        "decode_bucket.max_context = 0 must be in [1, 2^30]");
  CHECK(error_of([] { ra::plan_decode(config(32, 8, 128, 16), {1, 10}, {0}); }) ==
        "device_info.num_sms = 0 must be at least 1 (use query_device())");
  CHECK(error_of([] { ra::plan_decode(config(32, 8, 128, 16), {1, 10}, {.num_sms = 132}); }) ==
        "device_info.sm = 0 is not an architecture the kernels run on (compute capability x 10: 80, 86, 87, 89, 90, "
        "100, 103, 110, 120, 121; use query_device())");
  CHECK(error_of([] { ra::plan_prefill(config(32, 8, 128, 16), {1, 1, 0, 10}, {.num_sms = 40, .sm = 75}); }) ==
        "device_info.sm = 75 is not an architecture the kernels run on (compute capability x 10: 80, 86, 87, 89, 90, "
        "100, 103, 110, 120, 121; use query_device())");
  CHECK(error_of([] { ra::plan_decode(config(32, 8, 128, 16), {1, 10}, h100, {.ctas_per_sm = -1}); }) ==
        "plan_options.ctas_per_sm = -1 must be 0 (the instance's occupancy) or positive");
  // Other sm_80+ architectures: the build guarantees 1 CTA per SM (geometry::ctas_per_sm), so
  // an sm_89 GPU of 128 SMs has 128 slots: b = 16 (128 CTAs) fills them unsplit.
  CHECK(ra::plan_decode(config(32, 8, 128, 16), {16, 4096}, {.num_sms = 128, .sm = 89}).num_splits == 1);
  CHECK(error_of([] { ra::plan_decode(config(32, 8, 128, 16), {1, 10}, h100, {.split_tokens = -1}); }) ==
        "plan_options.split_tokens = -1 must be 0 (choose) or positive");
  auto bad_scale = config(32, 8, 128, 16);
  bad_scale.sm_scale = -1.0f;
  CHECK(error_of([&] { ra::plan_decode(bad_scale, {1, 10}, h100); }) ==
        "sm_scale = -1 must be finite and non-negative (0 means 1/sqrt(head_dim))");
  auto bad_window = config(32, 8, 128, 16);
  bad_window.scores.window = -4;
  CHECK(error_of([&] { ra::plan_decode(bad_window, {1, 10}, h100); }) ==
        "scores.window = -4 must be 0 (none) or positive");
  auto bad_cap = config(32, 8, 128, 16);
  bad_cap.scores.logit_soft_cap = std::numeric_limits<float>::infinity();
  CHECK(error_of([&] { ra::plan_prefill(bad_cap, {.max_batch = 1, .max_q_len = 1, .max_context = 10}, h100); }) ==
        "scores.logit_soft_cap = inf must be finite and non-negative (0: none)");
}

TEST_CASE("score transforms: an instance runs exactly the transforms it compiles in") {
  auto c = config(32, 8, 128, 16);
  const float sinks[32] = {};
  CHECK(ra::needed_mod(c.scores, false) == ra::causal_only);
  // The kernels' template argument: one bit per transform, and back.
  CHECK(ra::score_mod_bits({.sliding_window = true}) == 1u);
  CHECK(ra::score_mod_bits({.soft_cap = true, .sinks = true}) == 6u);
  for (unsigned bits = 0; bits < 8; ++bits) CHECK(ra::score_mod_bits(ra::score_mod_from_bits(bits)) == bits);
  CHECK_NOTHROW(ra::check_score_mod(ra::causal_only, c, nullptr, "decode"));
  c.scores = {.window = 4096, .logit_soft_cap = 50.0f};
  CHECK(ra::needed_mod(c.scores, true) == ra::score_mod{.sliding_window = true, .soft_cap = true, .sinks = true});
  CHECK_NOTHROW(ra::check_score_mod({.sliding_window = true, .soft_cap = true, .sinks = true}, c, sinks, "decode"));
  CHECK(error_of([&] { ra::check_score_mod(ra::causal_only, c, nullptr, "decode"); }) ==
        "decode: the instance compiles score_mod{} but the configuration and arguments need "
        "score_mod{.sliding_window = true, .soft_cap = true} (scores.window = 4096, scores.logit_soft_cap = 50, "
        "sinks null)");
  c.scores = {};
  CHECK(error_of([&] { ra::check_score_mod({.sliding_window = true, .sinks = true}, c, sinks, "prefill"); }) ==
        "prefill: the instance compiles score_mod{.sliding_window = true, .sinks = true} but the configuration and "
        "arguments need score_mod{.sinks = true} (scores.window = 0, scores.logit_soft_cap = 0, sinks given)");
}

namespace {
// Every tensor-core decode instance the kernel takes (fp16, bf16; head dims 64, 128; groups
// 1-8, 16), so that the planner's rules show beside the default set's instances.
using every_tensor_core_set =
    ra::instantiation_set<ra::supported_dtypes, ra::values<64, 128>, ra::values<ra::dynamic_block_size>,
                          ra::values<1, 2, 3, 4, 5, 6, 7, 8, 16>, ra::no_fp8_kv,
                          ra::tensor_core_decode_instances<ra::supported_dtypes, ra::values<64, 128>,
                                                           ra::values<1, 2, 3, 4, 5, 6, 7, 8, 16>>>;
// A set without tensor-core instances, and one with a static block size of 16 only.
using simt_only_set = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>,
                                            ra::values<ra::dynamic_block_size>, ra::values<4>>;
using static16_set = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<16>, ra::values<4>,
                                           ra::no_fp8_kv,
                                           ra::tensor_core_decode_instances<ra::dtypes<ra::dtype::bf16>, ra::values<128>,
                                                                            ra::values<4>>>;
}  // namespace

TEST_CASE("split merge geometry: chunks of a row's head dim, lanes per row, rows per CTA") {
  namespace geo = ra::geometry;
  CHECK(geo::merge_chunk_vectors(128) == 8);  // 32 dims, a 128-byte line of each partial output
  CHECK(geo::merge_chunk_vectors(80) == 4);   // 20 float4s
  CHECK(geo::merge_ctas_per_row(64) == 2);
  CHECK(geo::merge_ctas_per_row(80) == 5);
  CHECK(geo::merge_ctas_per_row(96) == 3);
  CHECK(geo::merge_ctas_per_row(128) == 4);
  CHECK(geo::merge_ctas_per_row(256) == 8);
  CHECK(geo::merge_split_slots(128) == 16);
  CHECK(geo::merge_split_slots(80) == 32);
  // At most 4 splits per lane, lanes a power of two, at most the slots.
  CHECK(geo::merge_row_lanes(128, 2) == 1);
  CHECK(geo::merge_row_lanes(128, 4) == 1);
  CHECK(geo::merge_row_lanes(128, 5) == 2);
  CHECK(geo::merge_row_lanes(128, 16) == 4);
  CHECK(geo::merge_row_lanes(128, 64) == 16);
  CHECK(geo::merge_row_lanes(128, 128) == 16);  // 8 splits a lane
  CHECK(geo::merge_row_lanes(80, 128) == 32);
  CHECK(geo::merge_rows_per_cta(128, 4) == 16);
  CHECK(geo::merge_rows_per_cta(128, 64) == 1);
  CHECK(geo::merge_rows_per_cta(80, 64) == 2);
}

TEST_CASE("decode plan: the in-CTA split (warp groups) only where the grid leaves CTA slots of the SMs empty") {
  namespace geo = ra::geometry;
  const ra::device_info a100{108, 80};
  const auto plan = [&](int hq, int hkv, int d, int batch, int context, const ra::device_info& dev = h100,
                        ra::plan_options opt = {}) {
    return ra::plan_decode(config(hq, hkv, d, 16), {.max_batch = batch, .max_context = context}, dev, opt);
  };
  // The reference shapes (32 query heads): 1 x 16384 splits into 64 (128 CTAs at group 16,
  // 256 at group 8), 8 x 4096 into 16 (256 at group 16, 512 at group 8), 64 x 4096 into 4 or 2
  // (512): H100 slots are 132 x 4 = 528 4-warp CTAs.
  CHECK(plan(32, 2, 64, 1, 16384).num_splits == 64);
  CHECK(plan(32, 2, 64, 1, 16384).warp_groups == 4);   // 128 x 4 = 512 <= 528
  CHECK(plan(32, 2, 128, 1, 16384).warp_groups == 3);  // head dim 128 group 16: 3 (4 spills on sm_80)
  CHECK(plan(32, 2, 128, 8, 4096).warp_groups == 2);   // 256 x 3 > 528
  CHECK(plan(32, 4, 80, 1, 16384).warp_groups == 2);   // 256 x 2 = 512
  CHECK(plan(32, 2, 96, 8, 4096).warp_groups == 2);    // 256 x 2
  CHECK(plan(32, 4, 128, 8, 4096).warp_groups == 1);   // 512: 2 x 512 > 528
  CHECK(plan(32, 2, 128, 64, 4096).warp_groups == 1);  // 64 x 4096 keeps the 4-warp CTA
  CHECK(plan(32, 4, 64, 64, 4096).warp_groups == 1);
  CHECK(plan(32, 2, 256, 1, 16384).warp_groups == 3);  // head dim 256 group 16: 128 x 3 = 384 <= 132 x 3
  CHECK(plan(32, 4, 256, 1, 16384).warp_groups == 2);  // group 8: 256 x 2 = 512 <= 528 (no W 4 at 256)
  CHECK(plan(32, 2, 256, 8, 4096).warp_groups == 1);   // 256 x 2 > 396
  CHECK(plan(32, 8, 128, 1, 16384).warp_groups == 1);  // group 4: not in the default set's split groups
  CHECK(plan(32, 2, 64, 1, 16384, a100).warp_groups == 1);  // sm_80: 3 CTAs per SM, no W divides them
  CHECK(plan(32, 2, 64, 1, 16384, h100, {.kernel = ra::decode_kernel::simt}).warp_groups == 1);
  CHECK(plan(32, 2, 64, 1, 16384, h100, {.warp_groups = 1}).warp_groups == 1);
  CHECK(plan(32, 2, 64, 64, 4096, h100, {.warp_groups = 2}).warp_groups == 2);  // forced
  CHECK(error_of([&] { plan(32, 2, 64, 1, 16384, h100, {.warp_groups = 5}); }) ==
        "plan_options.warp_groups = 5 must be 0 (the planner's choice) or 1 to 4");
  CHECK(error_of([&] { plan(32, 2, 64, 1, 16384, h100, {.warp_groups = 3}); }) ==
        "plan_options.warp_groups = 3: the set compiles no in-CTA split of 3 warp groups for a tensor-core decode of "
        "bf16, head_dim 64, group 16");
  CHECK(error_of([&] { plan(32, 2, 128, 1, 16384, h100, {.warp_groups = 4}); }) ==
        "plan_options.warp_groups = 4: the set compiles no in-CTA split of 4 warp groups for a tensor-core decode of "
        "bf16, head_dim 128, group 16");
  CHECK(error_of([&] { plan(32, 2, 64, 1, 16384, a100, {.warp_groups = 2}); }) ==
        "plan_options.warp_groups = 2: sm_80 runs no in-CTA split of 2 warp groups at head_dim 64, group 16 (the split "
        "is built for sm_90, within its shared memory)");
  // The geometry: W's CTAs per SM, a group's shared memory, the architectures' limits.
  CHECK(geo::tensor_core_decode_split_ctas_per_sm(90, 128, 8, 4) == 1);
  CHECK(geo::tensor_core_decode_split_ctas_per_sm(90, 64, 16, 2) == 2);
  CHECK(geo::tensor_core_decode_split_ctas_per_sm(90, 128, 16, 3) == 1);
  CHECK(geo::tensor_core_decode_split_ctas_per_sm(90, 128, 16, 4) == 0);
  CHECK(geo::tensor_core_decode_split_ctas_per_sm(80, 64, 16, 2) == 0);
  CHECK(geo::tensor_core_decode_split_ctas_per_sm(90, 256, 8, 2) == 2);
  CHECK(geo::tensor_core_decode_split_ctas_per_sm(90, 256, 8, 4) == 0);  // not compiled
  CHECK(geo::tensor_core_decode_split_ctas_per_sm(90, 256, 16, 2) == 1);
  CHECK(geo::tensor_core_decode_split_ctas_per_sm(90, 256, 16, 3) == 1);
  CHECK(geo::tensor_core_decode_group_bytes(128) == 48 * 1024);
  CHECK(geo::tensor_core_decode_group_bytes(64) == 48 * 1024);
  CHECK(geo::tensor_core_decode_group_bytes(80) == 3 * 2 * 32 * 88 * 2);  // padded rows
  CHECK(geo::tensor_core_decode_warp_groups(90, 64, 16, 133, 132) == 2);  // 133 x 4 > 528
  CHECK(geo::tensor_core_decode_warp_groups(89, 64, 16, 16, 132) == 1);   // sm_89: 1 CTA per SM, no W divides it
}

TEST_CASE("decode plan: tensor cores for GQA groups of 4 and more at head dims 64 and 128 on sm_80+ (on sm_90 "
          "at every head dim the kernel takes), the SIMT decode otherwise") {
  const ra::device_info a100{108, 80}, l40{142, 89}, b200{148, 100};
  const ra::decode_bucket bucket{.max_batch = 64, .max_context = 4096};
  using enum ra::decode_kernel;
  using all = every_tensor_core_set;
  // On sm_90, as an H100 and an H200 measured every default instance (benchmarks/RESULTS.md,
  // "Every default decode instance on an H100" / "... on an H200"): tensor cores from group 4 at
  // every head dim they take, and at head dim 80 group 2 (0.83-0.89x the SIMT decode's time on
  // the H200); the other groups 1 and 2 tie or lose and keep the SIMT decode.
  CHECK(ra::plan_decode(config(32, 8, 128, 16), bucket, h100).kernel == tensor_cores);  // group 4
  CHECK(ra::plan_decode(config(64, 8, 128, 16), bucket, h100).kernel == tensor_cores);  // group 8
  CHECK(ra::plan_decode(config(32, 32, 128, 16), bucket, h100).kernel == simt);  // group 1
  CHECK(ra::plan_decode(config(32, 16, 128, 16), bucket, h100).kernel == simt);  // group 2
  CHECK(ra::plan_decode(config(32, 2, 128, 16), bucket, h100).kernel == tensor_cores);  // group 16
  CHECK(ra::plan_decode(config(32, 32, 64, 16), bucket, h100).kernel == simt);  // head dim 64, group 1
  CHECK(ra::plan_decode(config(32, 32, 64, 16), bucket, h100, {.kernel = tensor_cores}).kernel == tensor_cores);
  CHECK(ra::plan_decode<all>(config(56, 8, 128, 16), bucket, h100).kernel == tensor_cores);  // group 7
  CHECK(ra::plan_decode(config(56, 8, 128, 16), bucket, h100).kernel == simt);  // the default set has no group 7
  CHECK(ra::plan_decode(config(32, 32, 128, 16), bucket, a100).kernel == simt);  // group 1, sm_80
  CHECK(ra::plan_decode(config(32, 16, 64, 16), bucket, a100).kernel == simt);   // group 2, sm_80
  CHECK(ra::plan_decode(config(32, 8, 128, 16), bucket, a100).kernel == tensor_cores);  // group 4, sm_80
  CHECK(ra::plan_decode(config(64, 8, 128, 16), bucket, a100).kernel == tensor_cores);  // group 8
  CHECK(ra::plan_decode(config(32, 8, 128, 16), bucket, l40).kernel == tensor_cores);   // sm_89
  CHECK(ra::plan_decode(config(32, 8, 128, 16), bucket, b200).kernel == tensor_cores);  // sm_100
  CHECK(ra::plan_decode<all>(config(16, 1, 64, 8), bucket, h100).kernel == tensor_cores);  // group 16
  CHECK(ra::plan_decode<all>(config(24, 8, 128, 16), bucket, h100).kernel == simt);  // group 3: not measured
  CHECK(ra::plan_decode(config(32, 8, 96, 16), bucket, h100).kernel == tensor_cores);   // head dim 96
  CHECK(ra::plan_decode(config(32, 8, 80, 16), bucket, h100).kernel == tensor_cores);   // head dim 80, group 4
  CHECK(ra::plan_decode(config(32, 32, 80, 16), bucket, h100).kernel == simt);          // head dim 80, group 1
  CHECK(ra::plan_decode(config(32, 16, 80, 16), bucket, h100).kernel == tensor_cores);  // head dim 80, group 2
  CHECK(ra::plan_decode(config(32, 16, 96, 16), bucket, h100).kernel == simt);          // head dim 96, group 2
  CHECK(ra::plan_decode(config(32, 16, 80, 16), bucket, a100).kernel == simt);          // not off sm_90
  CHECK(ra::plan_decode(config(32, 8, 96, 16), bucket, a100).kernel == simt);  // 80 and 96 off sm_90: not measured
  CHECK(ra::plan_decode(config(32, 8, 80, 16), bucket, b200).kernel == simt);
  // Head dim 256 (2 key warps x 2 dim warps over its 16-key tile): as every head dim on sm_90,
  // tensor cores from group 4, the SIMT decode at groups 1 and 2; off sm_90 (not measured) SIMT.
  CHECK(ra::plan_decode(config(32, 8, 256, 16), bucket, h100).kernel == tensor_cores);  // group 4
  CHECK(ra::plan_decode(config(64, 8, 256, 16), bucket, h100).kernel == tensor_cores);  // group 8
  CHECK(ra::plan_decode(config(32, 2, 256, 16), bucket, h100).kernel == tensor_cores);  // group 16
  CHECK(ra::plan_decode(config(32, 32, 256, 16), bucket, h100).kernel == simt);          // group 1
  CHECK(ra::plan_decode(config(32, 16, 256, 16), bucket, h100).kernel == simt);          // group 2
  CHECK(ra::plan_decode(config(32, 16, 256, 16), bucket, h100, {.kernel = tensor_cores}).kernel == tensor_cores);
  CHECK(ra::plan_decode(config(64, 8, 256, 16), bucket, a100).kernel == simt);           // group 8, sm_80
  CHECK(ra::plan_decode(config(32, 2, 256, 16), bucket, b200).kernel == simt);           // group 16, sm_100
  // Score transforms run on either kernel: Mistral (window, group 4), gpt-oss's shape (D 64,
  // group 8, window 128; its sinks are an argument, not configuration), Gemma 2's soft-cap.
  ra::attention_config windowed = config(32, 8, 128, 16);
  windowed.scores.window = 4096;
  CHECK(ra::plan_decode(windowed, bucket, a100).kernel == tensor_cores);
  CHECK(ra::plan_decode(windowed, bucket, h100).kernel == tensor_cores);
  CHECK(ra::plan_decode(windowed, bucket, h100, {.kernel = simt}).kernel == simt);
  ra::attention_config gpt_oss = config(64, 8, 64, 16);
  gpt_oss.scores.window = 128;
  CHECK(ra::plan_decode<all>(gpt_oss, bucket, h100).kernel == tensor_cores);
  CHECK(ra::plan_decode(gpt_oss, bucket, h100).kernel == tensor_cores);  // the default set's D 64, group 8
  ra::attention_config capped = config(32, 8, 128, 16);
  capped.scores.logit_soft_cap = 50.0f;
  CHECK(ra::plan_decode(capped, bucket, a100).kernel == tensor_cores);
  CHECK(ra::plan_decode(capped, bucket, a100, {.kernel = simt}).kernel == simt);
  ra::attention_config fp8 = config(32, 8, 128, 16);  // fp8 caches too
  fp8.kv.type = ra::dtype::fp8_e4m3;
  CHECK(ra::plan_decode(fp8, bucket, a100).kernel == tensor_cores);
  CHECK(ra::plan_decode(fp8, bucket, h100, {.kernel = tensor_cores}).kernel == tensor_cores);
  fp8.kv.type = ra::dtype::fp8_e5m2;  // the default set's fp8 instances are E4M3 only
  CHECK(ra::plan_decode(fp8, bucket, a100).kernel == simt);
  // The kernel's launch bound sets the CTA slots the split model counts on: at group 8 the
  // SIMT decode has 2 per SM on sm_90, the tensor-core decode 4, so a plan for tensor cores
  // splits as a SIMT plan told of 4 slots, and unlike the default SIMT plan at batch 33.
  for (const int batch : {1, 8, 33, 64}) {
    const ra::decode_bucket b{.max_batch = batch, .max_context = 4096};
    const auto tc = ra::plan_decode(config(64, 8, 128, 16), b, h100);
    const auto four = ra::plan_decode(config(64, 8, 128, 16), b, h100, {.ctas_per_sm = 4, .kernel = simt});
    INFO("batch " << batch);
    CHECK(tc.kernel == tensor_cores);
    CHECK((tc.num_splits == four.num_splits && tc.split_tokens == four.split_tokens &&
           tc.workspace.bytes == four.workspace.bytes));
    CHECK(ra::decode_workspace_bound(config(64, 8, 128, 16), b, h100) >= tc.workspace.bytes);
  }
  CHECK(ra::plan_decode(config(64, 8, 128, 16), {33, 4096}, h100).num_splits !=
        ra::plan_decode(config(64, 8, 128, 16), {33, 4096}, h100, {.kernel = simt}).num_splits);
  // Head dim 256: the launch bound is 4 CTAs per SM up to group 8 (the query fragments of 8 heads
  // and O^T of a dim warp's 128 dims: 128 registers), 3 at group 16 (168 registers: 16 heads'
  // query fragments over 256 dims are 64 registers, their O^T 64) on sm_90; 3 on sm_80.
  namespace geo = ra::geometry;
  CHECK(geo::tensor_core_decode_ctas_per_sm(90, 256, 8) == 4);
  CHECK(geo::tensor_core_decode_ctas_per_sm(90, 256, 16) == 3);
  CHECK(geo::tensor_core_decode_ctas_per_sm(90, 128, 16) == 4);
  CHECK(geo::tensor_core_decode_ctas_per_sm(80, 256, 8) == 3);
  CHECK(geo::tensor_core_decode_ctas_per_sm(80, 256, 16) == 3);
  for (const int batch : {1, 8, 33, 64}) {
    const ra::decode_bucket b{.max_batch = batch, .max_context = 4096};
    const auto g16 = ra::plan_decode(config(32, 2, 256, 16), b, h100);
    const auto three = ra::plan_decode(config(32, 2, 256, 16), b, h100, {.ctas_per_sm = 3, .kernel = simt});
    const auto g8 = ra::plan_decode(config(64, 8, 256, 16), b, h100);
    const auto four = ra::plan_decode(config(64, 8, 256, 16), b, h100, {.ctas_per_sm = 4, .kernel = simt});
    INFO("batch " << batch);
    CHECK((g16.kernel == tensor_cores && g8.kernel == tensor_cores));
    CHECK((g16.num_splits == three.num_splits && g16.split_tokens == three.split_tokens));
    CHECK((g8.num_splits == four.num_splits && g8.split_tokens == four.split_tokens));
  }
  // Forced: either way where the tensor-core decode fits; tensor cores elsewhere are refused.
  CHECK(ra::plan_decode(config(32, 8, 128, 16), bucket, h100, {.kernel = simt}).kernel == simt);
  CHECK(ra::plan_decode<all>(config(8, 8, 64, 16), bucket, h100, {.kernel = tensor_cores}).kernel == tensor_cores);
  ra::attention_config fp8_256 = config(32, 8, 256, 16);  // fp8_decode_agent takes 64 and 128
  fp8_256.kv.type = ra::dtype::fp8_e4m3;
  CHECK(error_of([&] { ra::plan_decode(fp8_256, bucket, h100, {.kernel = tensor_cores}); }) ==
        "plan_options.kernel = tensor_cores cannot run kv cache dtype = fp8_e4m3, head_dim = 256 (the tensor-core "
        "decode takes fp8 caches at head dims 64 and 128)");
  ra::attention_config fp8_96 = config(32, 8, 96, 16);  // the fp8 widening writes swizzled rows: 64 and 128
  fp8_96.kv.type = ra::dtype::fp8_e4m3;
  CHECK(ra::plan_decode(fp8_96, bucket, h100).kernel == simt);
  CHECK(error_of([&] { ra::plan_decode(fp8_96, bucket, h100, {.kernel = tensor_cores}); }) ==
        "plan_options.kernel = tensor_cores cannot run kv cache dtype = fp8_e4m3, head_dim = 96 (the tensor-core "
        "decode takes fp8 caches at head dims 64 and 128)");
}

TEST_CASE("decode plan: the kernel is chosen among those the set compiles, and decode refuses any other") {
  const ra::decode_bucket bucket{.max_batch = 64, .max_context = 4096};
  const ra::device_info a100{108, 80};  // where group 4 runs on tensor cores
  using enum ra::decode_kernel;
  // The default set's tensor-core instances are head dims 64, 80, 96, 128 at groups 1, 2, 4, 8, 16:
  // group 5 fits the kernel but has no instance, so the default plan is SIMT, sized for the
  // SIMT decode's CTA slots (3 per SM at 5 rows a thread on sm_90, not the 4 of tensor cores).
  const auto g5 = ra::plan_decode(config(40, 8, 128, 16), bucket, h100);
  CHECK(g5.kernel == simt);
  const auto g5_tc = ra::plan_decode<every_tensor_core_set>(config(40, 8, 128, 16), bucket, h100);
  CHECK(g5_tc.kernel == tensor_cores);
  CHECK(g5.num_splits == ra::plan_decode<every_tensor_core_set>(config(40, 8, 128, 16), bucket, h100,
                                                                 {.ctas_per_sm = 3, .kernel = simt}).num_splits);
  // A set without the instance, and a static block size the shape does not use, keep the SIMT
  // decode.
  CHECK(ra::plan_decode<simt_only_set>(config(32, 8, 128, 16), bucket, h100).kernel == simt);
  CHECK(ra::plan_decode<static16_set>(config(32, 8, 128, 16), bucket, a100).kernel == tensor_cores);
  CHECK(ra::plan_decode<static16_set>(config(32, 8, 128, 32), bucket, a100).kernel == simt);
  CHECK(ra::decode_workspace_bound<simt_only_set>(config(32, 8, 128, 16), {33, 4096}, h100) ==
        ra::decode_workspace_bound(config(32, 8, 128, 16), {33, 4096}, h100, {.kernel = simt}));
  // Forcing tensor cores where the call has no such kernel names the shape and what is missing.
  CHECK(error_of([&] { ra::plan_decode(config(40, 8, 128, 8), bucket, h100, {.kernel = tensor_cores}); }) ==
        "plan_options.kernel = tensor_cores cannot run dtype = bf16, head_dim = 128, block_size = 8, group_size = 5 "
        "(the instantiation set has no tensor-core decode instance for it)");
  // The run side: a plan is checked against the call that runs it.
  const auto tc = ra::plan_decode(config(32, 8, 128, 16), bucket, a100);
  REQUIRE(tc.kernel == tensor_cores);
  CHECK_NOTHROW(ra::check_decode_kernel<ra::default_instantiations>(tc));
  CHECK_NOTHROW(
      ra::check_decode_kernel<simt_only_set>(ra::plan_decode(config(32, 8, 128, 16), bucket, h100, {.kernel = simt})));
  CHECK(error_of([&] { ra::check_decode_kernel<simt_only_set>(tc); }) ==
        "decode: the plan's kernel is tensor_cores, which this call cannot run: dtype = bf16, head_dim = 128, "
        "block_size = 16, group_size = 4 (the instantiation set has no tensor-core decode instance for it); plan "
        "with plan_decode<Set>, decode's instantiation set, or plan_options.kernel = simt");
  ra::decode_plan edited = tc;  // a plan changed by hand after planning
  edited.config.kv.type = ra::dtype::fp8_e4m3;  // the default set has this one
  CHECK_NOTHROW(ra::check_decode_kernel<ra::default_instantiations>(edited));
  edited.config.kv.type = ra::dtype::fp8_e5m2;
  CHECK(error_of([&] { ra::check_decode_kernel<ra::default_instantiations>(edited); }) ==
        "decode: the plan's kernel is tensor_cores, which this call cannot run: dtype = bf16, kv cache dtype = "
        "fp8_e5m2, head_dim = 128, block_size = 16, group_size = 4 (the instantiation set has no tensor-core decode "
        "instance for it); plan with plan_decode<Set>, decode's instantiation set, or plan_options.kernel = simt");
}

TEST_CASE("prefill plan: tensor cores on sm_80+ at head dims 64 and 128, with score transforms and fp8 caches") {
  const ra::device_info a100{108, 80}, l40{142, 89};
  const ra::prefill_bucket bucket{.max_batch = 4, .max_q_len = 512, .max_context = 4096};
  using enum ra::attention_kernel;
  CHECK(ra::plan_prefill(config(32, 8, 128, 16), bucket, h100).kernel == tensor_cores);
  CHECK(ra::plan_prefill(config(64, 8, 128, 16), bucket, a100).kernel == tensor_cores);
  // Head dim 64 fits the kernel but the default set has no instance for it; a set with one.
  using d64_set = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<64>, ra::values<ra::dynamic_block_size>,
                                        ra::values<1>, ra::no_fp8_kv, ra::no_tensor_core_decode,
                                        ra::tensor_core_prefill_instances<ra::dtypes<ra::dtype::bf16>, ra::values<64>>>;
  CHECK(ra::plan_prefill(config(24, 8, 64, 8), bucket, l40).kernel == simt);
  CHECK(ra::plan_prefill<d64_set>(config(24, 8, 64, 8), bucket, l40).kernel == tensor_cores);  // any group (3)
  CHECK(ra::plan_prefill(config(32, 32, 128, 16), bucket, h100).kernel == tensor_cores);  // group 1
  CHECK(ra::plan_prefill(config(32, 8, 96, 16), bucket, h100).kernel == simt);
  CHECK(ra::plan_prefill(config(32, 8, 80, 16), bucket, h100).kernel == simt);
  CHECK(ra::plan_prefill(config(32, 8, 256, 16), bucket, h100).kernel == simt);
  // Score transforms run on either kernel (the instance compiles them in: prefill<Set, Mod>).
  ra::attention_config windowed = config(32, 8, 128, 16);
  windowed.scores.window = 4096;
  CHECK(ra::plan_prefill(windowed, bucket, h100).kernel == tensor_cores);
  ra::attention_config capped = config(32, 8, 128, 16);
  capped.scores.logit_soft_cap = 30.0f;
  CHECK(ra::plan_prefill(capped, bucket, h100).kernel == tensor_cores);
  // An fp8 cache: tensor cores where the set lists the shape in both its tensor-core prefill
  // and its fp8 instances (the default set: bf16 queries over E4M3 at head dim 128).
  ra::attention_config fp8 = config(32, 8, 128, 16);
  fp8.kv.type = ra::dtype::fp8_e4m3;
  CHECK(ra::plan_prefill(fp8, bucket, h100).kernel == tensor_cores);
  ra::attention_config e5m2 = fp8;
  e5m2.kv.type = ra::dtype::fp8_e5m2;
  CHECK(ra::plan_prefill(e5m2, bucket, h100).kernel == simt);
  // The same q tiles, and on sm_80 (3 CTAs per SM for both kernels) the same splits and
  // workspace: the plan's kernel only picks the launch.
  for (const int q : {4, 64, 512}) {
    const ra::prefill_bucket b{.max_batch = 2, .max_q_len = q, .max_context = 8192};
    const auto tc = ra::plan_prefill(config(32, 8, 128, 16), b, a100);
    const auto simt_plan = ra::plan_prefill(config(32, 8, 128, 16), b, a100, {.kernel = simt});
    INFO("max_q_len " << q);
    CHECK(tc.kernel == tensor_cores);
    CHECK((tc.q_tiles == simt_plan.q_tiles && tc.num_splits == simt_plan.num_splits &&
           tc.split_tokens == simt_plan.split_tokens && tc.workspace.bytes == simt_plan.workspace.bytes));
  }
  // Forced: either way where the tensor-core prefill fits; tensor cores elsewhere are refused.
  CHECK(ra::plan_prefill(config(32, 8, 128, 16), bucket, h100, {.kernel = simt}).kernel == simt);
  CHECK(error_of([&] { ra::plan_prefill(config(32, 8, 96, 16), bucket, h100, {.kernel = tensor_cores}); }) ==
        "plan_options.kernel = tensor_cores cannot run head_dim = 96 (the tensor-core prefill takes head dims 64 and "
        "128)");
  CHECK(ra::plan_prefill(windowed, bucket, h100, {.kernel = simt}).kernel == simt);
  CHECK(ra::plan_prefill(fp8, bucket, h100, {.kernel = simt}).kernel == simt);
  CHECK(error_of([&] { ra::plan_prefill(e5m2, bucket, h100, {.kernel = tensor_cores}); }) ==
        "plan_options.kernel = tensor_cores cannot run dtype = bf16, kv cache dtype = fp8_e5m2, head_dim = 128, "
        "block_size = 16 (the instantiation set has no tensor-core prefill instance for it)");
  // The set decides too: a set without the instance plans the SIMT prefill, and prefill<Set>
  // refuses a tensor-core plan it cannot run.
  CHECK(ra::plan_prefill<simt_only_set>(config(32, 8, 128, 16), bucket, h100).kernel == simt);
  CHECK(error_of([&] { ra::plan_prefill<simt_only_set>(config(32, 8, 128, 16), bucket, h100, {.kernel = tensor_cores}); }) ==
        "plan_options.kernel = tensor_cores cannot run dtype = bf16, head_dim = 128, block_size = 16 (the "
        "instantiation set has no tensor-core prefill instance for it)");
  const auto tc = ra::plan_prefill(config(32, 8, 128, 16), bucket, h100);
  CHECK_NOTHROW(ra::check_prefill_kernel<ra::default_instantiations>(tc));
  CHECK(error_of([&] { ra::check_prefill_kernel<simt_only_set>(tc); }) ==
        "prefill: the plan's kernel is tensor_cores, which this call cannot run: dtype = bf16, head_dim = 128, "
        "block_size = 16 (the instantiation set has no tensor-core prefill instance for it); plan with "
        "plan_prefill<Set>, prefill's instantiation set, or plan_options.kernel = simt");
}

TEST_CASE("decode validate: null, misaligned and undersized buffers") {
  const auto plan = ra::plan_decode(config(8, 2, 64, 16), {.max_batch = 4, .max_context = 1000}, h100, {.split_tokens = 256});
  REQUIRE(plan.split());
  ra::decode_args a{.q = at(0x1000), .k_cache = at(0x2000), .v_cache = at(0x3000),
                    .block_tables = at<const std::int32_t>(0x4000), .seq_lens = at<const std::int32_t>(0x5000),
                    .out = at(0x6000), .workspace = at(0x7000), .workspace_bytes = plan.workspace.bytes};
  CHECK_NOTHROW(ra::validate(plan, a));
  auto with = [&](auto change) {
    ra::decode_args b = a;
    change(b);
    return error_of([&] { ra::validate(plan, b); });
  };
  CHECK(with([](auto& b) { b.q = nullptr; }) == "decode_args.q is null");
  CHECK(with([](auto& b) { b.out = at(0x6008); }) ==
        "decode_args.out = 0x6008 is not 16-byte aligned (the kernels move 16-byte vectors)");
  CHECK(with([](auto& b) { b.seq_lens = nullptr; }) == "decode_args.seq_lens is null");
  CHECK(with([](auto& b) { b.q_stride = 500; }) == "decode_args.q_stride = 500 is smaller than a dense row (512 elements)");
  CHECK(with([](auto& b) { b.q_stride = 516; }) == "decode_args.q_stride = 516 must be a multiple of 8 elements (16-byte vectors)");
  CHECK_NOTHROW(ra::validate(plan, [&] { auto b = a; b.q_stride = 1536; return b; }()));
  CHECK(with([](auto& b) { b.block_table_stride = 10; }) ==
        "block_table_stride = 10 is shorter than the plan's max_blocks_per_seq = 63 (a row must hold the blocks of the "
        "bucket's longest sequence)");
  CHECK(with([&](auto& b) { b.workspace_bytes = plan.workspace.bytes - 1; }) ==
        "workspace_bytes = " + std::to_string(plan.workspace.bytes - 1) +
            " is smaller than the plan's workspace.bytes = " + std::to_string(plan.workspace.bytes));
  CHECK(with([](auto& b) { b.workspace = nullptr; }) == "workspace is null");
}

TEST_CASE("write_decode_step fills lengths and table rows, pads the batch, and rejects what the plan cannot run") {
  const auto plan = ra::plan_decode(config(8, 2, 64, 16, 50), {.max_batch = 4, .max_context = 100}, h100);
  REQUIRE(plan.max_blocks_per_seq == 7);
  std::vector<std::int32_t> lens_out(4, -5), tables_out(4 * 8, -5);
  const std::vector<std::int32_t> seq0 = {3, 9}, seq1 = {49, 0, 7, 8, 11, 12, 13};
  const std::vector<std::span<const std::int32_t>> ids = {seq0, seq1};
  const std::vector<std::int32_t> lens = {17, 100};
  ra::write_decode_step(plan, lens, ids, lens_out, tables_out, 8);
  CHECK(lens_out == std::vector<std::int32_t>{17, 100, 0, 0});
  CHECK(tables_out == std::vector<std::int32_t>{3,  9,  -5, -5, -5, -5, -5, -5, 49, 0,  7,  8,  11, 12, 13, -5,
                                               -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5});

  auto step = [&](std::vector<std::int32_t> l, std::vector<std::span<const std::int32_t>> i) {
    return error_of([&] { ra::write_decode_step(plan, l, i, lens_out, tables_out, 8); });
  };
  CHECK(step({1, 1, 1, 1, 1}, {seq0, seq0, seq0, seq0, seq0}) ==
        "batch = 5 exceeds the plan's max_batch = 4 (plan a larger bucket)");
  CHECK(step({101}, {seq1}) == "sequence 0: seq_len = 101 is outside [0, max_context = 100]");
  CHECK(step({33}, {seq0}) == "sequence 0: 33 tokens need 3 blocks of 16, got 2");
  const std::vector<std::int32_t> outside = {50};
  CHECK(step({5}, {outside}) == "sequence 0: block id 50 at position 0 is outside the pool [0, 50)");
  CHECK(step({5}, {}) == "block_ids has 0 rows for 1 sequences");
  CHECK(error_of([&] { ra::write_decode_step(plan, lens, ids, lens_out, tables_out, 6); }) ==
        "block_table_stride = 6 is shorter than the plan's max_blocks_per_seq = 7 (a row must hold the blocks of the "
        "bucket's longest sequence)");
  std::vector<std::int32_t> short_tables(20);
  CHECK(error_of([&] { ra::write_decode_step(plan, lens, ids, lens_out, short_tables, 8); }) ==
        "block_tables_out has 20 entries; the plan needs max_batch * stride = 32");
}

TEST_CASE("prefill plan: q tiles over flattened rows, splits, workspace over max_total_q") {
  // 512 tokens x 4 heads = 2048 rows; 32 rows per CTA for head dim 128 (4 per thread row) ->
  // 64 tiles; 64 x 8 x 2 = 1024 CTAs of 4 rows per thread on 132 x 4 slots: 2 waves unsplit
  // (8256); 2 splits, 4 waves (8320 + merge): no split.
  const auto a = ra::plan_prefill(config(32, 8, 128, 16), {.max_batch = 2, .max_q_len = 512, .max_context = 4096}, h100);
  CHECK(a.q_tiles == 64);
  CHECK(a.num_splits == 1);
  CHECK(a.bucket.max_total_q == 1024);
  CHECK(a.kernel == ra::attention_kernel::tensor_cores);  // 3 CTAs per SM (396 slots): 3 waves unsplit, no split
  // Extend of 4 tokens: 16 rows -> 1 tile; 1 x 8 x 1 CTAs of the SIMT prefill on 528 slots: 64
  // splits of 256, 512 CTAs, one wave: 288 + 32 + 31.3 (merge, 128 rows) = 351.3; 32 of 512:
  // 544 + 32 + 15.6.
  const auto b = ra::plan_prefill(config(32, 8, 128, 16), {.max_batch = 1, .max_q_len = 4, .max_context = 16384}, h100,
                                  {.kernel = ra::attention_kernel::simt});
  CHECK(b.q_tiles == 1);
  CHECK(b.split_tokens == 256);
  CHECK(b.num_splits == 64);
  CHECK(b.workspace.bytes == 4 * 32 * 64 * 128 * 4 + 4 * 32 * 64 * 4);
  // Under a sliding window prefill is built for 3 CTAs per SM on sm_90 (396 slots): 64 splits
  // take 2 waves (576 + 32 + 41.7); up to 49 fit one, and 16384 / 49 = 335 rounded up to
  // 32-token tiles is 352, 47 splits: 384 + 32 + 30.6 = 446.6 (splits rounded up to 128 tokens
  // made 43 of 384: 416 + 32 + 28.0 = 476).
  auto windowed = config(32, 8, 128, 16);
  windowed.scores.window = 1000;
  const auto w = ra::plan_prefill(windowed, {.max_batch = 1, .max_q_len = 4, .max_context = 16384}, h100,
                                  {.kernel = ra::attention_kernel::simt});
  CHECK(w.split_tokens == 352);
  CHECK(w.num_splits == 47);
  CHECK(w.kernel == ra::attention_kernel::simt);
  // The tensor-core prefill (the planner's choice at b's shape) is built for 3 CTAs per SM too.
  const auto tc = ra::plan_prefill(config(32, 8, 128, 16), {.max_batch = 1, .max_q_len = 4, .max_context = 16384}, h100);
  CHECK(tc.kernel == ra::attention_kernel::tensor_cores);
  CHECK((tc.q_tiles == 1 && tc.split_tokens == w.split_tokens && tc.num_splits == w.num_splits));
  CHECK(error_of([] { ra::plan_prefill(config(32, 8, 128, 16), {.max_batch = 2, .max_q_len = 8, .max_context = 4}, h100); }) ==
        "prefill_bucket.max_context = 4 is smaller than max_q_len = 8 (the context includes the new tokens)");
  CHECK(error_of([] {
          ra::plan_prefill(config(32, 8, 128, 16), {.max_batch = 2, .max_q_len = 8, .max_total_q = 17, .max_context = 8}, h100);
        }) == "prefill_bucket.max_total_q = 17 must be in [max_q_len, max_batch * max_q_len] = [8, 16]");
  // The split merge runs 4 CTAs per output row at head dim 128 (32 dims each), one row each at
  // 128 splits (16 lanes of 4 splits: geometry::merge_row_lanes): 1e9 tokens x 64 heads is past
  // 2^31 CTAs.
  CHECK(error_of([] {
          ra::plan_prefill(config(64, 64, 128, 16),
                           {.max_batch = 65535, .max_q_len = 16384, .max_total_q = 1000000000, .max_context = 16384}, h100,
                           {.split_tokens = 128});
        }) == "max_total_q * num_qo_heads = 64000000000 output rows need 256000000000 merge CTAs, past the grid's x "
              "limit; lower max_total_q");
  // Prefill accepts any group (rows are flattened).
  CHECK_NOTHROW(ra::plan_prefill(config(24, 2, 128, 16), {.max_batch = 1, .max_q_len = 4, .max_context = 8}, h100));
}

TEST_CASE("write_prefill_step packs q_indptr and checks lengths") {
  const auto plan = ra::plan_prefill(config(8, 2, 64, 8, 40),
                                     {.max_batch = 3, .max_q_len = 6, .max_total_q = 10, .max_context = 24}, h100);
  std::vector<std::int32_t> indptr(4, -5), kv(3, -5), tables(3 * 3, -5);
  const std::vector<std::int32_t> s0 = {1, 2, 3}, s1 = {39};
  const std::vector<std::span<const std::int32_t>> ids = {s0, s1};
  ra::write_prefill_step(plan, std::vector<std::int32_t>{6, 2}, std::vector<std::int32_t>{20, 2}, ids, indptr, kv, tables);
  CHECK(indptr == std::vector<std::int32_t>{0, 6, 8, 8});
  CHECK(kv == std::vector<std::int32_t>{20, 2, 0});
  CHECK(tables == std::vector<std::int32_t>{1, 2, 3, 39, -5, -5, -5, -5, -5});
  auto step = [&](std::vector<std::int32_t> q, std::vector<std::int32_t> k) {
    return error_of([&] { ra::write_prefill_step(plan, q, k, ids, indptr, kv, tables); });
  };
  CHECK(step({7, 1}, {8, 1}) == "sequence 0: q_len = 7 is outside [0, max_q_len = 6]");
  CHECK(step({2, 3}, {8, 2}) ==
        "sequence 1: kv_len = 2 must be in [q_len = 3, max_context = 24] (the context includes the new tokens)");
  CHECK(step({6, 6}, {8, 8}) == "the batch has 12 query tokens; the plan's max_total_q is 10");
  CHECK(step({1}, {1, 1}) == "q_lens has 1 entries but kv_lens has 2");
}

TEST_CASE("cache write validate") {
  const auto c = config(8, 2, 64, 16);
  const std::int64_t slot[1] = {0};
  ra::cache_write_args a{.k = at(0x100), .v = at(0x200), .slot_mapping = slot, .num_tokens = 1,
                         .k_cache = at(0x300), .v_cache = at(0x400)};
  CHECK_NOTHROW(ra::validate(c, a));
  a.k_stride = 100;
  CHECK(error_of([&] { ra::validate(c, a); }) == "cache_write_args.k_stride = 100 is smaller than a dense row (128 elements)");
  a.k_stride = 0;
  a.v_cache = nullptr;
  CHECK(error_of([&] { ra::validate(c, a); }) == "cache_write_args.v_cache is null");
  a.num_tokens = 0;  // nothing to write: no buffer is needed
  CHECK_NOTHROW(ra::validate(c, a));
}

TEST_CASE("fp8 caches: the configuration and the scales are checked against the cache type") {
  auto c = config(8, 2, 64, 16);
  const float scale[2] = {1.0f, 1.0f};
  // A bf16 cache takes no scales: they would be silently unused.
  const auto plan16 = ra::plan_decode(c, {.max_batch = 4, .max_context = 100}, h100);
  ra::decode_args a{.q = at(0x1000), .k_cache = at(0x2000), .v_cache = at(0x3000),
                    .block_tables = at<const std::int32_t>(0x4000), .seq_lens = at<const std::int32_t>(0x5000),
                    .out = at(0x6000), .k_scale = scale};
  CHECK(error_of([&] { ra::validate(plan16, a); }) ==
        "decode_args.k_scale is set but the KV cache is bf16 (scales apply to fp8 caches only)");
  c.kv = {.type = rungs::dtype::fp8_e4m3, .per_head_scales = true};
  CHECK(c.cache_type() == rungs::dtype::fp8_e4m3);
  CHECK(c.quantized_cache());
  const auto plan8 = ra::plan_decode(c, {.max_batch = 4, .max_context = 100}, h100);
  CHECK_NOTHROW(ra::validate(plan8, a));
  a.k_scale = nullptr;  // null: 1
  CHECK_NOTHROW(ra::validate(plan8, a));
  const std::int64_t slot[1] = {0};
  ra::cache_write_args w{.k = at(0x100), .v = at(0x200), .slot_mapping = slot, .num_tokens = 1,
                         .k_cache = at(0x300), .v_cache = at(0x400), .v_scale = scale};
  CHECK_NOTHROW(ra::validate(c, w));
  CHECK(error_of([&] { ra::validate(config(8, 2, 64, 16), w); }) ==
        "cache_write_args.v_scale is set but the KV cache is bf16 (scales apply to fp8 caches only)");
  // Another 16-bit type than the queries', and per-head scales without an fp8 cache.
  c.kv = {.type = rungs::dtype::fp16};
  CHECK(error_of([&] { ra::plan_decode(c, {.max_batch = 4, .max_context = 100}, h100); }) ==
        "kv.type = fp16 with dtype = bf16: a KV cache in another type than the queries' must be fp8_e4m3 or fp8_e5m2");
  c.kv = {.type = rungs::dtype::bf16, .per_head_scales = true};
  CHECK(error_of([&] { ra::plan_decode(c, {.max_batch = 4, .max_context = 100}, h100); }) ==
        "kv.per_head_scales is set but the KV cache is bf16 (scales apply to fp8 caches only)");
}

TEST_CASE("rungs::kv block tables and slot mappings feed the attention step as they are") {
  // The pool's tables keep one persistent row per sequence (rows padded with null_block);
  // write_decode_step gathers the step's sequences into batch order for the kernel.
  STATIC_REQUIRE(std::is_same_v<rungs::kv::block_id, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<rungs::kv::slot_id, std::int64_t>);  // cache_write_args::slot_mapping
  STATIC_REQUIRE(rungs::kv::padded_slot == -1);                        // the cache write skips it
  rungs::kv::block_tables pool_tables(4, 8);
  pool_tables.row(2)[0] = 5;
  pool_tables.row(2)[1] = 7;
  pool_tables.row(0)[0] = 1;
  const auto plan = ra::plan_decode(config(8, 2, 64, 16, 50), {.max_batch = 3, .max_context = 100}, h100);
  const std::vector<std::span<const std::int32_t>> batch = {pool_tables.row(2), pool_tables.row(0)};
  std::vector<std::int32_t> lens(3, -5), tables(3 * 7, -5);
  ra::write_decode_step(plan, std::vector<std::int32_t>{20, 3}, batch, lens, tables);
  CHECK(lens == std::vector<std::int32_t>{20, 3, 0});
  CHECK(tables == std::vector<std::int32_t>{5, 7, -5, -5, -5, -5, -5, 1, -5, -5, -5, -5, -5, -5,
                                           -5, -5, -5, -5, -5, -5, -5});
  rungs::kv::slot_id slot = 0;  // the new (20th) token of the first sequence
  rungs::kv::write_slots(pool_tables.row(2), 16, 19, 1, &slot);
  CHECK(slot == 7 * 16 + 3);
}
