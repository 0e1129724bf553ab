// The paged-attention dispatcher (rungs/attention/dispatch.hpp): which instance a run-time
// shape reaches in each instantiation set, and the errors for values outside the contract or
// the set.
#include <rungs/attention/dispatch.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <type_traits>

namespace ra = rungs::attention;

namespace {

struct instance {
  bool f16;
  int head_dim, block_size, group;
  bool operator==(const instance&) const = default;
};

template <class Set>
instance decode_instance(ra::dtype t, ra::attention_shape s) {
  return ra::dispatch_decode<Set>(t, s, []<class T, int D, int B, int G>() {
    return instance{std::is_same_v<T, rungs::f16>, D, B, G};
  });
}

ra::attention_shape shape(int hq, int hkv, int d, int b) {
  return {.num_qo_heads = hq, .num_kv_heads = hkv, .head_dim = d, .block_size = b, .num_blocks = 100};
}

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no exception";
}

}  // namespace

TEST_CASE("the default set reaches every contract value, with the dynamic block size") {
  using set = ra::default_instantiations;
  for (int d : {64, 80, 96, 128, 256}) {
    for (int b : {8, 16, 32, 64, 128}) {
      for (int g : {1, 2, 3, 4, 5, 6, 7, 8, 16}) {
        CHECK(decode_instance<set>(ra::dtype::bf16, shape(2 * g, 2, d, b)) == instance{false, d, 0, g});
      }
    }
  }
  CHECK(decode_instance<set>(ra::dtype::fp16, shape(32, 8, 128, 16)) == instance{true, 128, 0, 4});
  const auto prefill = ra::dispatch_prefill<set>(ra::dtype::fp16, shape(24, 2, 96, 32), []<class T, int D, int B>() {
    return instance{std::is_same_v<T, rungs::f16>, D, B, 0};
  });
  CHECK(prefill == instance{true, 96, 0, 0});
  const int cache_d = ra::dispatch_cache_write<set>(ra::dtype::bf16, shape(8, 8, 256, 8), []<class T, int D>() { return D; });
  CHECK(cache_d == 256);
}

TEST_CASE("the full set reaches static block sizes") {
  using set = ra::full_instantiations;
  for (int b : {8, 16, 32, 64, 128}) {
    CHECK(decode_instance<set>(ra::dtype::bf16, shape(16, 2, 64, b)) == instance{false, 64, b, 8});
  }
}

TEST_CASE("a set with static and dynamic block sizes prefers the static instance") {
  using set = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<16, ra::dynamic_block_size>,
                                    ra::values<4>>;
  CHECK(decode_instance<set>(ra::dtype::bf16, shape(32, 8, 128, 16)).block_size == 16);
  CHECK(decode_instance<set>(ra::dtype::bf16, shape(32, 8, 128, 64)).block_size == ra::dynamic_block_size);
}

