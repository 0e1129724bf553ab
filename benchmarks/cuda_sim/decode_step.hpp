// The executor benchmark's decode step (cuda_sim_executor_bench, cuda_sim_same_ptx_decode): one
// launch of nvcc's PTX of paged_attention_kernel<__half, 128, 0, 4, 1, true, 0u, __half> (f16,
// head dim 128, GQA group 4) over 4 sequences of 384 tokens, 2 KV heads, no split: 8 blocks of
// 128 threads. Inputs are random bits shaped as a real step (valid block tables). It uses the
// executor's public interface only (rungs_sim/executor.hpp), so it also builds against an older
// executor's headers and library (same_ptx_decode.cpp says how).
#pragma once

#include <rungs/attention/detail/params.cuh>
#include <rungs/attention/plan.hpp>
#include <rungs_sim/executor.hpp>

#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention_ptx.hpp"
#include "harness.hpp"

namespace rungs_sim_bench {

class decode_step {
 public:
  decode_step() {
    namespace ra = rungs::attention;
    std::mt19937_64 rng(1);
    q_.resize(static_cast<std::size_t>(kBatch * shape_.q_row_elements()));
    k_.resize(static_cast<std::size_t>(shape_.pool_elements()));
    v_.resize(k_.size());
    out_.resize(q_.size());
    for (auto* buf : {&q_, &k_, &v_}) {
      for (auto& x : *buf) x = static_cast<std::uint16_t>(0x3000 + rng() % 0x0c00);  // f16 in [0.125, 1)
    }
    lens_.assign(kBatch, kLen);
    tables_.resize(static_cast<std::size_t>(kBatch * plan_.max_blocks_per_seq));
    std::iota(tables_.begin(), tables_.end(), 0);
    mem_.add(q_), mem_.add(k_), mem_.add(v_), mem_.add(out_), mem_.add(lens_), mem_.add(tables_);
    const ra::decode_args a{.q = q_.data(), .k_cache = k_.data(), .v_cache = v_.data(), .block_tables = tables_.data(),
                            .block_table_stride = plan_.max_blocks_per_seq, .seq_lens = lens_.data(), .out = out_.data()};
    params_ = rungs::attention::detail::decode_params(plan_, a);
  }
  // One launch under `sched`: its result (warp instructions, traffic).
  rungs::sim::launch_result launch(const rungs::sim::schedule& sched) {
    void* args[] = {&params_};
    const auto g = rungs::attention::detail::decode_grid(plan_);
    return rungs::sim::launch(rungs_sim_test::attention_module(), kernel_, {g.x, g.y, g.z},
                              {rungs::attention::geometry::threads, 1, 1}, 0, args, mem_, sched);
  }
  const std::vector<std::uint16_t>& out() const { return out_; }

 private:
  static constexpr int kBatch = 4, kLen = 384, kBlock = 16;
  rungs::attention::attention_shape shape_{.num_qo_heads = 8, .num_kv_heads = 2, .head_dim = 128,
                                           .block_size = kBlock, .num_blocks = kBatch * kLen / kBlock};
  rungs::attention::decode_plan plan_ = rungs::attention::plan_decode(
      {rungs::attention::dtype::fp16, shape_, 0.1f}, {.max_batch = kBatch, .max_context = kLen}, {4, 90},
      {.split_tokens = kLen});  // one split: no merge
  std::vector<std::uint16_t> q_, k_, v_, out_;
  std::vector<std::int32_t> lens_, tables_;
  rungs_sim_test::host_memory mem_;
  rungs::attention::detail::attention_params params_{};
  std::string kernel_ = rungs_sim_test::attention_entry("paged_attention_kernel<__half, 128, 0, 4, 1, true, 0u, __half>");
};

}  // namespace rungs_sim_bench
