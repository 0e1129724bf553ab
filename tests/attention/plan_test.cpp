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

const ra::device_info h100{132};

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

TEST_CASE("decode plan: splits fill two CTAs per SM, in multiples of 128 tokens") {
  // 1 x 8 CTAs; 264 wanted -> 33 splits -> ceil(16384 / 33) = 497 -> 512 tokens -> 32 splits.
  const auto a = ra::plan_decode(config(32, 8, 128, 16), {.max_batch = 1, .max_context = 16384}, h100);
  CHECK(a.split_tokens == 512);
  CHECK(a.num_splits == 32);
  // 16 x 8 = 128 CTAs; 3 splits of ceil(4096 / 3) = 1366 -> 1408 tokens -> 3 splits.
  const auto b = ra::plan_decode(config(32, 8, 128, 16), {.max_batch = 16, .max_context = 4096}, h100);
  CHECK(b.split_tokens == 1408);
  CHECK(b.num_splits == 3);
  // Short contexts stop at min_split_tokens: 1 x 1 CTA, 300 tokens -> 256-token splits -> 2.
  const auto c = ra::plan_decode(config(4, 1, 64, 8), {.max_batch = 1, .max_context = 300}, h100);
  CHECK(c.split_tokens == 256);
  CHECK(c.num_splits == 2);
  // Workspace: rows (batch x query heads) x splits x head_dim floats, 256-byte aligned, then
  // rows x splits floats.
  CHECK(c.workspace.partial_out_offset == 0);
  CHECK(c.workspace.partial_lse_offset == 4 * 2 * 64 * 4);
  CHECK(c.workspace.bytes == 4 * 2 * 64 * 4 + 4 * 2 * 4);
  const auto d = ra::plan_decode(config(3, 3, 80, 8), {.max_batch = 1, .max_context = 300}, h100);  // 3 x 2 x 80 x 4 = 1920
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
  // The case that planning at the largest context misses: 8/2 heads, head dim 64, 132 SMs.
  // 16 sequences of 4096 tokens: 32 CTAs, 9 splits wanted, ceil(4096 / 9) = 456 -> 512-token
  // splits -> 8. Of 2100 tokens: ceil(2100 / 9) = 234 -> 256 -> 9 splits, 128 rows:
  // 128 x 9 x 64 x 4 = 294912 bytes, then 128 x 9 x 4 = 4608.
  const auto cfg = config(8, 2, 64, 16);
  CHECK(ra::plan_decode(cfg, {.max_batch = 16, .max_context = 4096}, h100).num_splits == 8);
  const auto shorter = ra::plan_decode(cfg, {.max_batch = 16, .max_context = 2100}, h100);
  CHECK(shorter.num_splits == 9);
  CHECK(shorter.workspace.bytes == 299520);
  // The largest plan at the largest context over batches 1-16 is 13 sequences: 26 CTAs, 11
  // splits of 384 tokens, 104 rows: 104 x 11 x 256 + 104 x 11 x 4 = 297440 < 299520.
  std::size_t at_max_context = 0;
  for (int b = 1; b <= 16; ++b)
    at_max_context = std::max(at_max_context, ra::plan_decode(cfg, {.max_batch = b, .max_context = 4096}, h100).workspace.bytes);
  CHECK(at_max_context == 297440);
  CHECK(ra::decode_workspace_bound(cfg, {.max_batch = 16, .max_context = 4096}, h100) == 299520);

  // Exhaustively: no plan within the limits asks for more than the bound.
  for (const ra::device_info dev : {ra::device_info{1}, ra::device_info{108}, h100}) {
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
        CHECK(bound <= worst + worst / 4);  // and not much more: engines allocate it
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
  // 512 tokens x 4 heads = 2048 rows; 64 rows per CTA for head dim 128 -> 32 tiles; 32 x 8 x 2
  // CTAs fill the GPU: no split.
  const auto a = ra::plan_prefill(config(32, 8, 128, 16), {.max_batch = 2, .max_q_len = 512, .max_context = 4096}, h100);
  CHECK(a.q_tiles == 32);
  CHECK(a.num_splits == 1);
  CHECK(a.bucket.max_total_q == 1024);
  // Extend of 4 tokens: 16 rows -> 1 tile; 1 x 8 x 1 CTAs -> 33 splits wanted -> 512-token splits.
  const auto b = ra::plan_prefill(config(32, 8, 128, 16), {.max_batch = 1, .max_q_len = 4, .max_context = 16384}, h100);
  CHECK(b.q_tiles == 1);
  CHECK(b.split_tokens == 512);
  CHECK(b.num_splits == 32);
  CHECK(b.workspace.bytes == 4 * 32 * 32 * 128 * 4 + 4 * 32 * 32 * 4);
  CHECK(error_of([] { ra::plan_prefill(config(32, 8, 128, 16), {.max_batch = 2, .max_q_len = 8, .max_context = 4}, h100); }) ==
        "prefill_bucket.max_context = 4 is smaller than max_q_len = 8 (the context includes the new tokens)");
  CHECK(error_of([] {
          ra::plan_prefill(config(32, 8, 128, 16), {.max_batch = 2, .max_q_len = 8, .max_total_q = 17, .max_context = 8}, h100);
        }) == "prefill_bucket.max_total_q = 17 must be in [max_q_len, max_batch * max_q_len] = [8, 16]");
  // The split merge runs a warp per output row, 4 per CTA: 1e9 tokens x 64 heads is past 2^31 CTAs.
  CHECK(error_of([] {
          ra::plan_prefill(config(64, 64, 128, 16),
                           {.max_batch = 65535, .max_q_len = 16384, .max_total_q = 1000000000, .max_context = 16384}, h100,
                           {.split_tokens = 128});
        }) == "max_total_q * num_qo_heads = 64000000000 output rows need 16000000000 merge CTAs, past the grid's x "
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
