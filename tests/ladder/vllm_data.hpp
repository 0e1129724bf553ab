// Reads tests/ladder/data/vllm_0_33_*.txt: the capture sizes vLLM 0.33.0's own code computed
// over a grid of inputs (how they were produced is in each file's header comment).
#pragma once

#include <rungs/ladder/rung.hpp>
#include <rungs/ladder/vllm_capture_sizes.hpp>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace rungs_test {

struct vllm_case {
  rungs::VllmCaptureSizes config;
  std::vector<rungs::rung_t> sizes;
  std::string line;  // as written in the file, for failure messages
};

/// Every case of a data file (name relative to RUNGS_TEST_DATA_DIR); throws when the file
/// is missing or a line is malformed, so a broken file cannot pass as an empty one.
inline std::vector<vllm_case> read_vllm_cases(const std::string& name) {
  const std::string path = std::string(RUNGS_TEST_DATA_DIR) + "/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<vllm_case> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) throw std::runtime_error(path + ": no ':' in " + line);
    std::istringstream key(line.substr(0, colon)), values(line.substr(colon + 1));
    vllm_case c{.line = line};
    std::string device;
    if (!(key >> c.config.max_num_seqs >> c.config.max_num_batched_tokens >> c.config.spec_tokens >> device) ||
        (device != "sm90" && device != "sm100"))
      throw std::runtime_error(path + ": bad inputs in " + line);
    c.config.device = device == "sm100" ? rungs::gpu_family::sm100 : rungs::gpu_family::sm90;
    for (rungs::rung_t v; values >> v;) c.sizes.push_back(v);
    if (c.sizes.empty() || !values.eof()) throw std::runtime_error(path + ": bad sizes in " + line);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace rungs_test
