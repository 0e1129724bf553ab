// Adapters from rungs' ladders and bucket grids (rungs/ladder/) to the engine's
// bucket_space: they decide what a bucket's coordinates mean for the graph shape and which
// part of a live batch each coordinate is looked up by. The lookup itself stays the
// ladder's or grid's own (a table index for ladders, covering search for grids).
//
//   ladder_buckets<L>   1-D ladder of token counts (vLLM capture sizes): a batch looks up
//                       by its new tokens; the graph has `rung` sequence and token rows.
//   grid_buckets<G>     Gaudi's 2-D [bs, seq] and 3-D [bs, query, blocks] grids:
//                         2-D  request (seqs, longest sequence); prompt graphs hold
//                              bs * seq tokens, decode graphs bs;
//                         3-D  prompt request (seqs, longest query, cached prefix blocks),
//                              graph bs x query tokens, sequences up to query + ctx blocks;
//                              decode request (seqs, 1, KV blocks over the batch).
//   gaudi_buckets(plan) phased_buckets of a plan's prompt and decode grids.
#pragma once

#include <rungs/blocks.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include <rungs/engine/bucket_space.hpp>
#include <rungs/engine/phased_buckets.hpp>

namespace rungs::engine {

namespace detail {
template <class L>
concept constant_size = requires {
  { std::integral_constant<std::size_t, L::size()>{} };
};
template <class L>
struct static_size_of {};
template <constant_size L>
struct static_size_of<L> {
  static constexpr std::size_t static_size = L::size();
};
}  // namespace detail

/// A 1-D ladder (rungs::ladder, rungs::static_ladder<P>, or anything with size(),
/// rungs() and lookup(n) returning {eager(), index}) as a bucket space. For a
/// static_ladder the engine's graph slots are a std::array.
template <class Ladder>
class ladder_buckets : public detail::static_size_of<Ladder> {
 public:
  explicit ladder_buckets(Ladder ladder, phase ph = phase::decode) : ladder_(std::move(ladder)), ph_(ph) {}

  std::size_t size() const { return ladder_.size(); }
  bucket at(std::size_t i) const {
    std::int64_t r = ladder_.rungs()[i];
    return bucket{.dims = {r, 0, 0}, .rank = 1, .ph = ph_, .shape = {r, r, 0}};
  }
  std::optional<std::size_t> find(const batch_key& k) const {
    if (k.ph != ph_) return std::nullopt;
    auto l = ladder_.lookup(k.tokens);
    if (l.eager()) return std::nullopt;
    return static_cast<std::size_t>(l.index);
  }
  const Ladder& ladder() const { return ladder_; }

 private:
  Ladder ladder_;
  phase ph_;
};

/// A bucket grid (rungs::bucket_grid<2> or <3>) of one phase as a bucket space.
template <class Grid>
class grid_buckets {
 public:
  using coordinates = std::remove_cvref_t<decltype(std::declval<const Grid&>()[0])>;
  static constexpr std::size_t rank = std::tuple_size_v<coordinates>;
  static_assert(rank == 2 || rank == 3, "rungs::engine::grid_buckets: grids have 2 or 3 dimensions");

  grid_buckets(Grid grid, phase ph) : grid_(std::move(grid)), ph_(ph) {}

  std::size_t size() const { return grid_.size(); }

  bucket at(std::size_t i) const {
    const coordinates& c = grid_[i];
    bucket b{.dims = {c[0], c[1], rank == 3 ? c[rank - 1] : 0}, .rank = static_cast<std::uint8_t>(rank), .ph = ph_};
    std::int64_t bs = c[0];
    if constexpr (rank == 2) {
      b.shape = {bs, ph_ == phase::prompt ? bs * c[1] : bs, c[1]};
    } else {
      std::int64_t block = grid_.block_size();
      b.shape = ph_ == phase::prompt ? graph_shape{bs, bs * c[1], c[1] + c[2] * block}
                                     : graph_shape{bs, bs * c[1], c[2] * block};
    }
    return b;
  }

  std::optional<std::size_t> find(const batch_key& k) const {
    if (k.ph != ph_) return std::nullopt;
    coordinates request{};
    if constexpr (rank == 2) {
      request = {k.seqs, k.max_context};
    } else {
      std::int64_t block = grid_.block_size();
      request = ph_ == phase::prompt ? coordinates{k.seqs, k.max_query, blocks_for(k.max_prefix, block)}
                                     : coordinates{k.seqs, k.max_query, k.blocks};
    }
    auto l = grid_.lookup(request);
    if (l.eager()) return std::nullopt;
    return static_cast<std::size_t>(l.index);
  }
  const Grid& grid() const { return grid_; }

 private:
  Grid grid_;
  phase ph_;
};

/// A Gaudi bucket plan (anything with .prompt and .decode grids) as one phased space.
template <class Plan>
auto gaudi_buckets(const Plan& plan) {
  using grid = std::remove_cvref_t<decltype(plan.prompt)>;
  return phased_buckets<grid_buckets<grid>, grid_buckets<grid>>(grid_buckets<grid>(plan.prompt, phase::prompt),
                                                                 grid_buckets<grid>(plan.decode, phase::decode));
}

}  // namespace rungs::engine
