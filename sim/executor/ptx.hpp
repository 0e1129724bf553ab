// The executor's internal form of a PTX module: every register resolved to a slot, every
// label to an instruction index, every symbol to an address in its state space, so that
// execution does no name lookups (speed: the cuda-sim suite runs every kernel family).
#pragma once

#include <rungs_sim/executor.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rungs::sim::detail {

struct module_source;  // parse.cpp: the module's text and scope, for parsing a body at first use

enum class op : std::uint8_t {
  ld, st, mov, add, sub, mul, mad, fma, div, rem, min, max, neg, abs, and_, or_, xor_, not_, shl, shr, bfi, prmt,
  setp, selp, cvt, cvta, bra, ret, exit, shfl, bar_sync, bar_warp_sync, cp_async, cp_async_commit,
  cp_async_wait_group, cp_async_wait_all, ex2, rcp, rsqrt, sqrt, sin, cos, mma, ldmatrix,
  atom, red, fence, vote, match, redux, activemask, clz, popc, brev, bfind, bfe, clock, call, lop3, trap, bmsk, bar_red, prefetch,
  wmma_load, wmma_store, wmma_mma, lg2, tanh, copysign, nanosleep,
  unsupported  // executing it is a sim_error naming the instruction (never a silent no-op)
};

// Value types. `bits` is the width, `sign` tells integer signedness, `fp` floating point.
enum class vtype : std::uint8_t { none, pred, b8, b16, b32, b64, u8, u16, u32, u64, s8, s16, s32, s64,
                                  f16, f16x2, bf16, bf16x2, f32, f64, e4m3x2, e5m2x2,
                                  tf32 };  // tf32: wmma's 19-bit float, kept in f32 bits

enum class space : std::uint8_t { none, global, shared, param, local, generic };
enum class cmp : std::uint8_t { eq, ne, lt, le, gt, ge, equ, neu, ltu, leu, gtu, geu, num, nan };
enum class shfl_mode : std::uint8_t { up, down, bfly, idx };
enum class rounding : std::uint8_t { none, rn, rz, rm, rp, rni, rzi, rmi, rpi, rna };  // rna: cvt to tf32
enum class atom_op : std::uint8_t { add, min, max, inc, dec, exch, cas, and_, or_, xor_ };
enum class vote_mode : std::uint8_t { all, any, uni, ballot };
enum class prmt_mode : std::uint8_t { none, f4e, b4e, rc8, ecl, ecr, rc16 };
// The functions a `call` may name: those nvcc calls for device printf and assert (the CUDA
// runtime's device side); any other call is not executed (device functions must be inlined).
enum class callee : std::uint8_t { vprintf, assertfail };
// Memory ordering of ld/st/atom/red as written (PTX ISA, "Memory Consistency Model"). The
// executor runs every access in one sequentially consistent order, so an order only matters to
// the race check: two conflicting strong accesses (atomics, volatile, relaxed, acquire,
// release) are not a data race; a weak (plain) one with anything is.
enum class mem_order : std::uint8_t { weak, relaxed, acquire, release, acq_rel, sc, volatile_ };

struct operand {
  enum kind_t : std::uint8_t { k_none, k_reg, k_imm, k_vec, k_addr } kind = k_none;
  bool negate = false;           // `!%p` as a source predicate
  std::uint32_t reg = 0;         // slot (reg), or base register slot (addr with has_base)
  bool has_base = false;         // addr: [%r + imm] (true) or [imm / symbol + imm] (false)
  std::uint64_t imm = 0;         // immediate bits, or the address offset (symbol value included)
  std::vector<operand> elems;    // vec: its elements (registers or immediates; sink `_` is none)
};

