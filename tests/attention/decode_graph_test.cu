// A decode step (cache write of the new tokens, then split-KV decode with its merge) captured
// once in a CUDA graph and replayed while the batch, the lengths, the block tables, the
// queries and the new tokens change, each replay checked against the host reference.
#include <rungs/attention/paged_attention.cuh>
#include <rungs/attention/reference.hpp>

#include <random>
#include <string>
#include <vector>

#include "gpu_support.hpp"
#include "paged_problem.hpp"

namespace ra = rungs::attention;
using namespace rungs_test;

TEST_CASE("a captured decode step replays correctly as lengths, block tables and batch change") {
  using host_t = rungs::bf16;
  using set = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<ra::dynamic_block_size>,
                                    ra::values<4>>;
  constexpr int kMaxBatch = 8;
  constexpr int kMaxContext = 600;
  const ra::attention_shape s{.num_qo_heads = 8, .num_kv_heads = 2, .head_dim = 128, .block_size = 16, .num_blocks = 400};
  const ra::attention_config config{ra::dtype::bf16, s};
  const ra::decode_plan plan =
      ra::plan_decode<set>(config, {.max_batch = kMaxBatch, .max_context = kMaxContext}, ra::query_device(), {.split_tokens = 128});
  REQUIRE(plan.num_splits == 5);
  const std::int64_t stride = plan.max_blocks_per_seq;
  const std::int64_t q_row = s.q_row_elements();
  const std::int64_t kv_row = s.kv_row_elements();

  device_buffer<host_t> k(static_cast<std::size_t>(s.pool_elements())), v(static_cast<std::size_t>(s.pool_elements()));
  device_buffer<host_t> q(static_cast<std::size_t>(kMaxBatch * q_row)), out(static_cast<std::size_t>(kMaxBatch * q_row));
  device_buffer<host_t> new_k(static_cast<std::size_t>(kMaxBatch * kv_row)), new_v(static_cast<std::size_t>(kMaxBatch * kv_row));
  device_buffer<std::int64_t> slots(kMaxBatch);
  device_buffer<std::int32_t> lens(kMaxBatch), tables(static_cast<std::size_t>(kMaxBatch * stride));
  device_buffer<std::byte> workspace(plan.workspace.bytes);

  cudaStream_t stream{};
  RUNGS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const ra::cache_write_args write{.k = new_k.data(), .v = new_v.data(), .slot_mapping = slots.data(),
                                   .num_tokens = kMaxBatch, .k_cache = k.data(), .v_cache = v.data()};
  const ra::decode_args args{.q = q.data(), .k_cache = k.data(), .v_cache = v.data(), .block_tables = tables.data(),
                             .seq_lens = lens.data(), .out = out.data(), .workspace = workspace.data(),
                             .workspace_bytes = workspace.size()};
  // The plan is what runs: the default set's plan for this shape (bf16, head dim 128, group 4)
  // on tensor cores (the planner's choice on sm_80 and sm_89; on sm_90 it picks the SIMT decode
  // at group 4, so the kernel is forced here), which `set` does not compile; decode<set> refuses
  // it before launching anything instead of running the SIMT decode on splits sized for tensor
  // cores.
  const ra::decode_plan default_plan =
      ra::plan_decode(config, {.max_batch = kMaxBatch, .max_context = kMaxContext}, ra::query_device(),
                      {.split_tokens = 128, .kernel = ra::decode_kernel::tensor_cores});
  REQUIRE(default_plan.kernel == ra::decode_kernel::tensor_cores);
  REQUIRE(plan.kernel == ra::decode_kernel::simt);
  CHECK_THROWS_WITH(ra::decode<set>(default_plan, args, stream),
                    "decode: the plan's kernel is tensor_cores, which this call cannot run: dtype = bf16, head_dim = 128, "
                    "block_size = 16, group_size = 4 (the instantiation set has no tensor-core decode instance for it); "
                    "plan with plan_decode<Set>, decode's instantiation set, or plan_options.kernel = simt");
  cudaGraph_t graph{};
  RUNGS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  ra::cache_write<set>(config, write, stream);
  ra::decode<set>(plan, args, stream);
  RUNGS_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec{};
  RUNGS_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  std::mt19937_64 rng(99);
  int step = 0;
  for (int batch : {8, 3, 6, 1, 8}) {
    INFO("step " << step << ", batch " << batch);
    auto seq_lens = random_lengths(rng, batch, step == 0 ? kMaxContext : kMaxContext / (step + 1), s.block_size);
    const paged_problem p = make_problem(rng, s, seq_lens);
    auto pools = make_pools<host_t>(rng, p);
    // The newest token of each sequence arrives through the captured cache write: its slot is
    // poison in the uploaded pools, and the host reference writes it the same way.
    std::vector<std::int64_t> slot_map(kMaxBatch, -1);
    for (int b = 0; b < batch; ++b) {
      const int last = seq_lens[static_cast<std::size_t>(b)] - 1;
      const std::int64_t slot =
          static_cast<std::int64_t>(p.blocks[static_cast<std::size_t>(b)][static_cast<std::size_t>(last / s.block_size)]) *
              s.block_size + last % s.block_size;
      slot_map[static_cast<std::size_t>(b)] = slot;
      for (int h = 0; h < s.num_kv_heads; ++h) {
        const auto at = static_cast<std::size_t>(s.slot_offset(slot, h));
        std::fill_n(pools.k.begin() + static_cast<std::ptrdiff_t>(at), s.head_dim, poison<host_t>());
        std::fill_n(pools.v.begin() + static_cast<std::ptrdiff_t>(at), s.head_dim, poison<host_t>());
      }
    }
    k.upload(pools.k);
    v.upload(pools.v);
    const auto nk = random_vector<host_t>(rng, static_cast<std::size_t>(kMaxBatch * kv_row));
    const auto nv = random_vector<host_t>(rng, static_cast<std::size_t>(kMaxBatch * kv_row));
    const auto qh = random_vector<host_t>(rng, static_cast<std::size_t>(kMaxBatch * q_row));
    new_k.upload(nk);
    new_v.upload(nv);
    q.upload(qh);
    slots.upload(slot_map);
    ra::reference::cache_write<host_t>(s, pools.k, pools.v, nk, nv, slot_map);

    std::vector<std::int32_t> lens_stage(kMaxBatch), tables_stage(static_cast<std::size_t>(kMaxBatch * stride), -1);
    const auto spans = p.block_spans();
    ra::write_decode_step(plan, seq_lens, spans, lens_stage, tables_stage);
    RUNGS_CUDA_CHECK(cudaMemcpyAsync(lens.data(), lens_stage.data(), lens_stage.size() * sizeof(std::int32_t),
                                     cudaMemcpyHostToDevice, stream));
    RUNGS_CUDA_CHECK(cudaMemcpyAsync(tables.data(), tables_stage.data(), tables_stage.size() * sizeof(std::int32_t),
                                     cudaMemcpyHostToDevice, stream));
    RUNGS_CUDA_CHECK(cudaMemsetAsync(out.data(), 0xff, out.size() * sizeof(host_t), stream));
    // The uploads above ran on the legacy stream (cudaMemcpy from pageable memory may return
    // before its DMA lands), which the non-blocking capture stream does not wait for.
    RUNGS_CUDA_CHECK(cudaDeviceSynchronize());
    RUNGS_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    RUNGS_CUDA_CHECK(cudaStreamSynchronize(stream));

    std::vector<double> want(static_cast<std::size_t>(batch * q_row));
    ra::reference::decode<host_t, host_t, double>(s, pools.k, pools.v, std::span<const host_t>(qh).first(want.size()),
                                                  seq_lens, {p.tables, p.table_stride}, 0.0, want);
    const auto got = out.download();
    require_close(got, want, q_row, 0, batch, "replay " + std::to_string(step));
    require_zero_rows(got, q_row, batch, kMaxBatch, "padded rows of replay " + std::to_string(step));
    ++step;
  }
  RUNGS_CUDA_CHECK(cudaGraphExecDestroy(exec));
  RUNGS_CUDA_CHECK(cudaGraphDestroy(graph));
  RUNGS_CUDA_CHECK(cudaStreamDestroy(stream));
}
