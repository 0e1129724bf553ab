// The demo's run, host side: defaults and memory plan (resolve), the configuration lines, the
// host backend's serving (serve_host), a data-parallel rank's share (share_of) and the check
// against the plain loop (verify). Compiled once into an object library shared by serve_demo,
// serve_demo_dp and the serving tests.
#include "run.hpp"

#include <rungs/engine/host_backend.hpp>
#include <rungs/planning/fleet.hpp>
#include <rungs/serving/workload.hpp>

#include <algorithm>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "reference_loop.hpp"
#include "report.hpp"

namespace demo {
namespace {

/// The host backend's model side: greedy sampling of the engine's rows, KV block copies.
struct host_runtime {
  const host_decoder<tiny_model>& model;
  kv_pools<tiny_model>& pools;

  void copy_blocks(std::span<const rungs::kv::block_copy> copies) {
    for (const rungs::kv::block_copy& c : copies) pools.copy_block(c.src, c.dst);
  }
  void sample(std::span<const float> rows, std::int64_t n, std::span<token_id> out) const {
    const std::int64_t h = host_decoder<tiny_model>::hidden;
    for (std::int64_t i = 0; i < n; ++i)
      out[static_cast<std::size_t>(i)] = model.sample(rows.subspan(static_cast<std::size_t>(i * h), static_cast<std::size_t>(h)));
  }
};

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

}  // namespace

backend_info host_backend_info(std::uint64_t seed) {
  backend_info b;
  b.device = "host (CPU; attention through rungs' paged-attention reference)";
  b.shape = tiny_model;
  b.kv_cache_dtypes = {rungs::dtype::fp32, rungs::dtype::fp16, rungs::dtype::bf16, rungs::dtype::fp8_e4m3,
                       rungs::dtype::fp8_e5m2};
  b.model = model_config{.seed = seed};
  b.weight_bytes = decoder_dims<tiny_model>::params(b.model) * static_cast<std::int64_t>(sizeof(float));
  b.default_memory = 6 << 20;
  b.memory_source = "the host default";
  return b;
}

namespace {

// The largest group's layers: a hybrid pool's block holds block_size tokens of them.
std::int64_t page_layers(const rungs::cli::layer_pattern& p) {
  std::int64_t most = 0;
  for (const rungs::kv::layer_group& g : p.groups) most = std::max(most, g.layers);
  return most;
}

// --layers: a count must be the model's; a pattern assigns the model's layers to attention
// groups in the pattern's order (full:1,sliding16:1: layer 0 full, layer 1 a window of 16 keys)
// and lists the groups full attention first (group 0's table is the staged one). Both backends'
// models read every group's tables (host_step::groups, cuda_step::block_tables).
void resolve_layers(const rungs::cli::layer_pattern& p, const backend_info& info, run_setup& s) {
  const std::int64_t layers = info.shape.num_layers;
  if (p.layers != layers) {
    const std::int64_t full = layers / 2;  // an example pattern of the model's layers, when it has two
    throw usage_error("--layers: the pattern has " + std::to_string(p.layers) + " layers; the " +
                      (s.backend == backend_kind::host ? "host" : "cuda") + " model has " + std::to_string(layers) +
                      (layers >= 2 ? " (e.g. full:" + std::to_string(full) + ",sliding16:" + std::to_string(layers - full) + ")" : ""));
  }
  if (p.groups.empty()) return;  // a count: every layer full attention, as without --layers
  bool full = false;
  for (const rungs::kv::layer_group& g : p.groups) {
    if (g.attention.kind == rungs::kv::attention_kind::chunked_local)
      throw usage_error("--layers: '" + rungs::cli::describe(g) + "': the " +
                        (s.backend == backend_kind::host ? "host" : "cuda") +
                        " model's attention has sliding windows, not chunked local attention");
    full = full || g.attention.kind == rungs::kv::attention_kind::full;
  }
  if (!full) throw usage_error("--layers: the pattern has no full-attention layer; the saving is measured against it");
  for (const rungs::kv::layer_group& g : p.groups)
    if (g.attention.kind == rungs::kv::attention_kind::full) s.groups.insert(s.groups.begin(), g.attention);
    else s.groups.push_back(g.attention);
  for (const rungs::kv::layer_group& g : p.groups)
    for (std::int64_t l = 0; l < g.layers; ++l) {
      s.attention.group.push_back(static_cast<int>(std::find(s.groups.begin(), s.groups.end(), g.attention) - s.groups.begin()));
      s.attention.window.push_back(g.attention.kind == rungs::kv::attention_kind::sliding_window ? g.attention.span : 0);
    }
}

}  // namespace

void hybrid_kv::print(std::ostream& log, const run_setup& s) const {
  const std::int64_t layer_block = s.block_bytes / page_layers(*s.opts.layers);
  const std::int64_t layers = std::int64_t(s.attention.group.size());
  const double saved = full_blocks > 0 ? 100.0 * (1.0 - blocks * static_cast<double>(s.block_bytes) /
                                                            (full_blocks * static_cast<double>(layers * layer_block)))
                                       : 0.0;
  log << "Hybrid KV (--layers";
  for (const rungs::kv::layer_group& g : s.opts.layers->groups) log << " " << rungs::cli::describe(g);
  log << "): peak " << human_bytes(peak_blocks * s.block_bytes) << " held, " << human_bytes(peak_full_blocks * layers * layer_block)
      << " if every layer were full; " << std::fixed << std::setprecision(1) << saved << std::defaultfloat
      << "% less over the run\n";
}

run_setup resolve(const demo_options& o, backend_kind backend, const backend_info& info) {
  const bool host = backend == backend_kind::host;
  run_setup s;
  s.opts = o;
  s.backend = backend;
  s.model = info.model;
  if (o.clock == clock_kind::virtual_time) {
    // The CUDA backend reports measured capture times, which the virtual clock cannot model.
    if (!host) throw usage_error("--clock virtual needs --backend host");
    s.virtual_clock = virtual_costs{};
  }
  // The host model has no attention kernels to choose from.
  if (host && o.decode_kernel != decode_kernel_kind::automatic)
    throw usage_error("--decode-kernel needs --backend cuda");
  if (host && o.prefill_kernel != kernel_choice::automatic)
    throw usage_error("--prefill-kernel needs --backend cuda");
  s.model.kv_cache = o.kv_cache_dtype.value_or(info.kv_cache_dtypes.front());
  if (std::find(info.kv_cache_dtypes.begin(), info.kv_cache_dtypes.end(), s.model.kv_cache) == info.kv_cache_dtypes.end()) {
    std::string known;
    for (rungs::dtype t : info.kv_cache_dtypes) known += (known.empty() ? "" : ", ") + std::string(rungs::name(t));
    throw usage_error("--kv-cache-dtype = " + std::string(rungs::name(s.model.kv_cache)) + " is not supported by the " +
                      (host ? "host" : "cuda") + " backend's model (its caches: " + known + "; fp8 is fp8_e4m3)");
  }
  if (o.layers) resolve_layers(*o.layers, info, s);
  // Workload: the blog's chats (scaled down on the host), or a trace.
  std::vector<serving::trace_request> rows;
  if (!o.trace.empty()) {
    try {
      rows = serving::read_trace(o.trace);
    } catch (const std::exception& e) {
      throw usage_error(std::string("--trace: ") + e.what());
    }
  } else {
    rows = serving::generate_chat({.conversations = o.chats.value_or(host ? 16 : 14),
                                   .turns = o.turns.value_or(host ? 6 : 10),
                                   .prompt_tokens = o.input_tokens.value_or(host ? 32 : 150),
                                   .output_tokens = o.output_tokens.value_or(host ? 64 : 350),
                                   .jitter = o.jitter,
                                   .think = o.think,
                                   .arrival_interval = o.arrival_interval,
                                   .seed = o.seed});
  }
  const std::int64_t longest = longest_conversation(rows);
  const std::int64_t block = info.shape.block_size;

  // Scheduler. The workload's lengths are checked before any prompt is built: a trace row of
  // 2^31 tokens must be refused, not allocated.
  constexpr std::int64_t longest_model_len = std::numeric_limits<std::int32_t>::max() / 128 * 128;
  if (!o.max_model_len && longest > longest_model_len)
    throw usage_error("the workload's longest chat (" + std::to_string(longest) + " tokens) is longer than any " +
                      "--max-model-len (at most " + std::to_string(longest_model_len) + ")");
  s.kv.max_model_len = o.max_model_len.value_or(static_cast<std::int32_t>(round_up(longest, 128)));
  if (s.kv.max_model_len < longest)
    throw usage_error("--max-model-len = " + std::to_string(s.kv.max_model_len) + " is shorter than the workload's longest chat (" +
                      std::to_string(longest) + " tokens)");
  s.requests = make_requests(rows, s.model.vocab, o.seed);
  const ladder_kind ladder = o.ladder.value_or(host ? ladder_kind::gaudi_linear : ladder_kind::vllm);
  const bool one_d = ladder == ladder_kind::vllm || ladder == ladder_kind::sglang || ladder == ladder_kind::trtllm ||
                     ladder == ladder_kind::explicit_rungs;
  s.scheduler.chunked_prefill = o.chunked_prefill.value_or(one_d);
  s.scheduler.max_num_seqs = o.max_num_seqs.value_or(host ? 16 : 64);
  s.scheduler.max_num_batched_tokens = o.max_num_batched_tokens.value_or(std::max<std::int32_t>(2048, s.kv.max_model_len));
  if (!s.scheduler.chunked_prefill && s.scheduler.max_num_batched_tokens < s.kv.max_model_len)
    throw usage_error("--max-num-batched-tokens = " + std::to_string(s.scheduler.max_num_batched_tokens) +
                      " must be at least --max-model-len = " + std::to_string(s.kv.max_model_len) +
                      " without chunked prefill (a whole prompt is computed in one step)");

  // Memory: weights first, then Gaudi's split of the rest between graphs and the KV cache.
  const bool memory_given = o.memory.has_value();
  s.memory_total = o.memory.value_or(info.default_memory);
  s.weight_bytes = info.weight_bytes;
  if (s.memory_total <= s.weight_bytes)
    throw usage_error("--memory = " + human_bytes(s.memory_total) + " does not hold the model's weights (" +
                      human_bytes(s.weight_bytes) + ")");
  s.memory = {.free_bytes = s.memory_total - s.weight_bytes, .gpu_memory_utilization = 1.0,
              .graph_reserved_mem = o.graph_memory};
  s.kv_bytes = rungs::kv::kv_memory(s.memory);
  s.graphs = eng::graph_budget::gaudi(s.memory, o.prompt_graph_ratio);
  s.block_bytes = rungs::kv::bytes_per_block(with_cache_dtype(info.shape, s).kv(), info.shape.block_size);
  if (!s.groups.empty()) s.block_bytes = s.block_bytes / info.shape.num_layers * page_layers(*o.layers);
  const std::int64_t fit = rungs::kv::blocks_for_memory(s.kv_bytes, s.block_bytes);
  std::int64_t blocks = fit;
  if (!o.kv_blocks && !memory_given && info.default_kv_blocks > 0) blocks = std::min(fit, info.default_kv_blocks);
  if (o.kv_blocks) {
    if (*o.kv_blocks > fit)
      throw usage_error("--kv-blocks = " + std::to_string(*o.kv_blocks) + " needs " +
                        human_bytes(std::int64_t{*o.kv_blocks} * s.block_bytes) + " of KV cache; --memory = " +
                        human_bytes(s.memory_total) + " leaves " + human_bytes(s.kv_bytes) +
                        " after weights and graphs");
    blocks = *o.kv_blocks;
  }
  if (blocks < 1)
    throw usage_error("--memory = " + human_bytes(s.memory_total) + " leaves no room for a KV block (" +
                      human_bytes(s.block_bytes) + ") after weights and graphs");
  blocks = std::min<std::int64_t>(blocks, 1 << 30);
  const std::int64_t watermark = static_cast<std::int64_t>(o.watermark * static_cast<double>(blocks));
  const std::int64_t need =
      s.groups.empty() ? rungs::blocks_for(longest, block)
                       : rungs::kv::blocks_held(s.groups, static_cast<std::int32_t>(block), longest,
                                                s.scheduler.chunked_prefill ? std::min<std::int64_t>(longest, s.scheduler.max_num_batched_tokens)
                                                                            : longest);
  if (need + watermark > blocks) {
    const std::string flag = o.kv_blocks ? "--kv-blocks" : memory_given ? "--memory" : "the default --memory";
    throw usage_error(flag + ": the KV pool holds " + std::to_string(blocks) + " blocks; the longest chat (" +
                      std::to_string(longest) + " tokens) needs " + std::to_string(need) + " (+" +
                      std::to_string(watermark) + " watermark): give more memory or shorten the chats");
  }
  s.kv.num_blocks = static_cast<std::int32_t>(blocks);  // max_model_len was set above
  s.kv.block_size = static_cast<std::int32_t>(block);
  s.kv.max_sequences = s.scheduler.max_num_seqs;
  s.kv.watermark_blocks = static_cast<std::int32_t>(watermark);

  // Buckets.
  if (o.dispatch && is_gaudi(ladder))
    throw usage_error("--dispatch applies to 1-D ladders only (--ladder vllm, sglang, trtllm or explicit); this run's "
                      "ladder is the default gaudi-linear");
  if (ladder == ladder_kind::gaudi_file && o.bucket_file.empty())
    throw usage_error("--ladder gaudi-file needs --bucket-file PATH");
  s.buckets.kind = ladder;
  s.buckets.bucket_file = o.bucket_file;
  s.buckets.rungs.assign(o.rungs.begin(), o.rungs.end());
  if (o.max_capture_size && !eng::is_capture_size_preset(ladder))  // a --ladder given was checked by parse_options
    throw usage_error("--max-capture-size applies to --ladder vllm, sglang and trtllm only; this run's ladder is "
                      "the default gaudi-linear");
  if (eng::is_capture_size_preset(ladder))
    s.buckets.max_capture_size = o.max_capture_size.value_or(
        std::min({2 * s.scheduler.max_num_seqs, 512, s.scheduler.max_num_batched_tokens}));
  s.buckets.dispatch = o.dispatch;
  if (is_gaudi(ladder)) s.buckets.getenv = bucket_environment(ladder, block, s.kv.max_model_len);
  return s;
}

void print_setup(std::ostream& log, const run_setup& s, const backend_info& info) {
  const rungs::engine::model_shape m = with_cache_dtype(info.shape, s);
  const std::int64_t fit = rungs::kv::blocks_for_memory(s.kv_bytes, s.block_bytes);
  log << "rungs serving demo: " << info.device << "\n";
  log << "Model: " << m.num_layers << " layers, " << m.num_qo_heads << " query heads / " << m.num_kv_heads
      << " KV heads of " << m.head_dim << ", hidden " << std::int64_t{m.num_qo_heads} * m.head_dim << ", MLP "
      << s.model.ffn << ", vocabulary " << s.model.vocab << ", random weights (seed " << s.opts.seed << "), "
      << human_bytes(s.weight_bytes) << "; KV cache " << rungs::name(m.dtype) << ", "
      << human_bytes(rungs::kv::bytes_per_token(m.kv())) << " per token\n";
  log << "Memory: " << human_bytes(s.memory_total) << " (" << (s.opts.memory ? "--memory" : info.memory_source)
      << "): weights " << human_bytes(s.weight_bytes) << "; of the other " << human_bytes(s.memory.free_bytes) << ", "
      << human_bytes(s.graphs.bytes) << " reserved for graphs (--graph-memory " << s.opts.graph_memory << "), "
      << human_bytes(s.kv_bytes) << " for the KV cache: ";
  if (s.opts.kv_blocks)
    log << s.kv.num_blocks << " blocks (--kv-blocks; " << fit << " would fit)";
  else if (s.kv.num_blocks < fit)
    log << s.kv.num_blocks << " blocks (" << info.kv_blocks_source << "; " << fit << " would fit)";
  else
    log << s.kv.num_blocks << " blocks";
  log << " of " << m.block_size << " tokens, " << human_bytes(s.block_bytes) << " each\n";
  std::int64_t prompt = 0, output = 0;
  std::map<serving::session_id, int> turns;
  for (const demo_request& r : s.requests) {
    prompt += r.row.prompt_tokens;
    output += r.row.output_tokens;
    if (r.row.conversation != 0) ++turns[r.row.conversation];
  }
  log << "Workload: " << s.requests.size() << " requests";
  if (!turns.empty()) log << " in " << turns.size() << " chats of up to " << std::max_element(turns.begin(), turns.end(),
                                                                                              [](auto& a, auto& b) { return a.second < b.second; })->second
                         << " turns";
  log << ", " << prompt << " prompt and " << output << " output tokens";
  if (s.opts.trace.empty())
    log << " (" << s.opts.input_tokens.value_or(s.backend == backend_kind::host ? 32 : 150) << " in / "
        << s.opts.output_tokens.value_or(s.backend == backend_kind::host ? 64 : 350) << " out per turn, +-"
        << static_cast<int>(s.opts.jitter * 100) << "%)";
  if (!s.opts.trace.empty()) {
    log << "; arrivals and think times from " << s.opts.trace << "\n";
  } else {
    std::ostringstream when;
    when << "; " << (s.opts.arrival_interval > 0 ? "chats start " : "every chat starts at once");
    if (s.opts.arrival_interval > 0) when << s.opts.arrival_interval << " s apart";
    when << ", next turn " << s.opts.think << " s after each answer";
    log << when.str() << "\n";
  }
  log << "Scheduler: max " << s.scheduler.max_num_seqs << " sequences, " << s.scheduler.max_num_batched_tokens
      << " tokens per step, " << (s.scheduler.chunked_prefill ? "chunked prefill (mixed steps)" : "separate prefill steps")
      << ", max_model_len " << s.kv.max_model_len << "\n";
}

rank_share share_of(const run_setup& all, int rank, int ranks) {
  std::vector<serving::trace_request> rows;
  for (const demo_request& d : all.requests) rows.push_back(d.row);
  const std::vector<std::int32_t> to = rungs::planning::route_round_robin(rows, ranks);
  rank_share mine{all, {}};
  mine.setup.requests.clear();
  for (std::size_t i = 0; i < all.requests.size(); ++i)
    if (to[i] == rank) {
      mine.setup.requests.push_back(all.requests[i]);
      mine.global.push_back(i);
    }
  return mine;
}

bool verify(const run_setup& s, const serve_result& r, std::int32_t n, std::ostream& log) {
  const host_decoder<tiny_model> model(s.model);
  return verify_with(s, r, n, log, [&](std::span<const token_id> context, std::int32_t max_output) {
    return plain_generate(model, context, max_output, s.groups.empty() ? nullptr : &s.attention);
  });
}

bool verify_with(const run_setup& s, const serve_result& r, std::int32_t n, std::ostream& log, const plain_loop& generate) {
  std::vector<std::vector<std::size_t>> groups;  // request indices per chat, in turn order
  std::map<serving::session_id, std::size_t> group_of;
  for (std::size_t i = 0; i < s.requests.size(); ++i) {
    const serving::session_id c = s.requests[i].row.conversation;
    if (c != 0 && group_of.contains(c)) {
      groups[group_of[c]].push_back(i);
      continue;
    }
    if (c != 0) group_of[c] = groups.size();
    groups.push_back({i});
  }
  std::int64_t turns = 0, tokens = 0;
  const std::size_t chats = std::min<std::size_t>(groups.size(), static_cast<std::size_t>(n));
  for (std::size_t g = 0; g < chats; ++g) {
    std::vector<token_id> conversation;
    for (std::size_t i : groups[g]) {
      const demo_request& d = s.requests[i];
      conversation.insert(conversation.end(), d.prompt.begin(), d.prompt.end());
      const std::vector<token_id> expected = generate(conversation, d.row.output_tokens);
      const std::vector<token_id>& got = r.requests[i].output;
      if (got != expected) {
        std::size_t k = 0;
        while (k < got.size() && k < expected.size() && got[k] == expected[k]) ++k;
        log << "verify: request " << i + 1 << " (chat " << d.row.conversation << " turn " << d.row.turn
            << ") differs from the plain loop at output token " << k << "\n";
        return false;
      }
      conversation.insert(conversation.end(), expected.begin(), expected.end());
      ++turns;
      tokens += static_cast<std::int64_t>(expected.size());
    }
  }
  log << "  verified     " << chats << " chats (" << turns << " turns, " << tokens
      << " tokens) recomputed one at a time by a plain loop (no batching, padding, paging or cache): identical\n";
  return true;
}

rungs::cli::json config_json(const run_setup& s, const backend_info& info) {
  const auto& m = info.shape;
  return {{"backend", s.backend == backend_kind::host ? "host" : "cuda"},
          {"clock", s.virtual_clock ? "virtual" : "wall"},
          {"seed", s.opts.seed},
          {"model", {{"layers", m.num_layers}, {"heads", m.num_qo_heads}, {"kv_heads", m.num_kv_heads},
                     {"head_size", m.head_dim}, {"block_size", m.block_size}, {"vocab", s.model.vocab},
                     {"weight_bytes", s.weight_bytes}, {"kv_cache_dtype", std::string(rungs::name(s.model.kv_cache))}}},
          {"memory_bytes", s.memory_total},
          {"graph_reserved_bytes", s.graphs.bytes},
          {"kv_blocks", s.kv.num_blocks},
          {"watermark_blocks", s.kv.watermark_blocks},
          {"max_num_seqs", s.scheduler.max_num_seqs},
          {"max_num_batched_tokens", s.scheduler.max_num_batched_tokens},
          {"max_model_len", s.kv.max_model_len},
          {"chunked_prefill", s.scheduler.chunked_prefill}};
}

eng::engine_config engine_config(const run_setup& s, const eng::model_shape& model) {
  return {.model = model, .buckets = s.buckets, .order = s.opts.order, .timing = timing_for(s.opts),
          .budget = s.graphs, .allocator = s.opts.allocator, .kv = s.kv, .groups = s.groups, .scheduler = s.scheduler};
}

serve_result serve_host(const run_setup& s, std::ostream& log, bool terminal) {
  const host_decoder<tiny_model> model(s.model);
  kv_pools<tiny_model> pools(s.kv.num_blocks);
  host_runtime runtime{model, pools};
  auto make_backend = [&](const eng::any_buckets&) {
    rungs::engine::host_backend::options bo;
    bo.workspace_bytes = [&model](std::int64_t seqs, std::int64_t tokens) { return model.workspace_bytes(seqs, tokens); };
    bo.groups = s.groups.empty() ? 1 : static_cast<std::int32_t>(s.groups.size());
    if (s.virtual_clock)  // captures report modeled seconds, not measured ones
      bo.simulate = rungs::engine::simulated_capture{.seconds = s.virtual_clock->capture_seconds,
                                                     .seconds_per_unit = s.virtual_clock->capture_seconds_per_unit};
    return rungs::engine::host_backend(
        [&model, &pools, &s](const rungs::engine::host_step& st) {
          model.forward(st.batch, pools, st.out, st.workspace, s.groups.empty() ? nullptr : &s.attention, st.groups);
        },
        bo);
  };
  return serve_engine<tiny_model>(s, make_backend, runtime, log, terminal);
}

}  // namespace demo
