// Gaudi's prompt and decode buckets, built from per-dimension ladders and filters, and
// printed the way vLLM on Gaudi logs them.
//
//   linear strategy       2-D [bs, seq]: prompt bs x seq, decode bs x seq (context tokens)
//   exponential strategy  3-D [bs, query, num_blocks]:
//       prompt  bs x query x context blocks, where with prefix caching the context takes
//               every value 0 .. (max_model_len - query) / block_size (else only 0);
//       decode  bs x {1} x KV blocks
//   file strategy         3-D buckets from a bucket file; query 1 means decode
// Prompt buckets are kept only if bs * (query + ctx * block_size) <= max_num_batched_tokens
// (when a budget is set) and query <= max_model_len; the omitted ones are counted. Buckets
// are listed sorted, as the logs show them. The kept buckets of each phase are counted
// before any is generated and must not exceed max_grid_buckets (with prefix caching and
// block size 1, a long max_model_len would otherwise ask for one bucket per context length). gaudi-bucketing.md gives the configurations
// that reproduce the documents' 24/48 (linear) and 36/42 (exponential) listings.
#pragma once

#include <rungs/ladder/bucket_file.hpp>
#include <rungs/ladder/exponential.hpp>
#include <rungs/ladder/gaudi_config.hpp>
#include <rungs/ladder/grid.hpp>
#include <rungs/ladder/ladder.hpp>
#include <rungs/ladder/linear.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rungs::gaudi {

/// One strategy's buckets: 2-D for linear, 3-D for exponential and file.
template <std::size_t D>
struct bucket_plan {
  bucket_config config;
  serving_config serving;
  bucket_grid<D> prompt;
  bucket_grid<D> decode;
  std::size_t prompt_omitted = 0;  ///< prompt buckets dropped by the budget / model-length filter
};

