// Must NOT compile: an engine composed with a policy that misses an operation. The test
// (tests/engine/CMakeLists.txt) checks that the first error names the policy and what it
// lacks. One variant per RUNGS_BAD_* macro.
#include <rungs/engine/engine.hpp>
#include <rungs/engine/host_backend.hpp>
#include <rungs/engine/reference_forward.hpp>
#include <rungs/kv/paged_allocator.hpp>
#include <rungs/ladder/ladder.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

using namespace rungs::engine;

struct ladder {
  std::size_t size() const { return 1; }
  bucket at(std::size_t) const { return {.dims = {1, 0, 0}, .shape = {1, 1, 1}}; }
  std::optional<std::size_t> find(const batch_key&) const { return 0; }
};
using pool = rungs::kv::free_list_allocator;
struct order_without_before {
  std::string_view name() const { return "broken"; }
};
struct timing_without_idle {
  std::string_view name() const { return "broken"; }
  std::optional<std::size_t> at_startup(const capture_queue&) const { return {}; }
  std::optional<std::size_t> during_step(const capture_queue&, std::optional<std::size_t>) const { return {}; }
};
struct pool_without_size {
  std::int64_t num_blocks() const { return 1; }
};
struct ladder_without_find {
  std::size_t size() const { return 1; }
  bucket at(std::size_t) const { return {}; }
};

constexpr model_shape m{.dtype = rungs::dtype::bf16, .num_qo_heads = 8, .num_kv_heads = 2, .head_dim = 64, .block_size = 16, .num_layers = 1};
constexpr model_shape bad_m{.dtype = rungs::dtype::fp16, .num_qo_heads = 8, .num_kv_heads = 3, .head_dim = 64, .block_size = 16, .num_layers = 1};

#if defined(RUNGS_BAD_ORDER)
using E = engine<ladder, order_without_before, startup, pool, host_backend>;
#elif defined(RUNGS_BAD_TIMING)
using E = engine<ladder, largest_first, timing_without_idle, pool, host_backend>;
#elif defined(RUNGS_BAD_ALLOCATOR)
using E = engine<ladder, largest_first, startup, pool_without_size, host_backend>;
#elif defined(RUNGS_BAD_BUCKETS)
using E = engine<ladder_without_find, largest_first, startup, pool, host_backend>;
#elif defined(RUNGS_BAD_LADDER)
using E = engine<rungs::ladder, largest_first, startup, pool, host_backend>;
#elif defined(RUNGS_BAD_MODEL)
using E = reference_forward<bad_m>;  // the model fixes the forward's instantiation
#else
using E = engine<ladder, largest_first, startup, pool, host_backend>;  // the control: compiles
constexpr std::size_t forward_size = sizeof(reference_forward<m>);
#endif

std::size_t instantiate() { return sizeof(E); }
