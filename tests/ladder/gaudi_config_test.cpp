#include <rungs/ladder/gaudi_config.hpp>

#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <string>

using namespace rungs::gaudi;

namespace {
// An injected environment: tests never touch the process's.
struct fake_env {
  std::map<std::string, std::string> vars;
  void set(const std::string& name, std::string value) { vars.insert_or_assign(name, std::move(value)); }
  const char* operator()(const char* name) const {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  }
};

serving_config linear_doc() {
  serving_config s;
  s.max_num_seqs = 4;
  s.block_size = 128;
  return s;
}
}  // namespace

TEST_CASE("variable names") {
  CHECK(env_name("prompt", "bs", "min") == "VLLM_PROMPT_BS_BUCKET_MIN");
  CHECK(env_name("decode", "block", "limit") == "VLLM_DECODE_BLOCK_BUCKET_LIMIT");
}

TEST_CASE("linear defaults: the configuration of the linear document's log") {
  const bucket_config c = read_bucket_config(linear_doc(), strategy::linear, fake_env{});
  CHECK(c.strategy == strategy::linear);
  CHECK(c.prompt_bs == bucket_range{1, 32, 4, 0});
  CHECK(c.prompt_seq == bucket_range{128, 128, 1024, 0});
  CHECK(c.decode_bs == bucket_range{1, 128, 4, 0});
  CHECK(c.decode_seq == bucket_range{128, 128, 2048, 0});
  serving_config many = linear_doc();
  many.max_num_seqs = 256;
  CHECK(default_bucket_config(strategy::linear, many).prompt_bs.max == 64);  // min(max_num_seqs, 64)
}

TEST_CASE("exponential defaults: the configuration of the exponential document's log") {
  serving_config s;
  s.max_num_seqs = 4;
  s.max_num_prefill_seqs = 1;
  s.max_model_len = 1024;
  s.num_blocks = 5777;
  s.prefix_caching = true;
  const bucket_config c = read_bucket_config(s, std::nullopt, fake_env{});
  CHECK(c.strategy == strategy::exponential);
  CHECK(c.prompt_bs == bucket_range{1, 1, 1, 1});
  CHECK(c.prompt_seq == bucket_range{128, 128, 1024, 11});
  CHECK(c.decode_bs == bucket_range{1, 1, 4, 3});
  CHECK(c.decode_seq == bucket_range{128, 128, 5777, 14});
  CHECK(log2_limit(1) == 1);
  CHECK(log2_limit(2) == 2);
  CHECK(log2_limit(4) == 3);
  CHECK(log2_limit(5) == 4);
  CHECK(log2_limit(5777) == 14);
}

TEST_CASE("unset pool size and prefill sequences take documented defaults") {
  serving_config s;  // 256 seqs, 2048 tokens, block 128
  CHECK(s.kv_blocks() == 256 * 16);
  CHECK(s.prefill_seqs() == 64);
  s.max_model_len = 2049;
  CHECK(s.kv_blocks() == 256 * 17);
  s.num_blocks = 10;
  CHECK(s.kv_blocks() == 10);
  // A pool smaller than one block size of blocks keeps min <= max.
  CHECK(default_bucket_config(strategy::exponential, s).decode_seq == bucket_range{10, 128, 10, 5});
}

TEST_CASE("each variable overrides its default") {
  fake_env env;
  env.set("VLLM_PROMPT_BS_BUCKET_MIN", "2");
  env.set("VLLM_PROMPT_BS_BUCKET_STEP", " 16 ");
  env.set("VLLM_PROMPT_SEQ_BUCKET_MAX", "+2048");
  env.set("VLLM_DECODE_SEQ_BUCKET_STEP", "256");
  env.set("VLLM_DECODE_BLOCK_BUCKET_STEP", "64");  // the exponential decode dimension
  env.set("VLLM_DECODE_BS_BUCKET_LIMIT", "7");
  const bucket_config lin = read_bucket_config(linear_doc(), strategy::linear, env);
  CHECK(lin.prompt_bs == bucket_range{2, 16, 4, 0});
  CHECK(lin.prompt_seq == bucket_range{128, 128, 2048, 0});
  CHECK(lin.decode_seq == bucket_range{128, 256, 2048, 0});
  CHECK(lin.decode_bs.limit == 0);  // linear ranges have no limit
  const bucket_config exp = read_bucket_config(linear_doc(), strategy::exponential, env);
  CHECK(exp.decode_seq.step == 64);
  CHECK(exp.decode_bs.limit == 7);
}

