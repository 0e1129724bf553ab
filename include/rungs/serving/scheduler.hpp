// rungs::serving::scheduler: continuous batching over a paged KV block allocator.
//
// The scheduler decides, step by step, which requests run and which tokens of each are
// computed; it owns the requests' tokens and their KV blocks (through the allocator it is
// moved in: it owns the pool, as vLLM v1's scheduler owns its KV cache manager), and nothing
// else: no clock, no model. What executes a step is rungs::engine::engine's (engine.hpp: the
// serving demo and rungs-plan simulate run through it). The loop it runs is
//
//   scheduler s(kv::prefix_caching_allocator<>(config), {.max_num_seqs = 256});
//   s.submit({.id = 1, .prompt = tokens, .max_output_tokens = 128, .session = chat});
//   while (!s.idle()) {
//     const scheduled_step& step = s.schedule();           // may preempt; may be empty
//     if (step.empty()) break;                             // nothing fits: wait for arrivals
//     std::span<const token_id> sampled = run(step.sequences);  // one per sampling entry
//     const step_events& ev = s.commit(sampled);           // first tokens, finished requests
//   }
//
// The library's serving loop over a scheduler is rungs::engine::engine::step (engine.hpp).
//
// Policies, after vLLM's schedulers (v1 with chunked prefill, v0 without):
//   admission   first come, first served from the waiting queue, when the allocator can hold
//               the request's whole prompt with its watermark to spare (kv create()), or
//               with admit_whole_prompt = false only the chunk this step would compute (as
//               vLLM's v1 scheduler allocates: later chunks may then preempt); the first
//               request that does not fit blocks the ones behind it (no reordering).
//               Requests preempted in a step block admission in that step.
//   steps       chunked_prefill (v1): the running requests first (decodes take one token,
//               partial prefills their next chunk), then new admissions, all within
//               max_num_batched_tokens and max_num_seqs: one mixed step. Without it (v0):
//               a step either prefills newly admitted prompts whole, or decodes every
//               running request; prefills go first ("pause the world").
//   preemption  by recompute: when a running request's next tokens need a block and none is
//               free, the most recently admitted running request is preempted (its blocks
//               freed, its progress dropped) and requeued at the head of the waiting queue;
//               readmitted, it prefills everything it had (prompt and outputs so far), hitting
//               its own freed blocks when the allocator caches prefixes.
//   sessions    a request with a session id is one turn of a chat: its prompt is appended to
//               the session's conversation (every earlier prompt and answer), so with a
//               prefix-caching allocator the turn reuses the blocks of the previous one.
//   reservation reserve_max_model_len: each request reserves blocks for max_model_len tokens
//               at admission (the pre-paging baseline: the blog's "naive" batching).
#pragma once

#include <rungs/blocks.hpp>
#include <rungs/kv/allocator.hpp>
#include <rungs/kv/types.hpp>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rungs::serving {

using token_id = kv::token_id;
using request_id = std::uint64_t;
/// A chat conversation; 0 means "no session" (a standalone request).
using session_id = std::uint64_t;

struct request {
  request_id id = 0;
  /// This turn's new tokens (for a session, appended to the conversation so far).
  std::vector<token_id> prompt;
  /// The request finishes after this many output tokens (or at eos).
  std::int32_t max_output_tokens = 1;
  session_id session = 0;
  /// LoRA adapter, per-tenant cache salt and eviction priority (kv::sequence_params).
  std::uint64_t adapter_id = 0;
  std::string cache_salt;
  std::uint8_t priority = 0;
  /// Leading tokens (history included) whose KV arrives with the request, computed elsewhere:
  /// the decode side of disaggregated prefill and decode (vLLM's KV connector reports them as
  /// external computed tokens). Admission allocates their blocks and computes only the rest, so
  /// at least one token is computed (the one whose logits sample the next). A preempted request
  /// recomputes them (the transferred KV is gone with its blocks).
  std::int32_t transferred_tokens = 0;
};

