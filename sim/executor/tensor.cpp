// Warp-wide tensor-core instructions (.sync.aligned): ldmatrix and mma.
#include "machine.hpp"

#include <algorithm>
#include <array>
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

namespace rungs::sim::detail {

// ---- wmma: the warp-wide matrix API (nvcuda::wmma) ------------------------------------
// The bytes of one fragment element at `addr` in space `where` (generic: the local or shared
// window, else global), checked as the matching ld/st would be: shared bounds, alignment,
// races and initialisation; global bounds and the missing-fence check.
unsigned char* executor::wmma_element(warp& w, unsigned lane, std::uint32_t pc, space where, std::uint64_t addr,
                                      std::size_t size, bool write) {
  const std::uint32_t tid = w.index * kLanes + lane;
  if (where == space::generic && in_local_window(addr)) return local_at(pc, tid, addr - kLocalWindow, size);
  if (where == space::generic && in_shared_window(addr)) where = space::shared, addr -= kSharedWindow;
  if (where == space::shared) {
    shared_access(w, lane, pc, addr, size, write);
    return shared_.data() + addr;
  }
  global_check(pc, tid, addr, size);
  if (write) parallel_write(addr, size);
  else parallel_read(addr, size);
  if (fence_check_) {
    if (write) note_weak_store(tid, addr, size);
    else check_published(pc, tid, addr, size);
  }
  return reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(addr));
}

// wmma.load.{a,b,c} and wmma.store.d (.sync.aligned: the whole warp). Each lane moves its
// fragment's elements (wmma_geometry: element e of lane l is the matrix's element (32 e + l)
// mod (rows x cols), row-major) between registers and memory at its own address, row-major
// (.row: element (r, c) at p + (r stride + c) elements) or column-major (.col: p + (c stride +
// r)); the stride defaults to the layout's leading dimension. The ISA requires one address and
// stride across the warp, so lanes that disagree are a finding.
void executor::wmma_load_store(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  require_whole_warp(w, pc, mask);
  if (mask == 0) return;
  const bool load = in.code == op::wmma_load;
  const wmma_fragment f = wmma_geometry(in.shape, in.vec, in.type);
  const operand& addr = in.ops[load ? 1 : 0];
  const operand& frag = in.ops[load ? 0 : 1];
  const std::uint64_t stride0 = in.ops.size() == 3 ? get(w, in.ops[2], 0) & 0xffffffffu : (in.trans ? f.rows : f.cols);
  const std::uint64_t p0 = address(w, addr, 0);
  for (unsigned l = 1; l < kLanes; ++l) {
    const std::uint64_t stride = in.ops.size() == 3 ? get(w, in.ops[2], l) & 0xffffffffu : stride0;
    if (address(w, addr, l) != p0 || stride != stride0) {
      fail_at(pc, w.index * kLanes + l,
              "wmma with another address or stride than lane 0's (0x" + hex64(address(w, addr, l)) + ", " +
                  std::to_string(stride) + " against 0x" + hex64(p0) + ", " + std::to_string(stride0) +
                  "): the ISA requires one for the whole warp");
    }
  }
  const std::size_t size = f.rows * f.cols;
  // Global traffic, counted as ld/st count theirs: every lane's element bytes, and the distinct
  // sectors of the instruction (at most 16 elements a lane: f16 A and B, 8 registers of 2).
  const bool global = in.where == space::global ||
                      (in.where == space::generic && !in_local_window(p0) && !in_shared_window(p0));
  std::array<std::uint64_t, kLanes * 16> sectors;
  unsigned nsectors = 0;
  const unsigned bits = static_cast<unsigned>(f.esize * 8);
  const std::uint64_t emask = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
  for (unsigned l = 0; l < kLanes; ++l) {
    for (unsigned r = 0; r < f.regs; ++r) {
      std::uint64_t value = load ? 0 : get(w, frag.elems[r], l);
      for (unsigned j = 0; j < f.per_reg; ++j) {
        const std::size_t index = (std::size_t{32} * (r * f.per_reg + j) + l) % size;
        const std::size_t row = index / f.cols, col = index % f.cols;
        const std::uint64_t offset = in.trans ? col * stride0 + row : row * stride0 + col;
        unsigned char* at = wmma_element(w, l, pc, in.where, p0 + offset * f.esize, f.esize, !load);
        if (global) sectors[nsectors++] = (p0 + offset * f.esize) / 32;
        if (load) {
          std::uint64_t v = 0;
          if (global) v = load_global(at, f.esize);
          else std::memcpy(&v, at, f.esize);
          value |= (v & emask) << (bits * j % 64);
        } else {
          const std::uint64_t v = value >> (bits * j % 64) & emask;
          if (global) store_global(at, v, f.esize);
          else std::memcpy(at, &v, f.esize);
        }
      }
      if (load) set(w, frag.elems[r], l, value);
    }
  }
  if (nsectors > 0) count_global(load, sectors.data(), nsectors, std::uint64_t{nsectors} * f.esize);
}