TEST_CASE("values outside the contract are rejected with the value and the supported list") {
  using set = ra::default_instantiations;
  auto noop = []<class T, int D, int B, int G>() {};
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, shape(8, 8, 72, 16), noop); }) ==
        "head_dim = 72 is not supported by this build; supported: 64, 80, 96, 128, 256");
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, shape(8, 8, 128, 24), noop); }) ==
        "block_size = 24 is not supported by this build; supported: 8, 16, 32, 64, 128");
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, shape(8, 8, 128, 256), noop); }) ==
        "block_size = 256 is not supported by this build; supported: 8, 16, 32, 64, 128");
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, shape(24, 2, 128, 16), noop); }) ==
        "group_size = 12 is not supported by this build; supported: 1, 2, 3, 4, 5, 6, 7, 8, 16");
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, shape(30, 8, 128, 16), noop); }) ==
        "num_qo_heads = 30 must be a multiple of num_kv_heads = 8 (each KV head serves a whole group of query heads)");
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, shape(8, 0, 128, 16), noop); }) ==
        "num_kv_heads = 0 must be at least 1");
  auto no_blocks = shape(8, 8, 128, 16);
  no_blocks.num_blocks = 0;
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, no_blocks, noop); }) ==
        "num_blocks = 0 must be at least 1");
  // A pool's rows (block, head, token) are addressed in 32 bits: 2^24 blocks x 8 heads x 16
  // tokens is 2^31 rows, one too many; a block fewer fits.
  auto rows_past_int32 = shape(8, 8, 128, 16);
  rows_past_int32.num_blocks = std::int64_t{1} << 24;
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, rows_past_int32, noop); }) ==
        "num_blocks * num_kv_heads * block_size = 2147483648 rows exceed 2^31 - 1 (the kernels address a pool's rows "
        "in 32 bits)");
  rows_past_int32.num_blocks -= 1;
  CHECK_NOTHROW(ra::dispatch_decode<set>(ra::dtype::bf16, rows_past_int32, noop));
  rows_past_int32.num_blocks = std::int64_t{1} << 31;
  CHECK(error_of([&] { ra::dispatch_prefill<set>(ra::dtype::bf16, rows_past_int32, []<class T, int D, int B>() {}); }) ==
        "num_blocks = 2147483648 exceeds 2^31 - 1 (block tables hold 32-bit ids)");
  CHECK_THROWS_AS(ra::dispatch_decode<set>(ra::dtype::bf16, shape(8, 8, 72, 16), noop), rungs::unsupported_value);
  // Prefill flattens the group into rows: any group is fine there.
  CHECK_NOTHROW(ra::dispatch_prefill<set>(ra::dtype::bf16, shape(24, 2, 128, 16), []<class T, int D, int B>() {}));
}

TEST_CASE("values inside the contract but outside a set are rejected with the set's list") {
  using set = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<64, 128>, ra::values<16, 32>,
                                    ra::values<1, 4>>;
  auto noop = []<class T, int D, int B, int G>() {};
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::fp16, shape(8, 2, 128, 16), noop); }) ==
        "dtype = fp16 is not supported by this build; supported: bf16");
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, shape(8, 2, 96, 16), noop); }) ==
        "head_dim = 96 is not supported by this build; supported: 64, 128");
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, shape(8, 2, 128, 8), noop); }) ==
        "block_size = 8 is not supported by this build; supported: 16, 32");
  CHECK(error_of([&] { ra::dispatch_decode<set>(ra::dtype::bf16, shape(4, 2, 128, 32), noop); }) ==
        "group_size = 2 is not supported by this build; supported: 1, 4");
  CHECK(decode_instance<set>(ra::dtype::bf16, shape(8, 2, 64, 32)) == instance{false, 64, 32, 4});
}

