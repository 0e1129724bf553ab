// Memory instructions: ld/st in every state space with the bounds, alignment and
// shared-memory race checks (happens-before over barrier epochs, see execute.cpp), and cp.async
// (issue, landing at a random legal moment, the waits that complete it).
#include "machine.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace rungs::sim::detail {

// ---- memory ----------------------------------------------------------------------------
inline bool executor::happens_before(const access_rec& a, std::uint32_t tid, const warp& w, unsigned lane) const {
  if (a.tid < 0 || static_cast<std::uint32_t>(a.tid) == tid) return true;
  if (a.epoch < epoch_) return true;
  const unsigned a_warp = static_cast<unsigned>(a.tid) / kLanes;
  if (a_warp == w.index) return w.pair_sync[static_cast<unsigned>(a.tid) % kLanes][lane] > a.wsc;
  return false;
}

[[noreturn]] void executor::race(const access_rec& first, bool first_write, std::uint32_t instr_index, std::uint32_t tid,
                       bool write, std::size_t offset) const {
  std::ostringstream os;
  os << "shared-memory race on byte " << offset << ": " << (first_write ? "write" : "read") << " at "
     << at(first.instr) << " by " << thread_name(static_cast<std::uint32_t>(first.tid)) << " and "
     << (write ? "write" : "read") << " at " << at(instr_index) << " by " << thread_name(tid)
     << ", with no barrier between them";
  fail(os.str());
}

// Whether an earlier access `a` and one by thread `tid` now conflict: not ordered by a barrier
// or warp sync, and not both strong (PTX ISA, "Data Race": morally strong accesses do not race).
inline bool executor::conflicts(const access_rec& a, std::uint32_t tid, const warp& w, unsigned lane, bool strong) const {
  return !happens_before(a, tid, w, lane) && !(strong && a.strong);
}

namespace {
// A write's cell keeps no readers. Each record is cleared from a constant (a chained
// `r1 = r2 = {}` compiled to narrow stores reread as one wide load: a store-forwarding stall,
// half of a cp.async issue's shadow time).
void forget_readers(shadow_byte& s) {
  static constexpr access_rec none{};
  s.r1 = none;
  s.r2 = none;
}
}  // namespace

// An access to a cell with a cp.async in flight.
void executor::shadow_finding(const shadow_byte& s, access_rec me, bool write, std::size_t byte) const {
  const std::uint32_t tid = static_cast<std::uint32_t>(me.tid);
  const std::uint32_t instr_index = me.instr;
  if (static_cast<std::uint32_t>(s.w.tid) == tid) {
    fail_at(instr_index, tid,
            "access to shared byte " + std::to_string(byte) + " of a cp.async (" + at(s.w.instr) +
                ") before the cp.async.wait_group that completes it");
  }
  race(s.w, true, instr_index, tid, write, byte);
}

// A read of an undefined cell (never written, or written with undefined lanes): a finding with
// uninitialized_at_load, else the instruction's loaded lanes are undefined (defined_after marks
// them, from the first such cell's origin).
void executor::undefined_read(const shadow_byte& s, access_rec me, std::size_t byte) {
  const std::uint32_t tid = static_cast<std::uint32_t>(me.tid);
  const std::uint32_t instr_index = me.instr;
  if (!track_defined_) fail_at(instr_index, tid, "read of never-written shared byte " + std::to_string(byte));
  if (!undef_read_) {
    undef_read_ = undef_after_ = true;
    undef_origin_ = s.w.tid < 0 ? origin{instr_index, tid, static_cast<std::uint32_t>(byte)} : shared_origin_[byte / 4];
  }
}

// One shadow cell (a byte, or a word whose bytes have the same records) accessed by `me`:
// the checks, then the record update. `byte` is the first byte it stands for (messages).
// `me` comes by value, in registers: a reference to the caller's freshly built record was
// reread as one wide load after narrow stores (a store-forwarding stall per access).
// Inline in its callers (shared_access), with its findings out of line (shadow_finding, race).
inline void executor::shadow_cell(shadow_byte& s, access_rec me, const warp& w, unsigned lane, bool write, bool strong,
                                  std::size_t byte) {
  const std::uint32_t tid = static_cast<std::uint32_t>(me.tid);
  const std::uint32_t instr_index = me.instr;
  if (s.pending) shadow_finding(s, me, write, byte);
  if (!write && sched_.uninitialized_check && (s.w.tid < 0 || s.w.undef)) undefined_read(s, me, byte);
  if (sched_.race_check) {
    if (conflicts(s.w, tid, w, lane, strong)) race(s.w, true, instr_index, tid, write, byte);
    if (write) {
      if (conflicts(s.r1, tid, w, lane, strong)) race(s.r1, false, instr_index, tid, true, byte);
      if (conflicts(s.r2, tid, w, lane, strong)) race(s.r2, false, instr_index, tid, true, byte);
    }
  }
  if (write) {
    s.w = me;  // (undefined lanes: defined_after marks their bytes)
    forget_readers(s);
  } else if (s.r1.tid < 0 || s.r1.tid == me.tid || s.r1.epoch < epoch_) {
    s.r1 = me;
  } else if (s.r2.tid < 0 || s.r2.tid == me.tid || s.r2.epoch < epoch_) {
    s.r2 = me;
  } else if (!strong && s.r2.strong) {
    s.r2 = me;  // keep weak readers: a later strong write races with them only
  }  // a third reader: any later writer differs from r1 or r2, which is enough to report
}