// wmma.mma: D = A B + C over the whole warp's fragments (every input read before any output is
// written). f16, bf16 and tf32 products are exact in double (tf32: the f32 bits less their low
// 13, which the tensor cores ignore) and each element's sum is rounded once to D's type (f16 D:
// through f32); s8/u8 sums are exact, wrapped to s32 or clamped (.satfinite); f64 is a chain of
// fused multiply-adds in k order. Tensor cores' order and intermediate rounding are unspecified,
// so f32 and f16 results may differ from a GPU's in their last bits.
void executor::wmma_mma(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  require_whole_warp(w, pc, mask);
  if (mask == 0) return;
  const unsigned m = in.shape >> 16, n = in.shape >> 8 & 0xffu, kk = in.shape & 0xffu;
  // Matrix element `index` (row-major) of fragment operand `o` of `matrix`, as a double (or an
  // integer, exactly, in the double).
  const auto element = [&](const operand& o, const wmma_fragment& f, vtype t, std::size_t index) -> double {
    const unsigned lane = static_cast<unsigned>(index % 32), e = static_cast<unsigned>(index / 32);
    const std::uint64_t reg = get(w, o.elems[e / f.per_reg], lane);
    const unsigned j = e % f.per_reg;
    switch (t) {
      case vtype::f16: return rungs::detail::f16_bits_to_float(static_cast<std::uint16_t>(reg >> 16 * j));
      case vtype::bf16: return rungs::detail::bf16_bits_to_float(static_cast<std::uint16_t>(reg >> 16 * j));
      case vtype::s8: return static_cast<std::int8_t>(reg >> 8 * j);
      case vtype::u8: return static_cast<std::uint8_t>(reg >> 8 * j);
      case vtype::tf32: return as_f32(reg & 0xffffe000u);
      case vtype::s32: return static_cast<std::int32_t>(reg);
      case vtype::f64: return as_f64(reg);
      default: return as_f32(reg);  // f32
    }
  };
  // The largest matrices of the shapes parsed (wmma_geometry): A 32 x 16, B 16 x 32, C 16 x 16
  // (or 32 x 8, 8 x 32); D at most 8 registers a lane.
  std::array<double, 512> a, b;
  std::array<double, 256> c;
  std::array<std::uint64_t, 8 * kLanes> out{};
  const std::size_t a_size = std::size_t{m} * kk, b_size = std::size_t{kk} * n, c_size = std::size_t{m} * n;
  const wmma_fragment fa = wmma_geometry(in.shape, 0, in.type2), fb = wmma_geometry(in.shape, 1, in.type2),
                      fc = wmma_geometry(in.shape, 2, in.type3);
  for (std::size_t i = 0; i < a_size; ++i) a[i] = element(in.ops[1], fa, in.type2, i);
  for (std::size_t i = 0; i < b_size; ++i) b[i] = element(in.ops[2], fb, in.type2, i);
  for (std::size_t i = 0; i < c_size; ++i) c[i] = element(in.ops[3], fc, in.type3, i);
  const wmma_fragment fd = wmma_geometry(in.shape, 2, in.type);
  for (std::size_t i = 0; i < c_size; ++i) {
    const std::size_t row = i / n, col = i % n;
    std::uint64_t bits = 0;
    if (in.type == vtype::s32) {
      std::int64_t sum = static_cast<std::int64_t>(c[i]);
      for (unsigned k = 0; k < kk; ++k) sum += static_cast<std::int64_t>(a[row * kk + k]) * static_cast<std::int64_t>(b[k * n + col]);
      if (in.sat) sum = std::clamp<std::int64_t>(sum, INT32_MIN, INT32_MAX);
      bits = static_cast<std::uint32_t>(sum);
    } else if (in.type == vtype::f64) {
      double d = c[i];
      for (unsigned k = 0; k < kk; ++k) d = std::fma(a[row * kk + k], b[k * n + col], d);
      bits = f64_out(d);
    } else {
      double d = c[i];
      for (unsigned k = 0; k < kk; ++k) d += a[row * kk + k] * b[k * n + col];
      const float r = static_cast<float>(d);
      bits = in.type == vtype::f16 ? f16_from_f32(r) : f32_out(r, false, false);
    }
    const unsigned lane = static_cast<unsigned>(i % 32), e = static_cast<unsigned>(i / 32);
    out[(e / fd.per_reg) * kLanes + lane] |= bits << (fd.esize * 8 * (e % fd.per_reg));
  }
  for (unsigned r = 0; r < fd.regs; ++r) {
    for (unsigned l = 0; l < kLanes; ++l) set(w, in.ops[0].elems[r], l, out[std::size_t{r} * kLanes + l]);
  }
}

}  // namespace rungs::sim::detail
