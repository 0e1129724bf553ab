// Every default decode instance (bf16) at the issue-margin reference shapes, on a GPU, against
// the copy ceiling measured in the same run (GPU only; scripts/gpu-check runs it).
//
//   decode_instances_bench [--quick]
//
// Writes CSV to stdout (comment lines start with '#'):
//   head_dim,group,cache,batch,context,qo_heads,kv_heads,kernel,min_split_tokens,splits,time_us,bytes,gb_s,ratio,
//   planner,pass,note,warp_groups
// (planner: 1 when the row's kernel is the one the planner picks for the shape; pass: 1 or 2;
// warp_groups: the run's CTA, 1 the 4-warp one, 2-4 the tensor-core decode's in-CTA split,
// whichever the planner would give.)
//
// 1. For head dims 64, 80, 96, 128 and 256 x groups 1, 2, 4, 8, 16 (bf16 caches) and the E4M3
//    cache at head dim 128, group 4 (the default set's fp8 instance), at batch 64 x context
//    4096, 8 x 4096 and 1 x 16384 with 32 query heads (the shapes of scripts/sass-check's issue
//    margins, benchmarks/RESULTS.md), run through decode<Set> as an engine runs it: the kernel
//    the planner picks for this GPU (A) and, where the set has both, the other one on a plan
//    forced to it (B), in the order A B B A (pass 1, 1, 2, 2), so that a drift of the GPU's
//    speed during the run shows as a difference between passes instead of between kernels; an
//    instance with one kernel runs it twice (A A). Every run here has the 4-warp CTA
//    (plan_options::warp_groups = 1), as before the in-CTA split existed.
// 2. The small grids whose split the planner's min_split_tokens (256) limits (head dim 128,
//    groups 4, 8 and 16 at 8 x 4096 and 1 x 16384): the planner's kernel with min_split_tokens
//    128, 64 and 32, to measure what finer splits (and their merge) buy.
// 3. The in-CTA split (docs/kernels.md): head dims 64-256, groups 8 and 16 at 8 x 4096 and
//    1 x 16384, where the planner gives the tensor-core decode more warp groups a CTA: its plan
//    (A) against the same plan with warp_groups 1 (B), A B B A (modelled only until this runs).
//
// Bytes per run: K and V once (1 byte per element for fp8), Q in and O out, block tables and
// lengths; ratio = GB/s / copy ceiling. Rows whose K and V fit in twice the L2 say so: back-to-back
// replays read them from cache. Timing as paged_attention_bench: runs captured in a CUDA graph and
// replayed between two events. Without a GPU it says so and exits 0 (1 with RUNGS_REQUIRE_GPU).
#include <rungs/attention/paged_attention.cuh>
#include <rungs/blocks.hpp>
#include <rungs/cuda/error.hpp>

#include "gpu_timing.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace ra = rungs::attention;
using namespace rungs_bench;