// Word `word`'s bytes as separate cells (made from the word's records when it was whole).
shadow_byte* executor::split_word(std::size_t word) {
  if (shadow_bytes_.size() < shadow_.size() * 4) shadow_bytes_.resize(shadow_.size() * 4);
  shadow_byte* b = &shadow_bytes_[word * 4];
  shadow_word& s = shadow_at(word);
  if (!s.split) {
    for (unsigned k = 0; k < 4; ++k) b[k] = s;
    s.split = true;
  }
  return b;
}

namespace {
bool same(const access_rec& a, const access_rec& b) {
  return a.tid == b.tid && a.strong == b.strong && a.undef == b.undef && a.instr == b.instr && a.epoch == b.epoch && a.wsc == b.wsc;
}
bool same(const shadow_byte& a, const shadow_byte& b) {
  return a.pending == b.pending && same(a.w, b.w) && same(a.r1, b.r1) && same(a.r2, b.r2);
}
}  // namespace

// A split word whose 4 bytes have the same records again (after a whole-word write) is whole.
void executor::unsplit_if_uniform(std::size_t word) {
  const shadow_byte* b = &shadow_bytes_[word * 4];
  if (!same(b[0], b[1]) || !same(b[0], b[2]) || !same(b[0], b[3])) return;
  shadow_word& s = shadow_at(word);
  static_cast<shadow_byte&>(s) = b[0];
  s.split = false;
}

void executor::shadow_access(warp& w, unsigned lane, std::uint32_t instr_index, std::uint64_t offset, std::size_t size,
                             bool write, bool strong) {
  const std::uint32_t tid = w.index * kLanes + lane;
  const access_rec me{static_cast<std::int16_t>(tid), strong, false, instr_index, epoch_, w.wsc[lane]};
  if (size < 4) {  // part of one word: its bytes
    shadow_byte* b = split_word(offset / 4);
    for (std::size_t k = 0; k < size; ++k) shadow_cell(b[offset % 4 + k], me, w, lane, write, strong, offset + k);
    return;
  }
  for (std::size_t word = offset / 4; word < (offset + size) / 4; ++word) {  // whole words (aligned to size)
    shadow_word& s = shadow_at(word);
    if (!s.split) {
      shadow_cell(s, me, w, lane, write, strong, word * 4);
      continue;
    }
    shadow_byte* b = &shadow_bytes_[word * 4];
    for (unsigned k = 0; k < 4; ++k) shadow_cell(b[k], me, w, lane, write, strong, word * 4 + k);
    if (write) unsplit_if_uniform(word);
  }
}

// The shadow's checks of a warp's shared accesses of `size` bytes at addr[l] (in bounds and
// aligned): a 4-byte access (most of them) is one whole word's cell inline, anything else
// shadow_access.
void executor::shadow_lanes(warp& w, std::uint32_t instr_index, std::uint32_t mask, const std::uint64_t* addr,
                            std::size_t size, bool write, bool strong) {
  if (size != 4) {
    for_lanes(mask, [&](unsigned l) { shadow_access(w, l, instr_index, addr[l], size, write, strong); });
    return;
  }
  const auto lanes = [&](auto is_write) {
    for_lanes(mask, [&](unsigned l) {
      const std::size_t word = addr[l] / 4;
      shadow_word& s = shadow_at(word);
      if (s.split) return shadow_access(w, l, instr_index, addr[l], size, is_write, strong);
      const access_rec me{static_cast<std::int16_t>(w.index * kLanes + l), strong, false, instr_index, epoch_, w.wsc[l]};
      shadow_cell(s, me, w, l, is_write, strong, word * 4);
    });
  };
  if (write) lanes(std::true_type{});
  else lanes(std::false_type{});
}

// The findings of the checks below, out of line (cold): building their messages inline made
// every access's frame large (the checks run per lane).
void executor::shared_bounds_finding(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t offset,
                                     std::size_t size) const {
  if (offset + size > shared_.size() || offset + size < offset) {
    fail_at(instr_index, tid,
            "shared-memory access [" + std::to_string(offset) + ", +" + std::to_string(size) +
                ") outside the block's " + std::to_string(shared_.size()) + " bytes");
  }
  fail_at(instr_index, tid, "misaligned shared-memory access at " + std::to_string(offset));
}

void executor::global_finding(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t addr, std::size_t size) const {
  if (misaligned(addr, size)) {
    fail_at(instr_index, tid, "misaligned global access of " + std::to_string(size) + " bytes at 0x" + hex64(addr));
  }
  fail_at(instr_index, tid,
          "global access of " + std::to_string(size) + " bytes at 0x" + hex64(addr) + " outside every live allocation");
}

bool executor::global_range_valid(std::uint64_t addr, std::size_t size) const {
  for (const auto& v : m_.variables) {  // the module's own .global/.const variables
    const auto base = reinterpret_cast<std::uintptr_t>(v.data.get());
    if (addr >= base && addr + size <= base + v.size) return true;
  }
  return memory_.valid(addr, size);
}

