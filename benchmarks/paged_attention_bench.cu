// Paged-attention decode bandwidth against the GPU's copy bandwidth, measured in one run
// (GPU only; scripts/gpu-check runs it).
//
//   paged_attention_bench [--quick] [--csv]
//   paged_attention_bench [--quick] [--csv] --shape BATCH,CONTEXT,QO_HEADS,KV_HEADS[,BLOCK]
//                         [--kernel simt|tensor-core]
//   paged_attention_bench [--quick] [--csv] --prefill CACHED
//
// With --shape (or --prefill) it times that one decode shape (or one 2048-token prefill chunk
// over CACHED cached tokens) after the copy ceiling and nothing else: scripts/gpu-profile runs
// it under Nsight Compute one case at a time. --shape takes block sizes 8, 16, 32, 64 and 128
// (default 16) and groups (QO_HEADS / KV_HEADS) 1, 2, 4, 8 and 16, on either kernel.
//
// Per shape (bf16, head dim 128, block size 16; batch {1, 8, 16, 64, 256} x context {512, 4096,
// 16384} x heads {32q/8kv, 32q/32kv}; shapes that do not fit in memory are skipped): the
// median time of a decode run (attention plus split merge, as planned for the shape's bucket),
// the bytes it must move (K and V once, Q, O, block tables, lengths; docs/kernels.md), the
// achieved GB/s, and its ratio to the copy ceiling: the better of cudaMemcpy device-to-device
// and a 16-byte copy kernel over 2 GiB (bytes read plus written). Block tables are a random
// permutation of the pool; the data is random. Shapes whose K and V fit in twice the L2 are
// marked: they measure cache, not memory. Later sections (comment lines, '#') time the static
// block-size instance against the dynamic one and the tensor-core decode against the SIMT one on
// the target shape, and prefill chunks of 2048 tokens over 0 and 4096 cached (time, TFLOPS).
//
// Decode runs are timed as they are served: captured in a CUDA graph (enough runs back to back
// for the graph to take ~200 us, at most 20) and replayed between two events, so the host's
// validation and launch cost never sits between the events; time per run = graph time / runs
// in it. Without a GPU it says so and exits 0 (1 when RUNGS_REQUIRE_GPU is set, as
// scripts/gpu-check does).
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
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ra = rungs::attention;
using namespace rungs_bench;