struct instr {
  op code = op::unsupported;
  vtype type = vtype::none;      // the instruction's main type (destination type of cvt and mma)
  vtype type2 = vtype::none;     // cvt: source type; mma: the A and B type
  space where = space::none;     // ld/st/cvta: state space
  cmp compare = cmp::eq;         // setp
  shfl_mode mode = shfl_mode::bfly;
  rounding round = rounding::none;
  std::uint8_t vec = 1;          // ld/st: .v2/.v4; ldmatrix: .x1/.x2/.x4 (matrices); mma: K / 8 (k8: 1, k16: 2)
  bool trans = false;            // ldmatrix .trans
  bool satfinite = false;        // cvt .satfinite
  atom_op aop = atom_op::add;    // atom/red
  vote_mode vote = vote_mode::all;
  prmt_mode pmode = prmt_mode::none;
  mem_order order = mem_order::weak;  // ld/st/atom/red/fence
  bool match_all = false;        // match.all (else match.any)
  bool shiftamt = false;         // bfind.shiftamt
  bool clamp = false;            // bmsk.clamp (else .wrap)
  bool noftz = false;            // atom.add.noftz (f16, bf16 and their pairs)
  vtype type3 = vtype::none;     // wmma.mma: the C type (type: D, type2: A and B)
  std::uint32_t shape = 0;       // wmma: m << 16 | n << 8 | k; vec: the matrix (0 a, 1 b, 2 c or d);
                                 // trans: .col layout; sat: .satfinite
  bool aligned = true;           // bar.sync, barrier.sync.aligned (every lane of a warp at the
                                 // same instruction); barrier.sync: lanes may arrive apart
  bool publishes = false;        // fence/membar of gpu or sys scope: makes the thread's weak global
                                 // stores visible to other blocks (a cta or cluster fence does not)
  callee fn = callee::vprintf;   // call: the function; ops are the return slot (or none), then the arguments
  bool ftz = false, sat = false, approx = false, uni = false, hi = false, wide = false, to = false;
  std::int32_t guard = -1;       // predicate slot guarding the instruction, -1 none
  bool guard_negate = false;
  std::vector<operand> ops;      // destination(s) first, then sources, as written
  std::uint32_t target = 0;      // bra: instruction index
  std::uint32_t line = 0;        // 1-based line of the module text
  std::uint32_t src_file = 0, src_line = 0;  // the last .loc before it (nvcc -lineinfo); 0: none
  std::uint32_t call_file = 0, call_line = 0;  // its inlined_at call site, if any
  std::string text;              // the statement as written (messages)
  std::string why;               // unsupported: what is not implemented
};

// An instruction's scheduling fields, and for the forms a kernel runs most (fma, add, sub, mul,
// min, max and ex2 .f32; integer add, sub, mul and mad; and, or, xor, shl and shr; setp on 32-bit
// integers and f32; selp; mov; the unpack `mov.b32 {lo, hi}`; cvt.f32.f16 and an index widened to
// 64 bits; shfl.sync with register operands) its operands resolved to slots: what
// executor::step, executor::exec_decoded and executor::shfl_decoded read, 40 bytes per
// instruction in one array, where an `instr` is 152 with its operands in a heap block of their
// own (two or three more cache lines per instruction). Built at parse (decode_forms, alu.cpp).
struct decoded {
  enum form_t : std::uint8_t { none, f32_fma, f32_add, f32_sub, f32_mul, int_add, int_sub, mov, unpack2, cvt_f32_f16,
                               shfl, f32_minmax, f32_ex2, shift, setp, selp, int_mul, int_mad, logic, cvt_widen32 };
  static constexpr std::uint32_t kNoSlot = ~0u;
  op code = op::unsupported;
  form_t form = none;            // none: the opcode's handler runs it
  bool guard_negate = false;
  std::uint8_t imm_op = 0;       // the source (1, 2 or 3) that is the immediate `imm`; 0: none
  std::uint8_t bits = 0;         // int_add, int_sub, int_mul, int_mad, logic, shift, selp, mov: the type's width;
                                 // unpack2: an element's;
                                 // shfl: its shfl_mode; setp: 0 s32, 1 u32 or b32, 2 f32
  // f32_minmax: bit 0 max, bit 1 .ftz; f32_ex2: .ftz; shift: 0 shl, 1 shr unsigned, 2 shr signed;
  // setp: its cmp; selp: the predicate negated; int_mul, int_mad: 0 .lo, 1 .wide unsigned, 2 .wide
  // signed; logic: 0 and, 1 or, 2 xor; cvt_widen32: 0 from u32, 1 from s32
  std::uint8_t sub = 0;
  std::int32_t guard = -1;
  // Slots: the destination, then the sources; unpack2: d and b the two elements (kNoSlot: a
  // sink), a the source; setp: c the second (predicate) destination (kNoSlot: none); selp: c the
  // predicate.
  std::uint32_t d = 0, a = 0, b = 0, c = 0;
  // shfl: the slots of the predicate destination (low 32 bits; kNoSlot: none) and of the member mask
  std::uint64_t imm = 0;
};
std::vector<decoded> decode_forms(const std::vector<instr>& code);