TEST_CASE("the environment selects the strategy unless one is forced") {
  fake_env env;
  CHECK(read_bucket_config(linear_doc(), std::nullopt, env).strategy == strategy::exponential);
  env.set("VLLM_EXPONENTIAL_BUCKETING", "False");
  CHECK(read_bucket_config(linear_doc(), std::nullopt, env).strategy == strategy::linear);
  env.set("VLLM_EXPONENTIAL_BUCKETING", "1");
  CHECK(read_bucket_config(linear_doc(), std::nullopt, env).strategy == strategy::exponential);
  env.set("VLLM_BUCKETING_FROM_FILE", "/tmp/buckets.txt");
  const bucket_config f = read_bucket_config(linear_doc(), std::nullopt, env);
  CHECK(f.strategy == strategy::file);
  CHECK(f.file == "/tmp/buckets.txt");
  CHECK(read_bucket_config(linear_doc(), strategy::linear, env).strategy == strategy::linear);
  // std::optional<std::string> lookups work as well.
  auto opt = [](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "VLLM_EXPONENTIAL_BUCKETING") return "false";
    return std::nullopt;
  };
  CHECK(read_bucket_config(linear_doc(), std::nullopt, opt).strategy == strategy::linear);
}

TEST_CASE("bad variables and serving parameters are named in the error") {
  fake_env env;
  env.set("VLLM_PROMPT_BS_BUCKET_MIN", "abc");
  CHECK_THROWS_WITH(read_bucket_config(linear_doc(), strategy::linear, env),
                    "VLLM_PROMPT_BS_BUCKET_MIN = \"abc\" is not an integer");
  env.set("VLLM_PROMPT_BS_BUCKET_MIN", "");
  CHECK_THROWS_WITH(read_bucket_config(linear_doc(), strategy::linear, env),
                    "VLLM_PROMPT_BS_BUCKET_MIN = \"\" is not an integer");
  env.set("VLLM_PROMPT_BS_BUCKET_MIN", "99999999999999999999");
  CHECK_THROWS_WITH(read_bucket_config(linear_doc(), strategy::linear, env),
                    "VLLM_PROMPT_BS_BUCKET_MIN = \"99999999999999999999\" is out of range");
  fake_env flag;
  flag.set("VLLM_EXPONENTIAL_BUCKETING", "maybe");
  CHECK_THROWS_WITH(read_bucket_config(linear_doc(), std::nullopt, flag),
                    "VLLM_EXPONENTIAL_BUCKETING = \"maybe\" is not a boolean (true, false, 1 or 0)");
  CHECK_THROWS_WITH(read_bucket_config(linear_doc(), strategy::file, fake_env{}),
                    "the file strategy needs VLLM_BUCKETING_FROM_FILE to name a bucket file");
  serving_config bad;
  bad.block_size = 0;
  CHECK_THROWS_WITH(default_bucket_config(strategy::linear, bad), "serving config: block_size = 0 must be positive");
  bad = serving_config{};
  bad.num_blocks = -3;
  CHECK_THROWS_WITH(default_bucket_config(strategy::linear, bad),
                    "serving config: num_blocks = -3 must not be negative (0 selects the default)");
  CHECK_THROWS_AS(default_bucket_config(strategy::linear, bad), std::invalid_argument);
}
