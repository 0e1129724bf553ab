// Operation sequences on hybrid_allocator (attention groups under one pool): one to three
// groups of full, sliding-window and chunked-local attention, then create, append (with
// lookahead), commit, free in any order on a small pool. The harness plays the device: one
// token per KV slot of each group, written through the group's slot mapping. After every
// operation check_consistency() must be empty, every group must hold exactly the blocks its
// window still needs (null entries before, real ones after) and read back its tokens.
#include <rungs/kv/free_stack.hpp>
#include <rungs/kv/hybrid_allocator.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fuzz.hpp"

namespace {
namespace kv = rungs::kv;

struct live {
  kv::sequence_id id;
  std::vector<kv::token_id> tokens, pending;
  std::vector<std::int32_t> first;  // per group: blocks before it left the window
};

template <class Allocator>
void run(FuzzedDataProvider& in) {
  kv::hybrid_config c;
  c.num_blocks = in.ConsumeIntegralInRange(1, 48);
  c.block_size = in.ConsumeIntegralInRange(1, 8);
  c.max_sequences = in.ConsumeIntegralInRange(1, 6);
  c.max_model_len = in.ConsumeIntegralInRange(1, 160);
  c.watermark_blocks = in.ConsumeIntegralInRange(0, std::min(2, c.num_blocks - 1));
  for (int g = in.ConsumeIntegralInRange(1, 3); g > 0; --g) {
    const int kind = in.ConsumeIntegralInRange(0, 2);
    const kv::attention_group a = kind == 0 ? kv::attention_group{}
                                            : kv::attention_group{static_cast<kv::attention_kind>(kind),
                                                                  in.ConsumeIntegralInRange(1, 24)};
    if (std::find(c.groups.begin(), c.groups.end(), a) == c.groups.end()) c.groups.push_back(a);
  }
  Allocator a(c);
  const auto groups = static_cast<std::size_t>(a.num_groups());
  std::vector<std::vector<kv::token_id>> slots(groups, std::vector<kv::token_id>(c.num_blocks * c.block_size, -1));
  std::vector<live> seqs;
  const auto window_start = [&](std::size_t g, std::int64_t p) -> std::int32_t {
    const kv::attention_group& x = c.groups[g];
    if (x.kind == kv::attention_kind::sliding_window) return static_cast<std::int32_t>(std::max<std::int64_t>(0, p - x.span + 1) / c.block_size);
    if (x.kind == kv::attention_kind::chunked_local) return static_cast<std::int32_t>(p / x.span * x.span / c.block_size);
    return 0;
  };
  const auto moved_to = [&](live& s, std::int64_t p) {
    for (std::size_t g = 0; g < groups; ++g) s.first[g] = std::max(s.first[g], window_start(g, p));
  };
  const auto check = [&] {
    const std::string e = a.check_consistency();
    RUNGS_FUZZ_CHECK(e.empty(), e.c_str());
    for (const live& s : seqs)
      for (std::size_t g = 0; g < groups; ++g) {
        const auto table = a.block_table(s.id, static_cast<std::int32_t>(g)).value();
        for (std::size_t k = 0; k < table.size(); ++k)
          RUNGS_FUZZ_CHECK((table[k] == kv::null_block) == (static_cast<std::int32_t>(k) < s.first[g]),
                           "a group holds other blocks than its window needs");
        for (std::size_t p = static_cast<std::size_t>(s.first[g]) * c.block_size; p < s.tokens.size(); ++p)
          RUNGS_FUZZ_CHECK(slots[g][static_cast<std::size_t>(table[p / c.block_size]) * c.block_size + p % c.block_size] ==
                               s.tokens[p],
                           "a group reads back a wrong token");
      }
  };
  const auto some_tokens = [&](std::size_t max) {
    std::vector<kv::token_id> t(in.ConsumeIntegralInRange<std::size_t>(0, max));
    for (kv::token_id& x : t) x = in.ConsumeIntegralInRange<kv::token_id>(0, 3);
    return t;
  };

  while (in.remaining_bytes() > 0) {
    const int op = in.ConsumeIntegralInRange(0, 3);
    if (op == 0 || seqs.empty()) {
      std::vector<kv::token_id> prompt = some_tokens(static_cast<std::size_t>(c.max_model_len) + 2);
      const auto r = a.create(prompt, {.admit_tokens = in.ConsumeIntegralInRange(0, 8)});
      if (r) {
        const auto cached = static_cast<std::size_t>(r.value().cached_tokens);
        RUNGS_FUZZ_CHECK(cached < prompt.size() || prompt.empty(), "the whole prompt came from the cache");
        live s{r.value().id, {prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(cached)},
               {prompt.begin() + static_cast<std::ptrdiff_t>(cached), prompt.end()}, std::vector<std::int32_t>(groups, 0)};
        moved_to(s, static_cast<std::int64_t>(cached));
        seqs.push_back(std::move(s));
      }
    } else {
      const std::size_t i = in.ConsumeIntegralInRange<std::size_t>(0, seqs.size() - 1);
      live& s = seqs[i];
      if (op == 1) {
        std::vector<kv::token_id> t;
        if (!s.pending.empty())
          t.assign(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(
                                                              in.ConsumeIntegralInRange<std::size_t>(1, s.pending.size())));
        else
          t = some_tokens(3);
        if (a.append(s.id, t, in.ConsumeIntegralInRange(0, 2)) == kv::errc::ok) {
          const auto first = static_cast<std::int32_t>(s.tokens.size());
          moved_to(s, first);
          s.tokens.insert(s.tokens.end(), t.begin(), t.end());
          for (std::size_t g = 0; g < groups; ++g) {
            std::vector<kv::slot_id> out(t.size());
            const kv::slot_range r[] = {{s.id, first, static_cast<std::int32_t>(t.size())}};
            RUNGS_FUZZ_CHECK(a.slot_mapping(static_cast<std::int32_t>(g), r, out).has_value(), "slot mapping refused");
            for (std::size_t k = 0; k < t.size(); ++k) slots[g][static_cast<std::size_t>(out[k])] = t[k];
          }
          if (!s.pending.empty()) s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(t.size()));
        }
      } else if (op == 2) {
        RUNGS_FUZZ_CHECK(a.commit(s.id, static_cast<std::int32_t>(s.tokens.size())) == kv::errc::ok, "commit failed");
      } else {
        RUNGS_FUZZ_CHECK(a.free(s.id) == kv::errc::ok, "free of a live sequence failed");
        seqs.erase(seqs.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    check();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeBool()) run<kv::hybrid_allocator<>>(in);
  else run<kv::hybrid_allocator<kv::no_prefix_cache, kv::free_stack>>(in);
  return 0;
}