// A wmma fragment's geometry (PTX ISA, "Matrix Fragments for WMMA"): its matrix (rows x cols:
// A is m x k, B k x n, C and D m x n), elements per 32-bit register (per 64-bit one for f64) and
// the registers each lane holds. f16 A and B fragments are 8 registers at every shape (their
// elements repeat); the others hold rows x cols / 32 elements a lane. Which lane holds which
// element is unspecified by the ISA (executor: element e of lane l is the matrix's element
// (32 e + l) mod (rows x cols) in row-major order).
struct wmma_fragment {
  unsigned rows = 0, cols = 0, per_reg = 1, regs = 0, esize = 4;
};
inline wmma_fragment wmma_geometry(std::uint32_t shape, unsigned matrix, vtype t) {
  const unsigned m = shape >> 16, n = shape >> 8 & 0xffu, k = shape & 0xffu;
  wmma_fragment f;
  f.rows = matrix == 1 ? k : m;
  f.cols = matrix == 0 ? k : n;
  if (t == vtype::f16 || t == vtype::bf16) f.per_reg = 2, f.esize = 2;
  else if (t == vtype::s8 || t == vtype::u8) f.per_reg = 4, f.esize = 1;
  else if (t == vtype::f64) f.esize = 8;
  f.regs = t == vtype::f16 && matrix < 2 ? 8 : f.rows * f.cols / 32 / f.per_reg;
  return f;
}
// Whether the ISA has this element type at this shape (and matrix: 0 a, 1 b, 2 c or d).
inline bool wmma_type_fits(std::uint32_t shape, unsigned matrix, vtype t) {
  const unsigned k = shape & 0xffu;
  if (k == 8) return t == (matrix < 2 ? vtype::tf32 : vtype::f32);
  if (k == 4) return t == vtype::f64;
  if (matrix < 2) return t == vtype::f16 || t == vtype::bf16 || t == vtype::s8 || t == vtype::u8;
  return t == vtype::f16 || t == vtype::f32 || t == vtype::s32;
}

struct param_decl {
  std::string name;
  param_info info;
  std::size_t offset = 0;        // in the parameter buffer
};

// A special register read by the kernel, with the slot it lives in.
enum class special : std::uint8_t { tid_x, tid_y, tid_z, ntid_x, ntid_y, ntid_z, ctaid_x, ctaid_y, ctaid_z,
                                    nctaid_x, nctaid_y, nctaid_z, laneid, warpid, nwarpid, lanemask_eq, lanemask_le,
                                    lanemask_lt, lanemask_ge, lanemask_gt, smid, nsmid, gridid, dynamic_smem_size,
                                    total_smem_size, reserved_smem_begin, reserved_smem_end, reserved_smem_cap,
                                    reserved_smem_0, reserved_smem_1 };
// Time read by `mov` from %clock, %clock64 or %globaltimer (op::clock; imm of operand 1).
enum class clock_kind : std::uint8_t { clock32, clock64, globaltimer };

struct function {
  std::string name;
  bool is_entry = false;
  std::uint32_t line = 0;
  std::vector<param_decl> params;
  std::size_t param_bytes = 0;
  std::vector<instr> code;
  std::uint32_t slots = 0;                                 // register slots (special registers included)
  std::vector<std::pair<special, std::uint32_t>> specials; // special register -> slot
  // Per instruction, the register slots it names (guard, operands, vector elements, address
  // bases), each once: code[i]'s are touch[touch_at[i] .. touch_at[i + 1]). The executor gives
  // a register its CTA's first bits (garbage, or zeros) when an instruction first names it.
  // An entry with kTouchDefines set names a slot the instruction writes in every lane when it
  // runs unguarded over a whole warp: its first bits are then never read and are not written.
  std::vector<std::uint32_t> touch_at, touch;
  static constexpr std::uint32_t kTouchDefines = 0x80000000u;
  std::vector<decoded> forms;                              // per instruction (decoded)
  std::size_t static_shared = 0;                           // bytes of .shared (function and module scope)
  std::size_t dynamic_shared_offset = 0;                   // where extern .shared begins
  std::size_t local_bytes = 0;                             // per-thread .local bytes
  std::string refused;  // non-empty: a construct of the body cannot be parsed (kernel, line, construct)
};

}  // namespace rungs::sim::detail

namespace rungs::sim {
struct module {
  // A module-scope .global/.const variable: host storage owned by the module, its address
  // being the variable's global address (initialised from the declaration's initializer).
  struct variable {
    std::string name;
    std::unique_ptr<unsigned char[]> data;
    std::size_t size = 0;
  };
  std::string name;
  std::vector<variable> variables;
  std::map<std::uint32_t, std::string> files;  // .file index -> source path (.loc)
  // Every .entry and .func in order. load_ptx reads their headers; a body is parsed at the
  // entry's first use (detail::entry_function, refusal, resources, entry_params), so a process
  // pays only for the kernels it launches.
  std::vector<detail::function> functions;
  std::map<std::string, std::size_t, std::less<>> by_name;  // entry name -> functions index
  std::shared_ptr<detail::module_source> source;
};
}  // namespace rungs::sim