namespace {

struct shape {
  int batch, context, qo_heads, kv_heads;
  int block = 16;
};

struct result {
  double ms = 0;
  double bytes = 0;
  int splits = 0;
};

// One decode shape; Launch(plan, args, stream) runs one instance.
template <class Launch>
bool run_shape(const shape& sh, int runs, std::mt19937_64& rng, result& r, Launch&& launch) {
  constexpr int kHeadDim = 128;
  const int kBlock = sh.block;
  const std::int64_t blocks_per_seq = rungs::blocks_for(sh.context, kBlock);
  const std::int64_t num_blocks = sh.batch * blocks_per_seq;
  const ra::attention_shape s{.num_qo_heads = sh.qo_heads, .num_kv_heads = sh.kv_heads, .head_dim = kHeadDim,
                              .block_size = kBlock, .num_blocks = num_blocks};
  const std::size_t pool = static_cast<std::size_t>(s.pool_elements());
  std::size_t free = 0, total = 0;
  RUNGS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  if (2.0 * pool * sizeof(__nv_bfloat16) > 0.85 * static_cast<double>(free)) return false;

  const ra::attention_config config{ra::dtype::bf16, s};
  const ra::decode_plan plan = ra::plan_decode(config, {.max_batch = sh.batch, .max_context = sh.context}, ra::query_device());
  device_array<__nv_bfloat16> k(pool), v(pool), q(static_cast<std::size_t>(sh.batch * s.q_row_elements())),
      out(static_cast<std::size_t>(sh.batch * s.q_row_elements()));
  device_array<std::int32_t> tables(static_cast<std::size_t>(num_blocks)), lens(static_cast<std::size_t>(sh.batch));
  device_array<std::byte> workspace(plan.workspace.bytes);
  fill_random<<<1024, 256>>>(k.p, pool, rng());
  fill_random<<<1024, 256>>>(v.p, pool, rng());
  fill_random<<<256, 256>>>(q.p, static_cast<std::size_t>(sh.batch * s.q_row_elements()), rng());
  RUNGS_CUDA_CHECK(cudaGetLastError());
  std::vector<std::int32_t> ids(static_cast<std::size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::vector<std::int32_t> seq_lens(static_cast<std::size_t>(sh.batch), sh.context);
  RUNGS_CUDA_CHECK(cudaMemcpy(tables.p, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  RUNGS_CUDA_CHECK(cudaMemcpy(lens.p, seq_lens.data(), seq_lens.size() * 4, cudaMemcpyHostToDevice));

  const ra::decode_args args{.q = q.p, .k_cache = k.p, .v_cache = v.p, .block_tables = tables.p, .seq_lens = lens.p,
                             .out = out.p, .workspace = workspace.p, .workspace_bytes = plan.workspace.bytes};
  RUNGS_CUDA_CHECK(cudaDeviceSynchronize());  // the fills and uploads above, on the legacy stream
  captured_runs g;
  timer t(g.stream);
  auto once = [&] { launch(plan, args, g.stream); };
  const double single_ms = t.median_ms(once, 3, 3);  // eager, to size the graph
  g.capture(once, std::clamp(static_cast<int>(0.2 / std::max(single_ms, 1e-3)), 1, 20));
  r.ms = t.median_ms([&] { g.replay(); }, 2, runs) / g.reps;
  r.splits = plan.num_splits;
  r.bytes = 2.0 * sh.batch * sh.context * s.kv_row_elements() * 2  // K and V, once
            + 2.0 * sh.batch * s.q_row_elements() * 2               // Q in, O out
            + 4.0 * (num_blocks + sh.batch);                        // block tables, lengths
  return true;
}

// One prefill chunk: q_len new tokens over `cached` cached ones (one sequence, 32/8 heads, bf16,
// head dim 128, block 16), on the kernel the planner picks; its causal FLOPs (Q K^T and P V over
// each row's visible keys) and bytes (K and V of the whole context once, Q, O).
struct prefill_result {
  double ms = 0, flops = 0, bytes = 0;
  int splits = 0;
  const char* kernel = "";
};

prefill_result run_prefill(int q_len, int cached, int runs, std::mt19937_64& rng) {
  constexpr int kHeadDim = 128, kBlock = 16, kQo = 32, kKv = 8;
  const int context = cached + q_len;
  const std::int64_t num_blocks = rungs::blocks_for(context, kBlock);
  const ra::attention_shape s{.num_qo_heads = kQo, .num_kv_heads = kKv, .head_dim = kHeadDim, .block_size = kBlock,
                              .num_blocks = num_blocks};
  const ra::attention_config config{ra::dtype::bf16, s};
  const ra::prefill_plan plan =
      ra::plan_prefill(config, {.max_batch = 1, .max_q_len = q_len, .max_context = context}, ra::query_device());
  const std::size_t pool = static_cast<std::size_t>(s.pool_elements());
  const std::size_t rows = static_cast<std::size_t>(q_len) * s.q_row_elements();
  device_array<__nv_bfloat16> k(pool), v(pool), q(rows), out(rows);
  device_array<std::int32_t> tables(static_cast<std::size_t>(num_blocks)), indptr(2), kv_lens(1);
  device_array<std::byte> workspace(plan.workspace.bytes);
  fill_random<<<1024, 256>>>(k.p, pool, rng());
  fill_random<<<1024, 256>>>(v.p, pool, rng());
  fill_random<<<256, 256>>>(q.p, rows, rng());
  RUNGS_CUDA_CHECK(cudaGetLastError());
  std::vector<std::int32_t> ids(static_cast<std::size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::int32_t host_indptr[2] = {0, q_len};
  RUNGS_CUDA_CHECK(cudaMemcpy(tables.p, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  RUNGS_CUDA_CHECK(cudaMemcpy(indptr.p, host_indptr, sizeof host_indptr, cudaMemcpyHostToDevice));
  RUNGS_CUDA_CHECK(cudaMemcpy(kv_lens.p, &context, 4, cudaMemcpyHostToDevice));
  const ra::prefill_args args{.q = q.p, .k_cache = k.p, .v_cache = v.p, .block_tables = tables.p,
                              .block_table_stride = num_blocks, .q_indptr = indptr.p, .kv_lens = kv_lens.p,
                              .out = out.p, .workspace = workspace.p, .workspace_bytes = plan.workspace.bytes};
  RUNGS_CUDA_CHECK(cudaDeviceSynchronize());
  captured_runs g;
  timer t(g.stream);
  auto once = [&] {
    if (plan.kernel == ra::attention_kernel::tensor_cores) {
      ra::launch_tensor_core_prefill<rungs::bf16, kHeadDim, ra::dynamic_block_size>(plan, args, g.stream);
    } else {
      ra::launch_prefill<rungs::bf16, kHeadDim, ra::dynamic_block_size>(plan, args, g.stream);
    }
  };
  const double single_ms = t.median_ms(once, 3, 3);
  g.capture(once, std::clamp(static_cast<int>(0.2 / std::max(single_ms, 1e-3)), 1, 20));
  prefill_result r;
  r.ms = t.median_ms([&] { g.replay(); }, 2, runs) / g.reps;
  r.splits = plan.num_splits;
  r.kernel = ra::name(plan.kernel);
  r.flops = 4.0 * kHeadDim * kQo * (static_cast<double>(q_len) * cached + q_len * (q_len + 1.0) / 2);
  r.bytes = 2.0 * context * s.kv_row_elements() * 2 + 2.0 * rows * 2 + 4.0 * num_blocks;
  return r;
}

// "B,C,QH,KH[,BLOCK]" into a shape; false (with a message) when it is not one the bench runs.
bool parse_shape(const char* text, shape& sh) {
  int v[5] = {0, 0, 0, 0, 16};
  int n = 0;
  const char* p = text;
  while (n < 5) {
    char* end = nullptr;
    const long x = std::strtol(p, &end, 10);
    if (end == p || x <= 0 || x > (1 << 24)) break;
    v[n++] = static_cast<int>(x);
    if (*end == '\0') { p = end; break; }
    if (*end != ',') break;
    p = end + 1;
  }
  if ((n != 4 && n != 5) || *p != '\0') {
    std::fprintf(stderr, "paged_attention_bench: --shape '%s': expected BATCH,CONTEXT,QO_HEADS,KV_HEADS[,BLOCK] (positive integers)\n", text);
    return false;
  }
  sh = {v[0], v[1], v[2], v[3], v[4]};
  const int group = sh.qo_heads % sh.kv_heads == 0 ? sh.qo_heads / sh.kv_heads : 0;
  if (group != 1 && group != 2 && group != 4 && group != 8 && group != 16) {
    std::fprintf(stderr, "paged_attention_bench: --shape '%s': QO_HEADS / KV_HEADS must be 1, 2, 4, 8 or 16 (the groups this bench instantiates)\n", text);
    return false;
  }
  if (sh.block != 8 && sh.block != 16 && sh.block != 32 && sh.block != 64 && sh.block != 128) {
    std::fprintf(stderr, "paged_attention_bench: --shape '%s': BLOCK %d is not a supported block size (8, 16, 32, 64, 128)\n", text, sh.block);
    return false;
  }
  return true;
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--quick] [--csv] [--shape BATCH,CONTEXT,QO_HEADS,KV_HEADS[,BLOCK] [--kernel simt|tensor-core] | "
               "--prefill CACHED]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, csv = false, tensor_core = false, one_shape = false;
  int prefill_cached = -1;
  shape only{};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--csv")) csv = true;
    else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      if (!parse_shape(argv[++i], only)) return 2;
      one_shape = true;
    } else if (!std::strcmp(argv[i], "--kernel") && i + 1 < argc) {
      const char* k = argv[++i];
      if (!std::strcmp(k, "tensor-core")) tensor_core = true;
      else if (std::strcmp(k, "simt")) {
        std::fprintf(stderr, "paged_attention_bench: --kernel '%s': expected simt or tensor-core\n", k);
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--prefill") && i + 1 < argc) {
      char* end = nullptr;
      const long c = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || c < 0 || c > (1 << 20)) {
        std::fprintf(stderr, "paged_attention_bench: --prefill '%s': expected a count of cached tokens, 0 to 1048576\n", argv[i]);
        return 2;
      }
      prefill_cached = static_cast<int>(c);
    } else {
      return usage(argv[0]);
    }
  }
  if (tensor_core && !one_shape) {
    std::fprintf(stderr, "paged_attention_bench: --kernel needs --shape\n");
    return 2;
  }
  if (one_shape && prefill_cached >= 0) {
    std::fprintf(stderr, "paged_attention_bench: --shape and --prefill are two different cases; give one\n");
    return 2;
  }
  if (const int status = no_gpu_status("paged_attention_bench"); status >= 0) return status;
  try {
    cudaDeviceProp prop{};
    const int runs = quick ? 10 : 50;
    const double ceiling = print_copy_ceiling(runs, prop);
    if (csv) std::printf("batch,context,qo_heads,kv_heads,splits,time_us,bytes,gb_s,ratio,note\n");
    else
      std::printf("%6s %8s %7s %6s %10s %12s %8s %6s  %s\n", "batch", "context", "heads", "splits", "time_us", "MB moved",
                  "GB/s", "ratio", "note");

    std::mt19937_64 rng(2026);
    // The bf16 D128 decode of `group` (1, 2, 4, 8 or 16) on either kernel, with the plan it is
    // given (the planner's, whichever kernel that was made for: both share the grid contract).
    auto dynamic = [](int group, bool tc) {
      return [group, tc](const ra::decode_plan& plan, const ra::decode_args& args, cudaStream_t stream) {
        auto run = [&]<int G>() {
          if (tc) ra::launch_tensor_core_decode<rungs::bf16, 128, ra::dynamic_block_size, G>(plan, args, stream);
          else ra::launch_decode<rungs::bf16, 128, ra::dynamic_block_size, G>(plan, args, stream);
        };
        switch (group) {
          case 1: run.template operator()<1>(); break;
          case 2: run.template operator()<2>(); break;
          case 4: run.template operator()<4>(); break;
          case 8: run.template operator()<8>(); break;
          case 16: run.template operator()<16>(); break;
          default: throw std::invalid_argument("paged_attention_bench: group " + std::to_string(group) +
                                               " is not instantiated (1, 2, 4, 8, 16)");
        }
      };
    };
    auto print_row = [&](const shape& sh, bool ran, const result& r) {
      const double kv_bytes = 4.0 * sh.batch * sh.context * sh.kv_heads * 128;
      const char* note = !ran ? "skipped: exceeds memory" : kv_bytes < 2.0 * prop.l2CacheSize ? "fits in L2 (latency not bandwidth)" : "";
      const double gbs = ran ? r.bytes / (r.ms * 1e6) : 0;
      if (csv) {
        std::printf("%d,%d,%d,%d,%d,%.2f,%.0f,%.1f,%.3f,%s\n", sh.batch, sh.context, sh.qo_heads, sh.kv_heads, r.splits,
                    r.ms * 1e3, r.bytes, gbs, gbs / ceiling, note);
      } else {
        std::printf("%6d %8d %4d/%-2d %6d %10.1f %12.1f %8.0f %6.3f  %s\n", sh.batch, sh.context, sh.qo_heads, sh.kv_heads,
                    r.splits, r.ms * 1e3, r.bytes / 1e6, gbs, gbs / ceiling, note);
      }
      std::fflush(stdout);
    };
    if (one_shape) {  // one decode case (scripts/gpu-profile)
      result r;
      const bool ran = run_shape(only, runs, rng, r, dynamic(only.qo_heads / only.kv_heads, tensor_core));
      print_row(only, ran, r);
      std::printf("# %s decode, block size %d\n", tensor_core ? "tensor-core" : "SIMT", only.block);
      return ran ? 0 : 1;
    }
    if (prefill_cached >= 0) {  // one prefill chunk (scripts/gpu-profile)
      const prefill_result r = run_prefill(2048, prefill_cached, runs, rng);
      std::printf("# prefill bf16 D128, 1 x 2048 over %d cached, 32q/8kv: %s, %d splits, %.1f us, %.1f TFLOPS, "
                  "%.0f GB/s\n",
                  prefill_cached, r.kernel, r.splits, r.ms * 1e3, r.flops / (r.ms * 1e9), r.bytes / (r.ms * 1e6));
      return 0;
    }
    for (int batch : {1, 8, 16, 64, 256}) {
      for (int context : {512, 4096, 16384}) {
        for (int kv_heads : {8, 32}) {
          const shape sh{batch, context, 32, kv_heads};
          result r;
          const bool ran = run_shape(sh, runs, rng, r, dynamic(32 / kv_heads, false));
          print_row(sh, ran, r);
        }
      }
    }

    // Static against dynamic block size, on the target shape (batch 64, context 4096, 32q/8kv).
    const shape target{64, 4096, 32, 8};
    result stat, dyn;
    run_shape(target, runs, rng, stat, [](const ra::decode_plan& plan, const ra::decode_args& args, cudaStream_t stream) {
      ra::launch_decode<rungs::bf16, 128, 16, 4>(plan, args, stream);
    });
    run_shape(target, runs, rng, dyn, dynamic(4, false));
    std::printf("# block size 16, batch 64, context 4096, 32q/8kv: static instance %.1f us, dynamic instance %.1f us "
                "(static/dynamic time %.3f)\n",
                stat.ms * 1e3, dyn.ms * 1e3, stat.ms / dyn.ms);

    // The tensor-core decode against the SIMT decode on the same plan (docs/kernels.md,
    // "Tensor-core decode"), at groups 4 (32q/8kv) and 8 (64q/8kv).
    for (const int qo_heads : {32, 64}) {
      const shape gqa{64, 4096, qo_heads, 8};
      result simt, tc;
      run_shape(gqa, runs, rng, simt, [qo_heads](const ra::decode_plan& plan, const ra::decode_args& args, cudaStream_t stream) {
        if (qo_heads == 32) ra::launch_decode<rungs::bf16, 128, ra::dynamic_block_size, 4>(plan, args, stream);
        else ra::launch_decode<rungs::bf16, 128, ra::dynamic_block_size, 8>(plan, args, stream);
      });
      run_shape(gqa, runs, rng, tc, [qo_heads](const ra::decode_plan& plan, const ra::decode_args& args, cudaStream_t stream) {
        if (qo_heads == 32) ra::launch_tensor_core_decode<rungs::bf16, 128, ra::dynamic_block_size, 4>(plan, args, stream);
        else ra::launch_tensor_core_decode<rungs::bf16, 128, ra::dynamic_block_size, 8>(plan, args, stream);
      });
      std::printf("# bf16 D128, batch 64, context 4096, %dq/8kv: SIMT decode %.1f us, tensor-core decode %.1f us "
                  "(tensor-core/SIMT time %.3f)\n",
                  qo_heads, simt.ms * 1e3, tc.ms * 1e3, tc.ms / simt.ms);
    }

    // Prefill chunks (the documented shapes, benchmarks/RESULTS.md): 2048 new tokens over 0 and
    // 4096 cached ones, 32q/8kv, one sequence, on the kernel the planner picks.
    for (const int cached : {0, 4096}) {
      const prefill_result r = run_prefill(2048, cached, runs, rng);
      std::printf("# prefill bf16 D128, 1 x 2048 over %d cached, 32q/8kv: %s, %d splits, %.1f us, %.1f TFLOPS, "
                  "%.0f GB/s\n",
                  cached, r.kernel, r.splits, r.ms * 1e3, r.flops / (r.ms * 1e9), r.bytes / (r.ms * 1e6));
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paged_attention_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