TEST_CASE("fp8 caches dispatch to the set's fp8 instances, and only those") {
  using set = ra::default_instantiations;
  struct fp8_instance {
    bool bf16, e4m3;
    int head_dim, block_size, group;
    bool operator==(const fp8_instance&) const = default;
  };
  auto decode = [](ra::dtype q, ra::dtype kv, ra::attention_shape s) {
    fp8_instance got{};
    ra::dispatch_fp8_decode<set>(q, kv, s, [&]<class T, class KV, int D, int B, int G>() {
      got = {std::is_same_v<T, rungs::bf16>, std::is_same_v<KV, rungs::e4m3>, D, B, G};
    });
    return got;
  };
  CHECK(decode(ra::dtype::bf16, ra::dtype::fp8_e4m3, shape(32, 8, 128, 16)) == fp8_instance{true, true, 128, 0, 4});
  CHECK(decode(ra::dtype::bf16, ra::dtype::fp8, shape(8, 2, 128, 64)) == fp8_instance{true, true, 128, 0, 4});
  int prefill_d = 0, cache_d = 0;
  ra::dispatch_fp8_prefill<set>(ra::dtype::bf16, ra::dtype::fp8_e4m3, shape(24, 2, 128, 32),
                                [&]<class T, class KV, int D, int B>() { prefill_d = D; });
  ra::dispatch_fp8_cache_write<set>(ra::dtype::bf16, ra::dtype::fp8_e4m3, shape(8, 8, 128, 8),
                                    [&]<class T, class KV, int D>() { cache_d = D; });
  CHECK(prefill_d == 128);
  CHECK(cache_d == 128);
  CHECK(error_of([&] { decode(ra::dtype::fp16, ra::dtype::fp8_e4m3, shape(32, 8, 128, 16)); }) ==
        "dtype = fp16 with kv cache dtype = fp8_e4m3 is not supported by this build; supported: queries bf16 with "
        "caches fp8_e4m3");
  CHECK(error_of([&] { decode(ra::dtype::bf16, ra::dtype::fp8_e5m2, shape(32, 8, 128, 16)); }) ==
        "dtype = bf16 with kv cache dtype = fp8_e5m2 is not supported by this build; supported: queries bf16 with "
        "caches fp8_e4m3");
  CHECK(error_of([&] { decode(ra::dtype::bf16, ra::dtype::fp8_e4m3, shape(64, 8, 128, 16)); }) ==
        "group_size = 8 is not supported by this build; supported: 4");
  CHECK(error_of([&] { decode(ra::dtype::bf16, ra::dtype::fp8_e4m3, shape(32, 8, 64, 16)); }) ==
        "head_dim = 64 is not supported by this build; supported: 128");
  CHECK(error_of([&] { decode(ra::dtype::bf16, ra::dtype::fp16, shape(32, 8, 128, 16)); }) ==
        "kv cache dtype = fp16 with queries bf16: a cache of another type than the queries' must be one of fp8_e4m3, "
        "fp8_e5m2");
  // A set without fp8 instances says so.
  using plain = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<ra::dynamic_block_size>,
                                      ra::values<4>>;
  CHECK(error_of([&] {
          ra::dispatch_fp8_decode<plain>(ra::dtype::bf16, ra::dtype::fp8_e4m3, shape(32, 8, 128, 16),
                                         []<class T, class KV, int D, int B, int G>() {});
        }) == "kv cache dtype = fp8_e4m3 is not supported by this build (its instantiation set has no fp8 instances)");
  // for_each_fp8_instance visits exactly the listed combinations.
  int visits = 0;
  ra::for_each_fp8_instance<ra::fp8_kv_instances<ra::dtypes<ra::dtype::fp16, ra::dtype::bf16>,
                                                 ra::dtypes<ra::dtype::fp8_e4m3, ra::dtype::fp8_e5m2>, ra::values<64, 128>,
                                                 ra::values<1, 4, 8>>>(
      [&]<ra::dtype Q, ra::dtype Kv, int D, int G>() { ++visits; });
  CHECK(visits == 2 * 2 * 2 * 3);
}

