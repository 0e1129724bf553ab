// Warp-synchronous instructions, run once every non-exited lane named by the member masks
// has arrived (executor::warp_sync): shfl.sync, vote.sync, match.sync, redux.sync and
// bar.warp.sync; and
// activemask, which waits for nothing.
#include "machine.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

namespace rungs::sim::detail {

void executor::sync_execute(warp& w, const instr& in, std::uint32_t pc, std::uint32_t ready, const std::uint32_t* masks) {
  switch (in.code) {
    case op::shfl: return sync_shfl(w, in, pc, ready, masks);
    case op::vote: sync_marks(w, in, ready); return sync_vote(w, in, ready);
    case op::match: sync_marks(w, in, ready); return sync_match(w, in, ready);
    case op::redux: sync_marks(w, in, ready); return sync_redux(w, in, ready);
    default:  // bar.warp.sync: orders the lanes' earlier shared accesses before their later ones
      for_lanes(ready, [&](unsigned l) { ++w.wsc[l]; });
      for_lanes(ready, [&](unsigned a) { for_lanes(ready, [&](unsigned b) { w.pair_sync[a][b] = w.wsc[a]; }); });
  }
}

namespace {
// The lane that lane l reads in shfl.sync with operands b and c (PTX ISA: shfl.sync): the
// computed source if in range (pval), else l itself.
template <shfl_mode Mode>
int shfl_source(int l, std::uint64_t b, std::uint64_t c, bool& pval) {
  const int bval = static_cast<int>(b & 0x1f);
  const int cval = static_cast<int>(c & 0x1f);
  const int segmask = static_cast<int>((c >> 8) & 0x1f);
  const int max_lane = (l & segmask) | (cval & ~segmask);
  int j = 0;
  if constexpr (Mode == shfl_mode::up) j = l - bval, pval = j >= max_lane;
  else if constexpr (Mode == shfl_mode::down) j = l + bval, pval = j <= max_lane;
  else if constexpr (Mode == shfl_mode::bfly) j = l ^ bval, pval = j <= max_lane;
  else j = (l & segmask) | (bval & ~segmask), pval = j <= max_lane;
  return pval ? j : l;
}
// f(std::integral_constant<shfl_mode, mode>) for the instruction's mode: shfl_source chosen once,
// not per lane.
template <class F>
void with_shfl_mode(shfl_mode mode, F&& f) {
  using M = shfl_mode;
  switch (mode) {
    case M::up: return f(std::integral_constant<M, M::up>{});
    case M::down: return f(std::integral_constant<M, M::down>{});
    case M::bfly: return f(std::integral_constant<M, M::bfly>{});
    case M::idx: return f(std::integral_constant<M, M::idx>{});
  }
}
}  // namespace

// shfl.sync d(|p), a, b, c, membermask (PTX ISA: shfl.sync)
void executor::sync_shfl(warp& w, const instr& in, std::uint32_t pc, std::uint32_t ready, const std::uint32_t* masks) {
  const operand& dst = in.ops[0];
  const operand& d = dst.kind == operand::k_vec ? dst.elems[0] : dst;
  const operand* p = dst.kind == operand::k_vec && dst.elems.size() > 1 ? &dst.elems[1] : nullptr;
  if (ready == 0xffffffffu && d.kind == operand::k_reg) return shfl_whole_warp(w, in);
  const std::uint32_t dead = dead_lanes(w);
  std::uint32_t src[kLanes], from[kLanes], dead_from = 0;
  for_lanes(ready, [&](unsigned l) { src[l] = static_cast<std::uint32_t>(get(w, in.ops[1], l)); });
  with_shfl_mode(in.mode, [&](auto mode) { for_lanes(ready, [&](unsigned lane) {
    bool pval = false;
    const int j = shfl_source<mode()>(static_cast<int>(lane), get(w, in.ops[2], lane), get(w, in.ops[3], lane), pval);
    from[lane] = static_cast<std::uint32_t>(j);
    if (((dead >> j) & 1) != 0) {  // an exited or absent lane: undefined bits (CUDA: "the value is undefined")
      dead_from |= 1u << lane;
      set(w, d, lane, static_cast<std::uint32_t>(rng_()));
      if (p && p->kind == operand::k_reg) set(w, *p, lane, pval ? 1 : 0);
      return;
    }
    if (!((ready >> j) & 1)) {
      fail_at(pc, w.index * kLanes + lane,
              "shfl.sync reads lane " + std::to_string(j) + ", which does not take part (member mask 0x" +
                  hex(masks[lane]) + "): the value is undefined");
    }
    set(w, d, lane, src[j]);
    if (p && p->kind == operand::k_reg) set(w, *p, lane, pval ? 1 : 0);
  }); });
  if (w.undef_live != 0 || (dead_from != 0 && track_defined_)) shfl_marks(w, in, ready, from, dead_from);
}

// shfl.sync with every lane taking part (the butterfly reductions of a kernel): each lane's
// source lane computed as in sync_shfl, with operands resolved once and no lane dead or missing.
void executor::shfl_whole_warp(warp& w, const instr& in) {
  const lanes_in a(w.regs, in.ops[1]), b(w.regs, in.ops[2]), c(w.regs, in.ops[3]);
  std::uint32_t src[kLanes];
  for (unsigned l = 0; l < kLanes; ++l) src[l] = static_cast<std::uint32_t>(a[l]);
  const operand& dst = in.ops[0];
  const bool has_p = dst.kind == operand::k_vec && dst.elems.size() > 1 && dst.elems[1].kind == operand::k_reg;
  std::uint64_t* d = w.regs.data() + std::size_t{(dst.kind == operand::k_vec ? dst.elems[0] : dst).reg} * kLanes;
  std::uint64_t* p = has_p ? w.regs.data() + std::size_t{dst.elems[1].reg} * kLanes : nullptr;
  // Each lane's source, with the mode chosen once per instruction (a switch per lane was most
  // of a shuffle's time).
  std::uint32_t from[kLanes], valid[kLanes];
  with_shfl_mode(in.mode, [&](auto mode) {
    for (unsigned l = 0; l < kLanes; ++l) {
      bool pval = false;
      from[l] = static_cast<std::uint32_t>(shfl_source<mode()>(static_cast<int>(l), b[l], c[l], pval));
      valid[l] = pval ? 1 : 0;
    }
  });
  for (unsigned l = 0; l < kLanes; ++l) d[l] = src[from[l]];
  if (p) {
    for (unsigned l = 0; l < kLanes; ++l) p[l] = valid[l];
  }
  if (w.undef_live != 0) shfl_marks(w, in, 0xffffffffu, from, 0);
}

// A decoded shfl.sync (ptx.hpp, decoded: register operands) that every lane of a warp without
// undefined lanes reaches: where every lane's member mask names the lane itself, every lane is
// ready at once and this is what warp_sync's whole warp and shfl_whole_warp do. False (nothing
// done) where one does not: warp_sync then reports it.
bool executor::shfl_decoded(warp& w, const decoded& dc) {
  const std::uint64_t* r = w.regs.data();
  const std::uint64_t* member = r + std::size_t{dc.imm >> 32} * kLanes;
  // Bit l of lane l's mask, for every lane: an OR of constant-masked lanes, which the compiler
  // vectorises (a shift by the lane's index was a serial chain, a quarter of a shuffle's time).
  static constexpr auto kLaneBit = [] {
    std::array<std::uint64_t, kLanes> bit{};
    for (unsigned l = 0; l < kLanes; ++l) bit[l] = std::uint64_t{1} << l;
    return bit;
  }();
  std::uint64_t self = 0;
  for (unsigned l = 0; l < kLanes; ++l) self |= member[l] & kLaneBit[l];
  if (self != 0xffffffffu) return false;
  const std::uint64_t* a = r + std::size_t{dc.a} * kLanes;
  const std::uint64_t* b = r + std::size_t{dc.b} * kLanes;
  const std::uint64_t* c = r + std::size_t{dc.c} * kLanes;
  std::uint32_t src[kLanes], from[kLanes], valid[kLanes];
  for (unsigned l = 0; l < kLanes; ++l) src[l] = static_cast<std::uint32_t>(a[l]);
  with_shfl_mode(static_cast<shfl_mode>(dc.bits), [&](auto mode) {
    for (unsigned l = 0; l < kLanes; ++l) {
      bool pval = false;
      from[l] = static_cast<std::uint32_t>(shfl_source<mode()>(static_cast<int>(l), b[l], c[l], pval));
      valid[l] = pval ? 1 : 0;
    }
  });
  std::uint64_t* d = w.regs.data() + std::size_t{dc.d} * kLanes;
  for (unsigned l = 0; l < kLanes; ++l) d[l] = src[from[l]];
  if (const auto p = static_cast<std::uint32_t>(dc.imm); p != decoded::kNoSlot) {
    std::uint64_t* q = w.regs.data() + std::size_t{p} * kLanes;
    for (unsigned l = 0; l < kLanes; ++l) q[l] = valid[l];
  }
  return true;
}

// vote.sync.{all,any,uni}.pred d, {!}a, membermask and vote.sync.ballot.b32 d, {!}a, membermask
// (PTX ISA: vote): over the lanes that take part, i.e. the non-exited lanes of the mask.
void executor::sync_vote(warp& w, const instr& in, std::uint32_t ready) {
  std::uint32_t ballot = 0;
  for_lanes(ready, [&](unsigned l) {
    if (get_pred(w, in.ops[1], l)) ballot |= 1u << l;
  });
  for_lanes(ready, [&](unsigned l) {
    const std::uint32_t group = ready & static_cast<std::uint32_t>(get(w, in.ops[2], l));
    std::uint64_t r = 0;
    switch (in.vote) {
      case vote_mode::all: r = (ballot & group) == group; break;
      case vote_mode::any: r = (ballot & group) != 0; break;
      case vote_mode::uni: r = (ballot & group) == group || (ballot & group) == 0; break;
      case vote_mode::ballot: r = ballot & group; break;
    }
    set(w, in.ops[0], l, r);
  });
}

// match.any.sync.b{32,64} d, a, membermask: the lanes of the mask holding the same a;
// match.all.sync.b{32,64} d|p, a, membermask: the mask if all of it holds the same a, else 0
// (PTX ISA: match.sync).
void executor::sync_match(warp& w, const instr& in, std::uint32_t ready) {
  const std::uint64_t wm = width_mask(type_bits(in.type));
  const operand& dst = in.ops[0];
  const operand& d = dst.kind == operand::k_vec ? dst.elems[0] : dst;
  const operand* p = dst.kind == operand::k_vec && dst.elems.size() > 1 ? &dst.elems[1] : nullptr;
  for_lanes(ready, [&](unsigned l) {
    const std::uint32_t group = ready & static_cast<std::uint32_t>(get(w, in.ops[2], l));
    const std::uint64_t mine = get(w, in.ops[1], l) & wm;
    std::uint32_t same = 0;
    for_lanes(group, [&](unsigned k) {
      if ((get(w, in.ops[1], k) & wm) == mine) same |= 1u << k;
    });
    const bool all = same == group;
    set(w, d, l, in.match_all ? (all ? group : 0) : same);
    if (p && p->kind == operand::k_reg) set(w, *p, l, all ? 1 : 0);
  });
}

// redux.sync.op.type d, a, membermask (PTX ISA: redux.sync): the reduction of a over the
// lanes of the mask that take part (add wraps; min/max signed or unsigned by type).
void executor::sync_redux(warp& w, const instr& in, std::uint32_t ready) {
  for_lanes(ready, [&](unsigned l) {
    const std::uint32_t group = ready & static_cast<std::uint32_t>(get(w, in.ops[2], l));
    std::uint32_t acc = 0;
    bool first = true;
    for_lanes(group, [&](unsigned k) {
      const auto v = static_cast<std::uint32_t>(get(w, in.ops[1], k));
      const auto sv = static_cast<std::int32_t>(v), sacc = static_cast<std::int32_t>(acc);
      const bool sgn = in.type == vtype::s32;
      switch (in.aop) {
        case atom_op::add: acc += v; break;
        case atom_op::min: acc = first ? v : sgn ? static_cast<std::uint32_t>(std::min(sacc, sv)) : std::min(acc, v); break;
        case atom_op::max: acc = first ? v : sgn ? static_cast<std::uint32_t>(std::max(sacc, sv)) : std::max(acc, v); break;
        case atom_op::and_: acc = first ? v : acc & v; break;
        case atom_op::or_: acc |= v; break;
        default: acc ^= v; break;  // xor
      }
      first = false;
    });
    set(w, in.ops[0], l, acc);
  });
}

// activemask.b32 d: the lanes executing it together, i.e. converged at this instruction.
void executor::exec_activemask(warp& w, const instr& in, std::uint32_t, std::uint32_t mask) {
  for_lanes(mask, [&](unsigned l) { set(w, in.ops[0], l, w.group_mask); });
}

}  // namespace rungs::sim::detail
