// rungs' attention kernels as nvcc compiles them (attention_instances.cu -> PTX at build
// time), run by the executor under several adversarial schedules, against the host reference:
// decode (with and without splits and the merge), prefill and the cache write. Needs nvcc to
// build (label cuda-sim), no GPU.
#include <rungs/attention/detail/params.cuh>
#include <rungs/attention/plan.hpp>
#include <rungs/attention/reference.hpp>

#include <catch2/catch.hpp>
#include <cxxabi.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "../tests/harness.hpp"
#include "compare.hpp"
#include "paged_problem.hpp"

namespace ra = rungs::attention;
namespace rd = rungs::attention::detail;
namespace geo = rungs::attention::geometry;
namespace sim = rungs::sim;
using namespace rungs_test;

namespace {

const sim::module& instances() {
  static const auto m = [] {
    std::ifstream f(RUNGS_SIM_ATTENTION_PTX);
    std::stringstream text;
    text << f.rdbuf();
    return sim::load_ptx(text.str(), "attention_instances.ptx");
  }();
  return *m;
}

// The entry whose demangled name starts with `signature` (e.g. "...merge_splits_kernel<__half, 128>").
std::string entry(const std::string& signature) {
  for (const std::string& e : sim::entries(instances())) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(e.c_str(), nullptr, nullptr, &status), std::free);
    if (status == 0 && std::string(d.get()).find(signature + "(") != std::string::npos) return e;
  }
  FAIL("no entry " << signature << " in attention_instances.ptx");
  return {};
}

template <class T>
std::string type_name() {
  return std::is_same_v<T, rungs::f16> ? "__half" : "__nv_bfloat16";
}
template <class T>
ra::dtype type_of() {
  return std::is_same_v<T, rungs::f16> ? ra::dtype::f16 : ra::dtype::bf16;
}

template <class Params>
sim::launch_result launch(const std::string& kernel, rd::launch_grid grid, unsigned threads, Params p,
                          const rungs_sim_test::host_memory& mem, std::uint64_t seed) {
  void* args[] = {&p};
  sim::schedule s;
  s.seed = seed;
  return sim::launch(instances(), entry(kernel), {grid.x, grid.y, grid.z}, {threads, 1, 1}, 0, args, mem, s);
}

template <class T, class A>
void add(rungs_sim_test::host_memory& mem, const std::vector<T, A>& v) {
  mem.add(v.data(), v.size() * sizeof(T));
}

// 256-byte aligned storage, as cudaMalloc returns: sector counts are then exact.
template <class T>
struct aligned_allocator {
  using value_type = T;
  aligned_allocator() = default;
  template <class U>
  aligned_allocator(const aligned_allocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{256})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{256}); }
  friend bool operator==(const aligned_allocator&, const aligned_allocator&) { return true; }
};
template <class T>
using device_vector = std::vector<T, aligned_allocator<T>>;
template <class T>
device_vector<T> to_device(const std::vector<T>& v) {
  return device_vector<T>(v.begin(), v.end());
}

