// rungs' dispatch_buckets replayed against vLLM's recorded CUDA-graph dispatch
// (tests/engine/data/vllm_dispatch_replay.csv, recorded from vLLM 0.33.0's own Python code:
// CudaGraphManager._init_candidates and dispatch, the batch classified as its GPUModelRunner
// does; the header names the commit and the script, which lives outside this repository).
// For every mode (none, piecewise, full, full_decode_only, full_and_piecewise), five
// scheduler configurations and a grid of batches (requests, tokens, longest query, whether a
// prefill is present), the capture sizes, the runtime mode and the padded shape must equal
// vLLM's. vLLM leaves a PIECEWISE graph's request count open (no request padding: any count
// up to its tokens and max_num_seqs runs on it); rungs names that bound, min(tokens,
// max_num_seqs), so a PIECEWISE row compares rungs' rows with it.
#include <rungs/engine/dispatch_buckets.hpp>
#include <rungs/ladder/vllm_capture_sizes.hpp>

#include <catch2/catch.hpp>
#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace rungs::engine;

namespace {
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream s(line);
  for (std::string x; std::getline(s, x, ',');) f.push_back(x);
  if (!line.empty() && line.back() == ',') f.emplace_back();
  return f;
}
}  // namespace

TEST_CASE("vllm dispatch replay: mode and padded shape equal vLLM's for every mode and batch") {
  std::ifstream in(RUNGS_VLLM_DISPATCH_REPLAY);
  REQUIRE(in.good());
  std::optional<dispatch_buckets> space;
  std::int64_t seqs = 0;
  int configs = 0, batches = 0;
  std::string where;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = fields(line);
    if (f[0] == "config") {
      seqs = std::stoll(f[1]);
      const rungs::VllmCaptureSizes p{.max_num_seqs = seqs, .max_num_batched_tokens = std::stoll(f[2]),
                                      .spec_tokens = std::stoll(f[3])};
      const std::optional<cudagraph_mode> mode = parse_cudagraph_mode(f[4]);
      REQUIRE(mode);
      const rungs::ladder sizes{p};
      where = line.substr(0, line.find(',', line.find(f[4])));
      INFO(where);
      // vLLM computes no sizes when no graph is captured.
      if (*mode != cudagraph_mode::none) {
        std::vector<std::int64_t> ours, theirs;
        for (const rungs::rung_t r : sizes.rungs()) ours.push_back(r);
        std::stringstream s(f[5]);
        for (std::int64_t x; s >> x;) theirs.push_back(x);
        CHECK(ours == theirs);
      }
      space.emplace(sizes, dispatch_options{.spec_tokens = p.spec_tokens, .max_num_seqs = seqs, .mode = *mode});
      ++configs;
    } else if (f[0] == "batch") {
      REQUIRE(space);
      const batch_key k{.seqs = std::stoll(f[1]), .tokens = std::stoll(f[2]), .max_query = std::stoll(f[3]),
                        .has_prefill = f[4] == "1"};
      const dispatch_decision d = space->dispatch(k);
      const std::int64_t padded_tokens = std::stoll(f[7]);
      const std::int64_t padded_requests = f[6].empty() ? std::min(padded_tokens, seqs) : std::stoll(f[6]);
      INFO(where << " batch " << line);
      CHECK(std::string(to_string(d.mode)) == f[5]);
      CHECK(d.tokens == padded_tokens);
      CHECK(d.seqs == padded_requests);
      ++batches;
    }
  }
  CHECK(configs == 25);
  CHECK(batches > 0);
}
