// The plain reference loop: one conversation at a time, no scheduler, no engine, no buckets,
// no padding, no paging (a private contiguous KV cache whose block table is 0, 1, 2, ...), no
// prefix cache, no preemption. Each turn recomputes the whole conversation from scratch and
// then decodes one token per forward. The serving tests (and the demo's --verify) compare the
// tokens the engine produced with these, bit for bit.
#pragma once

#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include <rungs/engine/batch.hpp>

#include "model.hpp"

namespace demo {

/// Greedy continuation of `context` by `max_output` tokens, computed alone and unpadded.
/// A hybrid model's `layers` apply their windows to the contiguous cache.
template <class Decoder>
std::vector<token_id> plain_generate(const Decoder& model, std::span<const token_id> context, std::int32_t max_output,
                                     const layer_attention* layers = nullptr) {
  constexpr auto shape = Decoder::shape;
  const std::int64_t longest = static_cast<std::int64_t>(context.size()) + max_output;
  const std::int64_t blocks = rungs::engine::blocks_for(longest, shape.block_size);
  kv_pools<shape> kv(blocks);
  std::vector<std::int32_t> table(static_cast<std::size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);  // contiguous: token p lives in slot p

  std::vector<token_id> tokens(context.begin(), context.end());
  std::vector<token_id> output;
  std::vector<float> row(static_cast<std::size_t>(Decoder::hidden));
  std::vector<std::byte> workspace;
  std::int64_t cached = 0;
  while (static_cast<std::int32_t>(output.size()) < max_output) {
    // The first forward takes the whole context, later ones the last sampled token.
    const std::int64_t q = static_cast<std::int64_t>(tokens.size()) - cached;
    std::vector<std::int32_t> positions(static_cast<std::size_t>(q));
    std::vector<std::int64_t> slots(static_cast<std::size_t>(q));
    for (std::int64_t i = 0; i < q; ++i) {
      positions[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(cached + i);
      slots[static_cast<std::size_t>(i)] = cached + i;
    }
    const std::int32_t query_start[2] = {0, static_cast<std::int32_t>(q)};
    const std::int32_t seq_len = static_cast<std::int32_t>(cached + q);
    const rungs::engine::batch_view b{.seqs = 1,
                                      .tokens = q,
                                      .width = blocks,
                                      .token_ids = tokens.data() + cached,
                                      .positions = positions.data(),
                                      .slot_mapping = slots.data(),
                                      .query_start = query_start,
                                      .seq_lens = &seq_len,
                                      .block_tables = table.data()};
    workspace.resize(static_cast<std::size_t>(model.workspace_bytes(1, q)));
    model.forward(b, kv, row, workspace, layers);
    cached += q;
    const token_id next = model.sample(row);
    output.push_back(next);
    tokens.push_back(next);
  }
  return output;
}

}  // namespace demo
