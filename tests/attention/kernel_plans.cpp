// What scripts/sass-check needs from the library itself, as JSON on stdout, so that the SASS
// checks and the bandwidth model never restate a rule of the C++ code:
//  * every kernel instance of default_instantiations (the kernels CI compiles for sm_80 and
//    sm_90), its fp8-cache instances included (dtype "bf16/e4m3": queries / cache; the
//    tensor-core decode's and prefill's where both lists have the shape), with the
//    CTAs per SM its __launch_bounds__ asks for (geometry::ctas_per_sm;
//    geometry::tensor_core_decode_ctas_per_sm for the tensor-core decodes, kind "decode_tc";
//    tensor_core_prefill_ctas_per_sm for the tensor-core prefills, kind "prefill_tc"; the
//    tensor-core decode's in-CTA split of W warp groups, kind "decode_tc_w<W>", with W and its
//    dynamic shared memory, geometry::tensor_core_decode_split_ctas_per_sm, 1 where not built);
//  * the launch geometry (threads, pipeline stages, tile tokens per head dim);
//  * the decode plans (plan_decode, on a 132-SM H100/H200) of the shapes the model predicts:
//    each default decode instance at the reference shape generalised (batch 64, context 4096,
//    8 KV heads, its group, head dim, dtype and cache type) and the benchmark's shapes
//    (benchmarks/RESULTS.md), each with its kernel ("kernel": simt or tensor_cores; the
//    benchmark's GQA shapes with both), and each instance at the issue margins' shapes
//    (role "margin": batch 64 x 4096, 8 x 4096, 1 x 16384; 32 query heads, 32 / group KV heads),
//    each with the warp groups its plan gives the tensor-core decode ("warp_groups");
//  * the prefill plans (plan_prefill) with their grids (detail::prefill_grid): each default
//    prefill and tensor-core prefill instance on a 2048-token chunk over 4096 cached tokens
//    (8 KV heads, group 4), and the documented chunks (benchmarks/RESULTS.md);
//  * the split merges those plans launch (detail::merge_grid): each default merge instance
//    after the planner's decode of batch 16 x context 4096 (32/8 heads), and every split decode
//    and prefill of the documented shapes (and of batches 4, 8, 33, 48 at context 4096);
//  * the cache writes (detail::cache_write_grid): each default cache-write instance on a
//    2048-token chunk of 8 KV heads, and a decode step of batch 64.
// Host-only; built with the cuda preset's targets (tests/attention/CMakeLists.txt).
#include <rungs/attention/detail/params.cuh>  // the launch grids: plain C++, no CUDA types
#include <rungs/attention/dispatch.hpp>
#include <rungs/attention/plan.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ra = rungs::attention;
namespace geo = rungs::attention::geometry;
namespace rad = rungs::attention::detail;

