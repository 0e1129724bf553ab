// A run of the demo: every default filled in for the chosen backend, the workload built, the
// memory plan made (resolve); the engine built from the chosen policies (serve_engine) and
// served by a backend: serve_host (run.cpp) or serve_cuda (cuda_serve.cu, compiled by nvcc,
// so that everything else stays plain C++). The tests call the same functions as main.
#pragma once

#include <rungs/engine/any_engine.hpp>
#include <rungs/engine/graph_budget.hpp>
#include <rungs/engine/observer.hpp>
#include <rungs/engine/rank_sync.hpp>
#include <rungs/kv/capacity.hpp>
#include <rungs/kv/paged_allocator.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "compose.hpp"
#include "json_line.hpp"
#include "model.hpp"
#include "options.hpp"
#include "serve.hpp"
#include "workload.hpp"

namespace demo {

/// What resolve needs to know about a backend before serving: its model and its memory.
struct backend_info {
  std::string device;                 ///< what runs the model
  rungs::engine::model_shape shape{};
  std::vector<rungs::dtype> kv_cache_dtypes;  ///< what --kv-cache-dtype may name (the first: auto)
  model_config model{};
  std::int64_t weight_bytes = 0;
  std::int64_t default_memory = 0;    ///< --memory when not given
  std::string memory_source;          ///< where default_memory comes from
  std::int64_t default_kv_blocks = 0; ///< the pool without --memory or --kv-blocks (0: what memory holds)
  std::string kv_blocks_source;       ///< why
};

struct run_setup {
  demo_options opts;
  backend_kind backend = backend_kind::host;
  model_config model{};
  std::vector<demo_request> requests;
  eng::bucket_config buckets{};  ///< the bucket space --ladder and its flags name
  serving::scheduler_options scheduler{};
  rungs::kv::allocator_config kv{};
  /// Gaudi's split of the memory left after the weights (--memory minus weights, all of it
  /// usable): graph_reserved_mem (--graph-memory) for graphs, the rest for the KV cache.
  rungs::kv::gaudi_memory memory{};
  std::int64_t memory_total = 0;  ///< --memory: weights, graphs and KV cache
  std::int64_t weight_bytes = 0;
  std::int64_t kv_bytes = 0;      ///< the KV cache's share
  std::int64_t block_bytes = 0;   ///< one KV block, every layer (a hybrid model: the largest group's layers)
  /// A hybrid model (--layers with a pattern): the allocator's attention groups (full
  /// attention first: group 0's table is the staged one) and each layer's group and window.
  std::vector<rungs::kv::attention_group> groups{};
  layer_attention attention{};
  eng::graph_budget graphs{};     ///< the graphs' share, split prompt/decode (--prompt-graph-ratio)
  std::optional<virtual_costs> virtual_clock{};  ///< --clock virtual
  /// Data-parallel ranks (serve_demo_dp, dp_main.cpp, through MPI): the rank_sync the engine
  /// and the serving loop agree through (rungs::serving::driver). Empty: one rank.
  eng::rank_sync_ref ranks{};
};

/// `model` with the run's KV cache type (--kv-cache-dtype): what the KV accounting counts.
inline eng::model_shape with_cache_dtype(eng::model_shape model, const run_setup& s) {
  model.dtype = s.model.kv_cache;
  return model;
}

/// The engine configuration the run's flags resolved to, for a backend running `model`.
eng::engine_config engine_config(const run_setup& s, const eng::model_shape& model);

/// A hybrid model's KV against all-full attention, measured as the steps run: the pool's live
/// blocks (pages of block_size tokens of the largest group's layers) and what the full group's
/// live blocks would cost over every layer.
struct hybrid_kv {
  std::int64_t peak_blocks = 0, peak_full_blocks = 0;
  double blocks = 0, full_blocks = 0;  // summed over runner steps
  void add(std::int64_t live, std::int64_t full) {
    peak_blocks = std::max(peak_blocks, live);
    peak_full_blocks = std::max(peak_full_blocks, full);
    blocks += static_cast<double>(live);
    full_blocks += static_cast<double>(full);
  }
  void print(std::ostream& log, const run_setup& s) const;
};

/// Builds rungs::engine::any_engine from the run's configuration (it writes the bucket
/// space's configuration to `log` and picks the instantiation), logs its captures, and serves
/// the workload. `make_backend(space)` returns the backend (it owns the forward), once the
/// bucket space is built; `runtime` samples rows and copies KV blocks. A bad bucket
/// configuration (VLLM_* variables, a bucket file) is a usage_error naming --ladder.
template <eng::model_shape Shape, class MakeBackend, class Runtime>
serve_result serve_engine(const run_setup& s, MakeBackend make_backend, Runtime& runtime, std::ostream& log,
                          bool terminal) {
  using engine_t = eng::any_engine<std::invoke_result_t<MakeBackend&, const eng::any_buckets&>>;
  std::optional<engine_t> e;
  try {
    e.emplace(engine_config(s, with_cache_dtype(Shape, s)), std::move(make_backend), &log);
  } catch (const rungs::ladder_error& x) {
    throw usage_error(std::string("--ladder: ") + x.what());
  }
  const auto& chosen = e->runner().config();
  log << "Engine: capture order " << chosen.order.name() << ", capture timing " << chosen.timing.name();
  if (const auto* d = std::get_if<eng::delayed>(&chosen.timing.policy()); d && d->largest_at_startup)
    log << " (largest bucket at startup)";
  if (const auto* l = std::get_if<eng::lazy>(&chosen.timing.policy())) log << " (after " << l->eager_uses << " eager uses)";
  log << ", allocator " << eng::to_string(e->allocator()) << " (" << s.kv.num_blocks << " blocks, watermark "
      << s.kv.watermark_blocks << ")\n";
  e->runner().observe(eng::log_observer(log, terminal));
  // The library's loop (rungs::serving::driver) on the chosen clock: the demo's prompts, every
  // turn's tokens kept (the digest, --verify), a status line per --status-every.
  const std::vector<serving::trace_request> rows = trace_rows(s.requests);
  rungs::serving::driver_options opts{
      .ranks = s.ranks, .keep_outputs = true, .who = "serving loop",
      .prompt = [&s](std::size_t i, std::span<token_id> out) {
        std::copy(s.requests[i].prompt.begin(), s.requests[i].prompt.end(), out.begin());
      }};
  sample_hook<Runtime, typename engine_t::rows_type> hook{runtime};
  hybrid_kv saving;  // a hybrid model: the pool's blocks and its full group's, as each step runs
  if (!s.groups.empty())
    hook.measure = [&e, &saving] {
      e->visit([&saving](const auto& x) {
        if constexpr (requires { x.blocks().live_blocks(0); }) saving.add(x.blocks().metrics().live_blocks, x.blocks().live_blocks(0));
      });
    };
  serve_log status(log, s.opts.status_every, s.requests);
  const auto serve = [&](auto clock) {
    rungs::serving::driver<engine_t, decltype(clock)> d(*e, rows, std::move(clock), std::move(opts));
    d.run(hook, status);
    if (!s.groups.empty()) saving.print(log, s);
    return d.finish();
  };
  if (s.virtual_clock) return serve(virtual_clock(*s.virtual_clock));
  return serve(rungs::serving::wall_clock());
}

/// The host backend: the tiny model on the CPU, 6 MiB of "device memory" by default.
backend_info host_backend_info(std::uint64_t seed);

/// Fills in the backend's defaults, builds the workload and plans memory. Throws usage_error
/// naming the flag for anything that cannot work.
run_setup resolve(const demo_options& o, backend_kind backend, const backend_info& info);

/// The run's configuration, one topic per line (model, memory, workload, scheduler).
void print_setup(std::ostream& log, const run_setup& s, const backend_info& info);

/// The run's configuration as a JSON object (the "config" of --json).
rungs::cli::json config_json(const run_setup& s, const backend_info& info);

/// Serves the run on the host backend: the tiny model, rungs' host engine backend.
serve_result serve_host(const run_setup& s, std::ostream& log, bool terminal);

/// Data parallel: one rank's share of a run.
struct rank_share {
  run_setup setup;                  ///< the run with this rank's requests only
  std::vector<std::size_t> global;  ///< global[k]: the index in the whole run of its k-th request
};

/// Rank `rank` of `ranks`' share of `all`: the k-th conversation (or standalone request) in
/// trace order goes to rank k mod `ranks` with all its turns (planning::route_round_robin, the
/// split of rungs-plan simulate --dp).
rank_share share_of(const run_setup& all, int rank, int ranks);

/// Recomputes the first `chats` chats of the run with plain_generate and compares every turn's
/// tokens; returns false (and says where) on the first difference.
bool verify(const run_setup& s, const serve_result& r, std::int32_t chats, std::ostream& log);

/// A plain loop: the greedy continuation of a context by max_output tokens, computed alone.
using plain_loop = std::function<std::vector<token_id>(std::span<const token_id> context, std::int32_t max_output)>;
/// verify's comparison with another backend's plain loop (the CUDA model's: verify_cuda).
bool verify_with(const run_setup& s, const serve_result& r, std::int32_t chats, std::ostream& log, const plain_loop& generate);

#ifdef RUNGS_DEMO_CUDA
/// True when a CUDA device is visible.
bool cuda_device_present();
/// The CUDA model and the device's free memory (x 0.9, vLLM's gpu_memory_utilization).
/// `layers` (--layers' count; 0: none given): the cuda-sim build's tiny model takes 1 to 4
/// layers; the full model has 8, and resolve() refuses another count.
backend_info cuda_backend_info(std::uint64_t seed, std::int64_t layers = 0);
/// Serves the run on the GPU: the CUDA model, the engine's CUDA backend (graphs).
serve_result serve_cuda(const run_setup& s, std::ostream& log, bool terminal);
/// verify on the CUDA model: each chat recomputed alone by eager steps of cuda_backend over a
/// contiguous cache, every layer with a pool of its own and its window applied by the kernels
/// (no group tables, group slots or shared pools), no scheduler, batching, padding or prefix cache.
bool verify_cuda(const run_setup& s, const serve_result& r, std::int32_t chats, std::ostream& log);
#endif

}  // namespace demo