TEST_CASE("the tensor-core decode dispatches to the set's tensor-core instances, and only those") {
  using set = ra::default_instantiations;
  auto noop = []<class T, int D, int B, int G>() {};
  // The default set: fp16 and bf16, head dims 64, 80, 96, 128 and 256, groups 1, 2, 4, 8, 16,
  // every block size (dynamic).
  for (ra::dtype t : {ra::dtype::fp16, ra::dtype::bf16}) {
    for (int b : {8, 16, 32, 64, 128}) {
      for (int d : {64, 80, 96, 128, 256}) {
        for (int g : {1, 2, 4, 8, 16}) CHECK(ra::has_tensor_core_decode<set>(t, shape(8 * g, 8, d, b)));
      }
    }
  }
  CHECK_FALSE(ra::has_tensor_core_decode<set>(ra::dtype::bf16, shape(24, 8, 128, 16)));  // group 3
  CHECK_FALSE(ra::has_tensor_core_decode<set>(ra::dtype::bf16, shape(48, 8, 256, 16)));  // group 6
  // Head dim 256 over fp8: not in the set's fp8_kv_instances, and not taken by fp8_decode_agent
  // even where a set lists both (it runs the SIMT decode over that cache).
  CHECK_FALSE(ra::has_tensor_core_decode<set>(ra::dtype::bf16, shape(32, 8, 256, 16), ra::dtype::fp8_e4m3));
  using fp8_256 = ra::instantiation_set<
      ra::dtypes<ra::dtype::bf16>, ra::values<128, 256>, ra::values<ra::dynamic_block_size>, ra::values<4>,
      ra::fp8_kv_instances<ra::dtypes<ra::dtype::bf16>, ra::dtypes<ra::dtype::fp8_e4m3>, ra::values<128, 256>, ra::values<4>>,
      ra::tensor_core_decode_instances<ra::dtypes<ra::dtype::bf16>, ra::values<128, 256>, ra::values<4>>>;
  CHECK_FALSE(ra::has_tensor_core_decode<fp8_256>(ra::dtype::bf16, shape(32, 8, 256, 16), ra::dtype::fp8_e4m3));
  CHECK(ra::has_tensor_core_decode<fp8_256>(ra::dtype::bf16, shape(32, 8, 256, 16)));
  CHECK(ra::has_tensor_core_decode<fp8_256>(ra::dtype::bf16, shape(32, 8, 128, 16), ra::dtype::fp8_e4m3));
  // fp8 caches: the shapes both lists have, bf16 queries over E4M3 at head dim 128, group 4.
  CHECK(ra::has_tensor_core_decode<set>(ra::dtype::bf16, shape(32, 8, 128, 16), ra::dtype::fp8_e4m3));
  CHECK(ra::has_tensor_core_decode<set>(ra::dtype::bf16, shape(32, 8, 128, 16), ra::dtype::bf16));
  CHECK_FALSE(ra::has_tensor_core_decode<set>(ra::dtype::bf16, shape(32, 8, 128, 16), ra::dtype::fp8_e5m2));
  CHECK_FALSE(ra::has_tensor_core_decode<set>(ra::dtype::fp16, shape(32, 8, 128, 16), ra::dtype::fp8_e4m3));
  CHECK_FALSE(ra::has_tensor_core_decode<set>(ra::dtype::bf16, shape(64, 8, 128, 16), ra::dtype::fp8_e4m3));  // g8
  std::string got;
  ra::dispatch_tensor_core_decode<set>(ra::dtype::bf16, shape(64, 8, 128, 32), [&]<class T, int D, int B, int G>() {
    got = std::string(std::is_same_v<T, rungs::bf16> ? "bf16" : "f16") + " " + std::to_string(D) + " " +
          std::to_string(B) + " " + std::to_string(G);
  });
  CHECK(got == "bf16 128 0 8");
  ra::dispatch_tensor_core_decode<set>(ra::dtype::fp16, shape(32, 2, 256, 16), [&]<class T, int D, int B, int G>() {
    got = std::string(std::is_same_v<T, rungs::bf16> ? "bf16" : "f16") + " " + std::to_string(D) + " " +
          std::to_string(B) + " " + std::to_string(G);
  });
  CHECK(got == "f16 256 0 16");
  CHECK(error_of([&] { ra::dispatch_tensor_core_decode<set>(ra::dtype::bf16, shape(48, 8, 256, 16), noop); }) ==
        "group_size = 6 is not supported by this build; supported: 1, 2, 4, 8, 16");
  CHECK(error_of([&] { ra::dispatch_tensor_core_decode<set>(ra::dtype::bf16, shape(48, 8, 128, 16), noop); }) ==
        "group_size = 6 is not supported by this build; supported: 1, 2, 4, 8, 16");
  // A set without tensor-core instances, and one with static block sizes only.
  using plain = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<16>, ra::values<4>>;
  CHECK_FALSE(ra::has_tensor_core_decode<plain>(ra::dtype::bf16, shape(32, 8, 128, 16)));
  CHECK(error_of([&] { ra::dispatch_tensor_core_decode<plain>(ra::dtype::bf16, shape(32, 8, 128, 16), noop); }) ==
        "the tensor-core decode is not compiled in this build (its instantiation set lists no "
        "tensor_core_decode_instances)");
  using static16 = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<16>, ra::values<4>,
                                         ra::no_fp8_kv,
                                         ra::tensor_core_decode_instances<ra::dtypes<ra::dtype::bf16>, ra::values<128>,
                                                                          ra::values<4>>>;
  CHECK(ra::has_tensor_core_decode<static16>(ra::dtype::bf16, shape(32, 8, 128, 16)));
  CHECK_FALSE(ra::has_tensor_core_decode<static16>(ra::dtype::bf16, shape(32, 8, 128, 32)));
}

