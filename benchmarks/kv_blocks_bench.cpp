// KV block allocation: rungs' policies against a straightforward baseline (a std::vector free
// list and a std::unordered_map of block hashes) on the same operation streams, in one run.
//
//   pool/*        allocate+free pairs on the block pool: a ring of live blocks, the oldest
//                 freed as a new one is taken. Counter pairs_per_s.
//   serve/*       an engine's stream through a whole allocator: 32 running sequences, prompts
//                 of a shared 256-token system prompt plus 64 own tokens, 128 decoded tokens,
//                 then free and admit the next. One iteration is one decode step of the batch.
//                 Counters tokens_per_s (prefill and decode tokens placed) and hit_rate.
//   lookup/*      admission of a 513-token prompt whose 32 full blocks are all cached (digest,
//                 index probe and taking the block back from the free list, per block), then
//                 its release. Counter time_per_block (seconds; "n" is nanoseconds).
//   match/*       the index alone: digest + probe per block of the same prompt, no admission
//                 (rungs' prefix_cache::match against hashing + std::unordered_map::find).
//   hash/*        chaining one 16-token block's digest. Counter time_per_token.
#include <rungs/kv/block_pool.hpp>
#include <rungs/kv/free_stack.hpp>
#include <rungs/kv/lru.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/kv/prefix_cache.hpp>
#include <rungs/kv/priority_lru.hpp>
#include <rungs/kv/sha256.hpp>
#include <rungs/kv/wyhash.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <unordered_map>
#include <vector>

using namespace rungs::kv;

namespace {

constexpr std::int32_t pool_blocks = 4096;
constexpr std::int32_t ring = 1024;  // live blocks while the pool benchmark runs

// ---- the baseline -----------------------------------------------------------------------

/// Straightforward paged allocation: a std::vector free list (LIFO), a std::unordered_map
/// from block hash to block, a std::vector block table per sequence in a std::unordered_map.
class baseline_allocator {
 public:
  baseline_allocator(std::int32_t num_blocks, std::int32_t block_size)
      : block_size_(block_size), ref_(static_cast<std::size_t>(num_blocks), 0),
        hash_(ref_.size(), 0), hashed_(ref_.size(), 0) {
    for (std::int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  }

  // Pool level.
  block_id allocate() {
    if (free_.empty()) return null_block;
    const block_id b = free_.back();
    free_.pop_back();
    if (hashed_[b]) {  // lazy eviction
      index_.erase(hash_[b]);
      hashed_[b] = 0;
    }
    ref_[b] = 1;
    return b;
  }
  void release(block_id b) {
    if (--ref_[b] == 0) free_.push_back(b);
  }

  // Sequence level, with the calls of rungs' allocators so one stream drives both.
  explicit baseline_allocator(const allocator_config& c) : baseline_allocator(c.num_blocks, c.block_size) {}

  result<sequence_start> create(std::span<const token_id> prompt, const sequence_params& = {}) {
    sequence s;
    s.chain = hasher_.root(0, "");
    const std::size_t limit = prompt.empty() ? 0 : (prompt.size() - 1) / block_size_;
    for (std::size_t i = 0; i < limit; ++i) {
      const std::uint64_t d = hasher_.chain(s.chain, prompt.subspan(i * block_size_, block_size_));
      const auto it = index_.find(d);
      if (it == index_.end()) break;
      const block_id b = it->second;
      if (ref_[b]++ == 0) free_.erase(std::find(free_.begin(), free_.end(), b));
      s.blocks.push_back(b);
      s.chain = d;
      s.num_tokens += block_size_;
    }
    const std::int32_t cached = s.num_tokens;
    seqs_.emplace(next_id_, std::move(s));
    return sequence_start{sequence_id{next_id_++, 0}, cached};
  }
  errc append(sequence_id id, std::span<const token_id> tokens, std::int32_t = 0) {
    sequence& s = seqs_.at(id.slot);
    const std::size_t need =
        (s.num_tokens + tokens.size() + block_size_ - 1) / static_cast<std::size_t>(block_size_);
    if (need - s.blocks.size() > free_.size()) return errc::out_of_blocks;
    while (s.blocks.size() < need) s.blocks.push_back(allocate());
    for (const token_id t : tokens) {
      s.tail.push_back(t);
      ++s.num_tokens;
      if (static_cast<std::int32_t>(s.tail.size()) == block_size_) {
        s.chain = hasher_.chain(s.chain, s.tail);
        const block_id b = s.blocks[static_cast<std::size_t>(s.num_tokens / block_size_ - 1)];
        if (index_.emplace(s.chain, b).second) {
          hash_[b] = s.chain;
          hashed_[b] = 1;
        }
        s.tail.clear();
      }
    }
    return errc::ok;
  }
  // The baseline registers blocks at append and keeps them after free whether their KV was
  // written or not (the hazard rungs' commit closes): its commit has nothing to do, so it
  // costs the baseline less than rungs' does.
  errc commit(sequence_id, std::int32_t) { return errc::ok; }
  errc free(sequence_id id) {
    const auto it = seqs_.find(id.slot);
    for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) release(*b);
    seqs_.erase(it);
    return errc::ok;
  }


