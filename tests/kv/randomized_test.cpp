// Randomized operation sequences against a model of the device KV memory.
//
// The test plays an engine: it admits prompts (many sharing prefixes, some with tenant salts
// or adapters), prefills in chunks, decodes with lookahead drafts, forks beams, finishes,
// preempts when blocks run out, abandons planned steps (append, then free without running
// the step or committing), and issues calls that must be rejected. It performs every
// copy-on-write pair, writes every token to its slot in a simulated KV memory and commits
// each step it ran. After every
// step it checks the allocator's consistency invariant and that every live sequence reads
// back exactly its own tokens through its block table, so a wrong prefix hit, a missed copy or
// a block shared by mistake shows up as a wrong token. With a sliding window the model also
// tracks which leading blocks each append must have released (their entries null, their
// slots refused) and reads back the tokens of the blocks still held.
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/kv/priority_lru.hpp>
#include <rungs/kv/sha256.hpp>

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"

using namespace rungs::kv;

namespace {

constexpr std::int32_t num_blocks = 48, block_size = 4, max_sequences = 12, max_model_len = 96;
constexpr token_id junk = -7;  // what a draft writes to a lookahead slot

template <class A>
class engine_model {
 public:
  engine_model(A& a, std::uint32_t seed, std::int32_t window = 0)
      : a_(a),
        window_(window),
        rng_(seed),
        kv_(static_cast<std::size_t>(num_blocks) * block_size, junk),
        writer_(static_cast<std::size_t>(num_blocks), -1) {
    for (int i = 0; i < 4; ++i) system_prompts_.push_back(random_tokens(5 + uniform(0, 30)));
  }

  void step() {
    const int op = uniform(0, 99);
    if (op < 22) create();
    else if (op < 70) decode();
    else if (op < 78) fork();
    else if (op < 84) finish();
    else if (op < 91) free_one();
    else if (op < 94) abandon();
    else rejected_calls();
    REQUIRE(a_.check_consistency() == "");
    verify_contents();
  }

  std::uint64_t hits = 0, preemptions = 0, copies = 0, abandoned = 0, window_releases = 0;
  std::uint64_t hits_past_window = 0;  // prefix hits whose first blocks were outside the window

 private:
  struct sequence {
    sequence_id id;
    std::vector<token_id> tokens;
    int key;  // tenant: salt and adapter index
    bool finished = false;
    std::int32_t first_block = 0;  // blocks before it left the window
  };
  struct tenant {
    std::uint64_t adapter;
    const char* salt;
  };
  static constexpr tenant tenants[] = {{0, ""}, {0, "tenant-b"}, {3, ""}};

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::vector<token_id> random_tokens(int n) {
    std::vector<token_id> t(static_cast<std::size_t>(n));
    for (token_id& x : t) x = uniform(0, 20);  // a small vocabulary: repeated blocks happen
    return t;
  }

  // Device side of append(): copy-on-write first, then the step's token and draft writes.
  void write(const sequence& s, std::int32_t first, std::int32_t count, std::int32_t lookahead) {
    for (const block_copy& c : a_.copies()) {
      REQUIRE(c.src != c.dst);
      std::copy_n(kv_.begin() + c.src * block_size, block_size, kv_.begin() + c.dst * block_size);
      writer_[c.dst] = writer_[c.src];
      ++copies;
    }
    a_.clear_copies();
    std::vector<slot_id> slots(static_cast<std::size_t>(count + lookahead));
    const slot_range r[] = {{s.id, first, count + lookahead}};
    REQUIRE(a_.slot_mapping(r, slots).value() == count + lookahead);
    for (std::int32_t i = 0; i < count + lookahead; ++i) {
      const slot_id slot = slots[static_cast<std::size_t>(i)];
      kv_[static_cast<std::size_t>(slot)] = i < count ? s.tokens[first + i] : junk;
      writer_[slot / block_size] = s.key;
    }
  }

