// The executor's decoder table: each opcode's handler (machine.hpp), one line per opcode, as
// LLVM's and QEMU's decoders table theirs. Adding an opcode: docs/sim.md, "Adding an opcode".
#include "machine.hpp"

#include <array>
#include <cstddef>

namespace rungs::sim::detail {
namespace {

constexpr std::size_t kOps = static_cast<std::size_t>(op::unsupported) + 1;

constexpr std::array<handler, kOps> make_table() {
  std::array<handler, kOps> t{};
  auto on = [&t](op code, handler h) { t[static_cast<std::size_t>(code)] = h; };
  for (handler& h : t) h = &executor::exec_unsupported;  // op::unsupported, and the scheduler's opcodes
  // memory (memory.cpp)
  on(op::ld, &executor::exec_ld_st);
  on(op::st, &executor::exec_ld_st);
  on(op::cp_async, &executor::exec_cp_async);
  on(op::prefetch, &executor::exec_prefetch);
  on(op::nanosleep, &executor::exec_nanosleep);
  on(op::cp_async_commit, &executor::exec_cp_async_commit);
  on(op::cp_async_wait_group, &executor::exec_cp_async_wait);
  on(op::cp_async_wait_all, &executor::exec_cp_async_wait);
  on(op::atom, &executor::exec_atom);
  on(op::red, &executor::exec_atom);
  on(op::fence, &executor::exec_fence);
  // warp-level (warp.cpp; shfl, vote and match are the scheduler's: executor::warp_sync)
  on(op::activemask, &executor::exec_activemask);
  // time (execute.cpp)
  on(op::clock, &executor::exec_clock);
  // arithmetic, logic, comparison (alu.cpp)
  on(op::mov, &executor::exec_mov);
  for (op o : {op::add, op::sub, op::mul, op::mad, op::fma, op::div}) on(o, &executor::exec_arith);
  on(op::rem, &executor::exec_rem);
  on(op::min, &executor::exec_minmax);
  on(op::max, &executor::exec_minmax);
  on(op::neg, &executor::exec_negabs);
  on(op::abs, &executor::exec_negabs);
  for (op o : {op::and_, op::or_, op::xor_, op::not_}) on(o, &executor::exec_logic);
  on(op::shl, &executor::exec_shift);
  on(op::shr, &executor::exec_shift);
  on(op::setp, &executor::exec_setp);
  on(op::selp, &executor::exec_selp);
  on(op::ex2, &executor::exec_ex2);
  for (op o : {op::rcp, op::rsqrt, op::sqrt, op::sin, op::cos, op::lg2, op::tanh}) on(o, &executor::exec_math);
  on(op::copysign, &executor::exec_copysign);
  // bit fields and bytes (bits.cpp)
  for (op o : {op::clz, op::popc, op::bfind}) on(o, &executor::exec_bit_count);
  on(op::brev, &executor::exec_brev);
  on(op::bfe, &executor::exec_bfe);
  on(op::bfi, &executor::exec_bfi);
  on(op::prmt, &executor::exec_prmt);
  on(op::lop3, &executor::exec_lop3);
  on(op::bmsk, &executor::exec_bmsk);
  // conversions (convert.cpp)
  on(op::cvt, &executor::exec_cvt);
  on(op::cvta, &executor::exec_cvta);
  // device printf, assert and trap (call.cpp)
  on(op::call, &executor::exec_call);
  on(op::trap, &executor::exec_trap);
  // tensor cores (tensor.cpp)
  on(op::ldmatrix, &executor::exec_ldmatrix);
  on(op::mma, &executor::exec_mma);
  on(op::wmma_load, &executor::exec_wmma);
  on(op::wmma_store, &executor::exec_wmma);
  on(op::wmma_mma, &executor::exec_wmma_mma);
  // bra, ret, exit, bar.sync and the warp-synchronous opcodes (shfl, vote, match,
  // bar.warp.sync): executor::step.
  return t;
}

}  // namespace

const std::array<handler, kOps> handlers = make_table();

}  // namespace rungs::sim::detail