namespace {

constexpr int kSms = 132;  // H100 SXM and H200: the same GH100 with 132 SMs enabled
constexpr int kBlockSize = 16;

struct instance {
  ra::dtype type;
  int head_dim;
  const char* kind;  // decode, decode_tc, decode_tc_w2, decode_tc_w4, prefill, prefill_tc, merge, cache_write
  int group;         // decode only
  std::optional<ra::dtype> kv{};  // an fp8 cache: its type
  int warp_groups = 1;            // decode_tc_w<W>: W
};

// "bf16", or "bf16/e4m3" for an fp8 cache (the names scripts/sass-check gives the kernels).
std::string dtype_key(ra::dtype t, std::optional<ra::dtype> kv) {
  std::string s(name(t));
  if (kv) {
    s += '/';
    s += std::string_view(name(*kv)).substr(4);  // fp8_e4m3 -> e4m3
  }
  return s;
}

template <int... G>
void add_instances(std::vector<instance>& out, ra::dtype t, int d, ra::values<G...>) {
  (out.push_back({t, d, "decode", G}), ...);
  for (const char* kind : {"prefill", "merge", "cache_write"}) out.push_back({t, d, kind, 0});
}

template <int... D, ra::dtype... T>
std::vector<instance> default_instances(ra::values<D...>, ra::dtypes<T...>) {
  std::vector<instance> out;
  for (const ra::dtype t : {T...}) {
    (add_instances(out, t, D, ra::default_instantiations::decode_groups{}), ...);
  }
  return out;
}

template <int... G>
void add_tensor_core_instances(std::vector<instance>& out, ra::dtype t, int d, ra::values<G...>) {
  using tc = ra::default_instantiations::tensor_core_decode;
  (out.push_back({t, d, "decode_tc", G}), ...);
  // The in-CTA splits the set compiles (tensor_core_decode_instances' split groups).
  for (const int g : {G...}) {
    if (tc::contains_split(t, d, g, 2)) out.push_back({t, d, "decode_tc_w2", g, {}, 2});
    if (tc::contains_split(t, d, g, 3)) out.push_back({t, d, "decode_tc_w3", g, {}, 3});
    if (tc::contains_split(t, d, g, 4)) out.push_back({t, d, "decode_tc_w4", g, {}, 4});
  }
}

template <int... D, ra::dtype... T>
void tensor_core_instances(std::vector<instance>& out, ra::values<D...>, ra::dtypes<T...>) {
  for (const ra::dtype t : {T...}) {
    (add_tensor_core_instances(out, t, D, ra::default_instantiations::tensor_core_decode::decode_groups{}), ...);
  }
}

template <int... D, ra::dtype... T>
void tensor_core_prefill_instances(std::vector<instance>& out, ra::values<D...>, ra::dtypes<T...>) {
  for (const ra::dtype t : {T...}) (out.push_back({t, D, "prefill_tc", 0}), ...);
}

std::string ctas_json(int sm80, int sm90) {
  return "{\"80\": " + std::to_string(sm80) + ", \"90\": " + std::to_string(sm90) + "}";
}

std::string instance_json(const instance& i) {
  std::string s = "{\"dtype\": \"" + dtype_key(i.type, i.kv) + "\", \"head_dim\": " + std::to_string(i.head_dim) +
                  ", \"kind\": \"" + i.kind + "\"";
  const std::string kind = i.kind;
  if (kind == "decode") {
    s += ", \"group\": " + std::to_string(i.group) + ", \"ctas_per_sm\": " + ctas_json(geo::ctas_per_sm(80, geo::decode_rows_per_thread(i.group)),
                                                        geo::ctas_per_sm(90, geo::decode_rows_per_thread(i.group)));
  } else if (kind == "decode_tc") {
    s += ", \"group\": " + std::to_string(i.group) + ", \"ctas_per_sm\": " +
         ctas_json(geo::tensor_core_decode_ctas_per_sm(80, i.head_dim, i.group),
                   geo::tensor_core_decode_ctas_per_sm(90, i.head_dim, i.group));
  } else if (i.warp_groups > 1) {
    // Its CTAs per SM where the architecture runs it (sm_90: the 4-warp CTAs per SM over W); none
    // on sm_80, which never launches it (its launch bound is 1 there).
    const int sm90 = geo::tensor_core_decode_split_ctas_per_sm(90, i.head_dim, i.group, i.warp_groups);
    const int sm80 = geo::tensor_core_decode_split_ctas_per_sm(80, i.head_dim, i.group, i.warp_groups);
    s += ", \"group\": " + std::to_string(i.group) + ", \"warp_groups\": " + std::to_string(i.warp_groups) +
         ", \"dynamic_smem\": " + std::to_string(i.warp_groups * geo::tensor_core_decode_group_bytes(i.head_dim)) +
         ", \"ctas_per_sm\": " + (sm80 > 0 ? ctas_json(sm80, sm90) : "{\"90\": " + std::to_string(sm90) + "}");
  } else if (kind == "prefill") {
    s += ", \"ctas_per_sm\": " + ctas_json(geo::prefill_ctas_per_sm(80, false), geo::prefill_ctas_per_sm(90, false));
  } else if (kind == "prefill_tc") {
    s += ", \"ctas_per_sm\": " +
         ctas_json(geo::tensor_core_prefill_ctas_per_sm(80), geo::tensor_core_prefill_ctas_per_sm(90));
  }
  return s + "}";
}

ra::attention_config config_of(ra::dtype t, int qo, int kv, int d, std::optional<ra::dtype> cache) {
  return {t,
          {.num_qo_heads = qo, .num_kv_heads = kv, .head_dim = d, .block_size = kBlockSize, .num_blocks = 1},
          0.0f,
          {},
          {.type = cache}};
}

std::string grid_json(rad::launch_grid g) {
  std::string s = "[";
  for (const unsigned v : {g.x, g.y, g.z}) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
  return s + "]";
}

// The merge a split plan launches: rows = tokens x query heads, geometry::merge_ctas_per_row(d)
// CTAs each.
std::string merge_json(const char* role, const char* after, ra::dtype t, int tokens, int qo, int d, int splits) {
  rad::merge_params m{};
  m.max_tokens = tokens;
  m.num_qo_heads = qo;
  m.num_splits = splits;
  m.head_dim = d;
  return "{\"role\": \"" + std::string(role) + "\", \"after\": \"" + after + "\", \"dtype\": \"" +
         dtype_key(t, {}) + "\", \"head_dim\": " + std::to_string(d) + ", \"rows\": " +
         std::to_string(static_cast<std::int64_t>(tokens) * qo) + ", \"num_splits\": " + std::to_string(splits) +
         ", \"threads\": " + std::to_string(32 * geo::merge_warps) + ", \"grid\": " + grid_json(rad::merge_grid(m)) +
         "}";
}

// The merge after a split decode plan.
std::string decode_merge_json(const char* role, const ra::decode_plan& p) {
  const ra::attention_shape& s = p.config.shape;
  const std::string after = "decode " + std::to_string(p.bucket.max_batch) + " x " +
                            std::to_string(p.bucket.max_context) + ", " + std::to_string(s.num_qo_heads) + "/" +
                            std::to_string(s.num_kv_heads) + " " + std::string(ra::name(p.kernel));
  return merge_json(role, after.c_str(), p.config.type, p.bucket.max_batch, s.num_qo_heads, s.head_dim, p.num_splits);
}

std::string plan_json(const char* role, ra::dtype t, int batch, int context, int qo, int kv, int d,
                      std::optional<ra::dtype> cache = {}, ra::decode_kernel kernel = ra::decode_kernel::simt,
                      std::vector<std::string>* merges = nullptr) {
  const ra::attention_config cfg = config_of(t, qo, kv, d, cache);
  const ra::decode_plan p =
      ra::plan_decode(cfg, {.max_batch = batch, .max_context = context}, {.num_sms = kSms, .sm = 90}, {.kernel = kernel});
  if (merges != nullptr && p.split()) merges->push_back(decode_merge_json(role, p));
  return "{\"role\": \"" + std::string(role) + "\", \"dtype\": \"" + dtype_key(t, cache) +
         "\", \"batch\": " + std::to_string(batch) + ", \"context\": " + std::to_string(context) +
         ", \"qo_heads\": " + std::to_string(qo) + ", \"kv_heads\": " + std::to_string(kv) +
         ", \"head_dim\": " + std::to_string(d) + ", \"block_size\": " + std::to_string(kBlockSize) +
         ", \"sms\": " + std::to_string(kSms) + ", \"num_splits\": " + std::to_string(p.num_splits) +
         ", \"split_tokens\": " + std::to_string(p.split_tokens) + ", \"kernel\": \"" + ra::name(p.kernel) +
         "\", \"warp_groups\": " + std::to_string(p.warp_groups) + "}";
}

// A prefill of `batch` sequences of q_len new tokens over `cached` cached ones each (the
// chunk is the bucket: max_q_len = q_len, max_context = cached + q_len), with the kernel
// forced (the kinds are separate instances).
std::string prefill_json(const char* role, ra::dtype t, int batch, int q_len, int cached, int qo, int kv, int d,
                         std::optional<ra::dtype> cache, ra::attention_kernel kernel,
                         std::vector<std::string>* merges = nullptr) {
  const ra::prefill_plan p =
      ra::plan_prefill(config_of(t, qo, kv, d, cache), {.max_batch = batch, .max_q_len = q_len, .max_context = cached + q_len},
                       {.num_sms = kSms, .sm = 90}, {.kernel = kernel});
  if (merges != nullptr && p.split()) {
    const std::string after = "prefill " + std::to_string(batch) + " x " + std::to_string(q_len) + " over " +
                              std::to_string(cached) + ", " + std::to_string(qo) + "/" + std::to_string(kv) + " " +
                              std::string(ra::name(p.kernel));
    merges->push_back(merge_json(role, after.c_str(), t, batch * q_len, qo, d, p.num_splits));
  }
  return "{\"role\": \"" + std::string(role) + "\", \"dtype\": \"" + dtype_key(t, cache) +
         "\", \"batch\": " + std::to_string(batch) + ", \"q_len\": " + std::to_string(q_len) +
         ", \"cached\": " + std::to_string(cached) + ", \"qo_heads\": " + std::to_string(qo) +
         ", \"kv_heads\": " + std::to_string(kv) + ", \"head_dim\": " + std::to_string(d) +
         ", \"block_size\": " + std::to_string(kBlockSize) + ", \"rows_per_cta\": " +
         std::to_string(geo::prefill_rows_per_cta(d)) + ", \"q_tiles\": " + std::to_string(p.q_tiles) +
         ", \"num_splits\": " + std::to_string(p.num_splits) + ", \"split_tokens\": " +
         std::to_string(p.split_tokens) + ", \"grid\": " + grid_json(rad::prefill_grid(p)) + ", \"kernel\": \"" +
         ra::name(p.kernel) + "\"}";
}

// A cache write of `tokens` tokens' K and V rows (kv heads, head dim d) into the cache.
std::string cache_write_json(const char* role, ra::dtype t, int tokens, int kv, int d, std::optional<ra::dtype> cache) {
  rad::cache_write_params c{};
  c.num_tokens = tokens;
  c.num_kv_heads = kv;
  return "{\"role\": \"" + std::string(role) + "\", \"dtype\": \"" + dtype_key(t, cache) +
         "\", \"tokens\": " + std::to_string(tokens) + ", \"kv_heads\": " + std::to_string(kv) +
         ", \"head_dim\": " + std::to_string(d) + ", \"threads\": " + std::to_string(geo::cache_write_threads) +
         ", \"grid\": " + grid_json(rad::cache_write_grid(c, d)) + "}";
}

template <int... D>
std::string tiles_json(ra::values<D...>) {
  std::string s;
  ((s += (s.empty() ? "" : ", ") + std::string("\"") + std::to_string(D) + "\": " + std::to_string(geo::tile_tokens(D))),
   ...);
  return "{" + s + "}";
}

void print_list(const char* key, const std::vector<std::string>& v, bool last) {
  std::printf("  \"%s\": [\n", key);
  for (std::size_t i = 0; i < v.size(); ++i) std::printf("    %s%s\n", v[i].c_str(), i + 1 < v.size() ? "," : "");
  std::printf("  ]%s\n", last ? "" : ",");
}

}  // namespace

