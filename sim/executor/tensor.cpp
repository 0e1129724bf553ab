// Warp-wide tensor-core instructions (.sync.aligned): ldmatrix and mma.
#include "machine.hpp"

#include <algorithm>
#include <cstring>

namespace rungs::sim::detail {

// ---- ldmatrix and mma: warp-wide (.sync.aligned) ------------------------------------
// .aligned: all 32 lanes execute the instruction together, converged (the ISA leaves anything
// else undefined); here anything else is a finding.
void executor::require_whole_warp(const warp& w, std::uint32_t pc, std::uint32_t mask) const {
  if (mask != 0xffffffffu && mask != 0) {
    fail_at(pc, w.index * kLanes + static_cast<unsigned>(std::countr_zero(mask)),
            "executed by lanes 0x" + hex64(mask) + " of the warp: .sync.aligned needs all 32 lanes, converged");
  }
}

// ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16 (PTX ISA, "ldmatrix"): lanes 8j ..
// 8j+7 give the addresses of the 8 rows (16 bytes, 8 elements each) of matrix j; the other
// lanes' addresses are not used. Lane l receives in its register j the elements (l/4, 2(l%4))
// (lower half) and (l/4, 2(l%4)+1) of matrix j, or of its transpose with .trans. Each row is
// checked and race-tracked as a 16-byte read by the lane that gave its address.
void executor::ldmatrix(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  require_whole_warp(w, pc, mask);
  if (mask == 0) return;  // predicated off in every lane
  const unsigned n = in.vec;
  std::uint16_t m[4][8][8];
  for (unsigned j = 0; j < n; ++j) {
    for (unsigned r = 0; r < 8; ++r) {
      const unsigned lane = j * 8 + r;
      const std::uint64_t a = address(w, in.ops[1], lane);
      shared_access(w, lane, pc, a, 16, false);  // bounds, 16-byte alignment, races, initialisation
      std::memcpy(m[j][r], shared_.data() + a, 16);
    }
  }
  for (unsigned l = 0; l < kLanes; ++l) {
    const unsigned row = l / 4, col = 2 * (l % 4);
    for (unsigned j = 0; j < n; ++j) {
      const std::uint32_t lo = in.trans ? m[j][col][row] : m[j][row][col];
      const std::uint32_t hi = in.trans ? m[j][col + 1][row] : m[j][row][col + 1];
      set(w, in.ops[0].kind == operand::k_reg ? in.ops[0] : in.ops[0].elems[j], l, lo | (hi << 16));
    }
  }
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 d, a, b, c: D = A B + C with
// A 16x16, B 16x8, C and D 16x8 f32, in the ISA's fragment layout ("Matrix Fragments for
// mma.m16n8k16 with floating point type"). Lane l, g = l/4, t = l%4; pairs hold the lower
// column (A) or row (B) in the lower half:
//   a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9];
//   b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g];
//   c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1] (and d likewise).
// m16n8k8 (vec 1) is the first half in k: A 16x8 (a0, a1), B 8x8 (b0).
// Every input is read before any output is written (d may be c). Each element is computed in
// double (the 16 products of 16-bit values are exact) and rounded once to f32, nearest even;
// NaN results are canonical. Tensor cores' accumulation order and intermediate rounding are
// not specified by the ISA, so a kernel's result may differ in the last bits of f32 on a GPU.
void executor::mma(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  require_whole_warp(w, pc, mask);
  if (mask == 0) return;  // predicated off in every lane
  const bool bf = in.type2 == vtype::bf16;
  auto element = [&](std::uint64_t reg, unsigned upper) -> double {
    const auto h = static_cast<std::uint16_t>(reg >> (16 * upper));
    return bf ? rungs::detail::bf16_bits_to_float(h) : rungs::detail::f16_bits_to_float(h);
  };
  const unsigned kk = 8u * in.vec;  // K: 16 or 8
  double a[16][16], b[16][8], c[16][8];
  const auto& av = in.ops[1].elems;
  const auto& bv = in.ops[2].elems;
  const auto& cv = in.ops[3].elems;
  for (unsigned l = 0; l < kLanes; ++l) {
    const unsigned g = l / 4, t = l % 4;
    for (unsigned i = 0; i < 2u * in.vec; ++i) {
      const std::uint64_t reg = get(w, av[i], l);
      const unsigned row = g + ((i & 1) != 0 ? 8 : 0), col = 2 * t + (i >= 2 ? 8 : 0);
      a[row][col] = element(reg, 0);
      a[row][col + 1] = element(reg, 1);
    }
    for (unsigned i = 0; i < in.vec; ++i) {
      const std::uint64_t reg = get(w, bv[i], l);
      b[2 * t + 8 * i][g] = element(reg, 0);
      b[2 * t + 8 * i + 1][g] = element(reg, 1);
    }
    for (unsigned i = 0; i < 4; ++i) c[g + (i >= 2 ? 8 : 0)][2 * t + (i & 1)] = as_f32(get(w, cv[i], l));
  }
  for (unsigned l = 0; l < kLanes; ++l) {
    const unsigned g = l / 4, t = l % 4;
    for (unsigned i = 0; i < 4; ++i) {
      const unsigned row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
      double d = c[row][col];
      for (unsigned k = 0; k < kk; ++k) d += a[row][k] * b[k][col];
      set(w, in.ops[0].elems[i], l, f32_out(static_cast<float>(d), false, false));
    }
  }
}

}  // namespace rungs::sim::detail
