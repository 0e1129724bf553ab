// Multi-dimensional buckets: bucket_grid<2> for [batch, seq] and bucket_grid<3> for
// [batch, query_tokens, context_blocks] (Gaudi's prompt and decode buckets), and the
// lookup of a live batch.
//
// "Smallest covering bucket" means: among the buckets >= the request in every dimension,
// the one that processes the fewest padded tokens,
//   [bs]           -> bs
//   [bs, seq]      -> bs * seq
//   [bs, q, ctx]   -> bs * (q + ctx * block_size)   (the token budget formula)
// with ties going to the bucket listed first. Padding is counted in those tokens. A
// request no bucket covers is the eager fallback, reported, never an error (upstream
// sometimes invents a bucket on the fly or even picks a smaller one; see docs/ladders.md).
//
// Limits: a grid holds at most max_grid_buckets buckets (every generator counts before it
// expands), and a bucket's tokens must fit int64: each dimension is below 2^31, but the 3-D
// product reaches 2^93, so it is checked, never assumed.
#pragma once

#include <rungs/checked.hpp>
#include <rungs/ladder/rung.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace rungs {

template <std::size_t D>
using bucket = std::array<rung_t, D>;

/// Tokens a bucket (or a request of the same shape) processes, see the file comment; nullopt
/// when that number does not fit int64.
template <std::size_t D>
constexpr std::optional<std::int64_t> bucket_tokens(const bucket<D>& b, rung_t block_size = 1) noexcept {
  static_assert(D >= 1 && D <= 3, "rungs: buckets have 1, 2 or 3 dimensions");
  if constexpr (D == 1) {
    return b[0];
  } else if constexpr (D == 2) {
    return checked_mul(b[0], b[1]);
  } else {
    const std::optional<std::int64_t> context = checked_mul(b[2], block_size);
    const std::optional<std::int64_t> row = context ? checked_add(b[1], *context) : std::nullopt;
    return row ? checked_mul(b[0], *row) : std::nullopt;
  }
}

/// A bucket the way Python prints a tuple: "(1, 128, 0)".
template <std::size_t D>
std::string bucket_text(const bucket<D>& b) {
  std::string s = "(";
  for (std::size_t d = 0; d < D; ++d) s.append(d ? ", " : "").append(std::to_string(b[d]));
  return s.append(D == 1 ? ",)" : ")");
}

/// Writes bucket_text(b).
template <std::size_t D>
std::ostream& print_bucket(std::ostream& os, const bucket<D>& b) {
  return os << bucket_text<D>(b);
}

/// Where a request lands in a grid.
template <std::size_t D>
struct bucket_lookup {
  static constexpr std::int32_t eager_index = -1;

  bucket<D> request{};
  bucket<D> chosen{};  ///< the bucket it runs as; equal to request when eager
  std::int32_t index = eager_index;  ///< position in the grid's listing, or eager_index
  std::int64_t real_tokens = 0;
  std::int64_t padded_tokens = 0;  ///< tokens of `chosen`; equal to real_tokens when eager

  constexpr bool eager() const noexcept { return index < 0; }
  constexpr std::int64_t padding() const noexcept { return padded_tokens - real_tokens; }
  constexpr double padding_fraction() const noexcept {
    return padded_tokens > 0 ? static_cast<double>(padding()) / static_cast<double>(padded_tokens) : 0.0;
  }
  // Units for padding_tally: tokens.
  constexpr std::int64_t real() const noexcept { return real_tokens; }
  constexpr std::int64_t padded() const noexcept { return padded_tokens; }

  friend constexpr bool operator==(const bucket_lookup&, const bucket_lookup&) = default;
};

template <std::size_t D>
class bucket_grid {
  static_assert(D >= 1 && D <= 3, "rungs::bucket_grid: buckets have 1, 2 or 3 dimensions");

 public:
  /// An empty grid: every request runs eagerly.
  bucket_grid() = default;