namespace detail {

/// The ladder of one dimension; a bad range is reported with the variables that set it.
inline ladder dimension_ladder(strategy s, const bucket_range& r, std::string_view phase, std::string_view dim) {
  try {
    if (s == strategy::linear) return ladder{Linear{r.min, r.step, r.max}};
    return ladder{Exponential{r.min, r.step, r.max, r.limit}};
  } catch (const ladder_error& e) {
    throw ladder_error(std::string(phase) + " " + std::string(dim) + " buckets (" +
                       env_name(phase, dim, "*") + "): " + e.what());
  }
}

/// The four per-dimension ladders of a strategy.
struct dimension_ladders {
  ladder prompt_bs, prompt_seq, decode_bs, decode_len;
};

inline dimension_ladders ladders_of(strategy s, const bucket_config& c) {
  return {dimension_ladder(s, c.prompt_bs, "prompt", "bs"), dimension_ladder(s, c.prompt_seq, "prompt", "seq"),
          dimension_ladder(s, c.decode_bs, "decode", "bs"),
          dimension_ladder(s, c.decode_seq, "decode", s == strategy::linear ? "seq" : "block")};
}

/// How many rungs of `sorted` are <= `limit`.
inline std::uint64_t rungs_up_to(std::span<const rung_t> sorted, rung_t limit) {
  return static_cast<std::uint64_t>(std::upper_bound(sorted.begin(), sorted.end(), limit) - sorted.begin());
}

/// Exponential prompt buckets: for each (bs, query), the context blocks 0 .. max_ctx, of which
/// a prefix is kept (tokens grow with the context). Returns max_ctx and the kept count.
struct context_run {
  rung_t max_ctx = 0;
  rung_t kept = 0;
};
inline context_run context_blocks(const serving_config& s, rung_t b, rung_t q) {
  const rung_t block = s.block_size, len = s.max_model_len;
  // With prefix caching a prompt of q new tokens may follow up to the rest of the model
  // length in cached blocks.
  const rung_t max_ctx = s.prefix_caching && q <= len ? (len - q) / block : 0;
  if (q > len) return {max_ctx, 0};
  if (s.max_num_batched_tokens == 0) return {max_ctx, max_ctx + 1};
  // b * (q + ctx * block) <= budget: no product here exceeds 2^62 (each factor < 2^31 and
  // q + ctx * block <= max_model_len).
  if (b * q > s.max_num_batched_tokens) return {max_ctx, 0};
  const rung_t fits = (s.max_num_batched_tokens / b - q) / block;
  return {max_ctx, (fits < max_ctx ? fits : max_ctx) + 1};
}

template <std::size_t D>
void sort_unique(std::vector<bucket<D>>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace detail

inline bucket_plan<2> linear_buckets(const bucket_config& config, const serving_config& serving) {
  serving.validate();
  const detail::dimension_ladders l = detail::ladders_of(strategy::linear, config);
  bucket_plan<2> plan{config, serving, {}, {}, 0};
  // Counted first: each ladder may have 65536 rungs, their product 2^32 buckets. The seq
  // rungs kept for a batch size b are those <= max_model_len with b * seq within the budget.
  auto kept_seqs = [&](rung_t b) {
    const rung_t budget = serving.max_num_batched_tokens == 0 ? max_rung : serving.max_num_batched_tokens / b;
    return detail::rungs_up_to(l.prompt_seq.rungs(), std::min(budget, serving.max_model_len));
  };
  std::uint64_t kept = 0;
  for (rung_t b : l.prompt_bs.rungs()) kept += kept_seqs(b);
  rungs::detail::require_grid_size("gaudi linear buckets", "prompt buckets", kept);
  rungs::detail::require_grid_size("gaudi linear buckets", "decode buckets",
                                   std::uint64_t{l.decode_bs.size()} * l.decode_len.size());
  std::vector<bucket<2>> prompt, decode;
  prompt.reserve(kept);
  for (rung_t b : l.prompt_bs.rungs())
    for (std::uint64_t i = 0, n = kept_seqs(b); i < n; ++i) prompt.push_back({b, l.prompt_seq[i]});
  plan.prompt_omitted = l.prompt_bs.size() * l.prompt_seq.size() - prompt.size();
  for (rung_t b : l.decode_bs.rungs())
    for (rung_t s : l.decode_len.rungs()) decode.push_back({b, s});
  plan.prompt = bucket_grid<2>(std::move(prompt));
  plan.decode = bucket_grid<2>(std::move(decode));
  return plan;
}

inline bucket_plan<3> exponential_buckets(const bucket_config& config, const serving_config& serving) {
  serving.validate();
  const detail::dimension_ladders l = detail::ladders_of(strategy::exponential, config);
  const rung_t block_size = serving.block_size;
  bucket_plan<3> plan{config, serving, {}, {}, 0};
  std::uint64_t kept = 0;  // counted first: one bucket per context length can be billions
  for (rung_t b : l.prompt_bs.rungs())
    for (rung_t q : l.prompt_seq.rungs()) kept += static_cast<std::uint64_t>(detail::context_blocks(serving, b, q).kept);
  rungs::detail::require_grid_size("gaudi exponential buckets", "prompt buckets", kept);
  rungs::detail::require_grid_size("gaudi exponential buckets", "decode buckets",
                                   std::uint64_t{l.decode_bs.size()} * l.decode_len.size());
  std::vector<bucket<3>> prompt, decode;
  prompt.reserve(kept);
  for (rung_t b : l.prompt_bs.rungs())
    for (rung_t q : l.prompt_seq.rungs()) {
      const detail::context_run run = detail::context_blocks(serving, b, q);
      for (rung_t ctx = 0; ctx < run.kept; ++ctx) prompt.push_back({b, q, ctx});
      plan.prompt_omitted += static_cast<std::size_t>(run.max_ctx + 1 - run.kept);
    }
  for (rung_t b : l.decode_bs.rungs())
    for (rung_t n : l.decode_len.rungs()) decode.push_back({b, 1, n});
  detail::sort_unique(prompt);  // already in order; kept sorted whatever the ladders hold
  detail::sort_unique(decode);
  plan.prompt = bucket_grid<3>(std::move(prompt), block_size);
  plan.decode = bucket_grid<3>(std::move(decode), block_size);
  return plan;
}

/// Buckets from config.file; a bucket whose query is 1 is a decode bucket (as upstream).
inline bucket_plan<3> file_buckets(const bucket_config& config, const serving_config& serving,
                                   const bucket_file_options& options = {}) {
  serving.validate();
  std::vector<bucket<3>> prompt, decode;
  for (const bucket<3>& b : read_bucket_file<3>(config.file, options)) (b[1] == 1 ? decode : prompt).push_back(b);
  detail::sort_unique(prompt);
  detail::sort_unique(decode);
  bucket_plan<3> plan{config, serving, {}, {}, 0};
  plan.prompt = bucket_grid<3>(std::move(prompt), serving.block_size);
  plan.decode = bucket_grid<3>(std::move(decode), serving.block_size);
  return plan;
}

/// Python's list-of-tuples repr: "[(1, 128), (1, 256)]".
template <std::size_t D>
std::ostream& print_bucket_list(std::ostream& os, std::span<const bucket<D>> buckets) {
  os << "[";
  for (std::size_t i = 0; i < buckets.size(); ++i) print_bucket<D>(os << (i ? ", " : ""), buckets[i]);
  return os << "]";
}

/// The startup log lines, without vLLM's "INFO <date> <file>:<line>]" prefix:
///   Prompt bucket config (min, step, max_warmup) bs:[1, 32, 4], seq:[128, 128, 1024]
///   Generated 24 prompt buckets [bs, seq]: [(1, 128), ...]
/// and, for the 3-D strategies, "Generated 36 prompt buckets [bs, query, num_blocks]: [...]".
/// The dimension names follow the contract; the linear document's own log omits
/// "[bs, seq]", the exponential one prints its 3-D names.
template <std::size_t D>
void write_log(std::ostream& os, const bucket_plan<D>& plan) {
  const bucket_config& c = plan.config;
  const bool linear = c.strategy == strategy::linear;
  auto range = [&](const bucket_range& r) -> std::ostream& {
    os << "[" << r.min << ", " << r.step << ", " << r.max;
    if (!linear) os << ", " << r.limit;
    return os << "]";
  };
  auto generated = [&](std::string_view phase, const bucket_grid<D>& g) {
    os << "Generated " << g.size() << " " << phase << " buckets" << (D == 3 ? " [bs, query, num_blocks]" : " [bs, seq]") << ": ";
    print_bucket_list<D>(os, g.buckets()) << "\n";
  };
  const std::string_view columns = linear ? "(min, step, max_warmup)" : "(min, step, max_warmup, limit)";
  if (c.strategy == strategy::file) {
    os << "Reading buckets from file: " << c.file << "\n";
  } else {
    os << "Prompt bucket config " << columns << " bs:";
    range(c.prompt_bs) << ", seq:";
    range(c.prompt_seq) << "\n";
  }
  generated("prompt", plan.prompt);
  if (plan.prompt_omitted > 0) {
    os << "Omitted " << plan.prompt_omitted << " prompt buckets above the token budget (max_num_batched_tokens=";
    if (plan.serving.max_num_batched_tokens > 0) os << plan.serving.max_num_batched_tokens;
    else os << "unset";
    os << ") or max_model_len (" << plan.serving.max_model_len << ")\n";
  }
  if (c.strategy != strategy::file) {
    os << "Decode bucket config " << columns << " bs:";
    range(c.decode_bs) << (linear ? ", seq:" : ", block:");
    range(c.decode_seq) << "\n";
  }
  generated("decode", plan.decode);
}

/// {"prompt": [[1, 128], ...], "decode": [[1, 128], ...]} on one line.
template <std::size_t D>
void write_json(std::ostream& os, const bucket_plan<D>& plan) {
  auto list = [&](const bucket_grid<D>& g) {
    os << "[";
    for (std::size_t i = 0; i < g.size(); ++i) {
      os << (i ? ", " : "") << "[";
      for (std::size_t d = 0; d < D; ++d) os << (d ? ", " : "") << g[i][d];
      os << "]";
    }
    os << "]";
  };
  os << "{\"prompt\": ";
  list(plan.prompt);
  os << ", \"decode\": ";
  list(plan.decode);
  os << "}\n";
}

}  // namespace rungs::gaudi