  // Appends tokens (already pushed to s.tokens' end) or rolls back on a rejected call.
  bool append(sequence& s, std::int32_t n, std::int32_t lookahead) {
    const std::int32_t first = static_cast<std::int32_t>(s.tokens.size()) - n;
    const auto before = observe();
    const errc e = a_.append(s.id, std::span(s.tokens).subspan(first), lookahead);
    if (e != errc::ok) {
      REQUIRE((e == errc::out_of_blocks || e == errc::sequence_too_long));
      REQUIRE(observe() == before);  // a rejected call changes nothing
      s.tokens.resize(static_cast<std::size_t>(first));
      return false;
    }
    // Keys below p - W + 1 are invisible to the step's first query p = first: whole blocks of
    // them were released.
    if (window_ > 0 && first - window_ + 1 > 0) {
      const std::int32_t leaving = (first - window_ + 1) / block_size;
      if (leaving > s.first_block) {
        window_releases += static_cast<std::uint64_t>(leaving - s.first_block);
        s.first_block = leaving;
      }
    }
    write(s, first, n, lookahead);
    REQUIRE(a_.commit(s.id, static_cast<std::int32_t>(s.tokens.size())) == errc::ok);
    return true;
  }

  // A step planned for a sequence and dropped before it ran: its tokens are appended but
  // never written (their slots keep whatever was there), then the sequence is freed. Half of
  // them are admissions (prompts like create()'s, so later prompts would hit their blocks).
  void abandon() {
    if (uniform(0, 1) == 0) return create(true);
    if (live_.empty()) return;
    const std::size_t i = static_cast<std::size_t>(uniform(0, int(live_.size()) - 1));
    sequence& s = live_[i];
    if (!s.finished) {
      const std::vector<token_id> t = random_tokens(uniform(1, 12));
      if (a_.append(s.id, t, 0) == errc::ok) ++abandoned;
      a_.clear_copies();  // the copies were to run with the step
    }
    release(i);
  }

  void create(bool abandon = false) {
    std::vector<token_id> prompt;
    if (uniform(0, 3) > 0) prompt = system_prompts_[static_cast<std::size_t>(uniform(0, 3))];
    const std::vector<token_id> suffix = random_tokens(uniform(prompt.empty() ? 1 : 0, 20));
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    const int key = uniform(0, 5) == 0 ? uniform(1, 2) : 0;
    const auto before = observe();
    const result<sequence_start> r =
        a_.create(prompt, {.adapter_id = tenants[key].adapter, .cache_salt = tenants[key].salt,
                           .priority = static_cast<std::uint8_t>(uniform(0, 3))});
    if (!r) {
      REQUIRE((r.error() == errc::out_of_blocks || r.error() == errc::too_many_sequences));
      REQUIRE(observe() == before);
      if (r.error() == errc::out_of_blocks) preempt();
      return;
    }
    const std::int32_t cached = r->cached_tokens;
    REQUIRE(cached % block_size == 0);
    REQUIRE(cached <= static_cast<std::int32_t>(prompt.size()) - 1);
    if (!A::cache_type::enabled) REQUIRE(cached == 0);
    hits += static_cast<std::uint64_t>(cached);
    sequence s{r->id, std::vector<token_id>(prompt.begin(), prompt.begin() + cached), key};
    // With a window the hit holds only the blocks the first query (at `cached`) can see.
    if (window_ > 0 && cached - window_ + 1 > 0) s.first_block = (cached - window_ + 1) / block_size;
    hits_past_window += s.first_block > 0;
    // The hit blocks hold this prompt's KV, written under the same tenant; the others are null.
    const auto table = a_.block_table(s.id).value();
    REQUIRE(static_cast<std::int32_t>(table.size()) == cached / block_size);
    for (std::int32_t k = 0; k < s.first_block; ++k) REQUIRE(table[static_cast<std::size_t>(k)] == null_block);
    for (std::int32_t p = s.first_block * block_size; p < cached; ++p) {
      const block_id b = table[static_cast<std::size_t>(p / block_size)];
      REQUIRE(kv_[static_cast<std::size_t>(b * block_size + p % block_size)] == prompt[p]);
      REQUIRE(writer_[b] == key);
    }
    if (abandon) {  // the prefill step is planned, then dropped: nothing is written
      if (a_.append(s.id, std::span(prompt).subspan(static_cast<std::size_t>(cached)), 0) == errc::ok) ++abandoned;
      a_.clear_copies();
      REQUIRE(a_.free(s.id) == errc::ok);
      dead_.push_back(s.id);
      return;
    }
    // Prefill the rest in chunks, the last one with draft slots.
    std::size_t done = static_cast<std::size_t>(cached);
    while (done < prompt.size()) {
      const std::size_t n = std::min<std::size_t>(prompt.size() - done, uniform(1, 12));
      s.tokens.insert(s.tokens.end(), prompt.begin() + done, prompt.begin() + done + n);
      done += n;
      const std::int32_t lookahead = done == prompt.size() ? uniform(0, 2) : 0;
      if (!append(s, static_cast<std::int32_t>(n), lookahead)) {
        REQUIRE(a_.free(s.id) == errc::ok);  // admitted optimistically; give up this time
        dead_.push_back(s.id);
        return;
      }
    }
    live_.push_back(std::move(s));
  }

