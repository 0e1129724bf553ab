// What scripts/sass-check needs from the library itself, as JSON on stdout, so that the SASS
// checks and the bandwidth model never restate a rule of the C++ code:
//  * every kernel instance of default_instantiations (the kernels CI compiles for sm_80 and
//    sm_90), its fp8-cache instances included (dtype "bf16/e4m3": queries / cache; the
//    tensor-core decode's where both lists have the shape), with the
//    CTAs per SM its __launch_bounds__ asks for (geometry::ctas_per_sm;
//    geometry::tensor_core_decode_ctas_per_sm for the tensor-core decodes, kind "decode_tc";
//    tensor_core_prefill_ctas_per_sm for the tensor-core prefills, kind "prefill_tc");
//  * the launch geometry (threads, pipeline stages, tile tokens per head dim);
//  * the decode plans (plan_decode, on a 132-SM H100/H200) of the shapes the model predicts:
//    each default decode instance at the reference shape generalised (batch 64, context 4096,
//    8 KV heads, its group, head dim, dtype and cache type) and the benchmark's shapes
//    (benchmarks/RESULTS.md), each with its kernel ("kernel": simt or tensor_cores; the
//    benchmark's GQA shapes with both).
// Host-only; built with the cuda preset's targets (tests/attention/CMakeLists.txt).
#include <rungs/attention/dispatch.hpp>
#include <rungs/attention/plan.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ra = rungs::attention;
namespace geo = rungs::attention::geometry;

namespace {

constexpr int kSms = 132;  // H100 SXM and H200: the same GH100 with 132 SMs enabled
constexpr int kBlockSize = 16;

struct instance {
  ra::dtype type;
  int head_dim;
  const char* kind;  // decode, decode_tc, prefill, prefill_tc, merge, cache_write
  int group;         // decode only
  std::optional<ra::dtype> kv{};  // an fp8 cache: its type
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
  (out.push_back({t, d, "decode_tc", G}), ...);
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
         ctas_json(geo::tensor_core_decode_ctas_per_sm(80), geo::tensor_core_decode_ctas_per_sm(90));
  } else if (kind == "prefill") {
    s += ", \"ctas_per_sm\": " + ctas_json(geo::prefill_ctas_per_sm(80, false), geo::prefill_ctas_per_sm(90, false));
  } else if (kind == "prefill_tc") {
    s += ", \"ctas_per_sm\": " +
         ctas_json(geo::tensor_core_prefill_ctas_per_sm(80), geo::tensor_core_prefill_ctas_per_sm(90));
  }
  return s + "}";
}

std::string plan_json(const char* role, ra::dtype t, int batch, int context, int qo, int kv, int d,
                      std::optional<ra::dtype> cache = {}, ra::decode_kernel kernel = ra::decode_kernel::simt) {
  const ra::attention_config cfg{t,
                                 {.num_qo_heads = qo, .num_kv_heads = kv, .head_dim = d, .block_size = kBlockSize,
                                  .num_blocks = 1},
                                 0.0f,
                                 {},
                                 {.type = cache}};
  const ra::decode_plan p =
      ra::plan_decode(cfg, {.max_batch = batch, .max_context = context}, {.num_sms = kSms, .sm = 90}, {.kernel = kernel});
  return "{\"role\": \"" + std::string(role) + "\", \"dtype\": \"" + dtype_key(t, cache) +
         "\", \"batch\": " + std::to_string(batch) + ", \"context\": " + std::to_string(context) +
         ", \"qo_heads\": " + std::to_string(qo) + ", \"kv_heads\": " + std::to_string(kv) +
         ", \"head_dim\": " + std::to_string(d) + ", \"block_size\": " + std::to_string(kBlockSize) +
         ", \"sms\": " + std::to_string(kSms) + ", \"num_splits\": " + std::to_string(p.num_splits) +
         ", \"split_tokens\": " + std::to_string(p.split_tokens) + ", \"kernel\": \"" + ra::name(p.kernel) + "\"}";
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
  // and the tensor-core decode where the set's tensor-core list has the shape too.
  ra::for_each_fp8_instance<set::fp8_kv>([&]<ra::dtype Q, ra::dtype Kv, int D, int G>() {
    for (const char* kind : {"decode", "prefill", "cache_write"}) {
      all.push_back({Q, D, kind, std::string(kind) == "decode" ? G : 0, Kv});
    }
    if constexpr (set::tensor_core_decode::contains(Q, D, G)) all.push_back({Q, D, "decode_tc", G, Kv});
  });
  tensor_core_instances(all, set::tensor_core_decode::head_dims{}, set::tensor_core_decode::dtype_list{});
  tensor_core_prefill_instances(all, set::tensor_core_prefill::head_dims{}, set::tensor_core_prefill::dtype_list{});
  std::vector<std::string> instances;
  std::vector<std::string> shapes;
  for (const instance& i : all) {
    instances.push_back(instance_json(i));
    // Every decode instance at the reference shape (batch 64, context 4096) with 8 KV heads.
    if (std::string(i.kind) == "decode") {
      shapes.push_back(plan_json("instance", i.type, 64, 4096, 8 * i.group, 8, i.head_dim, i.kv));
    }
    if (std::string(i.kind) == "decode_tc") {
      shapes.push_back(
          plan_json("instance", i.type, 64, 4096, 8 * i.group, 8, i.head_dim, i.kv, ra::decode_kernel::tensor_cores));
    }
  }
  // The benchmark's shapes (bf16, head dim 128: 32/8 and 32/32 heads) and Llama-3-70B's 64/8.
  for (const int batch : {1, 16, 64, 256}) {
    for (const int context : {512, 4096, 16384}) {
      for (const int qo : {32, 64}) {
        for (const ra::decode_kernel k : {ra::decode_kernel::simt, ra::decode_kernel::tensor_cores}) {
          shapes.push_back(plan_json("benchmark", ra::dtype::bf16, batch, context, qo, 8, 128, {}, k));
        }
      }
      shapes.push_back(plan_json("benchmark", ra::dtype::bf16, batch, context, 32, 32, 128));
    }
  }
  std::printf("{\n  \"threads\": %d,\n  \"stages\": %d,\n  \"tile_tokens\": %s,\n", geo::threads, geo::stages,
              tiles_json(set::head_dims{}).c_str());
  print_list("instances", instances, false);
  print_list("shapes", shapes, true);
  std::printf("}\n");
  return 0;
}
