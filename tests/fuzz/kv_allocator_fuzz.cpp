// Operation sequences on the paged KV allocators (prefix caching and free list): create,
// append (with lookahead), fork, finish, free, in any order, on a small pool. The harness
// plays the device: it keeps one token per KV slot, does the allocator's copy-on-write copies
// and writes each appended token into its slot (the step computing its KV). After every
// operation check_consistency() must be empty and every live sequence must read back, through
// its block table, exactly the tokens it holds: its cached prefix included. With a sliding
// window (half the inputs) the blocks outside the window (released by an append, or a prefix
// hit's blocks the first query cannot see) must be null in the table and the tokens of the
// blocks still held must read back.
#include <rungs/kv/paged_allocator.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fuzz.hpp"

namespace {
namespace kv = rungs::kv;

struct live {
  kv::sequence_id id;
  std::vector<kv::token_id> tokens;   // what its KV slots must hold, positions 0..
  std::vector<kv::token_id> pending;  // the rest of its prompt, appended in chunks
  bool finished = false;
  std::int32_t first_block = 0;       // blocks before it left the sliding window
};

template <class Allocator>
void run(FuzzedDataProvider& in) {
  kv::allocator_config c;
  c.num_blocks = in.ConsumeIntegralInRange(1, 48);
  c.block_size = in.ConsumeIntegralInRange(1, 8);
  c.max_sequences = in.ConsumeIntegralInRange(1, 6);
  c.max_model_len = in.ConsumeIntegralInRange(1, 160);
  c.watermark_blocks = in.ConsumeIntegralInRange(0, std::min(2, c.num_blocks - 1));
  c.sliding_window = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange(1, 24);
  Allocator a(c);
  std::vector<kv::token_id> slots(static_cast<std::size_t>(c.num_blocks * c.block_size), -1);
  std::vector<live> seqs;

  const auto slot_of = [&](const live& s, std::size_t pos) {
    const auto table = a.block_table(s.id).value();
    return static_cast<std::size_t>(table[pos / c.block_size]) * c.block_size + pos % c.block_size;
  };
  const auto check = [&] {
    const std::string e = a.check_consistency();
    RUNGS_FUZZ_CHECK(e.empty(), e.c_str());
    for (const live& s : seqs) {
      RUNGS_FUZZ_CHECK(a.num_tokens(s.id).value() == static_cast<std::int32_t>(s.tokens.size()), "token count");
      const auto table = a.block_table(s.id).value();
      for (std::int32_t k = 0; k < s.first_block; ++k)
        RUNGS_FUZZ_CHECK(table[static_cast<std::size_t>(k)] == kv::null_block, "a block that left the window is held");
      for (std::size_t p = static_cast<std::size_t>(s.first_block) * c.block_size; p < s.tokens.size(); ++p)
        RUNGS_FUZZ_CHECK(slots[slot_of(s, p)] == s.tokens[p], "a live sequence reads back a wrong token");
    }
  };
  // Tokens from a small alphabet, so that prompts share prefixes and hit the cache.
  const auto some_tokens = [&](std::size_t max) {
    std::vector<kv::token_id> t(in.ConsumeIntegralInRange<std::size_t>(0, max));
    for (kv::token_id& x : t) x = in.ConsumeIntegralInRange<kv::token_id>(0, 3);
    return t;
  };

  while (in.remaining_bytes() > 0) {
    const int op = in.ConsumeIntegralInRange(0, 4);
    if (op == 0 || seqs.empty()) {  // create
      std::vector<kv::token_id> prompt = some_tokens(static_cast<std::size_t>(c.max_model_len) + 2);
      const auto r = a.create(prompt, {.admit_tokens = in.ConsumeIntegralInRange(0, 8)});
      if (r) {
        const auto cached = static_cast<std::size_t>(r.value().cached_tokens);
        RUNGS_FUZZ_CHECK(cached < prompt.size() || prompt.empty(), "the whole prompt came from the cache");
        live s{r.value().id, {prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(cached)},
               {prompt.begin() + static_cast<std::ptrdiff_t>(cached), prompt.end()}};
        // With a window the hit holds only the blocks its first query (at `cached`) can see.
        const std::int64_t invisible = static_cast<std::int64_t>(cached) - c.sliding_window + 1;
        if (c.sliding_window > 0 && invisible > 0) s.first_block = static_cast<std::int32_t>(invisible / c.block_size);
        seqs.push_back(std::move(s));
      }
    } else {
      const std::size_t i = in.ConsumeIntegralInRange<std::size_t>(0, seqs.size() - 1);
      live& s = seqs[i];
      if (op == 1) {  // append: a prompt chunk, or sampled tokens, plus lookahead slots
        std::vector<kv::token_id> t;
        if (!s.pending.empty()) {
          const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(1, s.pending.size());
          t.assign(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(n));
        } else {
          t = some_tokens(3);
        }
        const std::int32_t lookahead = in.ConsumeIntegralInRange(0, 2);
        if (a.append(s.id, t, lookahead) == kv::errc::ok) {
          RUNGS_FUZZ_CHECK(!s.finished, "append to a finished sequence succeeded");
          for (const kv::block_copy& cp : a.copies())
            for (std::int32_t k = 0; k < c.block_size; ++k)
              slots[static_cast<std::size_t>(cp.dst * c.block_size + k)] = slots[static_cast<std::size_t>(cp.src * c.block_size + k)];
          a.clear_copies();
          const std::size_t first = s.tokens.size();
          // The step's first query p = first sees keys from p - W + 1 on: whole blocks below left.
          const std::int64_t invisible = static_cast<std::int64_t>(first) - c.sliding_window + 1;
          if (c.sliding_window > 0 && invisible > 0)
            s.first_block = std::max(s.first_block, static_cast<std::int32_t>(invisible / c.block_size));
          s.tokens.insert(s.tokens.end(), t.begin(), t.end());
          for (std::size_t p = first; p < s.tokens.size(); ++p) slots[slot_of(s, p)] = s.tokens[p];
          if (!s.pending.empty()) s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(t.size()));
        }
      } else if (op == 2) {  // fork
        if (const auto r = a.fork(s.id)) {
          live child = s;
          child.id = r.value();
          seqs.push_back(std::move(child));
        }
      } else if (op == 3) {  // finish
        if (a.finish(s.id) == kv::errc::ok) s.finished = true;
      } else {  // free
        RUNGS_FUZZ_CHECK(a.free(s.id) == kv::errc::ok, "free of a live sequence failed");
        RUNGS_FUZZ_CHECK(a.free(s.id) == kv::errc::unknown_sequence, "a freed id is still known");
        seqs.erase(seqs.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    check();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeBool()) run<kv::prefix_caching_allocator<>>(in);
  else run<kv::free_list_allocator>(in);
  return 0;
}
