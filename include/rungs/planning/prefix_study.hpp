// prefix_study: how much of a trace's prompts a prefix cache of a given size finds, replayed
// through rungs' prefix-caching allocator (kv::prefix_caching_allocator, LRU eviction).
//
// The replay (the semantics of Mooncake's FAST'25 cache study and of vLLM's block manager):
// the prompts run in file order, one request at a time. A request looks its full blocks up in
// order and stops at the first miss; it then holds all its blocks (the missed ones are
// allocated, evicting the least recently used cached blocks, and registered); when it ends,
// its blocks become evictable, its last block evicted first (kv::paged_allocator::free
// releases tail first). Hit rate = hit blocks / looked-up blocks.
//
// Prompts: a request's tokens come from serving::trace_prompt (hash_ids, or the request's own
// content); a conversation's turn is its history (earlier turns' prompts and outputs) plus
// its new tokens. A request with hash_ids is padded to whole 512-token id blocks: its last id
// names the last, partial block, and Mooncake's traces count that block as one (so at block
// size 512 the looked-up blocks are exactly the hash_ids). Hit tokens are capped at each
// prompt's real length.
//
// Two details of the allocator, and how the replay meets them: create() looks up at most the
// prompt's length minus one token (the last prompt token must be computed for the first
// output), so the replay hands it the prompt plus one token of the request's own and appends
// only the prompt: every full block of the prompt is looked up, and the extra token costs one
// block in the admission check only, i.e. a request must fit in the cache with one block to
// spare. A request that does not (more blocks than the cache) is not replayed and is counted
// in `too_large`.
#pragma once

#include <rungs/kv/paged_allocator.hpp>
#include <rungs/serving/workload.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace rungs::planning {

struct prefix_cache_point {
  std::int64_t capacity_tokens = 0;
  std::int32_t block_size = 0;
  std::int64_t looked_up_blocks = 0, hit_blocks = 0;
  std::int64_t prompt_tokens = 0, hit_tokens = 0;  ///< of the replayed requests
  std::int64_t requests = 0;                       ///< replayed
  std::int64_t too_large = 0;                      ///< requests with more blocks than the cache (not replayed)
  std::int64_t evictions = 0;                      ///< cached blocks reused for other content
  double hit_rate() const {
    return looked_up_blocks ? static_cast<double>(hit_blocks) / static_cast<double>(looked_up_blocks) : 0.0;
  }
};

/// The block size a study uses by default: Mooncake's 512 for a trace with hash_ids (one
/// cache block per id), rungs' 16 otherwise.
inline std::int32_t default_study_block_size(const std::vector<serving::trace_request>& trace) {
  for (const serving::trace_request& r : trace)
    if (!r.hash_ids.empty()) return serving::hash_block_tokens;
  return 16;
}