void executor::global_check(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t addr, std::size_t size) const {
  if (misaligned(addr, size) || !global_range_valid(addr, size)) global_finding(instr_index, tid, addr, size);
}

namespace {
// The span [lo, hi) of the lanes' accesses of `size(l)` bytes at `addr(l)` (size 0: none), and
// whether every one is aligned to its size: a warp's global accesses checked at once where the
// span lies in one allocation (executor::global_range_valid).
template <class A, class S>
bool aligned_span(std::uint32_t mask, A&& addr, S&& size, std::uint64_t& lo, std::uint64_t& hi) {
  lo = ~std::uint64_t{0};
  hi = 0;
  bool aligned = true;
  for_lanes(mask, [&](unsigned l) {
    const std::uint64_t a = addr(l), n = size(l);
    if (n == 0) return;
    aligned = aligned && !misaligned(a, n) && a + n >= a;
    lo = std::min(lo, a);
    hi = std::max(hi, a + n);
  });
  return aligned;
}
}  // namespace

void executor::cp_async_finding(std::uint32_t pc, std::uint32_t tid, std::uint32_t size, std::uint32_t src_size,
                                std::uint32_t dst, std::uint64_t src) const {
  if (size != 4 && size != 8 && size != 16) fail_at(pc, tid, "cp.async size must be 4, 8 or 16");
  if (src_size > size) {
    fail_at(pc, tid, "cp.async src-size " + std::to_string(src_size) + " exceeds cp-size " + std::to_string(size));
  }
  if (dst + std::uint64_t{size} > shared_.size() || misaligned(dst, size)) {
    fail_at(pc, tid, "cp.async destination " + std::to_string(dst) + " misaligned or outside shared memory");
  }
  fail_at(pc, tid, "misaligned cp.async source 0x" + hex64(src));
}

unsigned char* executor::local_at(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t offset, std::size_t size) {
  if (offset + size > f_.local_bytes || offset + size < offset) {
    fail_at(instr_index, tid, "local-memory access at " + std::to_string(offset) + " outside the thread's " +
                                  std::to_string(f_.local_bytes) + " bytes");
  }
  return local_.data() + std::size_t{tid} * f_.local_bytes + offset;
}

unsigned char* executor::generic_at(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t addr, std::size_t size) {
  if (in_local_window(addr)) return local_at(instr_index, tid, addr - kLocalWindow, size);
  global_check(instr_index, tid, addr, size);
  parallel_read(addr, size);  // (its callers read: device printf's arguments and strings)
  return reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(addr));
}

