// GPU prefill/extend against the host reference, for every head dim and block size of the
// tested set, a few GQA groups (prefill takes the group at run time), with and without KV
// splits: ragged query lengths (pure prefills, extends, a sequence with no new token),
// strided queries, padded batch rows, and output rows past the batch's tokens that must stay
// untouched. Included by one .cu per element type.
#pragma once

#include <rungs/attention/paged_attention.cuh>
#include <rungs/attention/reference.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gpu_support.hpp"
#include "paged_problem.hpp"

namespace rungs_test {

template <class HostT, class Set>
void check_prefill(std::mt19937_64& rng, ra::dtype type, int head_dim, int block_size, int group, double sm_scale) {
  constexpr int kMaxBatch = 6;
  constexpr int kMaxQ = 70;
  const int max_len = std::min(3 * block_size + 13, 260);
  // The bucket must admit a pure prefill of kMaxQ tokens even when the block size keeps the
  // sampled lengths short (block size 8: max_len 37).
  const int max_context = std::max(max_len + 30, kMaxQ);
  auto kv_lens = random_lengths(rng, 4, max_len, block_size);
  std::vector<std::int32_t> q_lens(kv_lens.size());
  std::uniform_int_distribution<int> pick(1, kMaxQ);
  for (std::size_t b = 0; b < kv_lens.size(); ++b) q_lens[b] = std::min(kv_lens[b], pick(rng));
  q_lens[1] = kv_lens[1] = std::min(kv_lens[1], kMaxQ);  // a pure prefill
  q_lens[2] = 0;                                         // no new token this step
  const std::int64_t table_stride = (max_context + block_size - 1) / block_size + 1;
  const ra::attention_shape shape0{.num_qo_heads = 2 * group, .num_kv_heads = 2, .head_dim = head_dim,
                                   .block_size = block_size};
  const paged_problem p = make_problem(rng, shape0, kv_lens, q_lens, table_stride);
  const ra::attention_shape& s = p.shape;
  const auto pools = make_pools<HostT>(rng, p);
  const std::int64_t row = s.q_row_elements();
  const int total_q = p.total_q();
  const int max_total_q = kMaxBatch * kMaxQ / 2;
  REQUIRE(total_q <= max_total_q);

  const std::int64_t q_stride = row + 16;
  const auto q_dense = random_vector<HostT>(rng, static_cast<std::size_t>(max_total_q * row));
  std::vector<HostT> q_strided(static_cast<std::size_t>(max_total_q * q_stride), poison<HostT>());
  for (int t = 0; t < max_total_q; ++t) std::copy_n(q_dense.begin() + t * row, row, q_strided.begin() + t * q_stride);

  std::vector<double> want(static_cast<std::size_t>(total_q * row));
  ra::reference::prefill<HostT, HostT, double>(s, pools.k, pools.v, q_dense, p.q_indptr, kv_lens,
                                               {p.tables, p.table_stride}, sm_scale, want);

  device_buffer<HostT> k(pools.k), v(pools.v), q_dev(q_strided), q_dense_dev(q_dense);
  device_buffer<std::int32_t> indptr_dev(kMaxBatch + 1), kv_dev(kMaxBatch),
      tables_dev(static_cast<std::size_t>(kMaxBatch * table_stride));
  device_buffer<HostT> out(static_cast<std::size_t>(max_total_q * row));

  const ra::attention_config config{type, s, static_cast<float>(sm_scale)};
  const ra::prefill_bucket bucket{.max_batch = kMaxBatch, .max_q_len = kMaxQ, .max_total_q = max_total_q,
                                  .max_context = max_context};
  struct run {
    const char* name;
    ra::plan_options options;
    bool strided_q;
  };
  const run runs[] = {{"no split", {.split_tokens = max_context}, true},
                      {"40-token splits", {.split_tokens = 40}, false},
                      {"planner's splits", {}, true}};
  for (const run& r : runs) {
    const ra::prefill_plan plan = ra::plan_prefill(config, bucket, ra::query_device(), r.options);
    if (r.options.split_tokens == max_context) REQUIRE_FALSE(plan.split());
    if (r.options.split_tokens == 40) REQUIRE(plan.split());
    std::vector<std::int32_t> indptr(kMaxBatch + 1, -1), kv(kMaxBatch, -1);
    std::vector<std::int32_t> tables(static_cast<std::size_t>(kMaxBatch * table_stride), -1000000);
    const auto spans = p.block_spans();
    ra::write_prefill_step(plan, q_lens, kv_lens, spans, indptr, kv, tables, table_stride);
    REQUIRE(indptr[kMaxBatch] == total_q);
    indptr_dev.upload(indptr);
    kv_dev.upload(kv);
    tables_dev.upload(tables);
    out.poison();
    device_buffer<std::byte> workspace(plan.workspace.bytes);
    if (plan.split()) workspace.poison();

    ra::prefill_args args{.q = r.strided_q ? q_dev.data() : q_dense_dev.data(),
                          .q_stride = r.strided_q ? q_stride : 0,
                          .k_cache = k.data(),
                          .v_cache = v.data(),
                          .block_tables = tables_dev.data(),
                          .block_table_stride = table_stride,
                          .q_indptr = indptr_dev.data(),
                          .kv_lens = kv_dev.data(),
                          .out = out.data(),
                          .workspace = workspace.data(),
                          .workspace_bytes = workspace.size()};
    ra::prefill<Set>(plan, args, nullptr);
    RUNGS_CUDA_CHECK(cudaDeviceSynchronize());

    const auto got = out.download();
    const std::string what = std::string(r.name) + ", " + std::to_string(plan.num_splits) + " splits, " +
                             std::to_string(plan.q_tiles) + " q tiles";
    require_close(got, want, row, 0, total_q, what);
    std::int64_t touched = 0;  // rows past the batch's tokens belong to nobody
    for (std::int64_t i = total_q * row; i < max_total_q * row; ++i) touched += got[static_cast<std::size_t>(i)].bits != 0xffff;
    INFO(what);
    CHECK(touched == 0);
  }
}

template <ra::dtype Type>
void check_prefill_set() {
  using host_t = ra::host_type<Type>;
  using set = tested_set_of<Type>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(Type) * 1000 + 23);
  for_each_value(typename set::head_dims{}, [&](int head_dim) {
    for (int block_size : {8, 16, 32, 64, 128}) {
      for (int group : {1, 3, 8}) {
        const double scale = group == 3 ? 0.0 : 0.3;
        INFO(ra::name(Type) << ", head_dim " << head_dim << ", block_size " << block_size << ", group " << group);
        check_prefill<host_t, set>(rng, Type, head_dim, block_size, group, scale);
      }
    }
  });
}

}  // namespace rungs_test
