// Index overflow: a pool of 40000 blocks (2 KV heads x 128 tokens x head dim 256: 2.6e9
// elements, 5.2 GB per pool) whose high blocks sit past 2^31 elements and 2^32 bytes. The
// sequences' blocks are split between the lowest and the highest ids; their K and V are
// written by the cache-write kernel, then decode (the SIMT and the tensor-core kernel) and
// prefill read them. The host reference runs on a compact pool holding the same blocks under
// ids 0..15. Skipped (with a warning) when the GPU has less than 12 GB free.
#include <rungs/attention/paged_attention.cuh>
#include <rungs/attention/reference.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "gpu_support.hpp"
#include "paged_problem.hpp"

namespace ra = rungs::attention;
using namespace rungs_test;

TEST_CASE("a pool past 2^31 elements: cache write, decode and prefill use 64-bit offsets") {
  using host_t = rungs::bf16;
  constexpr std::int64_t kDeviceBlocks = 40000;
  constexpr std::int64_t kHostBlocks = 16;
  const ra::attention_shape host_shape{.num_qo_heads = 16, .num_kv_heads = 2, .head_dim = 256, .block_size = 128,
                                       .num_blocks = kHostBlocks};
  ra::attention_shape dev_shape = host_shape;
  dev_shape.num_blocks = kDeviceBlocks;
  REQUIRE(dev_shape.pool_elements() > (std::int64_t{1} << 31));
  if (free_device_memory() < std::size_t{12} << 30) {
    WARN("skipped: needs 12 GB of free GPU memory");
    return;
  }
  // Host ids 0..7 stay low, 8..15 map to the top of the device pool.
  auto device_id = [&](std::int32_t id) -> std::int32_t {
    return id < 8 ? id : static_cast<std::int32_t>(kDeviceBlocks - kHostBlocks + id);
  };

  std::mt19937_64 rng(31);
  const std::vector<std::int32_t> kv_lens = {300, 129, 513, 57};
  const std::vector<std::int32_t> q_lens = {300, 5, 1, 57};
  const paged_problem p = make_problem(rng, host_shape, kv_lens, q_lens);
  std::vector<std::int32_t> dev_tables = p.tables;
  std::vector<std::vector<std::int32_t>> dev_blocks = p.blocks;
  for (auto& row : dev_blocks) {
    for (auto& id : row) id = device_id(id);
  }
  bool uses_high = false;
  for (const auto& row : dev_blocks) {
    for (auto id : row) uses_high = uses_high || id >= kDeviceBlocks - kHostBlocks;
  }
  REQUIRE(uses_high);

  // Every context token arrives through the cache write.
  std::vector<std::int64_t> host_slots, dev_slots;
  for (int b = 0; b < p.batch(); ++b) {
    for (int t = 0; t < kv_lens[static_cast<std::size_t>(b)]; ++t) {
      const auto block = p.blocks[static_cast<std::size_t>(b)][static_cast<std::size_t>(t / 128)];
      host_slots.push_back(std::int64_t{block} * 128 + t % 128);
      dev_slots.push_back(std::int64_t{device_id(block)} * 128 + t % 128);
    }
  }
  const auto tokens = static_cast<std::int64_t>(host_slots.size());
  const auto new_k = random_vector<host_t>(rng, static_cast<std::size_t>(tokens * host_shape.kv_row_elements()));
  const auto new_v = random_vector<host_t>(rng, static_cast<std::size_t>(tokens * host_shape.kv_row_elements()));
  // Poison with the bits the device pools get from cudaMemset(0xff), so whole blocks compare.
  std::vector<host_t> host_k(static_cast<std::size_t>(host_shape.pool_elements()), host_t::from_bits(0xffff));
  std::vector<host_t> host_v(host_k);
  ra::reference::cache_write<host_t>(host_shape, host_k, host_v, new_k, new_v, host_slots);

  device_buffer<host_t> k(static_cast<std::size_t>(dev_shape.pool_elements()));
  device_buffer<host_t> v(static_cast<std::size_t>(dev_shape.pool_elements()));
  k.poison();
  v.poison();
  device_buffer<host_t> nk(new_k), nv(new_v);
  device_buffer<std::int64_t> slots(dev_slots);
  ra::launch_cache_write<host_t, 256>({ra::dtype::bf16, dev_shape},
                                      {.k = nk.data(), .v = nv.data(), .slot_mapping = slots.data(),
                                       .num_tokens = tokens, .k_cache = k.data(), .v_cache = v.data()},
                                      nullptr);
  RUNGS_CUDA_CHECK(cudaDeviceSynchronize());

  // The highest block in use, second head, read back directly: it lies past 2^32 bytes.
  std::int32_t top_host = 0;
  for (const auto& row : p.blocks) {
    for (auto id : row) top_host = std::max(top_host, id);
  }
  REQUIRE(top_host >= 8);
  const std::int64_t block_elems = std::int64_t{128} * 256;
  std::vector<host_t> top(static_cast<std::size_t>(block_elems));
  RUNGS_CUDA_CHECK(cudaMemcpy(top.data(), k.data() + dev_shape.kv_offset(device_id(top_host), 1, 0),
                              top.size() * sizeof(host_t), cudaMemcpyDeviceToHost));
  REQUIRE(dev_shape.kv_offset(device_id(top_host), 1, 0) * 2 > (std::int64_t{1} << 32));
  std::int64_t mismatched = 0;
  for (std::int64_t i = 0; i < block_elems; ++i) {
    mismatched += top[static_cast<std::size_t>(i)].bits !=
                  host_k[static_cast<std::size_t>(host_shape.kv_offset(top_host, 1, 0) + i)].bits;
  }
  CHECK(mismatched == 0);

  const std::int64_t row = host_shape.q_row_elements();
  const auto spans_storage = dev_blocks;
  std::vector<std::span<const std::int32_t>> dev_spans(spans_storage.begin(), spans_storage.end());
  const ra::attention_config config{ra::dtype::bf16, dev_shape};

  {  // decode, split and not
    const auto q = random_vector<host_t>(rng, static_cast<std::size_t>(p.batch() * row));
    std::vector<double> want(q.size());
    ra::reference::decode<host_t, host_t, double>(host_shape, host_k, host_v, q, kv_lens, {p.tables, p.table_stride},
                                                  0.0, want);
    device_buffer<host_t> q_dev(q), out(q.size());
    for (int split_tokens : {1024, 100}) {
      const auto plan = ra::plan_decode(config, {.max_batch = p.batch(), .max_context = 600}, ra::query_device(),
                                        {.split_tokens = split_tokens});
      std::vector<std::int32_t> lens(static_cast<std::size_t>(p.batch())), tables(static_cast<std::size_t>(p.batch() * plan.max_blocks_per_seq), -1);
      ra::write_decode_step(plan, kv_lens, dev_spans, lens, tables);
      device_buffer<std::int32_t> lens_dev(lens), tables_dev(tables);
      device_buffer<std::byte> workspace(plan.workspace.bytes);
      const ra::decode_args args{.q = q_dev.data(), .k_cache = k.data(), .v_cache = v.data(),
                                 .block_tables = tables_dev.data(), .seq_lens = lens_dev.data(), .out = out.data(),
                                 .workspace = workspace.data(), .workspace_bytes = workspace.size()};
      // Both decode kernels (their typed launchers run whatever plan.kernel says): the SIMT
      // decode and the tensor-core decode, whose block addresses are built by other code.
      for (ra::decode_kernel kernel : {ra::decode_kernel::simt, ra::decode_kernel::tensor_cores}) {
        out.poison();
        if (kernel == ra::decode_kernel::simt) {
          ra::launch_decode<host_t, 256, ra::dynamic_block_size, 8>(plan, args, nullptr);
        } else {
          ra::launch_tensor_core_decode<host_t, 256, ra::dynamic_block_size, 8>(plan, args, nullptr);
        }
        RUNGS_CUDA_CHECK(cudaDeviceSynchronize());
        require_close(out.download(), want, row, 0, p.batch(),
                      "decode, " + std::to_string(plan.num_splits) + " splits, " + ra::name(kernel));
      }
    }
  }

  {  // prefill
    const auto q = random_vector<host_t>(rng, static_cast<std::size_t>(p.total_q() * row));
    std::vector<double> want(q.size());
    ra::reference::prefill<host_t, host_t, double>(host_shape, host_k, host_v, q, p.q_indptr, kv_lens,
                                                   {p.tables, p.table_stride}, 0.0, want);
    const auto plan = ra::plan_prefill(config, {.max_batch = p.batch(), .max_q_len = 300, .max_context = 600},
                                       ra::query_device());
    std::vector<std::int32_t> indptr(static_cast<std::size_t>(p.batch() + 1)), lens(static_cast<std::size_t>(p.batch()));
    std::vector<std::int32_t> tables(static_cast<std::size_t>(p.batch() * plan.max_blocks_per_seq), -1);
    ra::write_prefill_step(plan, q_lens, kv_lens, dev_spans, indptr, lens, tables);
    device_buffer<std::int32_t> indptr_dev(indptr), lens_dev(lens), tables_dev(tables);
    device_buffer<host_t> q_dev(q), out(static_cast<std::size_t>(plan.bucket.max_total_q * row));
    device_buffer<std::byte> workspace(plan.workspace.bytes);
    out.poison();
    ra::launch_prefill<host_t, 256, ra::dynamic_block_size>(
        plan,
        {.q = q_dev.data(), .k_cache = k.data(), .v_cache = v.data(), .block_tables = tables_dev.data(),
         .q_indptr = indptr_dev.data(), .kv_lens = lens_dev.data(), .out = out.data(), .workspace = workspace.data(),
         .workspace_bytes = workspace.size()},
        nullptr);
    RUNGS_CUDA_CHECK(cudaDeviceSynchronize());
    require_close(out.download(), want, row, 0, p.total_q(), "prefill, " + std::to_string(plan.num_splits) + " splits");
  }
}