struct scheduler_options {
  std::int32_t max_num_seqs = 256;              ///< running requests at most
  std::int32_t max_num_batched_tokens = 2048;   ///< tokens computed per step at most
  bool chunked_prefill = true;                  ///< mixed steps (v1); false: separate prefill steps (v0)
  bool reserve_max_model_len = false;           ///< reserve max_model_len tokens per request at admission
  bool admit_whole_prompt = true;               ///< false: admit when this step's chunk fits (vLLM v1)
  std::optional<token_id> eos{};                ///< a sampled eos finishes a request

  void validate() const {
    auto positive = [](const char* what, std::int64_t v) {
      if (v <= 0) throw std::invalid_argument(std::string("scheduler: ") + what + " = " + std::to_string(v) + " must be positive");
    };
    positive("max_num_seqs", max_num_seqs);
    positive("max_num_batched_tokens", max_num_batched_tokens);
  }

  /// validate(), and the rules that involve the allocator's max_model_len (the longest
  /// conversation: prompt, history and outputs), which the scheduler reads from its allocator.
  void validate(std::int32_t max_model_len) const {
    validate();
    if (max_model_len <= 0)
      throw std::invalid_argument("scheduler: max_model_len = " + std::to_string(max_model_len) + " must be positive");
    if (!chunked_prefill && max_num_batched_tokens < max_model_len)
      throw std::invalid_argument("scheduler: max_num_batched_tokens = " + std::to_string(max_num_batched_tokens) +
                                  " must be at least max_model_len = " + std::to_string(max_model_len) +
                                  " without chunked prefill (a whole prompt is computed in one step)");
  }
};

enum class step_phase : std::uint8_t { prefill, decode, mixed };

constexpr const char* to_string(step_phase p) {
  return p == step_phase::prefill ? "prefill" : p == step_phase::decode ? "decode" : "mixed";
}

/// Why admission stopped in a step with requests still waiting.
enum class admission_stop : std::uint8_t {
  none,          ///< nothing was left waiting
  token_budget,  ///< max_num_batched_tokens is used up (or a whole prompt does not fit it, v0)
  max_seqs,      ///< max_num_seqs requests are running
  kv_blocks,     ///< the head of the queue does not fit the free KV blocks (with the watermark)
  preemption,    ///< the step preempted, so it admits nothing
};

constexpr const char* to_string(admission_stop a) {
  switch (a) {
    case admission_stop::none: return "none";
    case admission_stop::token_budget: return "token-budget";
    case admission_stop::max_seqs: return "max-seqs";
    case admission_stop::kv_blocks: return "kv-blocks";
    case admission_stop::preemption: return "preemption";
  }
  return "?";
}

/// One sequence of a step in the engine's terms (field for field rungs::engine::sequence):
/// the step's new tokens, the tokens already in the KV cache, the sequence's block table.
struct step_sequence {
  std::span<const token_id> tokens;
  std::int64_t context = 0;
  std::span<const kv::block_id> block_table;
};

/// What the scheduler knows about one sequence of a step.
struct step_entry {
  request_id request = 0;
  kv::sequence_id seq{};
  std::int32_t first = 0;   ///< position of its first new token
  std::int32_t count = 0;   ///< new tokens this step
  bool decode = false;      ///< one token after its last sampled one (else a prefill chunk)
  bool samples = false;     ///< the step produces its next token (decode, or its last prefill chunk)
};

struct scheduled_step {
  std::vector<step_entry> entries;
  std::vector<step_sequence> sequences;  ///< parallel to entries
  step_phase phase = step_phase::decode;
  std::int32_t tokens = 0;               ///< new tokens over all sequences
  std::int32_t sampling = 0;             ///< entries that sample
  std::vector<request_id> admitted;      ///< admitted in this step
  std::vector<request_id> preempted;     ///< preempted while planning this step
  admission_stop stopped = admission_stop::none;  ///< why requests were left waiting

