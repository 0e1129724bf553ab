// nvcc's PTX of every attention kernel instance of the default set (attention_instances.cu,
// compiled at build time to the file RUNGS_SIM_ATTENTION_PTX names), loaded once, and its
// entries found by their demangled signatures. Shared by the executor's end-to-end test and its
// speed benchmark.
#pragma once

#include <rungs_sim/executor.hpp>

#include <cxxabi.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

namespace rungs_sim_test {

inline const rungs::sim::module& attention_module() {
  static const auto m = [] {
    std::ifstream f(RUNGS_SIM_ATTENTION_PTX);
    if (!f) throw std::runtime_error("cannot read " RUNGS_SIM_ATTENTION_PTX " (built by the rungs_sim_attention_ptx target)");
    std::stringstream text;
    text << f.rdbuf();
    return rungs::sim::load_ptx(text.str(), "attention_instances.ptx");
  }();
  return *m;
}

/// The mangled name of the entry whose demangled name starts with `signature`, e.g.
/// "merge_splits_kernel<__half, 128>" (namespaces included as rungs' kernels have them).
inline std::string attention_entry(const std::string& signature) {
  for (const std::string& e : rungs::sim::entries(attention_module())) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(e.c_str(), nullptr, nullptr, &status), std::free);
    if (status == 0 && std::string(d.get()).find(signature + "(") != std::string::npos) return e;
  }
  throw std::runtime_error("no entry " + signature + " in attention_instances.ptx");
}

}  // namespace rungs_sim_test