namespace {
// The first `n` (0, 1, 2, 4 or 8) bytes of a little-endian value: copies of a size known to the
// compiler (a memcpy of a run-time size is a library call, a tenth of a checked launch).
std::uint64_t load_bytes(const unsigned char* p, std::size_t n) {
  switch (n) {
    case 0: return 0;
    case 1: return *p;
    case 2: { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
    case 4: { std::uint32_t v; std::memcpy(&v, p, 4); return v; }
    default: { std::uint64_t v; std::memcpy(&v, p, 8); return v; }
  }
}
void store_bytes(unsigned char* p, std::uint64_t v, std::size_t n) {
  switch (n) {
    case 0: return;
    case 1: *p = static_cast<unsigned char>(v); return;
    case 2: { const auto x = static_cast<std::uint16_t>(v); std::memcpy(p, &x, 2); return; }
    case 4: { const auto x = static_cast<std::uint32_t>(v); std::memcpy(p, &x, 4); return; }
    default: std::memcpy(p, &v, 8); return;
  }
}

// The data of a warp's checked shared ld/st: `n` elements of E bytes per lane at shared + addr[l].
struct shared_lanes {
  unsigned char* shared;
  const std::uint64_t* addr;
  std::uint32_t mask;
  unsigned n;
  bool load, sign;
  std::uint64_t* const* vregs;  // per element: its register's lanes (null: an immediate or a sink)
  const std::uint64_t* vimm;
  template <std::size_t E>
  void move() const {
    for_mask(mask, [&](unsigned l) {
      unsigned char* p = shared + addr[l];
      for (unsigned e = 0; e < n; ++e) {
        if (load) {
          std::uint64_t v = load_bytes(p + e * E, E);
          if (sign) v = static_cast<std::uint64_t>(sext(v, E * 8));
          if (vregs[e]) vregs[e][l] = v;
        } else {
          store_bytes(p + e * E, vregs[e] ? vregs[e][l] : vimm[e], E);
        }
      }
    });
  }
};

// The distinct sectors of one instruction's lanes, sorted at the front of `s` (lanes mostly
// touch ascending addresses: then no sort is needed).
unsigned distinct_sectors(std::uint64_t* s, unsigned n) {
  if (!std::is_sorted(s, s + n)) std::sort(s, s + n);
  return static_cast<unsigned>(std::unique(s, s + n) - s);
}
}  // namespace

// ld/st of one lane: `n` elements of `esize` bytes at `addr` in space `sp`.
void executor::memory_op(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const bool load = in.code == op::ld;
  const operand& addr_op = in.ops[load ? 1 : 0];
  const operand& val_op = in.ops[load ? 0 : 1];
  const unsigned bits = type_bits(in.type);
  const std::size_t esize = bits / 8;
  const unsigned n = in.vec;
  const std::size_t total = esize * n;
  const bool sign = is_signed(in.type);
  if (n > 4) lane_io{*this, w, in, pc, mask}.no("a vector of more than 4 elements");
  // Each element's value register resolved once (null: an immediate, or a sink `_`).
  std::uint64_t* vregs[4] = {};
  std::uint64_t vimm[4] = {};
  for (unsigned e = 0; e < n; ++e) {
    const operand& r = val_op.kind == operand::k_vec ? val_op.elems[e] : val_op;
    if (r.kind == operand::k_reg) vregs[e] = w.regs.data() + std::size_t{r.reg} * kLanes;
    else vimm[e] = r.imm;
  }
  if (in.where == space::shared && (esize == 1 || esize == 2 || esize == 4 || esize == 8)) {
    // A warp's shared accesses: the addresses and bounds of every lane first (a loop without a
    // branch per lane), the shadow's checks lane by lane, then the data with the element size
    // known to the compiler. A lane out of bounds or misaligned takes the lane-by-lane way below,
    // which reports it. (A finding ends the launch, so which lanes moved data first is not seen.)
    std::uint64_t addr[kLanes];
    const std::uint64_t* base_reg = addr_op.has_base ? w.regs.data() + std::size_t{addr_op.reg} * kLanes : nullptr;
    const std::uint64_t limit = shared_.size();
    bool bad = false;
    for_mask(mask, [&](unsigned l) {
      const std::uint64_t a = (base_reg ? base_reg[l] : 0) + addr_op.imm;
      addr[l] = a;
      bad |= (a + total > limit) | (a + total < a) | ((a & (total - 1)) != 0);
    });
    if (!bad && (total & (total - 1)) == 0) {  // (sizes are powers of two; any other goes lane by lane)
      if (shadow_on_) {
        for_lanes(mask, [&](unsigned l) { prefetch_shadow(addr[l], total); });
        shadow_lanes(w, pc, mask, addr, total, !load, in.order != mem_order::weak);
      }
      const shared_lanes lanes{shared_.data(), addr, mask, n, load, sign, vregs, vimm};
      switch (esize) {
        case 1: return lanes.move<1>();
        case 2: return lanes.move<2>();
        case 4: return lanes.move<4>();
        default: return lanes.move<8>();
      }
    }
  }
  if (in.where == space::shared && shadow_on_) {
    for_lanes(mask, [&](unsigned l) { prefetch_shadow(address(w, addr_op, l), total); });
  }
  // Global lanes checked at once where their span lies in one allocation (else lane by lane).
  bool globals_checked = false;
  if (in.where == space::global || in.where == space::generic || in.where == space::none) {
    std::uint64_t lo = 0, hi = 0;
    bool local = false;
    const bool aligned = aligned_span(mask, [&](unsigned l) {
      const std::uint64_t a = address(w, addr_op, l);
      local = local || in_local_window(a);
      return a;
    }, [&](unsigned) { return total; }, lo, hi);
    globals_checked = aligned && !local && lo < hi && global_range_valid(lo, hi - lo);
  }
  std::uint64_t sectors[kLanes];
  unsigned nsectors = 0;
  for_lanes(mask, [&](unsigned l) {
    const std::uint32_t tid = w.index * kLanes + l;
    const std::uint64_t a = address(w, addr_op, l);
    unsigned char* base = nullptr;
    bool global = false;  // (its bytes moved by load_global and store_global)
    switch (in.where) {
      case space::generic:
      case space::none:
        if (in_local_window(a)) {
          base = generic_at(pc, tid, a, total);
          break;
        }
        if (in_shared_window(a)) {  // checked and race-tracked as ld/st.shared
          shared_access(w, l, pc, a - kSharedWindow, total, !load, in.order != mem_order::weak);
          base = shared_.data() + (a - kSharedWindow);
          break;
        }
        [[fallthrough]];
      case space::global:
        if (!globals_checked) global_check(pc, tid, a, total);
        base = reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(a));
        global = true;
        sectors[nsectors++] = a / 32;
        if (load) parallel_read(a, total);
        else parallel_write(a, total);
        if (fence_check_) {
          if (load) check_published(pc, tid, a, total);
          else if (in.order == mem_order::weak) note_weak_store(tid, a, total);
          else if (in.order == mem_order::release) publish(tid);
        }
        break;
      case space::shared:
        shared_access(w, l, pc, a, total, !load, in.order != mem_order::weak);
        base = shared_.data() + a;
        break;
      case space::param:
        if (!load) fail_at(pc, tid, "st.param is not implemented");
        if (a + total > f_.param_bytes || a + total < a) {
          fail_at(pc, tid, "ld.param outside the " + std::to_string(f_.param_bytes) + " parameter bytes");
        }
        base = const_cast<unsigned char*>(params_) + a;
        break;
      case space::local:
        if (misaligned(a, esize)) fail_at(pc, tid, "misaligned local access");
        base = local_at(pc, tid, a, total);
        break;
    }
    for (unsigned e = 0; e < n; ++e) {
      if (load) {
        std::uint64_t v = global ? load_global(base + e * esize, esize) : load_bytes(base + e * esize, esize);
        if (sign) v = static_cast<std::uint64_t>(sext(v, bits));
        if (vregs[e]) vregs[e][l] = v;
      } else if (global) {
        store_global(base + e * esize, vregs[e] ? vregs[e][l] : vimm[e], esize);
      } else {
        store_bytes(base + e * esize, vregs[e] ? vregs[e][l] : vimm[e], esize);
      }
    }
  });
  if (nsectors > 0) count_global(load, sectors, nsectors, total * nsectors);
}

