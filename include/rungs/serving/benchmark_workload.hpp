// benchmark_workload: the open-loop workloads of vLLM's benchmark_serving.py and SGLang's
// bench_serving.py, generated without their datasets, so that a published run can be replayed
// (planning/fidelity.hpp).
//
// Arrivals: request 0 at time 0, then exponential gaps at `rate` requests a second (both
// benchmarks draw gaps from a gamma distribution of shape 1, a Poisson process); rate 0 is
// their "inf": every request at time 0.
//
// Lengths:
//   - fixed: every prompt `input_mean` tokens and every output `output_mean` (the random
//     dataset with a range ratio that fixes the lengths);
//   - sharegpt: the ShareGPT conversations both benchmarks sample, whose text is not needed:
//     prompt and output lengths drawn independently from log-normal distributions (sigma
//     `sigma`), kept only when they pass the benchmarks' ShareGPT filter (both at least 4
//     tokens, the prompt at most 1024, prompt + output at most 2048; a pair that fails is
//     drawn again, as the benchmarks skip such conversations), with their locations set so the
//     kept pairs' means are the published ones (a run's "Total input tokens" / requests).
// Random numbers come from std::mt19937_64 (its output is fixed by the standard) and are turned
// into doubles and normals here, so a workload is the same on every standard library.
#pragma once

#include <rungs/serving/workload.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rungs::serving {

enum class benchmark_lengths { fixed, sharegpt };

struct benchmark_workload {
  std::int64_t requests = 1000;
  double rate = 0;  ///< requests per second (a Poisson process); 0: all at time 0
  benchmark_lengths lengths = benchmark_lengths::sharegpt;
  double input_mean = 224;   ///< tokens per prompt (fixed: exact, rounded)
  double output_mean = 189;  ///< tokens per output
  double sigma = 1.0;        ///< sharegpt: the log-normals' shape
  std::uint64_t seed = 1;

  /// The benchmarks' ShareGPT filter.
  static constexpr std::int32_t min_tokens = 4, max_prompt = 1024, max_total = 2048;

  void validate() const {
    auto fail = [](const std::string& what) { throw std::invalid_argument("benchmark workload: " + what); };
    if (requests < 1 || requests > 10'000'000) fail("requests = " + std::to_string(requests) + " must be in [1, 10^7]");
    if (!(rate >= 0 && rate <= 1e6)) fail("rate = " + std::to_string(rate) + " must be in [0, 10^6] requests/s");
    if (lengths == benchmark_lengths::fixed) {
      if (!(input_mean >= 1 && input_mean <= 1e9) || !(output_mean >= 1 && output_mean <= 1e9))
        fail("fixed lengths " + std::to_string(input_mean) + " and " + std::to_string(output_mean) + " must be in [1, 10^9]");
      return;
    }
    // sharegpt: the means must be reachable under the filter.
    if (!(input_mean >= min_tokens && input_mean <= max_prompt / 2))
      fail("sharegpt input_mean = " + std::to_string(input_mean) + " must be in [4, 512] (prompts are at most 1024 tokens)");
    if (!(output_mean >= min_tokens && output_mean <= (max_total - max_prompt) / 2))
      fail("sharegpt output_mean = " + std::to_string(output_mean) + " must be in [4, 512]");
    if (!(sigma > 0 && sigma <= 3)) fail("sigma = " + std::to_string(sigma) + " must be in (0, 3]");
  }
};

namespace detail {
/// [0, 1) from the top 53 bits.
inline double unit_uniform(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }
/// A standard normal (Box-Muller, one of the pair).
inline double standard_normal(std::mt19937_64& g) {
  const double u1 = unit_uniform(g), u2 = unit_uniform(g);
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(6.283185307179586 * u2);
}

/// `n` (prompt, output) pairs from log-normals located at (mu_in, mu_out), filtered.
inline std::vector<std::pair<std::int32_t, std::int32_t>> sharegpt_pairs(std::int64_t n, double mu_in, double mu_out,
                                                                         double sigma, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  auto tokens = [&](double mu) {
    const double x = std::exp(mu + sigma * standard_normal(g));
    return x > 1e6 ? std::int32_t{1'000'000} : static_cast<std::int32_t>(std::llround(x));
  };
  std::vector<std::pair<std::int32_t, std::int32_t>> pairs;
  pairs.reserve(static_cast<std::size_t>(n));
  while (static_cast<std::int64_t>(pairs.size()) < n) {
    const std::int32_t in = tokens(mu_in), out = tokens(mu_out);
    if (in < benchmark_workload::min_tokens || out < benchmark_workload::min_tokens || in > benchmark_workload::max_prompt ||
        in + out > benchmark_workload::max_total)
      continue;
    pairs.emplace_back(in, out);
  }
  return pairs;
}
}  // namespace detail

/// The workload's requests, standalone, in arrival order.
inline std::vector<trace_request> generate_benchmark(const benchmark_workload& w) {
  w.validate();
  std::vector<std::pair<std::int32_t, std::int32_t>> pairs;
  if (w.lengths == benchmark_lengths::fixed) {
    pairs.assign(static_cast<std::size_t>(w.requests), {static_cast<std::int32_t>(std::llround(w.input_mean)),
                                                        static_cast<std::int32_t>(std::llround(w.output_mean))});
  } else {
    // Locations start at the unfiltered log-normal's (mean = exp(mu + sigma^2 / 2)) and move
    // by the log of what the filter left off, the same draws each time, until both kept means
    // are within 0.1% of the targets (the filter cuts the tails, so the means rise with mu).
    double mu_in = std::log(w.input_mean) - w.sigma * w.sigma / 2, mu_out = std::log(w.output_mean) - w.sigma * w.sigma / 2;
    for (int round = 0;; ++round) {
      pairs = detail::sharegpt_pairs(w.requests, mu_in, mu_out, w.sigma, w.seed);
      double in = 0, out = 0;
      for (const auto& [i, o] : pairs) {
        in += i;
        out += o;
      }
      in /= static_cast<double>(pairs.size());
      out /= static_cast<double>(pairs.size());
      if ((std::fabs(in / w.input_mean - 1) < 1e-3 && std::fabs(out / w.output_mean - 1) < 1e-3) || round == 50) break;
      mu_in += std::log(w.input_mean / in);
      mu_out += std::log(w.output_mean / out);
    }
  }
  std::mt19937_64 gaps(w.seed ^ 0x9e3779b97f4a7c15ULL);
  std::vector<trace_request> rows;
  rows.reserve(pairs.size());
  double t = 0;
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    if (k > 0 && w.rate > 0) t += -std::log1p(-detail::unit_uniform(gaps)) / w.rate;
    rows.push_back({.arrival = t, .prompt_tokens = pairs[k].first, .output_tokens = pairs[k].second});
  }
  return rows;
}

}  // namespace rungs::serving
