// GPU cache write against the host reference: for both element types, every head dim of the
// tested set and every block size, the whole K and V pools after the write must equal the
// reference's bit for bit (so padded rows and untouched slots are checked too), with dense
// and strided (fused-QKV style) new rows.
#include <rungs/attention/paged_attention.cuh>
#include <rungs/attention/reference.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "gpu_support.hpp"
#include "paged_problem.hpp"

namespace ra = rungs::attention;
using namespace rungs_test;

namespace {

template <class HostT>
bool same_bits(const std::vector<HostT>& a, const std::vector<HostT>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](HostT x, HostT y) { return x.bits == y.bits; });
}

template <ra::dtype Type>
void check_cache_write_set() {
  using host_t = ra::host_type<Type>;
  using set = tested_set_of<Type>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(Type) + 5);
  for_each_value(typename set::head_dims{}, [&](int head_dim) {
    for (int block_size : {8, 16, 32, 64, 128}) {
      for (bool strided : {false, true}) {
        INFO(rungs::name(Type) << ", head_dim " << head_dim << ", block_size " << block_size << ", strided " << strided);
        const ra::attention_shape s{.num_qo_heads = 6, .num_kv_heads = 3, .head_dim = head_dim,
                                    .block_size = block_size, .num_blocks = 7};
        const ra::attention_config config{Type, s};
        const std::int64_t row = s.kv_row_elements();
        const std::int64_t k_stride = strided ? row + 3 * 8 : 0, v_stride = strided ? 2 * row + 8 : 0;
        constexpr int kTokens = 23;
        auto k_cache = random_vector<host_t>(rng, static_cast<std::size_t>(s.pool_elements()));
        auto v_cache = random_vector<host_t>(rng, static_cast<std::size_t>(s.pool_elements()));
        const auto k = random_vector<host_t>(rng, static_cast<std::size_t>(kTokens * (k_stride ? k_stride : row)));
        const auto v = random_vector<host_t>(rng, static_cast<std::size_t>(kTokens * (v_stride ? v_stride : row)));
        std::vector<std::int64_t> all(static_cast<std::size_t>(s.num_slots()));
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        std::vector<std::int64_t> slots(all.begin(), all.begin() + kTokens);
        slots[0] = slots[9] = slots[22] = -1;  // padded rows

        device_buffer<host_t> kc(k_cache), vc(v_cache), kd(k), vd(v);
        device_buffer<std::int64_t> slots_dev(slots);
        ra::cache_write<set>(config,
                             {.k = kd.data(), .v = vd.data(), .k_stride = k_stride, .v_stride = v_stride,
                              .slot_mapping = slots_dev.data(), .num_tokens = kTokens, .k_cache = kc.data(),
                              .v_cache = vc.data()},
                             nullptr);
        RUNGS_CUDA_CHECK(cudaDeviceSynchronize());
        ra::reference::cache_write<host_t>(s, k_cache, v_cache, k, v, slots, k_stride, v_stride);
        CHECK(same_bits(kc.download(), k_cache));
        CHECK(same_bits(vc.download(), v_cache));
      }
    }
  });
}

}  // namespace

TEST_CASE("cache write matches the reference bit for bit") {
  check_cache_write_set<ra::dtype::fp16>();
  check_cache_write_set<ra::dtype::bf16>();
}

TEST_CASE("cache write of zero tokens launches nothing and needs no buffers") {
  const ra::attention_config config{ra::dtype::bf16,
                                    {.num_qo_heads = 8, .num_kv_heads = 8, .head_dim = 128, .block_size = 16, .num_blocks = 1}};
  CHECK_NOTHROW(ra::cache_write<tested_set_of<ra::dtype::bf16>>(config, {.num_tokens = 0}, nullptr));
}