  bool empty() const { return entries.empty(); }
  /// An empty step that keeps its vectors' storage (the scheduler plans every step into one).
  void clear() {
    entries.clear();
    sequences.clear();
    admitted.clear();
    preempted.clear();
    phase = step_phase::decode;
    tokens = sampling = 0;
    stopped = admission_stop::none;
  }
  /// The waiting requests are held back by KV memory (not by the step's size).
  bool waiting_for_blocks() const { return stopped == admission_stop::kv_blocks || stopped == admission_stop::preemption; }
};

struct finished_request {
  request_id id = 0;
  session_id session = 0;
  std::int32_t prompt_tokens = 0;  ///< conversation history and this turn's prompt
  std::vector<token_id> output;
  std::int32_t preemptions = 0;
};

struct step_events {
  std::vector<request_id> first_token;  ///< requests whose first output token this step produced
  std::vector<finished_request> finished;
};

struct scheduler_stats {
  std::int64_t steps = 0;
  std::int64_t submitted = 0, admitted = 0, finished = 0;
  std::int64_t preemptions = 0;         ///< abort_step()'s included
  std::int64_t aborted_steps = 0;       ///< steps taken back (abort_step)
  std::int64_t computed_tokens = 0;     ///< tokens run through the model (recomputation included)
  std::int64_t recomputed_tokens = 0;   ///< of which recomputing preempted progress
  std::int64_t prefix_hit_tokens = 0;   ///< prompt tokens found in the prefix cache at admission
  std::int64_t transferred_tokens = 0;  ///< tokens admitted with KV computed elsewhere (request::transferred_tokens)
};

template <class Allocator>
class scheduler {
  static_assert(kv::check_block_allocator<Allocator>());

 public:
  /// The allocator is moved in: an lvalue does not compile, since a copy would diverge from
  /// the caller's silently. Read it back through blocks().
  /// The longest conversation is the allocator's max_model_len (its block tables are that
  /// wide): stated once, in the allocator's configuration.
  scheduler(Allocator&& blocks, scheduler_options options) : blocks_(std::move(blocks)), opts_(std::move(options)) {
    opts_.validate(blocks_.max_model_len());
  }

  /// The longest conversation (prompt, history and outputs): the allocator's.
  std::int32_t max_model_len() const { return blocks_.max_model_len(); }

  /// Queues a request. Throws std::invalid_argument for one that can never be served: an
  /// id in use, an empty prompt, a conversation longer than max_model_len, more blocks than
  /// the pool holds, or a session with a turn still in flight.
  void submit(request r) {
    if (requests_.contains(r.id)) throw std::invalid_argument("scheduler: request " + std::to_string(r.id) + " is already queued");
    if (r.prompt.empty()) throw std::invalid_argument("scheduler: request " + std::to_string(r.id) + " has an empty prompt");
    if (r.max_output_tokens <= 0)
      throw std::invalid_argument("scheduler: request " + std::to_string(r.id) + ": max_output_tokens = " +
                                  std::to_string(r.max_output_tokens) + " must be positive");
    request_state s;
    if (r.session != 0) {
      conversation& c = sessions_[r.session];
      if (c.in_flight)
        throw std::invalid_argument("scheduler: session " + std::to_string(r.session) + " already has a turn in flight");
      s.tokens = c.tokens;
    }
    s.tokens.insert(s.tokens.end(), r.prompt.begin(), r.prompt.end());
    s.prompt_len = static_cast<std::int32_t>(s.tokens.size());
    const std::int64_t longest = std::int64_t{s.prompt_len} + r.max_output_tokens;
    if (longest > blocks_.max_model_len())
      throw std::invalid_argument("scheduler: request " + std::to_string(r.id) + " needs " + std::to_string(longest) +
                                  " tokens (prompt and history " + std::to_string(s.prompt_len) + " + output " +
                                  std::to_string(r.max_output_tokens) + "), more than max_model_len = " +
                                  std::to_string(blocks_.max_model_len()));
    const std::int64_t need = blocks_needed(opts_.reserve_max_model_len ? blocks_.max_model_len() : longest);
    if (need + watermark() > blocks_.num_blocks())
      throw std::invalid_argument("scheduler: request " + std::to_string(r.id) + " needs " + std::to_string(need) +
                                  " KV blocks (+ watermark " + std::to_string(watermark()) + "), more than the pool's " +
                                  std::to_string(blocks_.num_blocks()));
    if (r.transferred_tokens < 0 || r.transferred_tokens >= s.prompt_len)
      throw std::invalid_argument("scheduler: request " + std::to_string(r.id) + ": transferred_tokens = " +
                                  std::to_string(r.transferred_tokens) + " must be in [0, " + std::to_string(s.prompt_len) +
                                  "): at least the last prompt token is computed, to sample from");
    s.transferred = r.transferred_tokens;
    if (r.session != 0) sessions_[r.session].in_flight = true;
    s.max_output = r.max_output_tokens;
    s.session = r.session;
    s.adapter_id = r.adapter_id;
    s.cache_salt = std::move(r.cache_salt);
    s.priority = r.priority;
    requests_.emplace(r.id, std::move(s));
    waiting_.push_back(r.id);
    ++stats_.submitted;
  }