  sequence* pick(bool running) {
    std::vector<sequence*> c;
    for (sequence& s : live_)
      if (!running || !s.finished) c.push_back(&s);
    return c.empty() ? nullptr : c[static_cast<std::size_t>(uniform(0, int(c.size()) - 1))];
  }

  void decode() {
    sequence* s = pick(true);
    if (s == nullptr) return;
    const int n = uniform(1, 3);  // accepted drafts plus the bonus token
    const std::vector<token_id> t = random_tokens(n);
    s->tokens.insert(s->tokens.end(), t.begin(), t.end());
    if (!append(*s, n, uniform(0, 3))) preempt();
  }

  void fork() {
    sequence* s = pick(true);
    if (s == nullptr) return;
    const result<sequence_id> c = a_.fork(s->id);
    if (!c) {
      REQUIRE(c.error() == errc::too_many_sequences);
      return;
    }
    sequence child = *s;
    child.id = *c;
    live_.push_back(std::move(child));
  }

  void finish() {
    if (sequence* s = pick(true)) {
      REQUIRE(a_.finish(s->id) == errc::ok);
      s->finished = true;
    }
  }

  void release(std::size_t i) {
    REQUIRE(a_.free(live_[i].id) == errc::ok);
    dead_.push_back(live_[i].id);
    live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  void free_one() {
    if (!live_.empty()) release(static_cast<std::size_t>(uniform(0, int(live_.size()) - 1)));
  }
  void preempt() {
    if (live_.empty()) return;
    ++preemptions;
    release(static_cast<std::size_t>(uniform(0, int(live_.size()) - 1)));
  }

  void rejected_calls() {
    const auto before = observe();
    const token_id t = 1;
    if (!dead_.empty()) {
      const sequence_id d = dead_[static_cast<std::size_t>(uniform(0, int(dead_.size()) - 1))];
      REQUIRE(a_.free(d) == errc::unknown_sequence);
      REQUIRE(a_.append(d, std::span(&t, 1), 0) == errc::unknown_sequence);
      REQUIRE(a_.fork(d).error() == errc::unknown_sequence);
      REQUIRE(a_.block_table(d).error() == errc::unknown_sequence);
    }
    for (const sequence& s : live_) {
      if (!s.finished) continue;
      REQUIRE(a_.append(s.id, std::span(&t, 1), 0) == errc::sequence_finished);
      REQUIRE(a_.finish(s.id) == errc::sequence_finished);
    }
    if (sequence* s = pick(true)) {
      REQUIRE(a_.append(s->id, {}, max_model_len) == errc::sequence_too_long);
      REQUIRE(a_.append(s->id, {}, -1) == errc::invalid_range);
      std::vector<slot_id> out(4, 5);
      const slot_range past[] = {{s->id, 0, max_model_len + 1}};
      REQUIRE(a_.slot_mapping(past, out).error() == errc::invalid_range);
      REQUIRE(out == std::vector<slot_id>(4, 5));
    }
    REQUIRE(observe() == before);
  }

  // Every live sequence reads its own tokens back through its slots (from its first block
  // still in the window; the released entries are null and their slots refused).
  void verify_contents() {
    for (const sequence& s : live_) {
      const std::int32_t n = static_cast<std::int32_t>(s.tokens.size());
      REQUIRE(a_.num_tokens(s.id).value() == n);
      const auto table = a_.block_table(s.id).value();
      for (std::int32_t k = 0; k < s.first_block; ++k) REQUIRE(table[static_cast<std::size_t>(k)] == null_block);
      const std::int32_t from = s.first_block * block_size;
      if (from > 0) {
        std::vector<slot_id> one(1);
        const slot_range released[] = {{s.id, from - 1, 1}};
        REQUIRE(a_.slot_mapping(released, one).error() == errc::invalid_range);
      }
      std::vector<slot_id> slots(static_cast<std::size_t>(n - from));
      const slot_range r[] = {{s.id, from, n - from}};
      REQUIRE(a_.slot_mapping(r, slots).value() == n - from);
      for (std::int32_t p = from; p < n; ++p)
        REQUIRE(kv_[static_cast<std::size_t>(slots[static_cast<std::size_t>(p - from)])] == s.tokens[p]);
    }
  }

  kv_test::snapshot observe() const { return kv_test::observe(a_); }

  A& a_;
  std::int32_t window_;  // allocator_config::sliding_window
  std::mt19937 rng_;
  std::vector<token_id> kv_;  // the simulated device KV memory: one token per slot
  std::vector<int> writer_;   // tenant that last wrote each block
  std::vector<std::vector<token_id>> system_prompts_;
  std::vector<sequence> live_;
  std::vector<sequence_id> dead_;
};

template <class A>
void run(std::uint32_t seed, int steps, std::int32_t window = 0, std::int32_t pool_blocks = num_blocks) {
  A a({.num_blocks = pool_blocks, .block_size = block_size, .max_sequences = max_sequences,
       .max_model_len = max_model_len, .watermark_blocks = 2, .sliding_window = window});
  engine_model<A> engine(a, seed, window);
  for (int i = 0; i < steps; ++i) {
    CAPTURE(seed, i);
    engine.step();
  }
  // The scenarios must actually have exercised what they claim to.
  CHECK(engine.preemptions > 0);
  CHECK(engine.copies > 0);
  CHECK(engine.abandoned > 0);
  if (window > 0) CHECK(engine.window_releases > 0);
  if constexpr (A::cache_type::enabled) {
    CHECK(engine.hits > 0);
    CHECK(a.metrics().evictions > 0);
    if (window > 0) CHECK(engine.hits_past_window > 0);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("random operation sequences keep every invariant", "", free_list_allocator,
                   prefix_caching_allocator<>, (prefix_caching_allocator<wyhash64, priority_lru<4>>),
                   (prefix_caching_allocator<sha256_hasher, free_stack>)) {
  for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u}) run<TestType>(seed, 3000);
}

// Windows of 1 key (a block is released as soon as the next query passes it), 6 and 13 (not
// multiples of the block size), with every cache and eviction policy above. A windowed
// sequence holds few blocks, so the pool is halved to keep preemption in play.
TEMPLATE_TEST_CASE("random operation sequences with a sliding window keep every invariant", "", free_list_allocator,
                   prefix_caching_allocator<>, (prefix_caching_allocator<wyhash64, priority_lru<4>>)) {
  for (std::int32_t window : {1, 6, 13})
    for (std::uint32_t seed : {1u, 2u}) {
      CAPTURE(window);
      run<TestType>(seed, 2000, window, num_blocks / 2);
    }
}
