// Evaluates one instruction per lane on given operand bits, for the opcode tests: each lane
// loads its operands %a, %b, %c (and 64-bit %la, %lb, %lc) from the input buffer, runs the
// instruction text, and stores %d (%ld).
#pragma once

#include "harness.hpp"

#include <array>

namespace rungs_sim_test {

// 32-bit: .reg .b32 %a, %b, %c, %d; .f32 names alias nothing: the instruction picks the type.
inline std::vector<std::uint32_t> eval32(const std::string& instruction, const std::vector<std::array<std::uint32_t, 3>>& in,
                                         const std::string& extra_regs = "") {
  const std::string text = lane_kernel(
      "  .reg .b32 %a, %b, %c, %d;\n  .reg .pred %p, %q;\n  .reg .b16 %ha, %hb, %hd;\n" + extra_regs,
      "  ld.global.u32 %a, [%rd_in];\n  ld.global.u32 %b, [%rd_in+4];\n  ld.global.u32 %c, [%rd_in+8];\n"
      "  mov.u32 %d, 0;\n  " + instruction + ";\n  st.global.u32 [%rd_out], %d;",
      12, 4);
  std::vector<std::uint32_t> flat;
  for (const auto& t : in) flat.insert(flat.end(), t.begin(), t.end());
  std::vector<std::uint32_t> out(in.size(), 0xdeadbeefu);
  host_memory mem;
  mem.add(flat);
  mem.add(out);
  rungs::sim::schedule sched;
  run(text, "k", {1, 1, 1}, {static_cast<unsigned>(in.size()), 1, 1}, mem, sched, out.data(), flat.data());
  return out;
}

inline std::uint32_t eval32(const std::string& instruction, std::uint32_t a, std::uint32_t b = 0, std::uint32_t c = 0) {
  return eval32(instruction, {{a, b, c}})[0];
}

inline std::uint64_t eval64(const std::string& instruction, std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0) {
  const std::string text = lane_kernel(
      "  .reg .b64 %la, %lb, %lc, %ld;\n  .reg .b32 %a, %b, %c, %d;\n  .reg .pred %p;\n",
      "  ld.global.u64 %la, [%rd_in];\n  ld.global.u64 %lb, [%rd_in+8];\n  ld.global.u64 %lc, [%rd_in+16];\n"
      "  cvt.u32.u64 %a, %la;\n  cvt.u32.u64 %b, %lb;\n  cvt.u32.u64 %c, %lc;\n"
      "  mov.u64 %ld, 0;\n  " + instruction + ";\n  st.global.u64 [%rd_out], %ld;",
      24, 8);
  std::vector<std::uint64_t> flat{a, b, c};
  std::vector<std::uint64_t> out(1, 0);
  host_memory mem;
  mem.add(flat);
  mem.add(out);
  rungs::sim::schedule sched;
  run(text, "k", {1, 1, 1}, {1, 1, 1}, mem, sched, out.data(), flat.data());
  return out[0];
}

}  // namespace rungs_sim_test
