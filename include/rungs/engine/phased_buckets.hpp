// One bucket space from a prompt space and a decode space, as Gaudi arranges its buckets:
// indices [0, prompt.size()) are prompt buckets, the rest decode buckets. A batch looks up
// in the space of its phase. Both phases share one graph budget (with its prompt/decode
// split) and one capture sequence (see by_phase in capture_order.hpp).
#pragma once

#include <cstddef>
#include <optional>
#include <utility>

#include <rungs/engine/bucket_space.hpp>

namespace rungs::engine {

template <bucket_space Prompt, bucket_space Decode>
class phased_buckets {
 public:
  phased_buckets(Prompt prompt, Decode decode) : prompt_(std::move(prompt)), decode_(std::move(decode)) {}

  std::size_t size() const { return prompt_.size() + decode_.size(); }

  bucket at(std::size_t i) const {
    bucket b = i < prompt_.size() ? bucket(prompt_.at(i)) : bucket(decode_.at(i - prompt_.size()));
    b.ph = i < prompt_.size() ? phase::prompt : phase::decode;
    return b;
  }

  std::optional<std::size_t> find(const batch_key& k) const {
    if (k.ph == phase::prompt) return prompt_.find(k);
    auto d = decode_.find(k);
    if (d) *d += prompt_.size();
    return d;
  }

  const Prompt& prompt() const { return prompt_; }
  const Decode& decode() const { return decode_; }

 private:
  Prompt prompt_;
  Decode decode_;
};

}  // namespace rungs::engine