/// Replays `trace` once per capacity (tokens; the cache holds capacity / block_size blocks).
/// Throws std::invalid_argument for a capacity under one block or a block size that is not
/// positive.
inline std::vector<prefix_cache_point> prefix_cache_study(const std::vector<serving::trace_request>& trace,
                                                          std::span<const std::int64_t> capacities,
                                                          std::int32_t block_size) {
  using serving::hash_block_tokens;
  if (block_size < 1) throw std::invalid_argument("prefix cache study: block size = " + std::to_string(block_size) + " must be positive");
  if (capacities.empty()) throw std::invalid_argument("prefix cache study: no capacity given");

  // Each request's prompt length as replayed (history, id padding) and the blocks all the
  // requests write: a cache larger than that behaves as that (nothing is ever evicted), so
  // the pool is sized min(capacity, that) and any capacity can be studied in bounded memory.
  std::vector<std::int64_t> replayed(trace.size()), real(trace.size());
  std::int64_t longest = 0, written_blocks = 0;
  {
    std::unordered_map<serving::session_id, std::int64_t> history;
    for (std::size_t i = 0; i < trace.size(); ++i) {
      const serving::trace_request& r = trace[i];
      std::int64_t own = r.prompt_tokens;
      if (!r.hash_ids.empty()) own = (own + hash_block_tokens - 1) / hash_block_tokens * hash_block_tokens;
      const std::int64_t before = r.conversation != 0 ? history[r.conversation] : 0;
      replayed[i] = before + own;
      real[i] = before + r.prompt_tokens;
      if (r.conversation != 0) history[r.conversation] = real[i] + r.output_tokens;
      longest = std::max(longest, replayed[i]);
      written_blocks += replayed[i] / block_size + 1;
    }
  }
  constexpr std::int64_t max_tokens = std::numeric_limits<std::int32_t>::max() - 1;
  if (longest > max_tokens)
    throw std::invalid_argument("prefix cache study: a prompt of " + std::to_string(longest) +
                                " tokens with its history is longer than " + std::to_string(max_tokens));

  std::vector<prefix_cache_point> points;
  std::vector<kv::prefix_caching_allocator<>> caches;
  caches.reserve(capacities.size());
  for (const std::int64_t capacity : capacities) {
    if (capacity < block_size)
      throw std::invalid_argument("prefix cache study: capacity = " + std::to_string(capacity) +
                                  " tokens holds no block of " + std::to_string(block_size));
    const std::int64_t blocks = std::min(capacity / block_size, written_blocks + 1);
    if (blocks > std::numeric_limits<std::int32_t>::max() - 64)
      throw std::invalid_argument("prefix cache study: capacity = " + std::to_string(capacity) + " tokens is " +
                                  std::to_string(blocks) + " blocks; at most 2^31 - 65");
    caches.emplace_back(kv::allocator_config{.num_blocks = static_cast<std::int32_t>(blocks), .block_size = block_size,
                                             .max_sequences = 1,
                                             .max_model_len = static_cast<std::int32_t>(longest + 1)});
    points.push_back({.capacity_tokens = capacity, .block_size = block_size});
  }

  std::unordered_map<serving::session_id, std::vector<kv::token_id>> conversations;
  std::vector<kv::token_id> tokens;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const serving::trace_request& r = trace[i];
    std::vector<kv::token_id>* history = r.conversation != 0 ? &conversations[r.conversation] : nullptr;
    if (history)
      tokens = *history;
    else
      tokens.clear();
    const std::size_t start = tokens.size();
    tokens.resize(static_cast<std::size_t>(replayed[i]) + 1);
    serving::trace_prompt(r, i, std::span(tokens).subspan(start, tokens.size() - 1 - start));
    // The extra token: the request's own, one past its prompt.
    tokens.back() = serving::synthetic_token(~std::uint64_t{0} - i, ~std::uint64_t{0}, 0);
    const std::span<const kv::token_id> prompt = std::span<const kv::token_id>(tokens).first(tokens.size() - 1);
    const std::int64_t looked_up = static_cast<std::int64_t>(prompt.size()) / block_size;

    for (std::size_t c = 0; c < caches.size(); ++c) {
      kv::prefix_caching_allocator<>& cache = caches[c];
      prefix_cache_point& point = points[c];
      const kv::result<kv::sequence_start> s = cache.create(tokens);
      if (!s) {
        if (s.error() != kv::errc::out_of_blocks)
          throw std::logic_error("prefix cache study: create failed: " + std::string(kv::to_string(s.error())));
        ++point.too_large;
        continue;
      }
      const std::int32_t hit = s->cached_tokens;
      // Its prefill runs (commit: the KV is written, so its blocks stay hits), then it leaves.
      if (cache.append(s->id, prompt.subspan(static_cast<std::size_t>(hit))) != kv::errc::ok ||
          cache.commit(s->id, static_cast<std::int32_t>(prompt.size())) != kv::errc::ok ||
          cache.free(s->id) != kv::errc::ok)
        throw std::logic_error("prefix cache study: a request that was admitted could not run");
      ++point.requests;
      point.looked_up_blocks += looked_up;
      point.hit_blocks += hit / block_size;
      point.prompt_tokens += real[i];
      point.hit_tokens += std::min<std::int64_t>(hit, real[i]);
    }

    if (history) {  // the turn's prompt and its output join the conversation
      history->assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(start));
      for (std::int64_t p = start; p < real[i]; ++p) history->push_back(tokens[static_cast<std::size_t>(p)]);
      for (std::int32_t p = 0; p < r.output_tokens; ++p)
        history->push_back(serving::synthetic_token(r.conversation, static_cast<std::uint64_t>(r.turn) << 32, static_cast<std::uint64_t>(p)));
    }
  }
  for (std::size_t c = 0; c < caches.size(); ++c) points[c].evictions = static_cast<std::int64_t>(caches[c].metrics().evictions);
  return points;
}

}  // namespace rungs::planning
