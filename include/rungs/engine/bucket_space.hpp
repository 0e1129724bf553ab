// What an engine needs from a ladder or bucket grid: a fixed list of buckets, each with its
// coordinates and the shape its graph is captured at, and a round-up lookup from a live
// batch to a bucket (or to "eager" when no bucket covers it).
//
// Ladders and grids (rungs/ladder/) know nothing about graphs; the adapters in
// rungs/engine/ladder_buckets.hpp present them through this concept. The engine never
// enumerates sizes itself: every capture slot is one bucket of the space.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>

namespace rungs::engine {

/// Gaudi keeps prompt (prefill) and decode buckets apart, with their own capture orders and
/// their own share of graph memory. A 1-D CUDA-graph ladder is a single (decode) phase.
enum class phase : std::uint8_t { prompt = 0, decode = 1 };

constexpr std::string_view to_string(phase p) { return p == phase::prompt ? "prompt" : "decode"; }

/// The shape a bucket's graph is captured at, in the engine's flattened (ragged) batch layout:
/// up to `seqs` sequences, up to `tokens` new tokens in all, sequences up to `context` tokens
/// long (this step's tokens included). context == 0 means "the engine's max_model_len".
struct graph_shape {
  std::int64_t seqs = 0;
  std::int64_t tokens = 0;
  std::int64_t context = 0;
  /// Uniform query length: every real sequence of a batch this graph serves has exactly
  /// `query` new tokens (padded sequences none), as in vLLM's uniform-decode graphs (1 + the
  /// speculative tokens). 0: any number (prefill and mixed batches). A forward may specialise
  /// on it, e.g. attention through the decode kernel when it is 1.
  std::int64_t query = 0;
  friend constexpr bool operator==(const graph_shape&, const graph_shape&) = default;
};

/// One bucket: its coordinates in the ladder or grid (1 to 3 of them: `[tokens]`,
/// `[bs, seq]`, `[bs, query, blocks]`), its phase, and its graph shape.
struct bucket {
  std::array<std::int64_t, 3> dims{};
  std::uint8_t rank = 1;
  phase ph = phase::decode;
  graph_shape shape{};

  friend constexpr bool operator==(const bucket&, const bucket&) = default;

  /// Batch size: the first coordinate.
  constexpr std::int64_t batch() const { return dims[0]; }
  /// Sequence length (or query length): the second coordinate, 1 for a 1-D ladder.
  constexpr std::int64_t seq() const { return rank >= 2 ? dims[1] : 1; }
  /// Tokens as Gaudi counts them for capture order: bs * seq.
  constexpr std::int64_t tokens() const { return batch() * seq(); }
  /// What graph memory scales with, as Gaudi estimates it: bs * seq for prompt graphs,
  /// bs for decode graphs (one new token per sequence).
  constexpr std::int64_t cost_units() const { return ph == phase::prompt ? tokens() : batch(); }
};

inline std::ostream& operator<<(std::ostream& os, const bucket& b) {
  if (b.rank == 1) return os << b.dims[0];
  os << "(";
  for (int i = 0; i < b.rank; ++i) os << (i ? ", " : "") << b.dims[static_cast<std::size_t>(i)];
  return os << ")";
}

/// What the lookup sees of a live batch. Each field is the maximum over the ranks when a
/// rank_sync agrees on it, so every rank picks the same bucket.
struct batch_key {
  phase ph = phase::decode;
  std::int64_t seqs = 0;         // sequences in the batch
  std::int64_t tokens = 0;       // new tokens over all sequences
  std::int64_t max_query = 0;    // most new tokens of one sequence
  std::int64_t max_context = 0;  // longest sequence, this step's tokens included
  std::int64_t max_prefix = 0;   // most tokens of one sequence already in the KV cache
  std::int64_t blocks = 0;       // KV blocks the batch reads, over all sequences
  bool has_lora = false;         // some sequence runs with a LoRA adapter
  bool has_prefill = false;      // some sequence computes prompt tokens (never a uniform decode)
  friend constexpr bool operator==(const batch_key&, const batch_key&) = default;
};

/// A bucket space. `find` returns the index of the bucket a batch pads up to, or nullopt when
/// none covers it (the step runs eagerly: a normal path, not an error). Optional: `phase
/// phase_of(const batch_key&) const` in a space keyed on the batch itself (dispatch_buckets),
/// which then picks the phase that serves a batch instead of the caller; and beside it `bool
/// keyed_on_batch() const`, whether that holds for the space chosen at run time (any_buckets).
template <class S>
concept bucket_space = requires(const S& s, std::size_t i, const batch_key& k) {
  { s.size() } -> std::convertible_to<std::size_t>;
  { s.at(i) } -> std::convertible_to<bucket>;
  { s.find(k) } -> std::same_as<std::optional<std::size_t>>;
};

/// A bucket space whose size is a constant expression (`static constexpr std::size_t
/// static_size`): the engine then keeps its graph slots in a std::array.
template <class S>
concept static_bucket_space = bucket_space<S> && requires {
  { std::integral_constant<std::size_t, S::static_size>{} };
};

}  // namespace rungs::engine
