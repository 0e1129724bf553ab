// Test support for the executor's unit tests: host buffers registered as "device" allocations
// and a one-call launcher for hand-written PTX snippets.
#pragma once

#include <rungs_sim/executor.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace rungs_sim_test {

// Live allocations: exactly the buffers added.
class host_memory : public rungs::sim::global_memory {
 public:
  void add(const void* p, std::size_t bytes) { allocations_[reinterpret_cast<std::uint64_t>(p)] = bytes; }
  template <class T>
  void add(const std::vector<T>& v) {
    add(v.data(), v.size() * sizeof(T));
  }
  [[nodiscard]] bool valid(std::uint64_t address, std::size_t size) const override {
    auto it = allocations_.upper_bound(address);
    if (it == allocations_.begin()) return false;
    --it;
    return address >= it->first && address + size <= it->first + it->second;
  }

 private:
  std::map<std::uint64_t, std::size_t> allocations_;
};

// A module header every snippet starts with.
inline std::string ptx_module(const std::string& body) {
  return ".version 9.0\n.target sm_80\n.address_size 64\n\n" + body;
}

// Launches entry `entry` of `text` with pointer/scalar arguments (each passed by address).
template <class... Args>
rungs::sim::launch_result run(const std::string& text, const std::string& entry, rungs::sim::dim3s grid,
                              rungs::sim::dim3s block, const host_memory& memory, const rungs::sim::schedule& sched,
                              Args... args) {
  const auto m = rungs::sim::load_ptx(text, "test.ptx");
  void* params[] = {static_cast<void*>(&args)..., nullptr};
  return rungs::sim::launch(*m, entry, grid, block, 0, params, memory, sched);
}

// Exactly-one-thread-per-lane kernel helper: "k(u64 out, u64 in)" where each thread runs `body`
// with %rd_out = &out[tid * out_stride], %rd_in = &in[tid * in_stride] already computed.
inline std::string lane_kernel(const std::string& regs, const std::string& body, int in_stride = 4,
                               int out_stride = 4) {
  return ptx_module(".visible .entry k(.param .u64 k_out, .param .u64 k_in)\n{\n"
                    "  .reg .b32 %tid;\n  .reg .b64 %rd_out, %rd_in, %rd_t;\n" +
                    regs +
                    "\n  ld.param.u64 %rd_out, [k_out];\n  ld.param.u64 %rd_in, [k_in];\n"
                    "  mov.u32 %tid, %tid.x;\n"
                    "  mul.wide.u32 %rd_t, %tid, " +
                    std::to_string(in_stride) +
                    ";\n  add.s64 %rd_in, %rd_in, %rd_t;\n"
                    "  mul.wide.u32 %rd_t, %tid, " +
                    std::to_string(out_stride) + ";\n  add.s64 %rd_out, %rd_out, %rd_t;\n" + body + "\n  ret;\n}\n");
}

// k(out, in): thread tid of a 1-D block; %tid, %lane, %rd_out = &out[tid], %rd_in = &in[tid] (u32).
inline std::string kernel(const std::string& decls, const std::string& body) {
  return lane_kernel("  .reg .b32 %lane, %r<16>;\n  .reg .b64 %rd<16>;\n  .reg .pred %p<8>;\n  .reg .f32 %f<8>;\n" + decls,
                     "  mov.u32 %lane, %laneid;\n" + body);
}

// The u32 buffers of kernel(): in[i] = i, out filled with 0xdeadbeef.
struct buffers {
  std::vector<std::uint32_t> in, out;
  host_memory mem;
  explicit buffers(std::size_t n) : in(n), out(n, 0xdeadbeefu) {
    for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::uint32_t>(i);
    mem.add(in);
    mem.add(out);
  }
  rungs::sim::launch_result run(const std::string& text, unsigned threads, const rungs::sim::schedule& s = {},
                                unsigned ctas = 1) {
    return rungs_sim_test::run(text, "k", {ctas, 1, 1}, {threads, 1, 1}, mem, s, out.data(), in.data());
  }
};

inline std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace rungs_sim_test