// One warp instruction's global traffic: `bytes` requested by its lanes, in the sectors
// `sectors[0 .. n)` (sorted and made distinct in place).
void executor::count_global(bool load, std::uint64_t* sectors, unsigned n, std::uint64_t bytes) {
  const unsigned distinct = distinct_sectors(sectors, n);
  auto& set = load ? sectors_read_ : sectors_written_;
  set.insert(sectors, sectors + distinct);
  if (load) {
    result_.global.bytes_read += bytes;
    result_.global.sector_reads_total += distinct;
  } else {
    result_.global.bytes_written += bytes;
  }
}

// ---- cp.async ------------------------------------------------------------------------
void executor::cp_async(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  if (shadow_on_) {
    for_lanes(mask, [&](unsigned l) { prefetch_shadow(address(w, in.ops[0], l), 16); });
  }
  const auto src_size_of = [&](unsigned l) {
    return in.ops.size() > 3 ? static_cast<std::uint32_t>(get(w, in.ops[3], l)) : static_cast<std::uint32_t>(get(w, in.ops[2], l));
  };
  std::uint64_t lo = 0, hi = 0;
  const bool aligned = aligned_span(mask, [&](unsigned l) { return address(w, in.ops[1], l); },
                                    [&](unsigned l) { return std::uint64_t{src_size_of(l)}; }, lo, hi);
  const bool sources_checked = aligned && (lo >= hi || global_range_valid(lo, hi - lo));
  std::uint64_t sectors[kLanes];
  unsigned nsectors = 0;
  for_lanes(mask, [&](unsigned l) {
    const std::uint32_t tid = w.index * kLanes + l;
    copy_op c;
    c.dst = static_cast<std::uint32_t>(address(w, in.ops[0], l));
    c.src = address(w, in.ops[1], l);
    const auto size = static_cast<std::uint32_t>(get(w, in.ops[2], l));
    const std::uint32_t src_size = in.ops.size() > 3 ? static_cast<std::uint32_t>(get(w, in.ops[3], l)) : size;
    if ((size != 4 && size != 8 && size != 16) || src_size > size || c.dst + std::uint64_t{size} > shared_.size() ||
        misaligned(c.dst, size) || (src_size > 0 && misaligned(c.src, size))) {
      cp_async_finding(pc, tid, size, src_size, c.dst, c.src);
    }
    c.size = static_cast<std::uint8_t>(size);
    c.src_size = static_cast<std::uint8_t>(src_size);
    if (c.src_size > 0) {
      if (!sources_checked) global_check(pc, tid, c.src, c.src_size);
      // The copy lands later (land): start reading its source now (its cache misses were most
      // of the landing's time). A hint only: the data are still read when the copy lands.
      __builtin_prefetch(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(c.src)));
      parallel_read(c.src, c.src_size);
      if (fence_check_) check_published(pc, tid, c.src, c.src_size);
      sectors[nsectors++] = c.src / 32;
      result_.global.bytes_read += c.src_size;
      result_.global.async_bytes_read += c.src_size;
    }
    c.tid = static_cast<std::uint16_t>(tid);
    c.instr = pc;
    c.group = async_[tid].open_group;
    c.epoch = epoch_;
    if (shadow_on_) issue_shadow(w, l, c);
    c.slot = static_cast<std::uint32_t>(unlanded_.size());
    std::uint32_t index = 0;
    if (free_copies_.empty()) {
      index = static_cast<std::uint32_t>(copies_.size());
      copies_.push_back(c);
    } else {
      index = free_copies_.back();
      free_copies_.pop_back();
      copies_[index] = c;
    }
    async_[tid].pending.push_back(index);
    unlanded_.push_back(index);
  });
  if (nsectors > 0) {
    const unsigned distinct = distinct_sectors(sectors, nsectors);
    sectors_read_.insert(sectors, sectors + distinct);
    async_sectors_.insert(sectors, sectors + distinct);
    result_.global.sector_reads_total += distinct;
  }
}

// land, issue_shadow and complete run once per lane copy: inline in their callers (their calls,
// registers saved and restored each time, were about 2% of a checked launch).
void executor::land_random() {
  land(unlanded_[draw_below(unlanded_.size())]);
}

