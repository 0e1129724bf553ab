// GPU tests of fp8 KV caches against the host reference: decode, prefill and the cache write
// of every fp8 instance of the tested set (fp8_kv_instances: E4M3 under bf16 queries at head
// dim 128 by default), with per-head and per-tensor scales (see decode_checks.cuh,
// prefill_checks.cuh). E5M2 runs in cuda_sim_kernels_test only: each shape here is another
// translation unit's worth of kernels in the cuda and cuda-sim steps.
#include "decode_checks.cuh"
#include "prefill_checks.cuh"

#include <algorithm>
#include <numeric>

namespace {

namespace ra = rungs::attention;
using namespace rungs_test;

// The whole pools after a cache write of 23 tokens (3 padded) of Type rows into a Kv cache
// must equal the reference's bit for bit; scales in [1/500, 1/50] put some of the values
// (|x| <= 1) past E4M3's 448, so saturation is exercised too.
template <ra::dtype Type, ra::dtype Kv, int HeadDim>
void check_cache_write_fp8() {
  using host_t = ra::host_type<Type>;
  using host_kv = ra::host_type<Kv>;
  using set = ra::instantiation_set<ra::dtypes<Type>, ra::values<HeadDim>, tested_set::block_sizes, ra::values<1>,
                                    ra::fp8_kv_instances<ra::dtypes<Type>, ra::dtypes<Kv>, ra::values<HeadDim>, ra::values<1>>>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(Kv) + HeadDim);
  for (int block_size : {8, 128}) {
    for (bool per_head : {true, false}) {
      INFO(rungs::name(Type) << " rows into a " << rungs::name(Kv) << " cache, head_dim " << HeadDim << ", block_size "
                             << block_size << (per_head ? ", per-head" : ", per-tensor") << " scales");
      const ra::attention_shape s{.num_qo_heads = 6, .num_kv_heads = 3, .head_dim = HeadDim, .block_size = block_size,
                                  .num_blocks = 7};
      const kv_scale_values scales = draw_kv_scales<host_kv>(rng, s.num_kv_heads, per_head, 1.0f / 500, 1.0f / 50);
      const ra::attention_config config{Type, s, 0.0f, {}, scales.format};
      const std::int64_t row = s.kv_row_elements();
      constexpr int kTokens = 23;
      auto k_cache = random_vector<host_kv>(rng, static_cast<std::size_t>(s.pool_elements()));
      auto v_cache = random_vector<host_kv>(rng, static_cast<std::size_t>(s.pool_elements()));
      const auto k = random_vector<host_t>(rng, static_cast<std::size_t>(kTokens * row));
      const auto v = random_vector<host_t>(rng, static_cast<std::size_t>(kTokens * row));
      std::vector<std::int64_t> all(static_cast<std::size_t>(s.num_slots()));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      std::vector<std::int64_t> slots(all.begin(), all.begin() + kTokens);
      slots[0] = slots[9] = slots[22] = -1;

      device_buffer<host_kv> kc(k_cache), vc(v_cache);
      device_buffer<host_t> kd(k), vd(v);
      device_buffer<std::int64_t> slots_dev(slots);
      device_buffer<float> k_scale(scales.k), v_scale(scales.v);
      ra::cache_write<set>(config,
                           {.k = kd.data(), .v = vd.data(), .slot_mapping = slots_dev.data(), .num_tokens = kTokens,
                            .k_cache = kc.data(), .v_cache = vc.data(), .k_scale = k_scale.data(),
                            .v_scale = v_scale.data()},
                           nullptr);
      RUNGS_CUDA_CHECK(cudaDeviceSynchronize());
      ra::reference::cache_write<host_kv, host_t>(s, k_cache, v_cache, k, v, slots, 0, 0, {scales.k, scales.v});
      const auto got_k = kc.download(), got_v = vc.download();
      std::int64_t differ = 0;
      for (std::size_t i = 0; i < k_cache.size(); ++i) {
        differ += got_k[i].bits != k_cache[i].bits;
        differ += got_v[i].bits != v_cache[i].bits;
      }
      CHECK(differ == 0);
    }
  }
}

struct each_instance {
  template <ra::dtype Type, ra::dtype Kv, int HeadDim, int Group>
  void operator()() const {
    check_decode_fp8_instance<Type, Kv, HeadDim, Group>();
    check_prefill_fp8_instance<Type, Kv, HeadDim>();
    check_cache_write_fp8<Type, Kv, HeadDim>();
  }
};

}  // namespace

TEST_CASE("fp8 KV caches: every fp8 instance of the tested set matches the reference") {
  ra::for_each_fp8_instance<tested_set::fp8_kv>(each_instance{});
}
