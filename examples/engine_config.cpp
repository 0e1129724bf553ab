// Engine policies chosen at run time: the twelve requests of engine_basics.cpp served by
// rungs::engine::any_engine, built from an engine_config that a small configuration text fills
// (bucket space, capture timing, allocator: what a config file or flags name). The same code
// serves vLLM's capture sizes and Gaudi's 2-D prompt and decode grids; no policy is a type
// here. Prints each configuration's engine and statistics; returns 0 when both replayed graphs.
#include <rungs/engine.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

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

// "key = value" lines: buckets, max_capture_size, timing (startup, delayed, lazy, idle), allocator.
eng::engine_config read_config(const std::string& text) {
  eng::engine_config c{.model = model,
                       .kv = {.num_blocks = num_blocks, .block_size = model.block_size, .max_sequences = 64, .max_model_len = 256},
                       .scheduler = {.max_num_seqs = 16, .max_num_batched_tokens = 512}};
  std::istringstream in(text);
  for (std::string key, eq, value; in >> key >> eq >> value;) {
    if (key == "buckets") c.buckets.kind = eng::parse_bucket_kind(value);
    else if (key == "max_capture_size") c.buckets.max_capture_size = std::stoi(value);
    else if (key == "allocator") c.allocator = eng::parse_allocator_kind(value);
    else if (key == "timing" && value == "startup") c.timing = eng::startup{};
    else if (key == "timing" && value == "delayed") c.timing = eng::delayed{};
    else if (key == "timing" && value == "lazy") c.timing = eng::lazy{};
    else if (key == "timing" && value == "idle") c.timing = eng::idle{};
    else throw std::invalid_argument("config: unknown setting '" + key + " = " + value + "'");
  }
  return c;
}

int main() {
  int replayed = 0;
  for (const char* text : {"buckets = vllm  max_capture_size = 32  timing = delayed  allocator = free-list",
                           "buckets = gaudi-linear  timing = lazy  allocator = prefix-caching"}) {
    // example-begin any-engine
    eng::engine_config config = read_config(text);
    if (eng::is_gaudi(config.buckets.kind))  // Gaudi's VLLM_* variables; none set here
      config.buckets.getenv = [](const char*) -> std::optional<std::string> { return std::nullopt; };
    eng::reference_forward<model> forward(num_blocks);
    eng::any_engine<eng::host_backend> e(
        config, eng::host_backend(std::ref(forward), {.workspace_bytes = eng::reference_forward<model>::workspace_bytes}));
    std::cout << "engine: " << e.runner().buckets().size() << " buckets, capture order " << e.runner().config().order.name()
              << ", timing " << e.runner().config().timing.name() << ", allocator " << eng::to_string(e.allocator()) << "\n";
    for (std::uint64_t i = 0; i < 12; ++i) {  // prompts of 10..21 tokens; seven answer in 3 tokens, five in 6
      rungs::serving::request r;
      r.id = i + 1;
      r.prompt.assign(10 + i, static_cast<kv::token_id>(100 + i));
      r.max_output_tokens = i < 7 ? 3 : 6;
      e.submit(std::move(r));
    }
    sampler hook;
    while (!e.idle_queues()) e.step(hook);
    std::cout << e.stats() << "\n";
    // example-end any-engine
    replayed += e.stats().replays > 0 ? 1 : 0;
  }
  return replayed == 2 ? 0 : 1;
}