  /// Forgets a session's conversation (its cached blocks stay with the allocator).
  void end_session(session_id s) {
    auto it = sessions_.find(s);
    if (it == sessions_.end()) return;
    if (it->second.in_flight)
      throw std::invalid_argument("scheduler: session " + std::to_string(s) + " has a turn in flight");
    sessions_.erase(it);
  }

  /// Plans the next step; commit() must follow before the next schedule(). Empty when
  /// nothing can run (nothing queued, or the head of the queue does not fit yet).
  const scheduled_step& schedule() {
    if (in_flight_) throw std::logic_error("scheduler: schedule() called twice without commit()");
    step_.clear();  // keeps the storage: a step of 512 sequences allocates nothing
    std::int32_t budget = opts_.max_num_batched_tokens;
    bool prefill_only = false;
    if (!opts_.chunked_prefill) {  // v0: admit and prefill if anything fits, else decode
      admit(budget);
      prefill_only = !step_.entries.empty();
    }
    if (!prefill_only) {  // v0 keeps the reason its admission failed for the decode step
      schedule_running(budget);
      if (!step_.preempted.empty()) step_.stopped = admission_stop::preemption;
      else if (opts_.chunked_prefill) admit(budget);
    }
    if (waiting_.empty()) step_.stopped = admission_stop::none;
    finish_plan();
    in_flight_ = !step_.empty();
    return step_;
  }

  /// Takes the step's sampled tokens (one per sampling entry, in entry order), advances
  /// every request and retires the finished ones.
  const step_events& commit(std::span<const token_id> sampled) {
    if (!in_flight_) throw std::logic_error("scheduler: commit() without a scheduled step");
    if (sampled.size() != static_cast<std::size_t>(step_.sampling))
      throw std::invalid_argument("scheduler: commit() got " + std::to_string(sampled.size()) + " sampled tokens for " +
                                  std::to_string(step_.sampling) + " sampling sequences");
    in_flight_ = false;
    events_.first_token.clear();
    events_.finished.clear();
    std::size_t k = 0;
    for (const step_entry& e : step_.entries) {
      request_state& r = requests_.at(e.request);
      r.computed += e.count;
      // The step ran: the blocks it filled hold written KV and may serve as prefix hits after
      // the request is freed (before this, a free drops them).
      if (blocks_.commit(e.seq, r.computed) != kv::errc::ok)
        throw std::logic_error("scheduler: the allocator refused to commit request " + std::to_string(e.request));
      if (!e.samples) continue;
      const token_id t = sampled[k++];
      r.tokens.push_back(t);
      const std::int32_t outputs = static_cast<std::int32_t>(r.tokens.size()) - r.prompt_len;
      if (outputs == 1) events_.first_token.push_back(e.request);
      if (outputs >= r.max_output || (opts_.eos && t == *opts_.eos)) retire(e.request, r);
    }
    ++stats_.steps;
    return events_;
  }