[[gnu::always_inline]] inline void executor::land(std::uint32_t index) {
  copy_op& c = copies_[index];
  if (c.landed()) return;
  // Out of the unlanded list in O(1): the last entry takes its slot (a scan of the list at
  // every wait was 2% of a checked launch).
  const std::uint32_t last = unlanded_.back();
  unlanded_[c.slot] = last;
  copies_[last].slot = c.slot;
  unlanded_.pop_back();
  c.slot = copy_op::kLanded;
  unsigned char* dst = shared_.data() + c.dst;
  const auto* src = reinterpret_cast<const unsigned char*>(static_cast<std::uintptr_t>(c.src));
  // Whole copies of 16, 8 or 4 bytes as loads of a size the compiler knows (a memcpy of a
  // run-time size is a library call, 2% of a checked decode launch); the source is global memory
  // (load_global), aligned to the copy's size (checked at issue).
  std::uint64_t v[2];
  switch (c.src_size == c.size ? c.size : 0) {
    case 16:
      v[0] = load_global(src, 8), v[1] = load_global(src + 8, 8);
      std::memcpy(dst, v, 16);
      return;
    case 8: v[0] = load_global(src, 8), std::memcpy(dst, v, 8); return;
    case 4: {
      const auto x = static_cast<std::uint32_t>(load_global(src, 4));
      std::memcpy(dst, &x, 4);
      return;
    }
    default: break;
  }
  for (unsigned k = 0; k < c.src_size; ++k) dst[k] = static_cast<unsigned char>(load_global(src + k, 1));
  std::memset(dst + c.src_size, 0, c.size - c.src_size);
}

// From its issue until the wait that completes it, a copy's destination is "pending": any
// access to it by another thread is a race, and by the issuing thread a read of data that
// may not have landed. The issue itself must be ordered after every earlier access by other
// threads (a barrier between them).
[[gnu::always_inline]] inline void executor::issue_shadow(const warp& w, unsigned lane, const copy_op& c) {
  const access_rec me{static_cast<std::int16_t>(c.tid), false, false, c.instr, c.epoch, w.wsc[lane]};
  const auto issue = [&](shadow_byte& s, std::size_t byte) {
    if (sched_.race_check) {
      if (s.pending && static_cast<std::uint32_t>(s.w.tid) != c.tid) race(s.w, true, c.instr, c.tid, true, byte);
      if (!happens_before(s.w, c.tid, w, lane)) race(s.w, true, c.instr, c.tid, true, byte);
      if (!happens_before(s.r1, c.tid, w, lane)) race(s.r1, false, c.instr, c.tid, true, byte);
      if (!happens_before(s.r2, c.tid, w, lane)) race(s.r2, false, c.instr, c.tid, true, byte);
    }
    s.w = me;
    forget_readers(s);
    s.pending = true;
  };
  // The destination is whole words (4, 8 or 16 bytes, aligned to its size).
  for (std::uint32_t word = c.dst / 4; word < (c.dst + c.size) / 4; ++word) {
    shadow_word& s = shadow_at(word);
    if (!s.split) {
      issue(s, std::size_t{word} * 4);
      continue;
    }
    for (unsigned k = 0; k < 4; ++k) issue(shadow_bytes_[std::size_t{word} * 4 + k], std::size_t{word} * 4 + k);
    unsplit_if_uniform(word);
  }
}

// The issuing thread's wait completes copies: they are landed now and ordered before what
// follows the thread's next barrier (or warp sync).
[[gnu::always_inline]] inline void executor::complete(std::uint32_t index, const warp& w, unsigned lane) {
  land(index);
  if (!shadow_on_) return;
  const copy_op& c = copies_[index];
  const auto done = [&](shadow_byte& s) {
    if (s.pending && static_cast<std::uint32_t>(s.w.tid) == c.tid && s.w.instr == c.instr) {
      s.pending = false;
      s.w.epoch = epoch_;
      s.w.wsc = w.wsc[lane];
    }
  };
  for (std::uint32_t word = c.dst / 4; word < (c.dst + c.size) / 4; ++word) {
    shadow_word& s = shadow_at(word);
    if (!s.split) {
      done(s);
      continue;
    }
    for (unsigned k = 0; k < 4; ++k) done(shadow_bytes_[std::size_t{word} * 4 + k]);
  }
}

void executor::wait_group(warp& w, std::uint32_t mask, std::uint64_t n_pending, bool commit_first) {
  // A thread's pending copies are in issue order, so their groups never decrease (a copy takes
  // the open group, which only grows): the copies a wait completes are a prefix of the list, and
  // the first copy of a later group ends it. Neither the walks nor the prefetches read the
  // entries of the copies that stay in flight (half of them at a wait_group 1; each a cache miss).
  std::uint32_t done[kLanes];
  for_lanes(mask, [&](unsigned l) {
    thread_async& t = async_[w.index * kLanes + l];
    if (commit_first) ++t.open_group;
    const std::uint64_t limit = t.open_group >= n_pending ? t.open_group - n_pending : 0;
    std::uint32_t n = 0;
    while (n < t.pending.size() && copies_[t.pending[n]].group < limit) ++n;
    done[l] = n;
  });
  if (shadow_on_) {  // the shadow words of the copies this wait completes, requested first
    for_lanes(mask, [&](unsigned l) {
      const std::vector<std::uint32_t>& pending = async_[w.index * kLanes + l].pending;
      for (std::uint32_t k = 0; k < done[l]; ++k) prefetch_shadow(copies_[pending[k]].dst, copies_[pending[k]].size);
    });
  }
  for_lanes(mask, [&](unsigned l) {
    thread_async& t = async_[w.index * kLanes + l];
    for (std::uint32_t k = 0; k < done[l]; ++k) {
      const std::uint32_t index = t.pending[k];
      complete(index, w, l);
      free_copies_.push_back(index);  // nothing refers to a completed copy: its entry is reused
    }
    t.pending.erase(t.pending.begin(), t.pending.begin() + done[l]);
  });
}

}  // namespace rungs::sim::detail

