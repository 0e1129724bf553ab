// The GPU tests' own setup, on the host: every decode and prefill case the GPU tests build
// (gpu_cases.hpp) plans, packs its step metadata and validates against buffers of the sizes
// the GPU tests allocate, for a 1-SM, an A100-sized and an H100-sized device. A setup mistake
// in a GPU test (its bucket too small for its own problem, say) fails here, in CI, instead of on
// the first GPU run.
#include <catch2/catch.hpp>

#include <cstdint>
#include <initializer_list>
#include <random>

#include "gpu_cases.hpp"

using namespace rungs_test;

namespace {

const ra::device_info devices[] = {{1, 90}, {108, 80}, {132, 90}};

// f(head_dim, block_size, group) over what the GPU tests cover; returns how many settings.
template <class F>
int for_each_setting(std::initializer_list<int> groups, F&& f) {
  int n = 0;
  for (int head_dim : {64, 80, 96, 128, 256})
    for (int block_size : {8, 16, 32, 64, 128})
      for (int group : groups) {
        f(head_dim, block_size, group);
        ++n;
      }
  return n;
}

}  // namespace

TEST_CASE("GPU decode cases plan, pack and validate on every device size") {
  std::mt19937_64 rng(17);
  int runs = 0;
  const int settings = for_each_setting({1, 2, 3, 4, 5, 6, 7, 8, 16}, [&](int head_dim, int block_size, int group) {
    const decode_case c = make_decode_case(rng, head_dim, block_size, group);
    const ra::attention_config config{ra::dtype::bf16, c.problem.shape, 0.3f};
    for (const ra::device_info& dev : devices)
      for (const gpu_run& r : c.runs) {
        INFO("head_dim " << head_dim << ", block_size " << block_size << ", group " << group << ", " << dev.num_sms
                         << " SMs, " << r.name);
        const decode_staged s = stage_decode(c, config, r, dev);
        const ra::decode_args args{.q = at(0x10000), .q_stride = r.strided_q ? c.problem.shape.q_row_elements() + 8 : 0,
                                   .k_cache = at(0x20000), .v_cache = at(0x30000),
                                   .block_tables = at<const std::int32_t>(0x40000),
                                   .block_table_stride = c.table_stride,
                                   .seq_lens = at<const std::int32_t>(0x50000), .out = at(0x60000),
                                   .workspace = s.plan.workspace.bytes ? at(0x70000) : nullptr,
                                   .workspace_bytes = s.plan.workspace.bytes};
        REQUIRE_NOTHROW(ra::validate(s.plan, args));
        CHECK(s.lens[2] == 0);                           // the length-0 sequence
        CHECK(s.lens[decode_case::max_batch - 1] == 0);  // a padded row
        ++runs;
      }
  });
  CHECK(settings == 5 * 5 * 9);
  CHECK(runs == settings * 3 * 3);
}

TEST_CASE("GPU prefill cases plan, pack and validate on every device size") {
  std::mt19937_64 rng(23);
  int runs = 0;
  const int settings = for_each_setting({1, 3, 8}, [&](int head_dim, int block_size, int group) {
    const prefill_case c = make_prefill_case(rng, head_dim, block_size, group);
    const ra::attention_config config{ra::dtype::bf16, c.problem.shape, 0.3f};
    for (const ra::device_info& dev : devices)
      for (const gpu_run& r : c.runs) {
        INFO("head_dim " << head_dim << ", block_size " << block_size << ", group " << group << ", " << dev.num_sms
                         << " SMs, " << r.name);
        const prefill_staged s = stage_prefill(c, config, r, dev);
        const ra::prefill_args args{.q = at(0x10000), .q_stride = r.strided_q ? c.problem.shape.q_row_elements() + 16 : 0,
                                    .k_cache = at(0x20000), .v_cache = at(0x30000),
                                    .block_tables = at<const std::int32_t>(0x40000),
                                    .block_table_stride = c.table_stride,
                                    .q_indptr = at<const std::int32_t>(0x50000),
                                    .kv_lens = at<const std::int32_t>(0x58000), .out = at(0x60000),
                                    .workspace = s.plan.workspace.bytes ? at(0x70000) : nullptr,
                                    .workspace_bytes = s.plan.workspace.bytes};
        REQUIRE_NOTHROW(ra::validate(s.plan, args));
        ++runs;
      }
  });
  CHECK(settings == 5 * 5 * 3);
  CHECK(runs == settings * 3 * 3);
}