namespace {

// The default set's bf16 decode instances at the dynamic block size: SIMT for every head dim and
// group, the tensor-core decode at every head dim (64-128, and 256 since its 2 x 2 warps), and the
// E4M3 instances (SIMT and tensor-core).
using bench_set =
    ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<64, 80, 96, 128, 256>, ra::values<ra::dynamic_block_size>,
                          ra::values<1, 2, 4, 8, 16>, ra::default_fp8_kv_instances,
                          ra::tensor_core_decode_instances<ra::dtypes<ra::dtype::bf16>, ra::values<64, 80, 96, 128, 256>,
                                                           ra::values<1, 2, 4, 8, 16>, ra::values<8, 16>>>;

constexpr int kQo = 32, kBlock = 16;

struct instance {
  int head_dim, group;
  bool fp8;
};

struct row {
  double ms = 0, bytes = 0;
  int splits = 0;
  ra::attention_kernel kernel{};
  int warp_groups = 1;
};

// One decode run of `inst` at batch x context, planned with `opt`; nullopt when it does not fit.
std::optional<row> time_decode(const instance& inst, int batch, int context, const ra::plan_options& opt, int runs,
                               std::mt19937_64& rng, const ra::device_info& dev) {
  const int kv_heads = kQo / inst.group;
  const std::int64_t num_blocks = batch * rungs::blocks_for(context, kBlock);
  const ra::attention_shape s{.num_qo_heads = kQo, .num_kv_heads = kv_heads, .head_dim = inst.head_dim,
                              .block_size = kBlock, .num_blocks = num_blocks};
  ra::attention_config config{.type = ra::dtype::bf16, .shape = s};
  if (inst.fp8) config.kv.type = ra::dtype::fp8_e4m3;
  const std::size_t pool = static_cast<std::size_t>(s.pool_elements());
  const std::size_t elem = inst.fp8 ? 1 : 2;
  std::size_t free = 0, total = 0;
  RUNGS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  if (2.0 * pool * elem > 0.85 * static_cast<double>(free)) return std::nullopt;

  const ra::decode_plan plan = ra::plan_decode<bench_set>(config, {.max_batch = batch, .max_context = context}, dev, opt);
  const std::size_t q_elems = static_cast<std::size_t>(batch * s.q_row_elements());
  device_array<std::uint8_t> k(pool * elem), v(pool * elem);
  device_array<__nv_bfloat16> q(q_elems), out(q_elems);
  device_array<std::int32_t> tables(static_cast<std::size_t>(num_blocks)), lens(static_cast<std::size_t>(batch));
  device_array<std::byte> workspace(plan.workspace.bytes);
  if (inst.fp8) {
    fill_random_bytes<<<1024, 256>>>(k.p, pool, rng());
    fill_random_bytes<<<1024, 256>>>(v.p, pool, rng());
  } else {
    fill_random<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(k.p), pool, rng());
    fill_random<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(v.p), pool, rng());
  }
  fill_random<<<256, 256>>>(q.p, q_elems, rng());
  RUNGS_CUDA_CHECK(cudaGetLastError());
  std::vector<std::int32_t> ids(static_cast<std::size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::vector<std::int32_t> seq_lens(static_cast<std::size_t>(batch), context);
  RUNGS_CUDA_CHECK(cudaMemcpy(tables.p, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  RUNGS_CUDA_CHECK(cudaMemcpy(lens.p, seq_lens.data(), seq_lens.size() * 4, cudaMemcpyHostToDevice));
  const ra::decode_args args{.q = q.p, .k_cache = k.p, .v_cache = v.p, .block_tables = tables.p, .seq_lens = lens.p,
                             .out = out.p, .workspace = workspace.p, .workspace_bytes = plan.workspace.bytes};
  RUNGS_CUDA_CHECK(cudaDeviceSynchronize());
  captured_runs g;
  timer t(g.stream);
  auto once = [&] { ra::decode<bench_set>(plan, args, g.stream); };
  const double single_ms = t.median_ms(once, 3, 3);
  g.capture(once, std::clamp(static_cast<int>(0.2 / std::max(single_ms, 1e-3)), 1, 20));
  row r;
  r.ms = t.median_ms([&] { g.replay(); }, 2, runs) / g.reps;
  r.splits = plan.num_splits;
  r.kernel = plan.kernel;
  r.warp_groups = plan.warp_groups;
  r.bytes = 2.0 * batch * static_cast<double>(context) * s.kv_row_elements() * static_cast<double>(elem)  // K and V
            + 2.0 * static_cast<double>(q_elems) * 2                                                       // Q, O
            + 4.0 * static_cast<double>(num_blocks + batch);                                                // tables, lengths
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else {
      std::fprintf(stderr, "decode_instances_bench: unknown argument '%s' (usage: %s [--quick])\n", argv[i], argv[0]);
      return 2;
    }
  }
  if (const int status = no_gpu_status("decode_instances_bench"); status >= 0) return status;
  try {
    cudaDeviceProp prop{};
    const int runs = quick ? 10 : 30;
    const double ceiling = print_copy_ceiling(runs, prop);
    std::printf("head_dim,group,cache,batch,context,qo_heads,kv_heads,kernel,min_split_tokens,splits,time_us,bytes,gb_s,"
                "ratio,planner,pass,note,warp_groups\n");
    std::fflush(stdout);
    const ra::device_info dev = ra::query_device();
    std::mt19937_64 rng(2026);
    // One row; a planning or launch error is reported in the row's note and the run goes on.
    auto measure = [&](const instance& inst, int batch, int context, const ra::plan_options& opt, int pass = 1) {
      std::optional<row> r;
      std::string error;
      try {
        r = time_decode(inst, batch, context, opt, runs, rng, dev);
      } catch (const std::exception& e) {
        error = std::string("error: ") + e.what();
        for (char& c : error) c = c == ',' || c == '\n' ? ';' : c;
      }
      const int kv_heads = kQo / inst.group;
      const double kv_bytes = 2.0 * batch * static_cast<double>(context) * kv_heads * inst.head_dim * (inst.fp8 ? 1 : 2);
      const std::string note = !error.empty() ? error
                               : !r         ? "skipped: exceeds memory"
                               : kv_bytes < 2.0 * prop.l2CacheSize ? "fits in L2"
                                                                    : "";
      const int min_split = opt.min_split_tokens;
      const double gbs = r ? r->bytes / (r->ms * 1e6) : 0;
      std::printf("%d,%d,%s,%d,%d,%d,%d,%s,%d,%d,%.2f,%.0f,%.1f,%.3f,%d,%d,%s,%d\n", inst.head_dim, inst.group,
                  inst.fp8 ? "fp8_e4m3" : "bf16", batch, context, kQo, kv_heads, r ? ra::name(r->kernel) : "-", min_split,
                  r ? r->splits : 0, r ? r->ms * 1e3 : 0.0, r ? r->bytes : 0.0, gbs, gbs / ceiling,
                  opt.kernel ? 0 : 1, pass, note.c_str(), r ? r->warp_groups : 0);
      std::fflush(stdout);
      return r;
    };
    constexpr int shapes[3][2] = {{64, 4096}, {8, 4096}, {1, 16384}};
    std::vector<instance> instances;
    for (int d : {64, 80, 96, 128, 256}) {
      for (int g : {1, 2, 4, 8, 16}) instances.push_back({d, g, false});
    }
    instances.push_back({128, 4, true});
    // 1. The planner's kernel (A) and the other one where the set has both (B): A B B A.
    for (const instance& inst : instances) {
      const bool both = bench_set::tensor_core_decode::contains(ra::dtype::bf16, inst.head_dim, inst.group);
      for (const auto& sh : shapes) {
        const ra::plan_options planned{.warp_groups = 1};
        const std::optional<row> a = measure(inst, sh[0], sh[1], planned);
        if (!a) continue;
        const ra::plan_options other{.kernel = a->kernel == ra::attention_kernel::tensor_cores
                                                   ? ra::attention_kernel::simt
                                                   : ra::attention_kernel::tensor_cores,
                                     .warp_groups = 1};
        if (both) measure(inst, sh[0], sh[1], other, 1);
        if (both) measure(inst, sh[0], sh[1], other, 2);
        measure(inst, sh[0], sh[1], planned, 2);
      }
    }
    // 2. Finer splits on the small grids.
    for (int g : {4, 8, 16}) {
      for (const auto& sh : {std::pair{8, 4096}, std::pair{1, 16384}}) {
        for (int min_split : {128, 64, 32}) {
          measure({128, g, false}, sh.first, sh.second, {.min_split_tokens = min_split, .warp_groups = 1});
        }
      }
    }
    // 3. The in-CTA split against the 4-warp CTA on the same plan: A B B A.
    for (int d : {64, 80, 96, 128, 256}) {
      for (int g : {8, 16}) {
        for (const auto& sh : {std::pair{8, 4096}, std::pair{1, 16384}}) {
          const std::optional<row> a = measure({d, g, false}, sh.first, sh.second, {});
          if (!a || a->warp_groups == 1) continue;
          measure({d, g, false}, sh.first, sh.second, {.warp_groups = 1}, 1);
          measure({d, g, false}, sh.first, sh.second, {.warp_groups = 1}, 2);
          measure({d, g, false}, sh.first, sh.second, {}, 2);
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_instances_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