// Decode over 3 sequences (the second of length 0) and a padded row, without and with splits.
template <class T, int D, int G>
void check_decode(int block_size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  constexpr int kMaxBatch = 4, kKvHeads = 2;
  // Five tiles and more: the 3-stage pipeline reuses a stage (where an early issue would race).
  const int max_context = 5 * geo::tile_tokens(D) + 30;
  std::vector<std::int32_t> lens = random_lengths(rng, 2, max_context - 5, block_size);
  lens.insert(lens.begin() + 1, 0);
  const paged_problem p = make_problem(
      rng, {.num_qo_heads = G * kKvHeads, .num_kv_heads = kKvHeads, .head_dim = D, .block_size = block_size}, lens);
  const auto pools = make_pools<T>(rng, p);
  const auto k_dev = to_device(pools.k), v_dev = to_device(pools.v);  // 256-byte aligned, as cudaMalloc's
  const std::int64_t row = p.shape.q_row_elements();
  const auto q = random_vector<T>(rng, static_cast<std::size_t>(kMaxBatch * row));
  std::vector<double> want(static_cast<std::size_t>(3 * row));
  ra::reference::decode<T, T, double>(p.shape, pools.k, pools.v, q, lens, {p.tables, p.table_stride}, 0.3, want);
  const std::uint64_t kv_bytes = 2ull * (lens[0] + lens[1] + lens[2]) * kKvHeads * D * sizeof(T);
  const std::string name = "paged_attention_kernel<" + type_name<T>() + ", " + std::to_string(D) + ", 0, " +
                           std::to_string(geo::decode_rows_per_thread(G)) + ", " +
                           std::to_string(geo::decode_row_groups(G)) + ", true>";
  for (int split : {max_context, geo::chunk_tokens * 4, 0}) {  // none, 16 tokens, the planner's
    const ra::attention_config config{type_of<T>(), p.shape, 0.3f};
    const ra::decode_plan plan =
        ra::plan_decode(config, {.max_batch = kMaxBatch, .max_context = max_context}, {4}, {.split_tokens = split});
    const std::int64_t stride = plan.max_blocks_per_seq;
    std::vector<std::int32_t> lens_dev(kMaxBatch, -1), tables(static_cast<std::size_t>(kMaxBatch * stride), -1000000);
    ra::write_decode_step(plan, lens, p.block_spans(), lens_dev, tables, stride);
    std::vector<T> out(static_cast<std::size_t>(kMaxBatch * row), poison<T>());
    std::vector<float> workspace((plan.workspace.bytes + 3) / 4, std::nanf(""));
    rungs_sim_test::host_memory mem;
    add(mem, q), add(mem, k_dev), add(mem, v_dev), add(mem, tables), add(mem, lens_dev), add(mem, out);
    add(mem, workspace);
    const ra::decode_args a{.q = q.data(), .k_cache = k_dev.data(), .v_cache = v_dev.data(),
                            .block_tables = tables.data(), .block_table_stride = stride, .seq_lens = lens_dev.data(),
                            .out = out.data(), .workspace = workspace.data(), .workspace_bytes = workspace.size() * 4};
    ra::validate(plan, a);
    const std::string what = name + ", " + std::to_string(plan.num_splits) + " splits, seed " + std::to_string(seed);
    INFO(what);
    const auto r = launch(name, rd::decode_grid(plan), geo::threads, rd::decode_params(plan, a), mem, seed);
    // The KV stream (cp.async): each byte of the sequences' K and V read once, in full sectors
    // (a D-element row is a whole number of sectors for D = 64, 96, 128 in 2-byte elements).
    CHECK(r.global.async_bytes_read == kv_bytes);
    CHECK(r.global.async_sectors_read * 32 == kv_bytes);
    if (plan.split()) {
      const rd::merge_params m = rd::decode_merge_params(plan, a);
      launch("merge_splits_kernel<" + type_name<T>() + ", " + std::to_string(D) + ">", rd::merge_grid(m),
             32 * geo::merge_warps, m, mem, seed);
    }
    require_close(out, want, row, 0, 3, what);
    require_zero_rows(out, row, 1, 2, what + ": the length-0 sequence");
    require_zero_rows(out, row, 3, kMaxBatch, what + ": the padded row");
  }
}

// Prefill over an extend, a pure prefill and a sequence without new tokens, plus a padded row.
template <class T, int D>
void check_prefill(int block_size, int group, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  constexpr int kMaxBatch = 4, kMaxQ = 12;
  const int max_context = 5 * geo::tile_tokens(D) + 23;
  const std::vector<std::int32_t> kv_lens = {max_context - 4, 9, 7};
  const std::vector<std::int32_t> q_lens = {kMaxQ, 9, 0};
  const paged_problem p = make_problem(
      rng, {.num_qo_heads = group, .num_kv_heads = 1, .head_dim = D, .block_size = block_size}, kv_lens, q_lens);
  const auto pools = make_pools<T>(rng, p);
  const std::int64_t row = p.shape.q_row_elements();
  const int max_total_q = kMaxBatch * kMaxQ;
  const auto q = random_vector<T>(rng, static_cast<std::size_t>(max_total_q * row));
  std::vector<double> want(static_cast<std::size_t>(p.total_q() * row));
  ra::reference::prefill<T, T, double>(p.shape, pools.k, pools.v, q, p.q_indptr, kv_lens, {p.tables, p.table_stride},
                                       0.0, want);
  const std::string name = "paged_attention_kernel<" + type_name<T>() + ", " + std::to_string(D) + ", 0, " +
                           std::to_string(geo::max_rows_per_thread) + ", " + std::to_string(geo::thread_rows(D)) +
                           ", false>";
  const ra::attention_config config{type_of<T>(), p.shape};
  for (int split : {max_context, geo::chunk_tokens * 2}) {
  const ra::prefill_plan plan = ra::plan_prefill(
      config, {.max_batch = kMaxBatch, .max_q_len = kMaxQ, .max_total_q = max_total_q, .max_context = max_context},
      {4}, {.split_tokens = split});
  std::vector<std::int32_t> indptr(kMaxBatch + 1), lens(kMaxBatch);
  std::vector<std::int32_t> tables(static_cast<std::size_t>(kMaxBatch * plan.max_blocks_per_seq), -1000000);
  ra::write_prefill_step(plan, q_lens, kv_lens, p.block_spans(), indptr, lens, tables);
  std::vector<T> out(static_cast<std::size_t>(max_total_q * row), poison<T>());
  std::vector<float> workspace((plan.workspace.bytes + 3) / 4, std::nanf(""));
  rungs_sim_test::host_memory mem;
  add(mem, q), add(mem, pools.k), add(mem, pools.v), add(mem, tables), add(mem, indptr), add(mem, lens);
  add(mem, out), add(mem, workspace);
  const ra::prefill_args a{.q = q.data(), .k_cache = pools.k.data(), .v_cache = pools.v.data(),
                           .block_tables = tables.data(), .q_indptr = indptr.data(), .kv_lens = lens.data(),
                           .out = out.data(), .workspace = workspace.data(), .workspace_bytes = workspace.size() * 4};
  ra::validate(plan, a);
  const std::string what = name + ", " + std::to_string(plan.num_splits) + " splits, seed " + std::to_string(seed);
  INFO(what);
  launch(name, rd::prefill_grid(plan), geo::threads, rd::prefill_params(plan, a), mem, seed);
  if (plan.split()) {
    const rd::merge_params m = rd::prefill_merge_params(plan, a);
    launch("merge_splits_kernel<" + type_name<T>() + ", " + std::to_string(D) + ">", rd::merge_grid(m),
           32 * geo::merge_warps, m, mem, seed);
  }
  require_close(out, want, row, 0, p.total_q(), what);
  }
}

}  // namespace

