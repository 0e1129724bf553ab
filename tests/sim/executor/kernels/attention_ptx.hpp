// nvcc's PTX of every attention kernel instance of the default set (attention_instances.cu,
// compiled at build time to the file RUNGS_SIM_ATTENTION_PTX names; other PTX files, such as
// the compute_90 fp8 instances, through ptx_module), loaded once, and its entries found by
// their demangled signatures. Shared by the executor's end-to-end test and its
// speed benchmark.
#pragma once

#include <rungs_sim/executor.hpp>

#include <cxxabi.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

namespace rungs_sim_test {

/// A PTX file's module, loaded once per path.
inline const rungs::sim::module& ptx_module(const char* path, const char* name) {
  static std::map<std::string, std::shared_ptr<const rungs::sim::module>> loaded;
  auto& m = loaded[path];
  if (!m) {
    std::ifstream f(path);
    if (!f) throw std::runtime_error(std::string("cannot read ") + path);
    std::stringstream text;
    text << f.rdbuf();
    m = rungs::sim::load_ptx(text.str(), name);
  }
  return *m;
}

inline const rungs::sim::module& attention_module() {
  return ptx_module(RUNGS_SIM_ATTENTION_PTX, "attention_instances.ptx");
}

/// The mangled name of the entry of `m` (by default attention_module()) whose demangled name
/// starts with `signature`, e.g. "merge_splits_kernel<__half, 128>" (namespaces included as
/// rungs' kernels have them).
inline std::string attention_entry(const std::string& signature, const rungs::sim::module& m = attention_module()) {
  for (const std::string& e : rungs::sim::entries(m)) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(e.c_str(), nullptr, nullptr, &status), std::free);
    if (status == 0 && std::string(d.get()).find(signature + "(") != std::string::npos) return e;
  }
  throw std::runtime_error("no entry " + signature + " in the PTX");
}

}  // namespace rungs_sim_test