TEST_CASE("the tensor-core prefill dispatches to the set's tensor-core prefill instances, and only those") {
  using set = ra::default_instantiations;
  auto noop = []<class T, int D, int B>() {};
  // The default set: fp16 and bf16, head dim 128, any group, every block size (dynamic).
  for (ra::dtype t : {ra::dtype::fp16, ra::dtype::bf16}) {
    for (int b : {8, 16, 32, 64, 128}) {
      CHECK(ra::has_tensor_core_prefill<set>(t, shape(24, 8, 128, b)));
      CHECK(ra::has_tensor_core_prefill<set>(t, shape(8, 8, 128, b)));
    }
  }
  CHECK_FALSE(ra::has_tensor_core_prefill<set>(ra::dtype::bf16, shape(32, 8, 64, 16)));  // head dim 64
  // fp8 caches: the shapes both lists have, bf16 queries over E4M3 at head dim 128 (any group:
  // prefill does not depend on it).
  CHECK(ra::has_tensor_core_prefill<set>(ra::dtype::bf16, shape(32, 8, 128, 16), ra::dtype::fp8_e4m3));
  CHECK(ra::has_tensor_core_prefill<set>(ra::dtype::bf16, shape(24, 8, 128, 8), ra::dtype::fp8_e4m3));
  CHECK(ra::has_tensor_core_prefill<set>(ra::dtype::bf16, shape(32, 8, 128, 16), ra::dtype::bf16));
  CHECK_FALSE(ra::has_tensor_core_prefill<set>(ra::dtype::bf16, shape(32, 8, 128, 16), ra::dtype::fp8_e5m2));
  CHECK_FALSE(ra::has_tensor_core_prefill<set>(ra::dtype::fp16, shape(32, 8, 128, 16), ra::dtype::fp8_e4m3));
  std::string got;
  ra::dispatch_tensor_core_prefill<set>(ra::dtype::fp16, shape(24, 8, 128, 64), [&]<class T, int D, int B>() {
    got = std::string(std::is_same_v<T, rungs::bf16> ? "bf16" : "f16") + " " + std::to_string(D) + " " +
          std::to_string(B);
  });
  CHECK(got == "f16 128 0");
  CHECK(error_of([&] { ra::dispatch_tensor_core_prefill<set>(ra::dtype::bf16, shape(32, 8, 64, 16), noop); }) ==
        "head_dim = 64 is not supported by this build; supported: 128");
  // A set without tensor-core prefill instances (the 6-parameter sets of before), and one
  // with static block sizes only.
  using decode_only =
      ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<16>, ra::values<4>, ra::no_fp8_kv,
                            ra::tensor_core_decode_instances<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<4>>>;
  CHECK_FALSE(ra::has_tensor_core_prefill<decode_only>(ra::dtype::bf16, shape(32, 8, 128, 16)));
  CHECK(error_of([&] { ra::dispatch_tensor_core_prefill<decode_only>(ra::dtype::bf16, shape(32, 8, 128, 16), noop); }) ==
        "the tensor-core prefill is not compiled in this build (its instantiation set lists no "
        "tensor_core_prefill_instances)");
  using static16 = ra::instantiation_set<ra::dtypes<ra::dtype::bf16>, ra::values<128>, ra::values<16>, ra::values<4>,
                                         ra::no_fp8_kv, ra::no_tensor_core_decode,
                                         ra::tensor_core_prefill_instances<ra::dtypes<ra::dtype::bf16>, ra::values<128>>>;
  CHECK(ra::has_tensor_core_prefill<static16>(ra::dtype::bf16, shape(32, 8, 128, 16)));
  CHECK_FALSE(ra::has_tensor_core_prefill<static16>(ra::dtype::bf16, shape(32, 8, 128, 32)));
}

TEST_CASE("decode group sizes fit the kernel geometry for every head dim") {
  for (int d : {64, 80, 96, 128, 256}) {
    for (int g : {1, 2, 3, 4, 5, 6, 7, 8, 16}) {
      INFO("head_dim " << d << ", group " << g);
      CHECK(ra::geometry::decode_group_fits(d, g));
    }
    CHECK_FALSE(ra::geometry::decode_group_fits(d, 12));
  }
  CHECK(ra::geometry::lanes_per_row(80) == 16);
  CHECK(ra::geometry::tile_tokens(128) == 32);
  CHECK(ra::geometry::prefill_rows_per_cta(64) == 64);  // 4 rows x 16 thread rows
}
