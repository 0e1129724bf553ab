// Paged KV blocks in one page: size the pool, admit prompts that share a system prompt,
// build a step's slot mapping padded to a CUDA-graph bucket, fork a beam with copy-on-write,
// and read the metrics. Returns 0 when every figure is what the comments say.
#include <rungs/kv.hpp>

#include <cstdio>
#include <vector>

namespace kv = rungs::kv;

#define EXPECT(cond)                                                   \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "kv_blocks_basics: expected %s\n", #cond);  \
      return 1;                                                        \
    }                                                                  \
  } while (0)

int main() {
  // 1. Capacity: Mistral-7B in fp16 (32 layers, 8 KV heads, head dim 128), 16-token blocks,
  //    7 GiB for the KV cache -> 2 MiB blocks, 3584 of them.
  const kv::kv_shape mistral{.layers = 32, .kv_heads = 8, .head_dim = 128,
                             .bytes_per_element = rungs::bytes_per_element(rungs::dtype::fp16)};
  const std::int64_t num_blocks =
      kv::blocks_for_memory(std::int64_t{7} << 30, kv::bytes_per_block(mistral, 16));
  std::printf("blocks: %lld of %lld bytes\n", static_cast<long long>(num_blocks),
              static_cast<long long>(kv::bytes_per_block(mistral, 16)));
  EXPECT(num_blocks == 3584);

  // 2. The allocator: prefix caching with the fast hasher and LRU eviction.
  kv::prefix_caching_allocator<> alloc({.num_blocks = static_cast<std::int32_t>(num_blocks),
                                        .block_size = 16,
                                        .max_sequences = 64,
                                        .max_model_len = 8192,
                                        .watermark_blocks = 36});  // ~1% kept free at admission

  std::vector<kv::token_id> system(48);  // a 48-token system prompt: three full blocks
  for (std::size_t i = 0; i < system.size(); ++i) system[i] = 1000 + static_cast<int>(i);
  auto chat = [&](kv::token_id first) {
    std::vector<kv::token_id> p = system;
    for (int i = 0; i < 10; ++i) p.push_back(first + i);
    return p;
  };

  // First chat: nothing cached. Prefill the whole prompt in this step.
  const std::vector<kv::token_id> p1 = chat(1);
  const kv::sequence_start a = alloc.create(p1).value();
  EXPECT(a.cached_tokens == 0);
  EXPECT(alloc.append(a.id, p1) == kv::errc::ok);

  // Second chat, admitted in the same step: the system prompt's three blocks are reused
  // (their KV is written by this very step, layer by layer before attention reads it); only
  // 10 tokens are computed.
  const std::vector<kv::token_id> p2 = chat(500);
  const kv::sequence_start b = alloc.create(p2).value();
  std::printf("second chat: %d of %zu prompt tokens cached\n", b.cached_tokens, p2.size());
  EXPECT(b.cached_tokens == 48);
  EXPECT(alloc.append(b.id, std::span(p2).subspan(48)) == kv::errc::ok);
  const auto ta = alloc.block_table(a.id).value();
  const auto tb = alloc.block_table(b.id).value();
  EXPECT(ta[0] == tb[0] && ta[1] == tb[1] && ta[2] == tb[2] && ta[3] != tb[3]);
  // The step ran: its KV is written, so its full blocks stay prefix hits after a free.
  EXPECT(alloc.commit(a.id, 58) == kv::errc::ok && alloc.commit(b.id, 58) == kv::errc::ok);

  // 3. A decode step: one new token each, slots padded to an 8-token CUDA-graph bucket.
  const kv::token_id next[] = {7, 8};
  EXPECT(alloc.append(a.id, std::span(next, 1)) == kv::errc::ok);
  EXPECT(alloc.append(b.id, std::span(next + 1, 1)) == kv::errc::ok);
  const kv::slot_range step[] = {{a.id, 58, 1}, {b.id, 58, 1}};
  std::vector<kv::slot_id> slot_mapping(8);
  EXPECT(alloc.slot_mapping(step, slot_mapping).value() == 2);
  std::printf("slot mapping:");
  for (const kv::slot_id s : slot_mapping) std::printf(" %lld", static_cast<long long>(s));
  std::printf("\n");
  EXPECT(slot_mapping[0] == ta[3] * 16 + 10 && slot_mapping[1] == tb[3] * 16 + 10);
  EXPECT(slot_mapping[2] == kv::padded_slot);

  // 4. Beam search: fork shares every block; the first write into the shared partial block
  //    gets a private copy, reported as (src, dst) for the device.
  const kv::sequence_id beam = alloc.fork(b.id).value();
  EXPECT(alloc.append(beam, std::span(next, 1)) == kv::errc::ok);
  EXPECT(alloc.copies().size() == 1);
  const kv::block_copy copy = alloc.copies()[0];
  std::printf("copy-on-write: block %d -> block %d\n", copy.src, copy.dst);
  EXPECT(copy.src == tb[3]);
  alloc.clear_copies();  // after the engine's copy kernel ran

  // 5. Metrics: live, cached-evictable and free blocks are reported apart.
  EXPECT(alloc.free(a.id) == kv::errc::ok);
  const kv::kv_metrics m = alloc.metrics();
  std::printf("live %d, cached %d, free %d, prefix hit rate %.2f\n", m.live_blocks,
              m.cached_blocks, m.free_blocks, m.prefix_hit_rate());
  EXPECT(m.live_blocks + m.cached_blocks + m.free_blocks == m.num_blocks);
  EXPECT(m.cached_blocks == 0);  // a's blocks 0-2 are still b's; its partial 4th is just free
  EXPECT(alloc.check_consistency().empty());
  return 0;
}