  /// Keeps the buckets in the given order (their listing order, used for the lookup's
  /// index and to break ties). Every dimension must be positive, except the context
  /// blocks of a 3-D bucket, which may be 0 (a prompt without a cached prefix); at most
  /// max_grid_buckets buckets, each with tokens that fit int64.
  explicit bucket_grid(std::vector<bucket<D>> buckets, rung_t block_size = 1)
      : buckets_(std::move(buckets)), block_size_(block_size) {
    detail::require_positive("bucket grid", "block_size", block_size);
    detail::require_grid_size("bucket grid", "bucket count", buckets_.size());
    for (std::size_t i = 0; i < buckets_.size(); ++i)
      for (std::size_t d = 0; d < D; ++d) {
        const rung_t v = buckets_[i][d];
        const std::string name = "buckets[" + std::to_string(i) + "]";
        if (v < 0 || (v == 0 && !(D == 3 && d == 2)))
          detail::reject_element("bucket grid", name, d, v, D == 3 && d == 2 ? "must not be negative" : "must be positive");
        if (v > max_rung)
          detail::reject_element("bucket grid", name, d, v, "exceeds the largest supported rung 2147483647");
      }
    for (std::size_t i = 0; i < buckets_.size(); ++i)
      if (!bucket_tokens<D>(buckets_[i], block_size_)) too_many_tokens("buckets[" + std::to_string(i) + "]", buckets_[i]);
    // Sorted by (tokens, listing order): a lookup starts at the first bucket with at least
    // the request's tokens (nothing cheaper can cover it) and takes the first that covers.
    by_tokens_.resize(buckets_.size());
    std::iota(by_tokens_.begin(), by_tokens_.end(), std::int32_t{0});
    std::vector<std::int64_t> listed(buckets_.size());
    for (std::size_t i = 0; i < buckets_.size(); ++i) listed[i] = tokens(buckets_[i]);
    std::stable_sort(by_tokens_.begin(), by_tokens_.end(),
                     [&](std::int32_t a, std::int32_t b) { return listed[a] < listed[b]; });
    sorted_tokens_.resize(buckets_.size());
    for (std::size_t k = 0; k < by_tokens_.size(); ++k) sorted_tokens_[k] = listed[by_tokens_[k]];
  }

  std::span<const bucket<D>> buckets() const noexcept { return buckets_; }
  std::size_t size() const noexcept { return buckets_.size(); }
  bool empty() const noexcept { return buckets_.empty(); }
  const bucket<D>& operator[](std::size_t i) const noexcept { return buckets_[i]; }
  rung_t block_size() const noexcept { return block_size_; }

  /// bucket_tokens(b) with this grid's block size. Throws ladder_error when that does not
  /// fit int64 (never for the grid's own buckets: the constructor checked them).
  std::int64_t tokens(const bucket<D>& b) const {
    if (const std::optional<std::int64_t> t = bucket_tokens<D>(b, block_size_)) return *t;
    too_many_tokens("request", b);
  }

  /// The covering bucket with the fewest tokens, or the eager fallback. Throws ladder_error
  /// for a request whose tokens do not fit int64 (no bucket could cover it).
  bucket_lookup<D> lookup(const bucket<D>& request) const {
    const std::int64_t need = tokens(request);
    auto k = static_cast<std::size_t>(
        std::lower_bound(sorted_tokens_.begin(), sorted_tokens_.end(), need) - sorted_tokens_.begin());
    for (; k < by_tokens_.size(); ++k) {
      const bucket<D>& b = buckets_[by_tokens_[k]];
      bool covers = true;
      for (std::size_t d = 0; d < D; ++d) covers = covers && b[d] >= request[d];
      if (covers) return {request, b, by_tokens_[k], need, sorted_tokens_[k]};
    }
    return {request, request, bucket_lookup<D>::eager_index, need, need};
  }

  friend bool operator==(const bucket_grid& a, const bucket_grid& b) {
    return a.buckets_ == b.buckets_ && a.block_size_ == b.block_size_;
  }

 private:
  [[noreturn]] void too_many_tokens(const std::string& what, const bucket<D>& b) const {
    throw ladder_error("bucket grid: " + what + " = " + bucket_text<D>(b) + " with block_size " +
                       std::to_string(block_size_) + " processes more than 2^63 - 1 tokens (" +
                       (D == 1 ? "batch" : D == 2 ? "batch * seq" : "batch * (query + context_blocks * block_size)") +
                       " must fit 64 bits)");
  }

  std::vector<bucket<D>> buckets_;
  rung_t block_size_ = 1;
  std::vector<std::int32_t> by_tokens_;      // listing indices sorted by tokens
  std::vector<std::int64_t> sorted_tokens_;  // their tokens, ascending
};

}  // namespace rungs
