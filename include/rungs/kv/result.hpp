// Checked results of the per-step calls. Running out of blocks is a normal outcome the
// scheduler handles (it preempts or waits), so hot-path calls never throw: they return an
// `errc` or a `result<T>` and leave the allocator unchanged when they fail. Configuration
// errors (bad pool or block sizes) throw std::invalid_argument at construction instead.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <rungs/config.hpp>

namespace rungs::kv {

enum class [[nodiscard]] errc : unsigned char {
  ok = 0,
  out_of_blocks,        // not enough free or evictable blocks (after the watermark, on admission)
  too_many_sequences,   // every block-table row is in use
  sequence_too_long,    // tokens + lookahead would exceed max_model_len
  unknown_sequence,     // never created, already freed, or a stale id of a reused row
  sequence_finished,    // append/fork/finish after finish()
  block_out_of_range,   // a block id outside [0, num_blocks)
  block_not_in_use,     // releasing or sharing a block nobody holds
  invalid_range,        // negative position or count, or positions past the sequence's slots
  buffer_too_small,     // the caller's output span cannot hold the result
};

constexpr std::string_view to_string(errc e) {
  switch (e) {
    case errc::ok: return "ok";
    case errc::out_of_blocks: return "out of KV blocks";
    case errc::too_many_sequences: return "too many sequences (every block-table row is in use)";
    case errc::sequence_too_long: return "sequence would exceed max_model_len";
    case errc::unknown_sequence: return "unknown sequence (never created or already freed)";
    case errc::sequence_finished: return "sequence is finished";
    case errc::block_out_of_range: return "block id out of range";
    case errc::block_not_in_use: return "block is not in use";
    case errc::invalid_range: return "position range outside the sequence's slots";
    case errc::buffer_too_small: return "output buffer too small";
  }
  return "unknown error";
}

/// Thrown by result<T>::value() on an error: reading a value that is not there is a caller bug.
class bad_result_access : public std::logic_error {
 public:
  explicit bad_result_access(errc e)
      : std::logic_error("rungs::kv: value() of a failed result: " + std::string(to_string(e))) {}
};

/// A value or the reason there is none (std::expected<T, errc> is C++23).
template <class T>
class [[nodiscard]] result {
 public:
  constexpr result(T value) : value_(std::move(value)) {}  // NOLINT: implicit like expected
  constexpr result(errc error) : error_(error) {}          // NOLINT
  constexpr bool has_value() const { return error_ == errc::ok; }
  constexpr explicit operator bool() const { return has_value(); }
  constexpr errc error() const { return error_; }
  constexpr const T& value() const {
    if (RUNGS_UNLIKELY(error_ != errc::ok)) throw bad_result_access(error_);
    return value_;
  }
  /// Unchecked access, for code that tested has_value().
  constexpr const T& operator*() const { return value_; }
  constexpr const T* operator->() const { return &value_; }

 private:
  T value_{};
  errc error_ = errc::ok;
};

}  // namespace rungs::kv