namespace rungs::sim::detail {

// ---- handlers ----------------------------------------------------------------------------
// Generic addresses are global ones, a thread's local bytes in the local window (cvta.local) or
// the CTA's shared bytes in the shared window (cvta.shared), so a generic access outside every
// live allocation and both windows is reported as a bad global access.
void executor::exec_ld_st(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  memory_op(w, in, pc, mask);
  if (undef_after_) defined_after(w, in, pc, mask);  // it read or stored undefined shared bytes
}

// The bytes an atom/red of `lane` reads and writes: checked as a global access, or as a strong
// shared read and write (the race check: two atomics do not race; an atomic and a plain access do).
unsigned char* executor::atomic_target(warp& w, const instr& in, std::uint32_t pc, unsigned lane, std::uint64_t addr,
                                       std::size_t size) {
  if (in.where == space::shared || (in.where != space::global && in_shared_window(addr))) {
    if (in.where != space::shared) addr -= kSharedWindow;  // a generic atomic on shared memory
    shared_access(w, lane, pc, addr, size, false, true);
    if (undef_read_) {  // a read-modify-write of garbage: reported here, whatever its result's use
      undef_read_ = undef_after_ = false;
      undefined_use(pc, w.index * kLanes + lane, "the shared bytes the atomic reads and modifies", undef_origin_);
    }
    shared_access(w, lane, pc, addr, size, true, true);
    return shared_.data() + addr;
  }
  const std::uint32_t tid = w.index * kLanes + lane;
  global_check(pc, tid, addr, size);
  // (A parallel launch's kernel has no global atomics: blocks_may_run_in_parallel.)
  if (par_ != nullptr) throw parallel_abort{};
  if (fence_check_) {
    if (in.order == mem_order::release || in.order == mem_order::acq_rel) publish(tid);
    check_published(pc, tid, addr, size);
  }
  result_.global.bytes_read += size;
  result_.global.bytes_written += size;
  return reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(addr));
}

namespace {
// One atomic operation on `old` (PTX ISA: atom): the new value stored.
std::uint64_t atomic_apply(const instr& in, std::uint64_t old, std::uint64_t b, std::uint64_t c) {
  const unsigned bits = type_bits(in.type);
  const std::uint64_t wm = width_mask(bits);
  const bool sgn = is_signed(in.type);
  auto half_add = [&](std::uint16_t x, std::uint16_t y) -> std::uint16_t {
    // f16/bf16 sums are exact in f32 and rounded once more to 16 bits: innocuous double rounding
    // (24 >= 2 * 11 + 2), so this is the correctly rounded sum; .noftz keeps subnormals.
    const bool bf = in.type == vtype::bf16 || in.type == vtype::bf16x2;
    const float r = as_f32(bf ? f32_from_bf16(x) : f32_from_f16(x)) + as_f32(bf ? f32_from_bf16(y) : f32_from_f16(y));
    return bf ? bf16_from_f32(r) : f16_from_f32(r);
  };
  switch (in.aop) {
    case atom_op::add:
      switch (in.type) {
        case vtype::f32:  // atom.add.f32 rounds to nearest even and flushes subnormals (PTX ISA: atom)
          return f32_out(f32_in(old, true) + f32_in(b, true), true, false);
        case vtype::f64: return f64_out(as_f64(old) + as_f64(b));
        case vtype::f16:
        case vtype::bf16: return half_add(static_cast<std::uint16_t>(old), static_cast<std::uint16_t>(b));
        case vtype::f16x2:
        case vtype::bf16x2:
          return half_add(static_cast<std::uint16_t>(old), static_cast<std::uint16_t>(b)) |
                 (std::uint64_t{half_add(static_cast<std::uint16_t>(old >> 16), static_cast<std::uint16_t>(b >> 16))} << 16);
        default: return (old + b) & wm;
      }
    case atom_op::min:
    case atom_op::max: {
      const bool is_max = in.aop == atom_op::max;
      if (sgn) {
        const std::int64_t x = sext(old, bits), y = sext(b, bits);
        return static_cast<std::uint64_t>(is_max ? std::max(x, y) : std::min(x, y)) & wm;
      }
      return is_max ? std::max(old & wm, b & wm) : std::min(old & wm, b & wm);
    }
    case atom_op::inc: return (old & wm) >= (b & wm) ? 0 : (old + 1) & wm;
    case atom_op::dec: return ((old & wm) == 0 || (old & wm) > (b & wm)) ? b & wm : (old - 1) & wm;
    case atom_op::exch: return b & wm;
    case atom_op::cas: return (old & wm) == (b & wm) ? c & wm : old & wm;
    case atom_op::and_: return old & b & wm;
    case atom_op::or_: return (old | b) & wm;
    case atom_op::xor_: return (old ^ b) & wm;
  }
  return old;
}
}  // namespace

