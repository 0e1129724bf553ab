// Quick start: a bucket ladder and a paged KV block pool working together for a few decode
// steps, the way a serving loop uses them. Each step the live batch is padded up to the
// smallest captured batch size (a rung), every sequence gets one new token in the KV cache,
// and the slot mapping is padded with -1 so padded rows never write the cache. When the pool
// cannot hold another sequence, the newcomer waits. Prints what happens; returns 0 when the
// invariants it checks hold.
#include <rungs/kv.hpp>
#include <rungs/ladder.hpp>

#include <cstdio>
#include <deque>
#include <string>
#include <vector>

namespace kv = rungs::kv;

int main() {
  // The ladder of captured batch sizes (vLLM's rule up to 16: 1 2 4 8 16) as a compile-time
  // value, and a small pool: 16 blocks of 16 tokens.
  using graphs = rungs::static_ladder<rungs::CaptureSizes::vllm(16)>;
  constexpr int block_size = 16;
  kv::prefix_caching_allocator<> pool({.num_blocks = 16, .block_size = block_size, .max_sequences = 16,
                                       .max_model_len = 256, .watermark_blocks = 1});
  std::printf("ladder:");
  for (rungs::rung_t r : graphs::rungs()) std::printf(" %lld", static_cast<long long>(r));
  std::printf("  |  KV pool: 16 blocks x %d tokens\n\n", block_size);

  // Requests: prompt lengths; every request shares a 32-token system prompt (two blocks).
  std::deque<int> waiting = {40, 70, 35, 90, 33, 50, 61, 45, 38};
  struct live_seq {
    kv::sequence_id id;
    int length;
  };
  std::vector<live_seq> running;
  rungs::padding_tally tally;
  std::vector<kv::slot_id> slots(graphs::top());
  int next_token = 1;

  for (int step = 1; step <= 15; ++step) {
    // Up to two requests arrive per step; admit from the head of the queue while the pool
    // can hold the prompt (plus the watermark), otherwise the head waits.
    for (int arrivals = 0; arrivals < 2 && !waiting.empty() && pool.can_admit(waiting.front()); ++arrivals) {
      std::vector<kv::token_id> prompt(waiting.front());
      for (int i = 0; i < waiting.front(); ++i) prompt[i] = i < 32 ? 7 + i : next_token++;
      const kv::sequence_start s = pool.create(prompt).value();
      (void)pool.append(s.id, std::span(prompt).subspan(s.cached_tokens));
      std::printf("step %2d: admit prompt of %3d tokens (%2d cached by prefix)\n", step, waiting.front(),
                  s.cached_tokens);
      running.push_back({s.id, waiting.front()});
      waiting.pop_front();
    }
    // One decode token per running sequence; the batch pads up to its rung.
    const auto rung = graphs::lookup(static_cast<rungs::rung_t>(running.size()));
    tally.add(rung);
    std::vector<kv::slot_range> step_rows;
    for (live_seq& s : running) {
      const kv::token_id t = next_token++;
      if (pool.append(s.id, std::span(&t, 1)) != kv::errc::ok) {
        std::printf("step %2d: out of KV blocks, stop decoding sequence\n", step);
        return 1;
      }
      step_rows.push_back({s.id, s.length, 1});
      ++s.length;
    }
    const std::int32_t real = pool.slot_mapping(step_rows, std::span(slots).first(rung.rung)).value();
    const kv::kv_metrics m = pool.metrics();
    std::printf("step %2d: batch %2lld -> rung %2lld (%lld padded rows)  slots[0]=%lld slots[%lld]=%lld"
                "  KV live %2d / cached %d / free %2d  waiting %zu\n",
                step, static_cast<long long>(rung.size), static_cast<long long>(rung.rung),
                static_cast<long long>(rung.padding()), static_cast<long long>(slots[0]),
                static_cast<long long>(rung.rung - 1), static_cast<long long>(slots[rung.rung - 1]),
                m.live_blocks, m.cached_blocks, m.free_blocks, waiting.size());
    if (real != static_cast<std::int32_t>(running.size()) ||
        (rung.padding() > 0 && slots[rung.rung - 1] != kv::padded_slot) ||
        m.live_blocks + m.cached_blocks + m.free_blocks != m.num_blocks)
      return 1;
    // The step ran (here: the slots were mapped; a real engine runs the model): its KV is
    // written, so its full blocks stay prefix hits after their sequence is freed.
    for (const live_seq& s : running)
      if (pool.commit(s.id, s.length) != kv::errc::ok) return 1;
    // The longest sequence finishes every third step and gives its blocks back.
    if (step % 3 == 0) {
      auto longest = running.begin();
      for (auto it = running.begin(); it != running.end(); ++it)
        if (it->length > longest->length) longest = it;
      std::printf("step %2d: sequence of %d tokens finishes\n", step, longest->length);
      if (pool.free(longest->id) != kv::errc::ok) return 1;
      running.erase(longest);
    }
  }
  const kv::kv_metrics m = pool.metrics();
  std::printf("\npadding: %lld real rows, %lld padded (%.1f%% of the work), %lld eager batches\n",
              static_cast<long long>(tally.real), static_cast<long long>(tally.padding),
              100.0 * tally.wasted_fraction(), static_cast<long long>(tally.eager));
  std::printf("prefix cache: %llu of %llu prompt tokens hit (%.0f%%)\n",
              static_cast<unsigned long long>(m.prefix_hit_tokens),
              static_cast<unsigned long long>(m.prefix_query_tokens), 100.0 * m.prefix_hit_rate());
  const std::string broken = pool.check_consistency();  // empty when every invariant holds
  if (!broken.empty()) std::printf("inconsistent: %s\n", broken.c_str());
  return broken.empty() ? 0 : 1;
}
