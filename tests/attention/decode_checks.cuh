// GPU decode against the host reference, for every head dim, block size and group of the
// tested set, with and without KV splits. Included by one .cu per element type.
#pragma once

#include <rungs/attention/paged_attention.cuh>
#include <rungs/attention/plan.hpp>
#include <rungs/attention/reference.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gpu_support.hpp"
#include "paged_problem.hpp"

namespace rungs_test {

/// One decode problem (shape, lengths with a zero-length sequence, padded batch rows, table
/// rows longer than needed, strided queries with NaN gaps) run under several plans.
template <class HostT, class Set>
void check_decode(std::mt19937_64& rng, ra::dtype type, int head_dim, int block_size, int group, double sm_scale) {
  constexpr int kMaxBatch = 8;
  const int max_len = std::min(3 * block_size + 13, 300);
  const int max_context = max_len + 40;  // the bucket is longer than any sequence: empty splits
  auto lens = random_lengths(rng, 5, max_len, block_size);
  lens.insert(lens.begin() + 2, 0);  // a sequence of length 0 (rows 6 and 7 are batch padding)
  const int batch = static_cast<int>(lens.size());
  const std::int64_t table_stride = (max_context + block_size - 1) / block_size + 3;
  const ra::attention_shape shape0{.num_qo_heads = 2 * group, .num_kv_heads = 2, .head_dim = head_dim,
                                   .block_size = block_size};
  const paged_problem p = make_problem(rng, shape0, lens, {}, table_stride);
  const ra::attention_shape& s = p.shape;
  const auto pools = make_pools<HostT>(rng, p);
  const std::int64_t row = s.q_row_elements();

  // Queries: kMaxBatch rows `q_stride` apart; the gaps are NaN.
  const std::int64_t q_stride = row + 8;
  std::vector<HostT> q_dense = random_vector<HostT>(rng, static_cast<std::size_t>(kMaxBatch * row));
  std::vector<HostT> q_strided(static_cast<std::size_t>(kMaxBatch * q_stride), poison<HostT>());
  for (int b = 0; b < kMaxBatch; ++b) {
    std::copy_n(q_dense.begin() + b * row, row, q_strided.begin() + b * q_stride);
  }

  std::vector<double> want(static_cast<std::size_t>(batch * row));
  ra::reference::decode<HostT, HostT, double>(s, pools.k, pools.v, q_dense, lens, {p.tables, p.table_stride}, sm_scale,
                                              want);

  device_buffer<HostT> k(pools.k), v(pools.v), q_dev(q_strided);
  device_buffer<HostT> q_dense_dev(q_dense);
  device_buffer<std::int32_t> tables_dev(static_cast<std::size_t>(kMaxBatch * table_stride));
  device_buffer<std::int32_t> lens_dev(kMaxBatch);
  device_buffer<HostT> out(static_cast<std::size_t>(kMaxBatch * row));

  const ra::attention_config config{type, s, static_cast<float>(sm_scale)};
  struct run {
    const char* name;
    ra::plan_options options;
    bool strided_q;
  };
  const run runs[] = {{"no split", {.split_tokens = max_context}, false},
                      {"48-token splits", {.split_tokens = 48}, true},
                      {"planner's splits", {}, false}};
  for (const run& r : runs) {
    const ra::decode_plan plan =
        ra::plan_decode(config, {.max_batch = kMaxBatch, .max_context = max_context}, ra::query_device(), r.options);
    if (r.options.split_tokens == max_context) REQUIRE_FALSE(plan.split());
    if (r.options.split_tokens == 48) REQUIRE(plan.split());

    // Per-step metadata through the host writer; table entries it does not write stay poison.
    std::vector<std::int32_t> lens_stage(kMaxBatch, -1);
    std::vector<std::int32_t> tables_stage(static_cast<std::size_t>(kMaxBatch * table_stride), -1000000);
    const auto spans = p.block_spans();
    ra::write_decode_step(plan, lens, spans, lens_stage, tables_stage, table_stride);
    lens_dev.upload(lens_stage);
    tables_dev.upload(tables_stage);
    out.poison();
    device_buffer<std::byte> workspace(plan.workspace.bytes);
    if (plan.split()) workspace.poison();

    ra::decode_args args{.q = r.strided_q ? q_dev.data() : q_dense_dev.data(),
                         .q_stride = r.strided_q ? q_stride : 0,
                         .k_cache = k.data(),
                         .v_cache = v.data(),
                         .block_tables = tables_dev.data(),
                         .block_table_stride = table_stride,
                         .seq_lens = lens_dev.data(),
                         .out = out.data(),
                         .workspace = workspace.data(),
                         .workspace_bytes = workspace.size()};
    ra::decode<Set>(plan, args, nullptr);
    RUNGS_CUDA_CHECK(cudaDeviceSynchronize());

    const auto got = out.download();
    const std::string what = std::string(r.name) + ", " + std::to_string(plan.num_splits) + " splits";
    require_close(got, want, row, 0, batch, what);
    require_zero_rows(got, row, 2, 3, what + ": the length-0 sequence");
    require_zero_rows(got, row, batch, kMaxBatch, what + ": padded batch rows");
  }
}

template <ra::dtype Type>
void check_decode_set() {
  using host_t = ra::host_type<Type>;
  using set = tested_set_of<Type>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(Type) * 1000 + 17);
  for_each_value(typename set::head_dims{}, [&](int head_dim) {
    for (int block_size : {8, 16, 32, 64, 128}) {
      for_each_value(typename set::decode_groups{}, [&](int group) {
        const double scale = group % 2 == 0 ? 0.3 : 0.0;  // sharper and default softmax
        INFO(ra::name(Type) << ", head_dim " << head_dim << ", block_size " << block_size << ", group " << group
                            << ", sm_scale " << scale);
        check_decode<host_t, set>(rng, Type, head_dim, block_size, group, scale);
      });
    }
  });
}

}  // namespace rungs_test