 private:
  struct sequence {
    std::vector<block_id> blocks;
    std::vector<token_id> tail;
    std::uint64_t chain = 0;
    std::int32_t num_tokens = 0;
  };
  std::int32_t block_size_;
  wyhash64 hasher_;
  std::vector<block_id> free_;
  std::vector<std::int32_t> ref_;
  std::vector<std::uint64_t> hash_;
  std::vector<std::uint8_t> hashed_;
  std::unordered_map<std::uint64_t, block_id> index_;
  std::unordered_map<std::uint32_t, sequence> seqs_;
  std::uint32_t next_id_ = 0;
};

// ---- pool: allocate+free pairs -------------------------------------------------------------

template <class Pool>
void pool_pairs(benchmark::State& state, Pool& pool, auto allocate, auto release) {
  std::vector<block_id> live(ring);
  for (block_id& b : live) b = allocate(pool);
  std::size_t oldest = 0;
  for (auto _ : state) {
    const block_id b = allocate(pool);
    release(pool, live[oldest]);
    live[oldest] = b;
    oldest = (oldest + 1) & (ring - 1);
    benchmark::DoNotOptimize(b);
  }
  state.counters["pairs_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

template <class Eviction>
void BM_pool(benchmark::State& state) {
  block_pool<Eviction> pool(pool_blocks);
  pool_pairs(state, pool, [](auto& p) { return *p.allocate(); },
             [](auto& p, block_id b) { (void)p.release(b); });
}
void BM_pool_baseline(benchmark::State& state) {
  baseline_allocator pool(pool_blocks, 16);
  pool_pairs(state, pool, [](auto& p) { return p.allocate(); },
             [](auto& p, block_id b) { p.release(b); });
}
BENCHMARK(BM_pool<free_stack>)->Name("pool/free_stack");
BENCHMARK(BM_pool<lru>)->Name("pool/lru");
BENCHMARK(BM_pool<priority_lru<4>>)->Name("pool/priority_lru<4>");
BENCHMARK(BM_pool_baseline)->Name("pool/baseline_vector");

// ---- serve: the per-step stream through a whole allocator ---------------------------------

constexpr std::int32_t serve_block_size = 16, running = 32, system_len = 256, own_len = 64,
                       decode_len = 128;

// Random tokens come from a ring drawn before timing starts: generating them with mt19937 per
// token took about a quarter of the timed loop, a cost every allocator paid alike and that
// diluted their differences. The ring (2^20 tokens, 65536 blocks' worth) outlasts the pool
// many times over, so a prompt that comes round again finds its old blocks long evicted:
// the hit rate stays the system prompt's.
struct serve_stream {
  static constexpr std::size_t ring_size = std::size_t{1} << 20;
  std::vector<token_id> system = std::vector<token_id>(system_len);
  std::vector<token_id> ring = std::vector<token_id>(ring_size);
  std::size_t next = 0;
  serve_stream() {
    std::iota(system.begin(), system.end(), 1000);
    std::mt19937 rng{7};
    for (token_id& t : ring) t = static_cast<token_id>(rng() % 32000);
  }
  std::vector<token_id> prompt() {
    std::vector<token_id> p = system;
    for (int i = 0; i < own_len; ++i) p.push_back(sampled());
    return p;
  }
  token_id sampled() { return ring[next++ & (ring_size - 1)]; }
};

template <class A>
void BM_serve(benchmark::State& state) {
  A a({.num_blocks = pool_blocks, .block_size = serve_block_size, .max_sequences = running,
       .max_model_len = system_len + own_len + decode_len});
  serve_stream stream;
  std::vector<sequence_id> seqs(running);
  std::vector<std::int32_t> left(running), length(running);
  std::uint64_t tokens = 0;
  auto admit = [&](std::size_t i) {
    const std::vector<token_id> p = stream.prompt();
    const sequence_start s = a.create(p).value();
    (void)a.append(s.id, std::span(p).subspan(static_cast<std::size_t>(s.cached_tokens)));
    (void)a.commit(s.id, static_cast<std::int32_t>(p.size()));  // the prefill step ran
    tokens += p.size() - static_cast<std::size_t>(s.cached_tokens);
    seqs[i] = s.id;
    left[i] = decode_len;
    length[i] = static_cast<std::int32_t>(p.size());
  };
  for (std::size_t i = 0; i < running; ++i) admit(i);
  for (auto _ : state) {  // one decode step of the whole batch
    for (std::size_t i = 0; i < running; ++i) {
      const token_id t = stream.sampled();
      (void)a.append(seqs[i], std::span(&t, 1));
      (void)a.commit(seqs[i], ++length[i]);  // the decode step ran
      ++tokens;
      if (--left[i] == 0) {
        (void)a.free(seqs[i]);
        admit(i);
      }
    }
  }
  state.counters["tokens_per_s"] = benchmark::Counter(double(tokens), benchmark::Counter::kIsRate);
  if constexpr (requires { a.metrics(); }) state.counters["hit_rate"] = a.metrics().prefix_hit_rate();
}

BENCHMARK(BM_serve<free_list_allocator>)->Name("serve/free_list");
BENCHMARK(BM_serve<prefix_caching_allocator<>>)->Name("serve/prefix_lru_wyhash");
BENCHMARK(BM_serve<prefix_caching_allocator<wyhash64, priority_lru<4>>>)
    ->Name("serve/prefix_priority_wyhash");
BENCHMARK(BM_serve<prefix_caching_allocator<sha256_hasher>>)->Name("serve/prefix_lru_sha256");
BENCHMARK(BM_serve<baseline_allocator>)->Name("serve/baseline_vector_unordered_map");

// ---- lookup: prefix matching per block ----------------------------------------------------

constexpr std::int32_t lookup_blocks = 32, lookup_block_size = 16;

template <class A>
void BM_lookup(benchmark::State& state) {
  A a({.num_blocks = pool_blocks, .block_size = lookup_block_size, .max_model_len = 4096});
  // Fill the index with 100 unrelated chains, then the prompt's own chain.
  std::mt19937 rng(3);
  for (int c = 0; c < 100; ++c) {
    std::vector<token_id> p(lookup_blocks * lookup_block_size);
    for (token_id& t : p) t = static_cast<token_id>(rng() % 32000);
    const sequence_start s = a.create(p).value();
    (void)a.append(s.id, p);
    (void)a.commit(s.id, static_cast<std::int32_t>(p.size()));
    (void)a.free(s.id);
  }
  std::vector<token_id> prompt(lookup_blocks * lookup_block_size + 1);
  std::iota(prompt.begin(), prompt.end(), 5);
  const sequence_start s = a.create(prompt).value();
  (void)a.append(s.id, prompt);
  (void)a.commit(s.id, static_cast<std::int32_t>(prompt.size()));
  (void)a.free(s.id);
  for (auto _ : state) {  // admission with a full hit, then release
    const sequence_start hit = a.create(prompt).value();
    if (hit.cached_tokens != lookup_blocks * lookup_block_size) {
      state.SkipWithError("the prompt did not hit");
      break;
    }
    (void)a.free(hit.id);
  }
  state.counters["time_per_block"] = benchmark::Counter(
      double(state.iterations()) * lookup_blocks,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_lookup<prefix_caching_allocator<>>)->Name("lookup/prefix_lru_wyhash");
BENCHMARK(BM_lookup<prefix_caching_allocator<sha256_hasher>>)->Name("lookup/prefix_lru_sha256");
BENCHMARK(BM_lookup<baseline_allocator>)->Name("lookup/baseline_unordered_map_wyhash");

// ---- match: the index alone ---------------------------------------------------------------

std::vector<token_id> match_prompt() {
  std::vector<token_id> prompt(lookup_blocks * lookup_block_size);
  std::iota(prompt.begin(), prompt.end(), 5);
  return prompt;
}

void BM_match(benchmark::State& state) {
  block_pool<lru> pool(pool_blocks);
  prefix_cache<wyhash64> cache(pool_blocks, lookup_block_size, 1);
  const std::vector<token_id> prompt = match_prompt();
  std::vector<block_id> row(lookup_blocks);
  for (block_id& b : row) b = *pool.allocate();
  const std::uint64_t root = cache.root(0, "");
  cache.start(0, root);
  cache.append(0, 0, prompt, row.data(), pool);
  std::vector<block_id> out(lookup_blocks);
  for (auto _ : state) {
    std::uint64_t chain = root;
    benchmark::DoNotOptimize(cache.match(chain, prompt, out));
  }
  state.counters["time_per_block"] = benchmark::Counter(
      double(state.iterations()) * lookup_blocks,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_match_baseline(benchmark::State& state) {
  const wyhash64 h;
  const std::vector<token_id> prompt = match_prompt();
  std::unordered_map<std::uint64_t, block_id> index;
  std::uint64_t chain = h.root(0, "");
  for (block_id b = 0; b < lookup_blocks; ++b) {
    chain = h.chain(chain, std::span(prompt).subspan(b * lookup_block_size, lookup_block_size));
    index.emplace(chain, b);
  }
  std::vector<block_id> out(lookup_blocks);
  for (auto _ : state) {
    std::uint64_t d = h.root(0, "");
    for (std::size_t i = 0; i < lookup_blocks; ++i) {
      d = h.chain(d, std::span(prompt).subspan(i * lookup_block_size, lookup_block_size));
      const auto it = index.find(d);
      if (it == index.end()) break;
      out[i] = it->second;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["time_per_block"] = benchmark::Counter(
      double(state.iterations()) * lookup_blocks,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_match)->Name("match/prefix_cache_wyhash");
BENCHMARK(BM_match_baseline)->Name("match/baseline_unordered_map_wyhash");

// ---- hash: one block digest ---------------------------------------------------------------

template <class Hasher>
void BM_hash(benchmark::State& state) {
  const Hasher h;
  std::vector<token_id> block(lookup_block_size);
  std::iota(block.begin(), block.end(), 17);
  typename Hasher::digest_type d = h.root(0, "");
  for (auto _ : state) {
    d = h.chain(d, block);
    benchmark::DoNotOptimize(d);
  }
  state.counters["time_per_token"] = benchmark::Counter(
      double(state.iterations()) * lookup_block_size,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_hash<wyhash64>)->Name("hash/wyhash64");
BENCHMARK(BM_hash<sha256_hasher>)->Name("hash/sha256");

}  // namespace

BENCHMARK_MAIN();
