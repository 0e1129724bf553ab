// Engine basics: rungs' engine serving twelve requests. Its scheduler admits them into KV
// blocks of rungs::kv's allocator; its graph runner pads each step to vLLM's capture-size
// ladder and replays graphs captured under a 10 MiB budget (the largest at startup, the rest
// when first needed), on the host backend with rungs' CPU reference attention; a hook picks
// each sequence's next token from its output row. Prints the capture log, each step and the
// statistics; returns 0 when steps replayed and the budget held.
#include <rungs/engine.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>

namespace eng = rungs::engine;
namespace kv = rungs::kv;

constexpr eng::model_shape model{.dtype = rungs::dtype::bf16, .num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 16,
                                 .block_size = 16, .num_layers = 2};
constexpr std::int32_t num_blocks = 256;

struct sampler {  // a real stack runs its LM head on the row here
  void sample(const rungs::serving::scheduled_step&, std::span<const std::size_t> entries, std::span<const float> rows,
              std::span<kv::token_id> out) const {
    for (std::size_t k = 0; k < entries.size(); ++k)
      out[k] = 1 + static_cast<kv::token_id>(std::fabs(rows[k * model.row_width()]) * 1e4f) % 997;
  }
};

int main() {
  // example-begin engine
  using buckets = eng::ladder_buckets<rungs::ladder>;
  using engine = eng::engine<buckets, eng::largest_first, eng::delayed, kv::free_list_allocator, eng::host_backend>;
  const eng::graph_cost cost{.base = 1 << 20, .per_unit = 1 << 16};  // 1 MiB + 64 KiB per sequence (simulated)
  eng::reference_forward<model> forward(num_blocks);
  engine e(buckets(rungs::ladder{rungs::CaptureSizes::vllm(32)}),  // 1 2 4 8 16 24 32
           kv::free_list_allocator({.num_blocks = num_blocks, .block_size = model.block_size, .max_sequences = 64, .max_model_len = 256}),
           eng::host_backend(std::ref(forward), {.simulate = eng::simulated_capture{.bytes = cost, .seconds = 0.05},
                                                 .workspace_bytes = eng::reference_forward<model>::workspace_bytes}),
           {.timing = eng::delayed{.largest_at_startup = true}, .budget = {.bytes = 10 << 20, .model = cost}, .model = model});
  e.runner().observe(eng::log_observer(std::cout, eng::log_observer::is_terminal(stdout)));
  for (std::uint64_t i = 0; i < 12; ++i) {  // prompts of 10..21 tokens; seven answer in 3 tokens, five in 6
    rungs::serving::request r;
    r.id = i + 1;
    r.prompt.assign(10 + i, static_cast<kv::token_id>(100 + i));
    r.max_output_tokens = i < 7 ? 3 : 6;
    e.submit(std::move(r));
  }
  sampler hook;
  while (!e.idle_queues())
    for (const eng::engine_run& r : e.step(hook).runs)
      std::printf("%2lld sequences, %3lld tokens -> %s%s\n", static_cast<long long>(r.seqs), static_cast<long long>(r.tokens),
                  r.bucket ? ("bucket " + std::to_string(e.runner().at(*r.bucket).batch()) + " ").c_str() : "",
                  r.run == eng::run_kind::replay ? "replay" : "eager");
  std::cout << e.stats() << "\n";
  // example-end engine
  return e.stats().replays > 0 && e.runner().ledger().used() <= (10 << 20) ? 0 : 1;
}
