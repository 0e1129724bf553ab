// Ladder basics: a compile-time ladder, the same ladder read at run time, a lookup with its
// padding, the tally over a short trace, and Gaudi's decode buckets.
#include <rungs/ladder.hpp>

#include <cstdio>
#include <iostream>
#include <vector>

// Compile time: the captured batch sizes are a type; lookups are constant expressions.
using decode_graphs = rungs::static_ladder<rungs::CaptureSizes::vllm(512)>;
static_assert(decode_graphs::size() == 67);
static_assert(decode_graphs::lookup(33).rung == 40);

int main() {
  // Run time: the same policy (here it would come from a configuration file).
  const rungs::ladder graphs{rungs::CaptureSizes::vllm(512)};
  const rungs::rung_lookup l = graphs.lookup(33);
  std::cout << "a batch of 33 runs at " << l << "\n";  // 40 (padding 7, 17.5%)

  // A Gaudi prompt ladder: linear with ramp-up, min and max always present.
  const rungs::ladder prompt{rungs::Linear{.min = 3, .step = 32, .max = 100}};
  std::cout << "linear (3, 32, 100):";
  for (rungs::rung_t r : prompt.rungs()) std::cout << " " << r;
  std::cout << "\n";

  // Padding over a trace; 600 is above the top rung and runs eagerly.
  const std::vector<rungs::rung_t> trace{33, 40, 1, 3, 600, 250};
  const rungs::padding_tally t = rungs::tally_padding(graphs, trace);
  std::printf("trace: %lld batches, %lld eager, %lld padded rows (%.1f%% of graph rows)\n",
              static_cast<long long>(t.batches), static_cast<long long>(t.eager),
              static_cast<long long>(t.padding), 100.0 * t.wasted_fraction());

  // Gaudi's exponential decode buckets for 4 sequences and 5777 KV blocks.
  rungs::gaudi::serving_config serving;
  serving.max_num_seqs = 4;
  serving.max_model_len = 1024;
  serving.num_blocks = 5777;
  const auto config = rungs::gaudi::default_bucket_config(rungs::gaudi::strategy::exponential, serving);
  const auto plan = rungs::gaudi::exponential_buckets(config, serving);
  const auto hit = plan.decode.lookup({3, 1, 412});
  std::cout << plan.decode.size() << " decode buckets; 3 sequences at 412 blocks run as ";
  rungs::print_bucket<3>(std::cout, hit.chosen) << "\n";

  return l.rung == 40 && t.eager == 1 && hit.chosen == rungs::bucket<3>{4, 1, 512} ? 0 : 1;
}
