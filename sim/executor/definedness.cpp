// Definedness (docs/sim.md, "Definedness"): lane-granular undefined marks, as Valgrind's
// memcheck keeps V bits. A read of shared bytes no thread of the block wrote is not a finding by
// itself: it makes the loaded register lanes undefined (warp::undef, one bit per lane and slot).
// The marks flow through instructions (a result lane is undefined when a source it depends on is,
// with exact rules where it does not: selp, and.pred, or.pred) and through shared memory (a store
// of undefined lanes marks its bytes; a later load gives undefined lanes again). The finding is a
// use that can change what the kernel does or outputs: a branch or guard, an address, a store to
// global or local memory, an operand of an atomic, cp.async, a member mask or bar.red; it names
// the use and where the value came from (origin). A warp without undefined lanes skips all of it
// (warp::undef_live is 0), so a kernel that reads only what it wrote pays a compare per
// instruction.
#include "machine.hpp"

namespace rungs::sim::detail {

namespace {
// The instructions whose only effect is their destination registers: a guard with undefined
// lanes makes those lanes of the destination undefined (the instruction ran or did not). Any
// other guarded instruction with an undefined guard lane is a finding.
bool register_only(op code) {
  switch (code) {
    case op::mov: case op::add: case op::sub: case op::mul: case op::mad: case op::fma: case op::div: case op::rem:
    case op::min: case op::max: case op::neg: case op::abs: case op::and_: case op::or_: case op::xor_: case op::not_:
    case op::shl: case op::shr: case op::bfi: case op::prmt: case op::setp: case op::selp: case op::cvt: case op::cvta:
    case op::ex2: case op::rcp: case op::rsqrt: case op::sqrt: case op::sin: case op::cos: case op::clz: case op::popc:
    case op::brev: case op::bfind: case op::bfe: case op::clock: case op::lop3: case op::bmsk: case op::lg2:
    case op::tanh: case op::copysign: case op::activemask: case op::nanosleep: return true;
    default: return false;
  }
}

// The lanes of `mask` in which predicate operand `o` is true (after its `!`).
std::uint32_t pred_lanes(const std::vector<std::uint64_t>& regs, const operand& o, std::uint32_t mask) {
  const lanes_in p(regs, o);
  std::uint32_t v = 0;
  for (unsigned l = 0; l < kLanes; ++l) v |= static_cast<std::uint32_t>(((p[l] & 1) != 0) != o.negate) << l;
  return v & mask;
}
}  // namespace

// The lanes in which operand `o` (a register, a vector's registers, an address's base) is undefined.
std::uint32_t executor::marks(const warp& w, const operand& o) const {
  switch (o.kind) {
    case operand::k_reg: return w.undef[o.reg];
    case operand::k_addr: return o.has_base ? w.undef[o.reg] : 0;
    case operand::k_vec: {
      std::uint32_t m = 0;
      for (const operand& e : o.elems) m |= marks(w, e);
      return m;
    }
    default: return 0;
  }
}

// The origin of the first register of `o` undefined in one of `lanes`.
const origin& executor::origin_of(const warp& w, const operand& o, std::uint32_t lanes) const {
  if (o.kind == operand::k_vec) {
    for (const operand& e : o.elems) {
      if (marks(w, e) & lanes) return origin_of(w, e, lanes);
    }
  }
  return w.undef_origin[o.reg];
}

// Slot `slot`'s lanes `written` are now undefined where `undefined` says (defined elsewhere).
void executor::set_marks(warp& w, std::uint32_t slot, std::uint32_t written, std::uint32_t undefined, const origin& o) {
  undefined &= written;
  if (w.undef.empty()) {
    if (undefined == 0) return;
    w.undef.assign(f_.slots, 0);
    w.undef_origin.assign(f_.slots, origin{});
  }
  const std::uint32_t old = w.undef[slot], kept = old & ~written, now = kept | undefined;
  if (kept == 0 && undefined != 0) w.undef_origin[slot] = o;  // (else the first origin stays)
  w.undef[slot] = now;
  w.undef_live += static_cast<unsigned>(now != 0) - static_cast<unsigned>(old != 0);
}

void executor::set_marks(warp& w, const operand& dst, std::uint32_t written, std::uint32_t undefined, const origin& o) {
  if (dst.kind == operand::k_reg) return set_marks(w, dst.reg, written, undefined, o);
  if (dst.kind != operand::k_vec) return;
  for (const operand& e : dst.elems) {
    if (e.kind == operand::k_reg) set_marks(w, e.reg, written, undefined, o);
  }
}

void executor::undefined_use(std::uint32_t pc, std::uint32_t tid, const std::string& use, const origin& o) const {
  std::ostringstream os;
  os << "use of an undefined value at " << at(pc) << ", " << thread_name(tid) << ": " << use << " comes from ";
  if (o.byte == origin::kNoByte) {
    os << "shfl.sync reading an exited or absent lane";
  } else {
    os << "a read of never-written shared byte " << o.byte;
  }
  os << " (" << at(o.instr) << ", " << thread_name(o.tid) << ")";
  fail(os.str());
}

// A finding if operand `o` is undefined in one of `lanes`.
void executor::check_defined(const warp& w, std::uint32_t pc, const operand& o, std::uint32_t lanes,
                             const char* use) const {
  const std::uint32_t bad = marks(w, o) & lanes;
  if (bad != 0) undefined_use(pc, w.index * kLanes + static_cast<unsigned>(std::countr_zero(bad)), use, origin_of(w, o, bad));
}

// Before the handler of `in` (lanes `mask` of the group, guards applied) in a warp with undefined
// lanes: the uses it checks, and its destinations' marks (from the sources' marks before it runs).
void executor::defined_before(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const std::uint32_t guard_undef = in.guard >= 0 ? w.undef[static_cast<std::uint32_t>(in.guard)] & w.group_mask : 0;
  const origin& guard_origin = in.guard >= 0 ? w.undef_origin[static_cast<std::uint32_t>(in.guard)] : undef_origin_;
  if (register_only(in.code)) {
    std::uint32_t undefined = 0;
    const auto m = [&](unsigned k) { return k < in.ops.size() ? marks(w, in.ops[k]) : 0u; };
    if (in.code == op::selp) {  // d = p ? a : b: only the selected source, where p is defined
      const std::uint32_t p = pred_lanes(w.regs, in.ops[3], mask);
      undefined = m(3) | (p & m(1)) | (~p & m(2));
    } else if (in.type == vtype::pred && (in.code == op::and_ || in.code == op::or_)) {
      // A defined false operand decides and.pred; a defined true one or.pred.
      const bool is_and = in.code == op::and_;
      const std::uint32_t ma = m(1), mb = m(2);
      const std::uint32_t a = pred_lanes(w.regs, in.ops[1], mask), b = pred_lanes(w.regs, in.ops[2], mask);
      const std::uint32_t decided = is_and ? (~ma & ~a) | (~mb & ~b) : (~ma & a) | (~mb & b);
      undefined = (ma | mb) & ~decided;
    } else {
      for (unsigned k = 1; k < in.ops.size(); ++k) undefined |= m(k);
    }
    undefined &= mask;
    const origin* o = &guard_origin;
    if (undefined != 0) {
      for (unsigned k = 1; k < in.ops.size(); ++k) {
        if (marks(w, in.ops[k]) & undefined) {
          o = &origin_of(w, in.ops[k], undefined);
          break;
        }
      }
    }
    set_marks(w, in.ops[0], mask | guard_undef, undefined | guard_undef, *o);
    return;
  }
  if (guard_undef != 0) {
    undefined_use(pc, w.index * kLanes + static_cast<unsigned>(std::countr_zero(guard_undef)),
                  in.code == op::bra ? "the branch's predicate" : "the guard predicate", guard_origin);
  }
  if (mask == 0) return;
  const origin none{};
  switch (in.code) {
    case op::ld:
      check_defined(w, pc, in.ops[1], mask, "the address");
      set_marks(w, in.ops[0], mask, 0, none);  // (lanes it reads undefined: defined_after)
      return;
    case op::st: {
      check_defined(w, pc, in.ops[0], mask, "the address");
      const std::uint32_t bad = marks(w, in.ops[1]) & mask;
      if (bad == 0) return;
      const auto lane_of = [&](std::uint32_t lanes) { return w.index * kLanes + static_cast<unsigned>(std::countr_zero(lanes)); };
      const origin& o = origin_of(w, in.ops[1], bad);
      if (in.where == space::global || in.where == space::param) {
        undefined_use(pc, lane_of(bad), "the value stored to global memory", o);
      }
      if (in.where == space::local) {
        undefined_use(pc, lane_of(bad), "the value stored to local memory (definedness is not tracked there)", o);
      }
      if (in.where != space::shared) {  // generic: only the shared window keeps marks
        for_lanes(bad, [&](unsigned l) {
          const std::uint64_t a = address(w, in.ops[0], l);
          if (in_shared_window(a)) return;
          undefined_use(pc, w.index * kLanes + l,
                        in_local_window(a) ? "the value stored to local memory (definedness is not tracked there)"
                                           : "the value stored to global memory",
                        o);
        });
      }
      undef_after_ = true;  // its undefined lanes mark the shared bytes they store
      return;
    }
    case op::atom:
    case op::red:
      for (unsigned k = in.code == op::red ? 0 : 1; k < in.ops.size(); ++k) {
        check_defined(w, pc, in.ops[k], mask, k == (in.code == op::red ? 0u : 1u) ? "the address" : "an operand of the atomic");
      }
      if (in.code == op::atom) set_marks(w, in.ops[0], mask, 0, none);
      return;
    case op::cp_async:
      for (const operand& o : in.ops) check_defined(w, pc, o, mask, "an address or size of cp.async");
      return;
    case op::ldmatrix:
    case op::wmma_load:
      for (unsigned k = 1; k < in.ops.size(); ++k) check_defined(w, pc, in.ops[k], mask, k == 1 ? "the address" : "the stride");
      set_marks(w, in.ops[0], mask, 0, none);
      return;
    case op::wmma_store:
      check_defined(w, pc, in.ops[0], mask, "the address");
      for (unsigned k = 2; k < in.ops.size(); ++k) check_defined(w, pc, in.ops[k], mask, "the stride");
      // Its elements go wherever the layout puts them: a fragment with undefined lanes is a
      // finding whether the matrix goes to global or shared memory.
      check_defined(w, pc, in.ops[1], mask, "the fragment wmma.store writes");
      return;
    case op::mma:
    case op::wmma_mma: {  // every result element may depend on any lane's inputs: all or nothing
      std::uint32_t undefined = 0;
      for (unsigned k = 1; k < in.ops.size(); ++k) undefined |= marks(w, in.ops[k]);
      const origin* o = &none;
      for (unsigned k = 1; k < in.ops.size() && undefined != 0; ++k) {
        if (marks(w, in.ops[k]) != 0) {
          o = &origin_of(w, in.ops[k], marks(w, in.ops[k]));
          break;
        }
      }
      set_marks(w, in.ops[0], mask, undefined != 0 ? mask : 0, *o);
      return;
    }
    case op::shfl:
    case op::vote:
    case op::match:
    case op::redux:
    case op::bar_warp_sync:  // the member mask decides which lanes wait for which
      check_defined(w, pc, in.ops.back(), mask, "the member mask");
      return;
    case op::bar_red: check_defined(w, pc, in.ops[2], mask, "bar.red's predicate"); return;
    default: return;  // no register operands (bra, exit, bar.sync, call's are local memory) or no effect
  }
}

// After the handler of `in`, when it read undefined shared bytes (undef_read_) or stored
// undefined lanes to shared memory (defined_before): the loaded lanes' marks, or the stored
// bytes' marks.
void executor::defined_after(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const bool read = undef_read_;
  undef_read_ = undef_after_ = false;
  const auto shared_offset = [&](std::uint64_t a, std::uint64_t& offset) {
    if (in.where == space::shared) return offset = a, true;
    if (in.where != space::global && in_shared_window(a)) return offset = a - kSharedWindow, true;
    return false;
  };
  const unsigned esize = type_bits(in.type) / 8;
  // f(lane, element's shared offset, element's register operand) for each element of each lane
  // of `mask` whose address (operand `at`) is shared memory; `regs` names the elements.
  const auto shared_elements = [&](const operand& at, const operand& regs, auto&& f) {
    for_lanes(mask, [&](unsigned l) {
      std::uint64_t offset = 0;
      if (!shared_offset(address(w, at, l), offset)) return;
      for (unsigned e = 0; e < in.vec; ++e) {
        const operand& r = regs.kind == operand::k_vec ? regs.elems[e] : regs;
        if (r.kind == operand::k_reg) f(l, offset + e * esize, r);
      }
    });
  };
  switch (in.code) {
    case op::ld:
      if (!read) return;
      shared_elements(in.ops[1], in.ops[0], [&](unsigned l, std::uint64_t offset, const operand& d) {
        origin o;
        if (shared_undefined(pc, w.index * kLanes + l, offset, esize, o)) set_marks(w, d.reg, 1u << l, 1u << l, o);
      });
      return;
    case op::st:
      if (w.undef_live == 0) return;
      shared_elements(in.ops[0], in.ops[1], [&](unsigned l, std::uint64_t offset, const operand& v) {
        if (((w.undef[v.reg] >> l) & 1) != 0) mark_shared(offset, esize, w.undef_origin[v.reg]);
      });
      return;
    case op::ldmatrix:
    case op::wmma_load:  // each lane's registers come from rows other lanes address: all undefined
      if (read) set_marks(w, in.ops[0], mask, mask, undef_origin_);
      return;
    default: return;
  }
}

// Whether [offset, offset + size) of shared memory (just read by thread tid at pc) holds an
// undefined byte, and the first one's origin.
bool executor::shared_undefined(std::uint32_t pc, std::uint32_t tid, std::uint64_t offset, std::size_t size, origin& o) {
  for (std::uint64_t b = offset; b < offset + size; ++b) {
    const shadow_word& s = shadow_at(b / 4);
    const shadow_byte& c = s.split ? shadow_bytes_[b] : static_cast<const shadow_byte&>(s);
    if (c.w.tid < 0) {
      o = origin{pc, tid, static_cast<std::uint32_t>(b)};
      return true;
    }
    if (c.w.undef) {
      o = shared_origin_[b / 4];
      return true;
    }
  }
  return false;
}

// Shared bytes [offset, offset + size), just stored, hold undefined lanes (from `o`).
void executor::mark_shared(std::uint64_t offset, std::size_t size, const origin& o) {
  if (shared_origin_.size() < shadow_.size()) shared_origin_.resize(shadow_.size());
  for (std::uint64_t word = offset / 4; word <= (offset + size - 1) / 4; ++word) {
    shared_origin_[word] = o;
    if (size >= 4 && !shadow_at(word).split) {
      shadow_at(word).w.undef = true;
      continue;
    }
    shadow_byte* b = split_word(word);
    for (unsigned k = 0; k < 4; ++k) {
      if (word * 4 + k >= offset && word * 4 + k < offset + size) b[k].w.undef = true;
    }
  }
}

// vote, match and redux: each lane's result may depend on every lane taking part, so any
// undefined source lane makes every result lane undefined (conservative).
void executor::sync_marks(warp& w, const instr& in, std::uint32_t ready) {
  if (w.undef_live == 0) return;
  const std::uint32_t bad = marks(w, in.ops[1]) & ready;
  set_marks(w, in.ops[0], ready, bad != 0 ? ready : 0, bad != 0 ? origin_of(w, in.ops[1], bad) : origin{});
}

// shfl.sync: lane l gets lane from[l]'s mark (or undefined bits: lanes dead_from read an exited
// or absent lane), and its lane and clamp operands' marks; the predicate those operands' marks.
void executor::shfl_marks(warp& w, const instr& in, std::uint32_t ready, const std::uint32_t* from, std::uint32_t dead_from) {
  std::uint32_t moved = 0, control = 0;
  if (w.undef_live != 0) {
    const std::uint32_t a = marks(w, in.ops[1]);
    for_lanes(ready & ~dead_from, [&](unsigned l) { moved |= ((a >> from[l]) & 1) << l; });
    control = (marks(w, in.ops[2]) | marks(w, in.ops[3])) & ready;
  }
  if (!track_defined_) dead_from = 0;
  origin o;  // the first cause: the source register's origin, the lane or clamp operand's, or the shfl itself
  if (moved != 0) {
    o = w.undef_origin[in.ops[1].reg];
  } else if (control != 0) {
    o = origin_of(w, marks(w, in.ops[2]) & control ? in.ops[2] : in.ops[3], control);
  } else if (dead_from != 0) {
    o = origin{static_cast<std::uint32_t>(&in - f_.code.data()),
               w.index * kLanes + static_cast<unsigned>(std::countr_zero(dead_from)), origin::kNoByte};
  }
  const operand& dst = in.ops[0];
  const operand& d = dst.kind == operand::k_vec ? dst.elems[0] : dst;
  if (d.kind == operand::k_reg) set_marks(w, d.reg, ready, moved | control | dead_from, o);
  if (dst.kind == operand::k_vec && dst.elems.size() > 1 && dst.elems[1].kind == operand::k_reg) {
    set_marks(w, dst.elems[1].reg, ready, control, o);
  }
}

}  // namespace rungs::sim::detail