// atom d, [a], b{, c} and red [a], b: the lanes of the warp one after another, each
// read-modify-write indivisible (so racing atomics are exact, and a plain read-modify-write
// racing with them is reported by the race check in shared memory).
void executor::exec_atom(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const bool red = in.code == op::red;
  const operand& addr = in.ops[red ? 0 : 1];
  const std::size_t size = type_bits(in.type) / 8;
  for_lanes(mask, [&](unsigned l) {
    unsigned char* p = atomic_target(w, in, pc, l, address(w, addr, l), size);
    std::uint64_t old = 0;
    std::memcpy(&old, p, size);
    const std::uint64_t b = get(w, in.ops[red ? 1 : 2], l);
    const std::uint64_t c = in.aop == atom_op::cas ? get(w, in.ops[3], l) : 0;
    const std::uint64_t v = atomic_apply(in, old, b, c);
    std::memcpy(p, &v, size);
    if (!red) set(w, in.ops[0], l, is_signed(in.type) ? static_cast<std::uint64_t>(sext(old, type_bits(in.type))) : old);
  });
}

// fence and membar: every access already takes effect in one sequentially consistent order; one
// of gpu or sys scope publishes the thread's weak global stores to other blocks.
void executor::exec_fence(warp& w, const instr& in, std::uint32_t, std::uint32_t mask) {
  if (!in.publishes || !fence_check_) return;
  for_lanes(mask, [&](unsigned l) { publish(w.index * kLanes + l); });
}

// ---- publication of global stores between blocks -------------------------------------------
void executor::note_weak_store(std::uint32_t tid, std::uint64_t addr, std::size_t bytes) {
  const std::uint64_t record = (cta_index_ + 1) << kRecordCtaShift | std::uint64_t{publications_[tid]} << 10 | tid;
  const std::uint64_t first = addr / 4, last = (addr + bytes - 1) / 4;
  for (std::uint64_t word = first; word <= last; ++word) weak_writes_.at(word) = record;
  weak_lo_ = std::min(weak_lo_, first);
  weak_hi_ = std::max(weak_hi_, last);
}

void executor::publish(std::uint32_t tid) {
  if (publications_[tid] < kMostPublications) ++publications_[tid];
}

// At a block's end: the publications of its threads that published, for the stores they made.
void executor::close_publications() {
  for (std::uint32_t tid = 0; tid < threads_; ++tid) {
    if (publications_[tid] != 0) published_by_[cta_index_ << 10 | tid] = publications_[tid];
  }
}

void executor::check_published(std::uint32_t pc, std::uint32_t tid, std::uint64_t addr, std::size_t bytes) const {
  const std::uint64_t first = addr / 4, last = (addr + bytes - 1) / 4;
  if (last < weak_lo_ || first > weak_hi_) return;
  for (std::uint64_t word = first; word <= last; ++word) {
    const std::uint64_t record = weak_writes_.find(word);
    if (record == 0) continue;
    const std::uint64_t writer = (record >> kRecordCtaShift) - 1;
    if (writer == cta_index_) continue;  // its own block: bar.sync orders it
    const auto before = static_cast<std::uint32_t>(record >> 10 & kMostPublications);
    const auto writer_tid = static_cast<std::uint32_t>(record & 1023);
    const std::uint16_t* after = published_by_.find(writer << 10 | writer_tid);
    if (before == kMostPublications || (after != nullptr && *after > before)) continue;  // published since
    std::ostringstream os;
    os << "global read of 0x" << std::hex << word * 4 << std::dec << ", written in this launch by thread ("
       << writer_tid % block_.x << "," << writer_tid / block_.x % block_.y << "," << writer_tid / (block_.x * block_.y)
       << ") of block (" << writer % grid_.x << "," << writer / grid_.x % grid_.y << ","
       << writer / (std::uint64_t{grid_.x} * grid_.y)
       << ") with a weak store its writer never published (no __threadfence / fence of gpu scope, and no release, "
          "after the store): another block may read a stale value";
    fail_at(pc, tid, os.str());
  }
}

void executor::exec_cp_async(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) { cp_async(w, in, pc, mask); }

void executor::exec_cp_async_commit(warp& w, const instr&, std::uint32_t, std::uint32_t mask) {
  for_lanes(mask, [&](unsigned l) { ++async_[w.index * kLanes + l].open_group; });
}

// cp.async.wait_group N (the N most recent groups may stay in flight) and cp.async.wait_all
// (commit, then wait for every group).
void executor::exec_cp_async_wait(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  if (in.code == op::cp_async_wait_all) return wait_group(w, mask, 0, true);
  if (in.ops[0].kind != operand::k_imm) lane_io{*this, w, in, pc, mask}.no("cp.async.wait_group needs an immediate");
  wait_group(w, mask, in.ops[0].imm, false);
}

}  // namespace rungs::sim::detail