TEST_CASE("decode kernels (nvcc's PTX) match the reference under adversarial schedules", "[cuda-sim]") {
  for (std::uint64_t seed : {1u, 2u}) {
    check_decode<rungs::f16, 128, 4>(16, seed);
    check_decode<rungs::bf16, 64, 16>(8, seed);
    check_decode<rungs::f16, 96, 1>(32, seed);
  }
}

TEST_CASE("prefill kernels (nvcc's PTX) match the reference under adversarial schedules", "[cuda-sim]") {
  check_prefill<rungs::bf16, 128>(16, 4, 3);
  check_prefill<rungs::f16, 80>(8, 2, 4);
}

TEST_CASE("cache write (nvcc's PTX): every slot as the reference; each KV byte written once, full sectors",
          "[cuda-sim]") {
  std::mt19937_64 rng(7);
  const ra::attention_shape s{.num_qo_heads = 4, .num_kv_heads = 2, .head_dim = 128, .block_size = 16, .num_blocks = 6};
  const ra::attention_config config{ra::dtype::f16, s};
  constexpr int kTokens = 19;
  const std::int64_t row = s.kv_row_elements();
  auto k_cache = random_vector<rungs::f16>(rng, static_cast<std::size_t>(s.pool_elements()));
  auto v_cache = random_vector<rungs::f16>(rng, static_cast<std::size_t>(s.pool_elements()));
  const auto k = random_vector<rungs::f16>(rng, static_cast<std::size_t>(kTokens * row));
  const auto v = random_vector<rungs::f16>(rng, static_cast<std::size_t>(kTokens * row));
  std::vector<std::int64_t> slots(kTokens);
  for (int t = 0; t < kTokens; ++t) slots[static_cast<std::size_t>(t)] = (t * 37) % s.num_slots();
  slots[4] = -1;
  auto want_k = k_cache, want_v = v_cache;
  ra::reference::cache_write<rungs::f16>(s, want_k, want_v, k, v, slots, 0, 0);
  auto kc = to_device(k_cache), vc = to_device(v_cache);
  const auto kd = to_device(k), vd = to_device(v);
  const auto slots_dev = to_device(slots);
  rungs_sim_test::host_memory mem;
  add(mem, kc), add(mem, vc), add(mem, kd), add(mem, vd), add(mem, slots_dev);
  const ra::cache_write_args a{.k = kd.data(), .v = vd.data(), .slot_mapping = slots_dev.data(),
                               .num_tokens = kTokens, .k_cache = kc.data(), .v_cache = vc.data()};
  ra::validate(config, a);
  const rd::cache_write_params p = rd::make_cache_write_params(config, a);
  const auto r = launch("cache_write_kernel<__half, 128>", rd::cache_write_grid(p, 128), geo::cache_write_threads, p,
                        mem, 5);
  for (std::size_t i = 0; i < k_cache.size(); ++i) {
    REQUIRE(kc[i].bits == want_k[i].bits);
    REQUIRE(vc[i].bits == want_v[i].bits);
  }
  // 18 real tokens x 2 heads x 128 dims x 2 bytes, for K and V: each byte read and written
  // once, in full 32-byte sectors (rows are 256 bytes on 256-byte aligned buffers); the 19
  // slots (152 bytes, read by every thread of their token) are 5 more sectors.
  const std::uint64_t kv_bytes = 2ull * 18 * row * 2;
  CHECK(r.global.bytes_written == kv_bytes);
  CHECK(r.global.sectors_written == kv_bytes / 32);
  CHECK(r.global.sectors_read == kv_bytes / 32 + 5);
}