  /// The step planned by schedule() did not run (its device failed): every request of the
  /// step is preempted by recompute (its blocks freed; their uncommitted KV never becomes a
  /// prefix hit) and requeued at the head of the waiting queue in step order, and the plan
  /// lists them in `preempted`. Afterwards the state is that of a step that never ran, but
  /// for the lost progress. Returns the requests, in step order.
  std::vector<request_id> abort_step() {
    if (!in_flight_) throw std::logic_error("scheduler: abort_step() without a scheduled step");
    in_flight_ = false;
    std::vector<request_id> ids;
    for (const step_entry& e : step_.entries) ids.push_back(e.request);
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) preempt(*it);  // push_front: reverse keeps step order
    std::reverse(step_.preempted.end() - static_cast<std::ptrdiff_t>(ids.size()), step_.preempted.end());
    ++stats_.aborted_steps;
    return ids;
  }

  /// Empty when consistent; otherwise the first broken invariant: every live request is
  /// either waiting (holding no KV sequence) or running (holding one), never both, never
  /// twice; and the allocator's own check, when it has one.
  std::string check_consistency() const {
    std::unordered_map<request_id, int> seen;
    for (request_id id : waiting_) ++seen[id];
    for (request_id id : running_) seen[id] += 2;
    if (seen.size() != requests_.size())
      return std::to_string(requests_.size()) + " live requests but " + std::to_string(seen.size()) + " queued";
    for (const auto& [id, where] : seen) {
      auto it = requests_.find(id);
      if (it == requests_.end()) return "request " + std::to_string(id) + " is queued but not live";
      if (where != 1 && where != 2) return "request " + std::to_string(id) + " is queued more than once";
      if ((where == 2) != it->second.seq.has_value())
        return "request " + std::to_string(id) + (where == 2 ? " runs without" : " waits with") + " a KV sequence";
    }
    if constexpr (requires(const Allocator& a) { { a.check_consistency() } -> std::convertible_to<std::string>; })
      if (std::string e = blocks_.check_consistency(); !e.empty()) return "allocator: " + e;
    return {};
  }

  /// Nothing waiting and nothing running.
  bool idle() const { return waiting_.empty() && running_.empty(); }
  std::size_t waiting() const { return waiting_.size(); }
  std::size_t running() const { return running_.size(); }
  const std::deque<request_id>& waiting_queue() const { return waiting_; }
  const std::vector<request_id>& running_requests() const { return running_; }
  const scheduler_stats& stats() const { return stats_; }
  const scheduler_options& options() const { return opts_; }
  Allocator& blocks() { return blocks_; }
  const Allocator& blocks() const { return blocks_; }
  /// A live request's tokens (history, prompt, outputs so far); empty when unknown.
  std::span<const token_id> tokens(request_id id) const {
    auto it = requests_.find(id);
    return it == requests_.end() ? std::span<const token_id>{} : std::span<const token_id>(it->second.tokens);
  }
  /// A session's conversation so far (finished turns only).
  std::span<const token_id> conversation_tokens(session_id s) const {
    auto it = sessions_.find(s);
    return it == sessions_.end() ? std::span<const token_id>{} : std::span<const token_id>(it->second.tokens);
  }

 private:
  struct request_state {
    std::vector<token_id> tokens;  // history + prompt + outputs so far
    std::int32_t prompt_len = 0;
    std::int32_t max_output = 0;
    std::int32_t computed = 0;     // tokens whose KV is written
    std::int32_t recompute_until = 0;  // after a preemption: tokens computed before it
    std::int32_t preemptions = 0;
    std::int32_t transferred = 0;  // leading tokens whose KV arrives with it (0 once preempted)
    std::optional<kv::sequence_id> seq;
    session_id session = 0;
    std::uint64_t adapter_id = 0;
    std::string cache_salt;
    std::uint8_t priority = 0;
  };
  struct conversation {
    std::vector<token_id> tokens;
    bool in_flight = false;
  };

  std::int64_t watermark() const {
    if constexpr (requires(const Allocator& a) { a.config().watermark_blocks; })
      return blocks_.config().watermark_blocks;
    else
      return 0;
  }

  // The most blocks a request of `tokens` tokens holds at once: all of them with one
  // attention group; an allocator of several groups (kv::hybrid_allocator) says, given the
  // most tokens one append brings (a prefill chunk, or the whole reservation).
  std::int64_t blocks_needed(std::int64_t tokens) const {
    if constexpr (requires(const Allocator& a) { { a.blocks_held(std::int32_t{}, std::int32_t{}) } -> std::convertible_to<std::int64_t>; }) {
      const std::int64_t step = opts_.chunked_prefill && !opts_.reserve_max_model_len
                                    ? std::min<std::int64_t>(tokens, opts_.max_num_batched_tokens) : tokens;
      return blocks_.blocks_held(static_cast<std::int32_t>(tokens), static_cast<std::int32_t>(step));
    } else {
      return rungs::blocks_for(tokens, blocks_.block_size());
    }
  }

  std::int32_t lookahead(const request_state& r, std::int32_t count) const {
    return opts_.reserve_max_model_len ? std::max(0, blocks_.max_model_len() - (r.computed + count)) : 0;
  }

  // Running requests in admission order: each takes its next tokens, preempting from the
  // back of the queue when the allocator is out of blocks.
  void schedule_running(std::int32_t& budget) {
    for (std::size_t i = 0; i < running_.size() && budget > 0;) {
      const request_id id = running_[i];
      request_state& r = requests_.at(id);
      const std::int32_t remaining = static_cast<std::int32_t>(r.tokens.size()) - r.computed;
      const std::int32_t count = std::min(remaining, budget);
      bool self_preempted = false;
      while (blocks_.append(*r.seq, span_of(r, count), lookahead(r, count)) != kv::errc::ok) {
        const request_id victim = running_.back();
        preempt(victim);
        if (victim == id) {
          self_preempted = true;
          break;
        }
      }
      if (self_preempted) break;  // it was the last one: nothing after it to schedule
      add_entry(id, r, count);
      budget -= count;
      ++i;
    }
  }

  // Admits from the head of the waiting queue while the step has room.
  void admit(std::int32_t& budget) {
    while (!waiting_.empty()) {
      if (budget <= 0) return stop(admission_stop::token_budget);
      if (running_.size() >= static_cast<std::size_t>(opts_.max_num_seqs)) return stop(admission_stop::max_seqs);
      const request_id id = waiting_.front();
      request_state& r = requests_.at(id);
      const auto all = static_cast<std::int32_t>(r.tokens.size());
      if (!opts_.chunked_prefill && all > budget) return stop(admission_stop::token_budget);  // v0: whole prompts only
      if (opts_.reserve_max_model_len && !blocks_.can_admit(blocks_.max_model_len())) return stop(admission_stop::kv_blocks);
      const kv::sequence_params params{.adapter_id = r.adapter_id, .cache_salt = r.cache_salt, .priority = r.priority,
                                       .admit_tokens = opts_.admit_whole_prompt ? 0 : budget};
      const kv::result<kv::sequence_start> started = blocks_.create(std::span<const token_id>(r.tokens), params);
      if (!started)  // first come, first served: the head waits, and so do the others
        return stop(started.error() == kv::errc::too_many_sequences ? admission_stop::max_seqs : admission_stop::kv_blocks);
      r.seq = started->id;
      r.computed = started->cached_tokens;
      const std::int32_t transferred = std::max(0, r.transferred - r.computed);
      if (transferred > 0 && blocks_.append(*r.seq, span_of(r, transferred)) == kv::errc::ok) r.computed += transferred;
      const std::int32_t count = std::min(all - r.computed, budget);
      if (r.computed < r.transferred || blocks_.append(*r.seq, span_of(r, count), lookahead(r, count)) != kv::errc::ok) {
        (void)blocks_.free(*r.seq);  // create() checked the chunk fits; keep the queue intact regardless
        r.seq.reset();
        r.computed = 0;
        return stop(admission_stop::kv_blocks);
      }
      waiting_.pop_front();
      running_.push_back(id);
      step_.admitted.push_back(id);
      ++stats_.admitted;
      stats_.prefix_hit_tokens += started->cached_tokens;
      stats_.transferred_tokens += transferred;
      add_entry(id, r, count);
      budget -= count;
    }
  }

  void stop(admission_stop why) { step_.stopped = why; }

  std::span<const token_id> span_of(const request_state& r, std::int32_t count) const {
    return std::span<const token_id>(r.tokens).subspan(static_cast<std::size_t>(r.computed), static_cast<std::size_t>(count));
  }

  void add_entry(request_id id, request_state& r, std::int32_t count) {
    const auto all = static_cast<std::int32_t>(r.tokens.size());
    step_entry e{.request = id, .seq = *r.seq, .first = r.computed, .count = count};
    // A transferred request's one computed token follows KV computed elsewhere: a decode too.
    e.decode = count == 1 && r.computed + 1 == all && (all > r.prompt_len || (r.transferred > 0 && r.computed == r.transferred)) &&
               r.computed >= r.recompute_until;
    e.samples = r.computed + count == all;
    step_.entries.push_back(e);
    const kv::result<std::span<const kv::block_id>> table = blocks_.block_table(*r.seq);
    step_.sequences.push_back({span_of(r, count), r.computed, table ? *table : std::span<const kv::block_id>{}});
    step_.tokens += count;
    step_.sampling += e.samples;
    stats_.computed_tokens += count;
    if (r.computed < r.recompute_until) stats_.recomputed_tokens += std::min(count, r.recompute_until - r.computed);
  }

  void preempt(request_id id) {
    request_state& r = requests_.at(id);
    (void)blocks_.free(*r.seq);
    r.seq.reset();
    r.recompute_until = std::max(r.recompute_until, r.computed);
    r.computed = 0;
    r.transferred = 0;
    ++r.preemptions;
    running_.erase(std::find(running_.begin(), running_.end(), id));
    waiting_.push_front(id);
    step_.preempted.push_back(id);
    ++stats_.preemptions;
  }

  void retire(request_id id, request_state& r) {
    (void)blocks_.finish(*r.seq);
    (void)blocks_.free(*r.seq);
    running_.erase(std::find(running_.begin(), running_.end(), id));
    finished_request f;
    f.id = id;
    f.session = r.session;
    f.prompt_tokens = r.prompt_len;
    f.preemptions = r.preemptions;
    f.output.assign(r.tokens.begin() + r.prompt_len, r.tokens.end());
    if (r.session != 0) {
      conversation& c = sessions_[r.session];
      c.tokens = std::move(r.tokens);
      c.in_flight = false;
    }
    events_.finished.push_back(std::move(f));
    requests_.erase(id);
    ++stats_.finished;
  }

  void finish_plan() {
    bool prefill = false, decode = false;
    for (const step_entry& e : step_.entries) (e.decode ? decode : prefill) = true;
    step_.phase = prefill && decode ? step_phase::mixed : prefill ? step_phase::prefill : step_phase::decode;
  }

  Allocator blocks_;
  scheduler_options opts_;
  std::unordered_map<request_id, request_state> requests_;
  std::unordered_map<session_id, conversation> sessions_;
  std::deque<request_id> waiting_;
  std::vector<request_id> running_;
  scheduled_step step_;
  step_events events_;
  scheduler_stats stats_;
  bool in_flight_ = false;
};

}  // namespace rungs::serving
