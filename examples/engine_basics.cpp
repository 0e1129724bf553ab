// Engine basics: an engine built from policies (vLLM's capture-size ladder, largest-first
// order, delayed capture with the largest graph at startup, a 10 MiB graph budget), run on the
// host backend with rungs' CPU reference attention over a paged KV cache whose blocks come from
// rungs::kv's allocator. Prints the capture log, each step and the statistics; returns 0 when
// steps replayed and the budget held.
#include <rungs/engine/engine.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/ladder_buckets.hpp>
#include <rungs/engine/reference_forward.hpp>
#include <rungs/kv.hpp>
#include <rungs/ladder.hpp>

#include <cstdio>
#include <functional>
#include <iostream>
#include <vector>

namespace eng = rungs::engine;
namespace kv = rungs::kv;

constexpr eng::model_shape model{.dtype = eng::kv_dtype::bf16, .num_heads = 4, .num_kv_heads = 2, .head_size = 16,
                                 .block_size = 16, .num_layers = 2};

int main() {
  // ---- the engine, from policies ----------------------------------------------------------
  using buckets = eng::ladder_buckets<rungs::ladder>;
  using engine = eng::engine<model, buckets, eng::largest_first, eng::delayed, kv::free_list_allocator, eng::host_backend>;
  const eng::graph_cost cost{.base = 1 << 20, .per_unit = 1 << 16};  // 1 MiB + 64 KiB per sequence (simulated)
  eng::reference_forward<model> forward(/*num_blocks=*/256);
  engine e(buckets(rungs::ladder{rungs::CaptureSizes::vllm(32)}),  // 1 2 4 8 16 24 32
           kv::free_list_allocator({.num_blocks = 256, .block_size = model.block_size, .max_sequences = 64, .max_model_len = 256}),
           eng::host_backend(std::ref(forward), {.simulate = eng::simulated_capture{.bytes = cost, .seconds = 0.05},
                                                 .workspace_bytes = eng::reference_forward<model>::workspace_bytes}),
           {.timing = eng::delayed{.largest_at_startup = true}, .budget = {.bytes = 10 << 20, .model = cost}, .max_model_len = 256});
  e.observe(eng::log_observer(std::cout, eng::log_observer::is_terminal(stdout)));
  e.start();

  // ---- twelve sequences, admitted and grown by the engine's KV allocator -------------------
  std::vector<kv::sequence_id> ids;
  std::vector<std::vector<std::int32_t>> next(12);
  std::vector<std::int64_t> cached(12);  // tokens already in the KV cache
  for (std::size_t i = 0; i < 12; ++i) {
    std::vector<kv::token_id> prompt(10 + i, static_cast<kv::token_id>(100 + i));
    ids.push_back(e.blocks().create(prompt).value().id);
    if (e.blocks().append(ids.back(), prompt) != kv::errc::ok) return 1;
    cached[i] = static_cast<std::int64_t>(prompt.size()) - 1;  // the prompt's last token is this step's
    next[i] = {prompt.back()};
  }
  for (int step = 0; step < 6; ++step) {
    const std::size_t live = step < 3 ? 12 : 5;  // seven sequences finish after step 2
    std::vector<eng::sequence> seqs;
    for (std::size_t i = 0; i < live; ++i) seqs.push_back({next[i], cached[i], e.blocks().block_table(ids[i]).value()});
    auto r = e.step(seqs);
    std::printf("step %d: %2zu sequences -> %s%s, output row 0 begins %+.4f\n", step, live,
                r.bucket ? ("bucket " + std::to_string(e.at(*r.bucket).batch()) + " ").c_str() : "",
                r.run == eng::run_kind::replay ? "replay" : "eager", static_cast<double>(r.rows[0]));
    for (std::size_t i = 0; i < live; ++i) {  // "sample" the next token and make room for it
      next[i] = {static_cast<std::int32_t>(1 + (step * 31 + static_cast<int>(i)) % 997)};
      ++cached[i];
      if (e.blocks().append(ids[i], next[i]) != kv::errc::ok) return 1;
    }
  }
  std::cout << e.stats() << "\n";
  return e.stats().replays > 0 && e.ledger().used() <= (10 << 20) ? 0 : 1;
}