int main() {
  using set = ra::default_instantiations;
  std::vector<instance> all = default_instances(set::head_dims{}, set::dtype_list{});
  // The fp8-cache instances: decode, prefill and cache write each (the merge is the 16-bit one),
  // and the tensor-core decode and prefill where the set's tensor-core lists have the shape too.
  ra::for_each_fp8_instance<set::fp8_kv>([&]<ra::dtype Q, ra::dtype Kv, int D, int G>() {
    for (const char* kind : {"decode", "prefill", "cache_write"}) {
      all.push_back({Q, D, kind, std::string(kind) == "decode" ? G : 0, Kv});
    }
    if constexpr (set::tensor_core_decode::contains(Q, D, G)) all.push_back({Q, D, "decode_tc", G, Kv});
    if constexpr (set::tensor_core_prefill::contains(Q, D)) all.push_back({Q, D, "prefill_tc", 0, Kv});
  });
  tensor_core_instances(all, set::tensor_core_decode::head_dims{}, set::tensor_core_decode::dtype_list{});
  tensor_core_prefill_instances(all, set::tensor_core_prefill::head_dims{}, set::tensor_core_prefill::dtype_list{});
  std::vector<std::string> instances;
  std::vector<std::string> shapes;
  std::vector<std::string> prefill_shapes;
  std::vector<std::string> merge_shapes;
  std::vector<std::string> cache_write_shapes;
  for (const instance& i : all) {
    instances.push_back(instance_json(i));
    const std::string kind = i.kind;
    // Every decode instance at the reference shape (batch 64, context 4096) with 8 KV heads.
    if (kind == "decode") {
      shapes.push_back(plan_json("instance", i.type, 64, 4096, 8 * i.group, 8, i.head_dim, i.kv));
    }
    if (kind == "decode_tc") {
      shapes.push_back(
          plan_json("instance", i.type, 64, 4096, 8 * i.group, 8, i.head_dim, i.kv, ra::decode_kernel::tensor_cores));
    }
    // The issue margins' shapes (batch 64 x context 4096, 8 x 4096, 1 x 16384): 32 query heads
    // and the group's KV heads (32 / group, rounded down: groups 3, 5, 6, 7 have 30, 30, 30, 28).
    if (kind == "decode" || kind == "decode_tc") {
      const int kv_heads = 32 / i.group;
      for (const auto& [batch, context] : {std::pair{64, 4096}, std::pair{8, 4096}, std::pair{1, 16384}}) {
        shapes.push_back(plan_json("margin", i.type, batch, context, kv_heads * i.group, kv_heads, i.head_dim, i.kv,
                                   kind == "decode" ? ra::decode_kernel::simt : ra::decode_kernel::tensor_cores));
      }
    }
    // Prefill instances: a 2048-token chunk over 4096 cached tokens, 32/8 heads.
    if (kind == "prefill" || kind == "prefill_tc") {
      prefill_shapes.push_back(prefill_json("instance", i.type, 1, 2048, 4096, 32, 8, i.head_dim, i.kv,
                                            kind == "prefill" ? ra::attention_kernel::simt
                                                              : ra::attention_kernel::tensor_cores));
    }
    // Merge instances: after the planner's decode of batch 16 x 4096 tokens, 32/8 heads (split).
    // (scripts/sass-check fails an instance that has no shape: the planner must split here.)
    if (kind == "merge") {
      const ra::decode_plan p = ra::plan_decode(config_of(i.type, 32, 8, i.head_dim, {}),
                                                {.max_batch = 16, .max_context = 4096}, {.num_sms = kSms, .sm = 90});
      if (p.split()) merge_shapes.push_back(decode_merge_json("instance", p));
    }
    // Cache-write instances: a 2048-token chunk of 8 KV heads.
    if (kind == "cache_write") cache_write_shapes.push_back(cache_write_json("instance", i.type, 2048, 8, i.head_dim, i.kv));
  }
  // The benchmark's shapes (bf16, head dim 128: 32/8 and 32/32 heads) and Llama-3-70B's 64/8;
  // the merges of the 32/8 ones that split, under the kernel the planner picks there.
  const ra::attention_kernel planned =
      ra::plan_decode(config_of(ra::dtype::bf16, 32, 8, 128, {}), {.max_batch = 1, .max_context = 512},
                      {.num_sms = kSms, .sm = 90})
          .kernel;
  for (const int batch : {1, 16, 64, 256}) {
    for (const int context : {512, 4096, 16384}) {
      for (const int qo : {32, 64}) {
        for (const ra::decode_kernel k : {ra::decode_kernel::simt, ra::decode_kernel::tensor_cores}) {
          shapes.push_back(plan_json("benchmark", ra::dtype::bf16, batch, context, qo, 8, 128, {}, k,
                                     qo == 32 && k == planned ? &merge_shapes : nullptr));
        }
      }
      shapes.push_back(plan_json("benchmark", ra::dtype::bf16, batch, context, 32, 32, 128));
    }
  }
  // The merges of more of the planner's split decodes at 32/8 heads, context 4096 (the waves
  // split batches up to 48, docs/kernels.md "Choosing splits").
  for (const int batch : {4, 8, 33, 48}) {
    const ra::decode_plan p = ra::plan_decode(config_of(ra::dtype::bf16, 32, 8, 128, {}),
                                              {.max_batch = batch, .max_context = 4096}, {.num_sms = kSms, .sm = 90});
    if (p.split()) merge_shapes.push_back(decode_merge_json("benchmark", p));
  }
  // Prefill chunks (bf16, head dim 128, one sequence): 2048 new tokens over 0 and 4096 cached
  // ones (32/8 and Llama-3-70B's 64/8 heads), and 256 over 16384 (a late chunk, which splits).
  struct chunk {
    int q_len, cached, qo;
  };
  for (const chunk c : {chunk{2048, 0, 32}, chunk{2048, 4096, 32}, chunk{2048, 4096, 64}, chunk{256, 16384, 32}}) {
    for (const ra::attention_kernel k : {ra::attention_kernel::simt, ra::attention_kernel::tensor_cores}) {
      prefill_shapes.push_back(prefill_json("benchmark", ra::dtype::bf16, 1, c.q_len, c.cached, c.qo, 8, 128, {}, k,
                                            k == planned ? &merge_shapes : nullptr));
    }
  }
  // Cache writes (bf16, head dim 128, 8 KV heads): a decode step of batch 64, a 2048-token chunk.
  for (const int tokens : {64, 2048}) {
    cache_write_shapes.push_back(cache_write_json("benchmark", ra::dtype::bf16, tokens, 8, 128, {}));
  }
  std::printf("{\n  \"threads\": %d,\n  \"stages\": %d,\n  \"tile_tokens\": %s,\n", geo::threads, geo::stages,
              tiles_json(set::head_dims{}).c_str());
  print_list("instances", instances, false);
  print_list("shapes", shapes, false);
  print_list("prefill_shapes", prefill_shapes, false);
  print_list("merge_shapes", merge_shapes, false);
  print_list("cache_write_shapes", cache_write_shapes, true);
  std::printf("}\n");
  return 0;
}
