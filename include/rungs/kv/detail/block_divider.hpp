// Division of token positions by the block size, on the per-token path of append(). The usual
// block sizes (16, 32, 64, 128) are powers of two: a shift and a mask then replace an integer
// division that costs tens of cycles; other sizes divide as usual.
#pragma once

#include <rungs/blocks.hpp>

#include <bit>
#include <cstdint>

namespace rungs::kv::detail {

class block_divider {
 public:
  explicit block_divider(std::int32_t block_size)
      : size_(static_cast<std::uint32_t>(block_size)),
        shift_(std::has_single_bit(size_) ? std::countr_zero(size_) : -1) {}

  // Arguments are non-negative positions or counts up to 2^31 - 1.
  std::int32_t quot(std::int32_t x) const {
    const auto u = static_cast<std::uint32_t>(x);
    return static_cast<std::int32_t>(shift_ >= 0 ? u >> shift_ : u / size_);
  }
  std::int32_t rem(std::int32_t x) const {
    const auto u = static_cast<std::uint32_t>(x);
    return static_cast<std::int32_t>(shift_ >= 0 ? u & (size_ - 1) : u % size_);
  }
  /// rungs::blocks_for(x, block_size), by a shift for a power-of-two block size.
  std::int32_t ceil(std::int32_t x) const {
    if (shift_ < 0) return static_cast<std::int32_t>(blocks_for(x, size_));
    return static_cast<std::int32_t>((std::int64_t{x} + size_ - 1) >> shift_);
  }

 private:
  std::uint32_t size_;
  int shift_;
};

}  // namespace rungs::kv::detail
