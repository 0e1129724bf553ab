// rungs-plan dispatch: the graphs vLLM V1's dispatch key (num_tokens, uniform_decode
// [, has_lora]) captures for vLLM 0.33.0's default sizes under a cudagraph mode
// (rungs::engine::dispatch_buckets), their memory under the cost model's graph figures, and
// how one batch runs (runtime mode and padded shape).
//   $ rungs-plan dispatch --max-num-seqs 4 --max-num-batched-tokens 8192 --spec-tokens 1 --specialize-lora
//   capture sizes: 1 2 4 8 16
//   uniform-decode graphs: 3 (tokens 2 4 8)
//   mixed graphs: 5 (tokens 1 2 4 8 16)
//   LoRA cases: 2
//   graphs: 16
//   graph memory: 384.7 MiB (24 MiB + 8 KiB per token row, each graph)
// --mode adds a line naming the mode and the runtime mode of each list; --batch
// REQUESTS,TOKENS,MAX_QUERY,PREFILL adds the batch's runtime mode, graph and padded shape;
// --json prints all of it as one JSON object.
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/planning/cost_model.hpp>

#include "command.hpp"
#include "json_line.hpp"
#include "ladder_args.hpp"
#include "vllm_args.hpp"

namespace rungs::plan {
namespace {
using cli::json;
using engine::cudagraph_mode;
using engine::runtime_mode;

struct batch_query {
  std::int64_t requests = 0, tokens = 0, max_query = 0;
  bool prefill = false;
};

struct dispatch_args {
  vllm_size_args vllm;
  bool lora = false, json = false;
  std::optional<cudagraph_mode> mode;
  std::optional<batch_query> batch;
};

// "REQUESTS,TOKENS,MAX_QUERY,PREFILL": every request has 1 .. max_query new tokens and one
// of them has max_query, so requests <= tokens, ceil(tokens / requests) <= max_query and
// max_query <= tokens - (requests - 1).
batch_query parse_batch(std::string_view flag, std::string_view text) {
  const std::string what(flag);
  cli::check_length(what, text, 4);
  const std::vector<std::string_view> v = cli::split(text);
  if (v.size() != 4)
    throw usage_error(what + " = '" + std::string(text) + "' must be REQUESTS,TOKENS,MAX_QUERY,PREFILL (PREFILL 0 or 1)");
  batch_query b{cli::positive(what + " requests", v[0]), cli::positive(what + " tokens", v[1]),
                cli::positive(what + " max query", v[2]), cli::integer_in(what + " prefill", v[3], 0, 1) == 1};
  if (b.tokens < b.requests)
    throw usage_error(what + ": tokens = " + std::to_string(b.tokens) + " must be at least requests = " +
                      std::to_string(b.requests) + " (every request has a new token)");
  if (b.max_query > b.tokens - (b.requests - 1) || b.max_query < (b.tokens + b.requests - 1) / b.requests)
    throw usage_error(what + ": max query = " + std::to_string(b.max_query) + " must be in [ceil(tokens / requests), " +
                      "tokens - requests + 1] = [" + std::to_string((b.tokens + b.requests - 1) / b.requests) + ", " +
                      std::to_string(b.tokens - b.requests + 1) + "]");
  return b;
}

const std::vector<std::pair<std::string_view, cudagraph_mode>> mode_names = {
    {"none", cudagraph_mode::none},
    {"piecewise", cudagraph_mode::piecewise},
    {"full", cudagraph_mode::full},
    {"full_decode_only", cudagraph_mode::full_decode_only},
    {"full_and_piecewise", cudagraph_mode::full_and_piecewise}};

// The runtime modes of the two lists, for the mode line.
std::string describe(cudagraph_mode m) {
  switch (m) {
    case cudagraph_mode::none: return "no graphs: every batch eager";
    case cudagraph_mode::piecewise: return "mixed graphs PIECEWISE, uniform decodes on them";
    case cudagraph_mode::full: return "mixed graphs FULL, uniform decodes on them";
    case cudagraph_mode::full_decode_only: return "uniform-decode graphs FULL, every other batch eager";
    case cudagraph_mode::full_and_piecewise: return "uniform-decode graphs FULL, mixed graphs PIECEWISE";
  }
  return {};
}

struct graph_lists {
  std::vector<std::int64_t> decode, mixed;  // token rows of one LoRA case's graphs
  std::int64_t bytes = 0;                   // every graph's memory under the cost model
};

graph_lists lists_of(const engine::dispatch_buckets& space, const planning::cost_model& cost) {
  graph_lists g;
  for (std::size_t i = 0; i < space.size(); ++i) {
    const engine::bucket b = space.at(i);
    g.bytes += cost.graph_memory(b.shape.tokens);
    if (i >= space.decode_graphs() + space.mixed_graphs()) continue;
    (b.ph == engine::phase::decode ? g.decode : g.mixed).push_back(b.shape.tokens);
  }
  return g;
}

std::string joined(const std::vector<std::int64_t>& v) {
  std::string s;
  for (std::int64_t x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

engine::batch_key key_for(const batch_query& b) {
  return {.seqs = b.requests, .tokens = b.tokens, .max_query = b.max_query, .has_prefill = b.prefill};
}

std::string_view graph_kind(const engine::dispatch_buckets& space, const engine::dispatch_decision& d) {
  if (!d.bucket) return "none";
  return space.at(*d.bucket).ph == engine::phase::decode ? "uniform decode" : "mixed";
}

void print_text(std::ostream& out, const dispatch_args& a, const ladder& sizes, const engine::dispatch_buckets& space,
                const graph_lists& g, const planning::cost_model& cost) {
  out << "capture sizes: ";
  print_rungs(out, sizes);
  const auto tokens = [](const std::vector<std::int64_t>& v) {
    return v.empty() ? std::string() : " (tokens " + joined(v) + ")";
  };
  out << "uniform-decode graphs: " << space.decode_graphs() << tokens(g.decode) << "\n";
  out << "mixed graphs: " << space.mixed_graphs() << tokens(g.mixed) << "\n";
  out << "LoRA cases: " << space.lora_cases() << "\n";
  out << "graphs: " << space.size() << "\n";
  char line[160];
  std::snprintf(line, sizeof line, "graph memory: %.1f MiB (%.0f MiB + %.0f KiB per token row, each graph)\n",
                static_cast<double>(g.bytes) / (1 << 20), static_cast<double>(cost.graph_bytes) / (1 << 20),
                static_cast<double>(cost.graph_bytes_per_token) / (1 << 10));
  out << line;
  if (a.mode) out << "mode: " << engine::to_string(*a.mode) << " (" << describe(*a.mode) << ")\n";
  if (a.batch) {
    const batch_query& b = *a.batch;
    const engine::dispatch_decision d = space.dispatch(key_for(b));
    out << "batch: " << b.requests << " requests, " << b.tokens << " tokens, longest query " << b.max_query
        << (b.prefill ? ", with a prefill\n" : ", no prefill\n");
    out << "runtime mode: " << engine::to_string(d.mode) << "\n";
    out << "graph: " << graph_kind(space, d) << "\n";
    out << "padded shape: " << d.seqs << " requests, " << d.tokens << " tokens\n";
  }
}

void print_json(std::ostream& out, const dispatch_args& a, const ladder& sizes, const engine::dispatch_buckets& space,
                const graph_lists& g) {
  const cudagraph_mode m = space.options().mode;
  const auto list = [&](const std::vector<std::int64_t>& tokens, std::size_t first) {
    const runtime_mode rm = tokens.empty() ? runtime_mode::none : space.mode_of(first);
    return json{{"runtime_mode", std::string(engine::to_string(rm))},
                {"tokens", tokens}};
  };
  std::vector<std::int64_t> capture;
  for (const rung_t r : sizes.rungs()) capture.push_back(r);
  json j{{"mode", std::string(engine::to_string(m))},
         {"capture_sizes", capture},
         {"uniform_decode_graphs", list(g.decode, 0)},
         {"mixed_graphs", list(g.mixed, space.decode_graphs())},
         {"lora_cases", space.lora_cases()},
         {"graphs", space.size()},
         {"graph_memory_bytes", g.bytes}};
  if (a.batch) {
    const batch_query& b = *a.batch;
    const engine::dispatch_decision d = space.dispatch(key_for(b));
    j["batch"] = json{{"requests", b.requests},
                      {"tokens", b.tokens},
                      {"max_query", b.max_query},
                      {"prefill", b.prefill},
                      {"runtime_mode", std::string(engine::to_string(d.mode))},
                      {"graph", std::string(graph_kind(space, d))},
                      {"padded_requests", d.seqs},
                      {"padded_tokens", d.tokens}};
  }
  cli::write_json_line(out, j);
}

action define(CLI::App& app) {
  auto a = std::make_shared<dispatch_args>();
  a->vllm.define(app);
  cli::flag(app, "--specialize-lora", a->lora, "graphs with and without LoRA adapters (vLLM's cudagraph_specialize_lora)");
  cli::choices<cudagraph_mode>(app, "--mode MODE", a->mode, mode_names,
                               "vLLM's cudagraph_mode: none, piecewise, full, full_decode_only, full_and_piecewise "
                               "(default, vLLM's)");
  cli::option(app, "--batch REQUESTS,TOKENS,MAX_QUERY,PREFILL", a->batch, parse_batch,
              "how one batch runs: its runtime mode, graph and padded shape (PREFILL 1: some request is a prefill)");
  cli::flag(app, "--json", a->json, "print everything as one JSON object");
  return [a](std::ostream& out, std::ostream&) {
    const VllmCaptureSizes p = a->vllm.sizes();
    const ladder sizes{p};
    const engine::dispatch_buckets space(sizes, {.spec_tokens = p.spec_tokens, .max_num_seqs = p.max_num_seqs,
                                                 .specialize_lora = a->lora,
                                                 .mode = a->mode.value_or(cudagraph_mode::full_and_piecewise)});
    const planning::cost_model cost{};
    const graph_lists g = lists_of(space, cost);
    if (a->json) print_json(out, *a, sizes, space, g);
    else print_text(out, *a, sizes, space, g, cost);
    return 0;
  };
}
const registration reg{{"dispatch",
                        "dispatch --max-num-seqs N --max-num-batched-tokens T [--spec-tokens K] [--device sm90|sm100] "
                        "[--specialize-lora] [--mode MODE] [--batch REQUESTS,TOKENS,MAX_QUERY,PREFILL] [--json]",
                        "The graphs of vLLM V1's dispatch key (uniform decode, mixed, LoRA) per cudagraph mode, their "
                        "memory, and how one batch runs.",
                        define}};
}  // namespace
}  // namespace rungs::plan
