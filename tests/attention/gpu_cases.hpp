// The problems, buckets, plans and per-step metadata of the GPU decode and prefill tests
// (decode_checks.cuh, prefill_checks.cuh), in plain C++. The GPU tests build their cases here,
// and the host test gpu_cases_test.cpp builds every one of them for several GPU sizes and
// checks that it plans, packs and validates: a mistake in the GPU tests' setup (a bucket too
// small for its own problem, say) fails CI instead of the first run on a GPU.
#pragma once

#include <rungs/attention/plan.hpp>
#include <rungs/blocks.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "paged_problem.hpp"

namespace rungs_test {

namespace ra = rungs::attention;

// Plausible aligned device addresses (never dereferenced on the host), for validate()
// calls in host tests.
template <class T = void>
T* at(std::uintptr_t a) {
  return reinterpret_cast<T*>(a);
}

/// One way a case is run: plan options and whether queries are strided.
struct gpu_run {
  const char* name;
  ra::plan_options options;
  bool strided_q;
};

/// Decode: 5 random lengths plus a length-0 sequence, in a bucket of 8 (rows 6 and 7 are batch
/// padding) whose context is longer than any sequence (empty splits), with table rows longer
/// than needed.
struct decode_case {
  static constexpr int max_batch = 8;
  int max_context = 0;
  std::int64_t table_stride = 0;
  std::vector<std::int32_t> lens;
  paged_problem problem;
  std::array<gpu_run, 3> runs{};

  int batch() const { return static_cast<int>(lens.size()); }
  ra::decode_bucket bucket() const { return {.max_batch = max_batch, .max_context = max_context}; }
};

inline decode_case make_decode_case(std::mt19937_64& rng, int head_dim, int block_size, int group) {
  decode_case c;
  const int max_len = std::min(3 * block_size + 13, 300);
  c.max_context = max_len + 40;
  c.lens = random_lengths(rng, 5, max_len, block_size);
  c.lens.insert(c.lens.begin() + 2, 0);
  c.table_stride = rungs::blocks_for(c.max_context, block_size) + 3;
  const attention_shape shape{.num_qo_heads = 2 * group, .num_kv_heads = 2, .head_dim = head_dim,
                              .block_size = block_size};
  c.problem = make_problem(rng, shape, c.lens, {}, c.table_stride);
  c.runs = {gpu_run{"no split", {.split_tokens = c.max_context}, false},
            gpu_run{"48-token splits", {.split_tokens = 48}, true},
            gpu_run{"planner's splits", {}, false}};
  return c;
}

/// A decode plan and the step's host-packed lengths and block tables (entries the writer does
/// not touch stay -1 / -1000000: poison the kernels must not read).
struct decode_staged {
  ra::decode_plan plan;
  std::vector<std::int32_t> lens;
  std::vector<std::int32_t> tables;
};

/// Set: the instantiation set of the decode<Set, ...> call that runs the plan.
template <class Set = ra::default_instantiations>
decode_staged stage_decode(const decode_case& c, const ra::attention_config& config, const gpu_run& r,
                           const ra::device_info& dev) {
  decode_staged s{ra::plan_decode<Set>(config, c.bucket(), dev, r.options),
                  std::vector<std::int32_t>(decode_case::max_batch, -1),
                  std::vector<std::int32_t>(static_cast<std::size_t>(decode_case::max_batch * c.table_stride), -1000000)};
  if (r.options.split_tokens == c.max_context && s.plan.split())
    throw std::logic_error(std::string(r.name) + ": the plan splits");
  if (r.options.split_tokens == 48 && !s.plan.split()) throw std::logic_error(std::string(r.name) + ": no split");
  const auto spans = c.problem.block_spans();
  ra::write_decode_step(s.plan, c.lens, spans, s.lens, s.tables, c.table_stride);
  return s;
}

/// Prefill/extend: 4 sequences with ragged new-token counts up to 70 (one pure prefill, one
/// with no new token), in a bucket of 6 with at most 210 new tokens.
struct prefill_case {
  static constexpr int max_batch = 6;
  static constexpr int max_q = 70;
  static constexpr int max_total_q = max_batch * max_q / 2;
  int max_context = 0;
  std::int64_t table_stride = 0;
  std::vector<std::int32_t> kv_lens, q_lens;
  paged_problem problem;
  std::array<gpu_run, 3> runs{};

  ra::prefill_bucket bucket() const {
    return {.max_batch = max_batch, .max_q_len = max_q, .max_total_q = max_total_q, .max_context = max_context};
  }
};

inline prefill_case make_prefill_case(std::mt19937_64& rng, int head_dim, int block_size, int group) {
  prefill_case c;
  const int max_len = std::min(3 * block_size + 13, 260);
  // The bucket must admit a pure prefill of max_q tokens even when the block size keeps the
  // sampled lengths short (block size 8: max_len 37).
  c.max_context = std::max(max_len + 30, prefill_case::max_q);
  c.kv_lens = random_lengths(rng, 4, max_len, block_size);
  c.q_lens.resize(c.kv_lens.size());
  std::uniform_int_distribution<int> pick(1, prefill_case::max_q);
  for (std::size_t b = 0; b < c.kv_lens.size(); ++b) c.q_lens[b] = std::min(c.kv_lens[b], pick(rng));
  c.q_lens[1] = c.kv_lens[1] = std::min(c.kv_lens[1], prefill_case::max_q);  // a pure prefill
  c.q_lens[2] = 0;                                                           // no new token this step
  c.table_stride = rungs::blocks_for(c.max_context, block_size) + 1;
  const attention_shape shape{.num_qo_heads = 2 * group, .num_kv_heads = 2, .head_dim = head_dim,
                              .block_size = block_size};
  c.problem = make_problem(rng, shape, c.kv_lens, c.q_lens, c.table_stride);
  if (c.problem.total_q() > prefill_case::max_total_q) throw std::logic_error("prefill case: too many new tokens");
  c.runs = {gpu_run{"no split", {.split_tokens = c.max_context}, true},
            gpu_run{"40-token splits", {.split_tokens = 40}, false},
            gpu_run{"planner's splits", {}, true}};
  return c;
}

/// A prefill plan and the step's host-packed q_indptr, lengths and block tables.
struct prefill_staged {
  ra::prefill_plan plan;
  std::vector<std::int32_t> indptr;
  std::vector<std::int32_t> kv_lens;
  std::vector<std::int32_t> tables;
};

inline prefill_staged stage_prefill(const prefill_case& c, const ra::attention_config& config, const gpu_run& r,
                                    const ra::device_info& dev) {
  prefill_staged s{ra::plan_prefill(config, c.bucket(), dev, r.options),
                   std::vector<std::int32_t>(prefill_case::max_batch + 1, -1),
                   std::vector<std::int32_t>(prefill_case::max_batch, -1),
                   std::vector<std::int32_t>(static_cast<std::size_t>(prefill_case::max_batch * c.table_stride), -1000000)};
  if (r.options.split_tokens == c.max_context && s.plan.split())
    throw std::logic_error(std::string(r.name) + ": the plan splits");
  if (r.options.split_tokens == 40 && !s.plan.split()) throw std::logic_error(std::string(r.name) + ": no split");
  const auto spans = c.problem.block_spans();
  ra::write_prefill_step(s.plan, c.q_lens, c.kv_lens, spans, s.indptr, s.kv_lens, s.tables, c.table_stride);
  if (s.indptr[prefill_case::max_batch] != c.problem.total_q())
    throw std::logic_error("prefill case: q_indptr does not end at the batch's new tokens");
  return s;
}

}  // namespace rungs_test
