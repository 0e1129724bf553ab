// Executes a parsed PTX entry over a grid (executor.hpp). Model, also in docs/kernels.md:
//  - A CTA is a set of 32-lane warps. Each lane has its own PC; a warp issues the instruction
//    at the smallest PC of its runnable lanes for every lane at that PC (so lanes reconverge
//    where structured control flow joins), with per-lane guards.
//  - Warp-synchronous instructions (shfl.sync, bar.warp.sync) wait until every lane named by
//    each participant's member mask has reached the same instruction; a mask naming an exited
//    lane, or lanes that can never arrive, is a sim_error. bar.sync is a CTA barrier reached by
//    whole, converged warps; a barrier some threads can never reach is a sim_error.
//  - Adversarial mode (schedule::randomize): CTAs and warps run in a seeded random order with
//    random quanta, and each cp.async lands at a random moment between its issue and the
//    wait that covers it; registers start with random bits.
//  - Shared-memory race detection is happens-before with barrier epochs: two accesses by
//    different threads to one byte, at least one a write, race unless a bar.sync completed
//    between them, or both threads are in one warp and took part in one bar.warp.sync
//    (__syncwarp) between them. shfl.sync orders no memory (CUDA: "no memory barrier"), so it
//    does not count. A cp.async write spans [issue, completing wait]: it races with accesses
//    by other threads in the epochs of that span, and reading it before the issuing thread's
//    wait is reported too.
#include "numeric.hpp"
#include "ptx.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <random>
#include <sstream>
#include <unordered_set>

namespace rungs::sim {
namespace detail {
const function& entry_function(const module& m, std::string_view entry);
}
namespace {

using namespace detail;

constexpr unsigned kLanes = 32;

enum class lane_state : std::uint8_t { run, wait_warp, wait_bar, done, absent };

struct access_rec {
  std::int32_t tid = -1;   // thread (flat index in the CTA); -1: none
  std::uint32_t instr = 0;
  std::uint32_t epoch = 0;  // CTA barriers completed before the access
  std::uint32_t wsc = 0;    // the thread's warp-sync count at the access
};

struct shadow_byte {
  access_rec w, r1, r2;  // last write; up to two readers since it (distinct threads)
  bool pending = false;  // w is a cp.async that its thread has not waited for yet
};

struct copy_op {
  std::uint32_t dst = 0;
  std::uint64_t src = 0;
  std::uint32_t size = 0, src_size = 0;
  std::uint32_t tid = 0, instr = 0, group = 0, epoch = 0;
  bool landed = false;
};

struct warp {
  std::vector<std::uint64_t> regs;  // slot-major: regs[slot * 32 + lane]
  std::uint32_t pc[kLanes] = {};
  lane_state state[kLanes] = {};
  std::uint32_t wait_mask[kLanes] = {};
  std::uint32_t group_mask = 0, group_pc = 0;
  bool group_valid = false;
  bool diverged = false;  // running lanes outside the group
  std::uint32_t wsc[kLanes] = {};
  std::uint32_t pair_sync[kLanes][kLanes] = {};
  unsigned index = 0;
};

struct thread_async {
  std::uint32_t open_group = 0;
  std::vector<std::uint32_t> pending;  // indices into cta::copies
};

template <class F>
inline void for_lanes(std::uint32_t mask, F&& f) {
  for (; mask; mask &= mask - 1) f(static_cast<unsigned>(std::countr_zero(mask)));
}

inline std::uint64_t width_mask(unsigned bits) { return bits >= 64 ? ~0ull : ((1ull << bits) - 1); }

unsigned type_bits(vtype t) {
  switch (t) {
    case vtype::pred: return 1;
    case vtype::b8: case vtype::u8: case vtype::s8: return 8;
    case vtype::b16: case vtype::u16: case vtype::s16: case vtype::f16: case vtype::bf16: case vtype::e4m3x2:
    case vtype::e5m2x2: return 16;
    case vtype::b32: case vtype::u32: case vtype::s32: case vtype::f32: case vtype::f16x2: case vtype::bf16x2: return 32;
    case vtype::b64: case vtype::u64: case vtype::s64: case vtype::f64: return 64;
    case vtype::none: return 0;
  }
  return 0;
}
bool is_signed(vtype t) { return t == vtype::s8 || t == vtype::s16 || t == vtype::s32 || t == vtype::s64; }
inline std::int64_t sext(std::uint64_t v, unsigned bits) {
  return bits >= 64 ? static_cast<std::int64_t>(v)
                    : static_cast<std::int64_t>(v << (64 - bits)) >> (64 - bits);
}

class executor {
 public:
  executor(const module& m, const function& f, dim3s grid, dim3s block, std::size_t dynamic_shared, const void* params,
           const global_memory& memory, const schedule& sched)
      : m_(m), f_(f), grid_(grid), block_(block), params_(static_cast<const unsigned char*>(params)),
        memory_(memory), sched_(sched), rng_(sched.seed) {
    threads_ = block.x * block.y * block.z;
    shared_bytes_ = dynamic_shared > 0 ? f.dynamic_shared_offset + dynamic_shared : f.static_shared;
    shadow_on_ = sched.race_check || sched.uninitialized_check;
  }

  launch_result run() {
    std::vector<std::uint64_t> order;
    const std::uint64_t ctas = std::uint64_t{grid_.x} * grid_.y * grid_.z;
    for (std::uint64_t c = 0; c < ctas; ++c) order.push_back(c);
    if (sched_.randomize) {
      for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng_() % i]);
    }
    for (const std::uint64_t c : order) {
      run_cta({static_cast<unsigned>(c % grid_.x), static_cast<unsigned>(c / grid_.x % grid_.y),
               static_cast<unsigned>(c / (std::uint64_t{grid_.x} * grid_.y))});
    }
    result_.global.sectors_read = sectors_read_.size();
    result_.global.sectors_written = sectors_written_.size();
    result_.global.async_sectors_read = async_sectors_.size();
    return result_;
  }

 private:
  // ---- messages ---------------------------------------------------------------------------
  std::string thread_name(std::uint32_t tid) const {
    std::ostringstream os;
    os << "thread (" << tid % block_.x << "," << tid / block_.x % block_.y << "," << tid / (block_.x * block_.y)
       << ") of block (" << cta_.x << "," << cta_.y << "," << cta_.z << ")";
    return os.str();
  }
  std::string at(std::uint32_t instr_index) const {
    const instr& in = f_.code[instr_index];
    std::ostringstream os;
    os << "PTX line " << in.line << " `" << in.text << "`";
    const auto source = [&](std::uint32_t file, std::uint32_t line) {
      const auto f = m_.files.find(file);
      const std::string path = f == m_.files.end() ? "?" : f->second;
      return path.substr(path.find_last_of('/') + 1) + ":" + std::to_string(line);
    };
    if (in.src_line != 0) {
      os << " (" << source(in.src_file, in.src_line);
      if (in.call_line != 0) os << ", inlined at " << source(in.call_file, in.call_line);
      os << ")";
    }
    return os.str();
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw sim_error("kernel " + f_.name + " (module " + m_.name + "): " + what);
  }
  [[noreturn]] void fail_at(std::uint32_t instr_index, std::uint32_t tid, const std::string& what) const {
    fail(what + " at " + at(instr_index) + ", " + thread_name(tid));
  }

  // ---- CTA -------------------------------------------------------------------------------
  void run_cta(dim3s id) {
    cta_ = id;
    const unsigned nwarps = (threads_ + kLanes - 1) / kLanes;
    warps_.assign(nwarps, warp{});
    const std::size_t slots = f_.slots;
    for (unsigned wi = 0; wi < nwarps; ++wi) {
      warp& w = warps_[wi];
      w.index = wi;
      w.regs.assign(slots * kLanes, 0);
      if (sched_.randomize) {  // registers hold garbage on hardware; so do they here
        std::uint64_t x = rng_() | 1;
        for (auto& r : w.regs) {
          x ^= x << 13;
          x ^= x >> 7;
          x ^= x << 17;
          r = x;
        }
      }
      for (unsigned l = 0; l < kLanes; ++l) {
        const unsigned tid = wi * kLanes + l;
        w.state[l] = tid < threads_ ? lane_state::run : lane_state::absent;
        w.pc[l] = 0;
        for (const auto& [sp, slot] : f_.specials) {
          std::uint64_t v = 0;
          switch (sp) {
            case special::tid_x: v = tid % block_.x; break;
            case special::tid_y: v = tid / block_.x % block_.y; break;
            case special::tid_z: v = tid / (block_.x * block_.y); break;
            case special::ntid_x: v = block_.x; break;
            case special::ntid_y: v = block_.y; break;
            case special::ntid_z: v = block_.z; break;
            case special::ctaid_x: v = id.x; break;
            case special::ctaid_y: v = id.y; break;
            case special::ctaid_z: v = id.z; break;
            case special::nctaid_x: v = grid_.x; break;
            case special::nctaid_y: v = grid_.y; break;
            case special::nctaid_z: v = grid_.z; break;
            case special::laneid: v = l; break;
            case special::warpid: v = wi; break;
          }
          w.regs[slot * kLanes + l] = v;
        }
      }
    }
    shared_.assign(shared_bytes_, 0);
    if (sched_.randomize) {
      for (auto& b : shared_) b = static_cast<unsigned char>(rng_());
    }
    if (shadow_on_) shadow_.assign(shared_bytes_, shadow_byte{});
    local_.assign(std::size_t{threads_} * f_.local_bytes, 0);
    async_.assign(threads_, thread_async{});
    copies_.clear();
    unlanded_.clear();
    epoch_ = 0;
    bar_waiting_ = 0;
    live_ = threads_;
    bar_instr_ = 0;

    std::vector<unsigned> runnable;
    std::size_t rr = 0;
    for (;;) {
      runnable.clear();
      for (unsigned wi = 0; wi < nwarps; ++wi) {
        if (has_runnable(warps_[wi])) runnable.push_back(wi);
      }
      if (runnable.empty()) break;
      if (sched_.randomize) {
        warp& w = warps_[runnable[rng_() % runnable.size()]];
        const unsigned quantum = 1 + static_cast<unsigned>(rng_() % 48);
        for (unsigned q = 0; q < quantum && step(w); ++q) {
          if (!unlanded_.empty() && rng_() % 4 == 0) land_random();
        }
      } else {
        warp& w = warps_[runnable[rr++ % runnable.size()]];
        while (step(w)) {
        }
      }
    }
    if (live_ > 0) deadlock();
    // Copies never waited for still land (the data arrives after the thread has exited).
    while (!unlanded_.empty()) land_random();
  }

  static bool has_runnable(const warp& w) {
    for (unsigned l = 0; l < kLanes; ++l) {
      if (w.state[l] == lane_state::run) return true;
    }
    return false;
  }

  [[noreturn]] void deadlock() const {
    std::ostringstream os;
    os << "deadlock: no thread can proceed;";
    for (const warp& w : warps_) {
      for (unsigned l = 0; l < kLanes; ++l) {
        if (w.state[l] == lane_state::wait_warp) {
          os << " " << thread_name(w.index * kLanes + l) << " waits at " << at(w.pc[l]) << " for member mask 0x"
             << std::hex << w.wait_mask[l] << std::dec << ";";
          break;
        }
      }
    }
    if (bar_waiting_ > 0) os << " " << bar_waiting_ << " threads wait at bar.sync (" << at(bar_instr_) << ")";
    fail(os.str());
  }

  void regroup(warp& w) {
    std::uint32_t mask = 0, pc = ~0u;
    for (unsigned l = 0; l < kLanes; ++l) {
      if (w.state[l] != lane_state::run) continue;
      if (w.pc[l] < pc) {
        pc = w.pc[l];
        mask = 1u << l;
      } else if (w.pc[l] == pc) {
        mask |= 1u << l;
      }
    }
    w.group_mask = mask;
    w.group_pc = pc;
    w.group_valid = true;
    // While some running lanes are elsewhere, regroup after every instruction so that lanes
    // merge as soon as the group reaches their PC (reconvergence).
    std::uint32_t running = 0;
    for (unsigned l = 0; l < kLanes; ++l) {
      if (w.state[l] == lane_state::run) running |= 1u << l;
    }
    w.diverged = running != mask;
  }
  static void regroup_if_diverged(warp& w) {
    if (w.diverged) {
      write_back(w);
      w.group_valid = false;
    }
  }
  // The group's lanes keep their PC in group_pc while they run together; write it back
  // before they part.
  static void write_back(warp& w) {
    for_lanes(w.group_mask, [&](unsigned l) { w.pc[l] = w.group_pc; });
  }

  std::uint64_t get(const warp& w, const operand& o, unsigned l) const {
    return o.kind == operand::k_reg ? w.regs[o.reg * kLanes + l] : o.imm;
  }
  bool get_pred(const warp& w, const operand& o, unsigned l) const { return ((get(w, o, l) & 1) != 0) != o.negate; }
  static void set(warp& w, const operand& o, unsigned l, std::uint64_t v) { w.regs[o.reg * kLanes + l] = v; }

  // One warp instruction. False when the warp cannot go on (all lanes done or waiting).
  bool step(warp& w) {
    if (!w.group_valid) regroup(w);
    if (w.group_mask == 0) return false;
    const std::uint32_t pc = w.group_pc;
    const instr& in = f_.code[pc];
    std::uint32_t mask = w.group_mask;
    if (in.guard >= 0) {
      std::uint32_t g = 0;
      const std::uint64_t* p = &w.regs[static_cast<std::size_t>(in.guard) * kLanes];
      for_lanes(mask, [&](unsigned l) {
        if (((p[l] & 1) != 0) != in.guard_negate) g |= 1u << l;
      });
      mask = g;
    }
    ++result_.warp_instructions;
    switch (in.code) {
      case op::bra: {
        if (mask == w.group_mask || mask == 0) {
          w.group_pc = mask ? in.target : pc + 1;
          regroup_if_diverged(w);
        } else {
          for_lanes(w.group_mask, [&](unsigned l) { w.pc[l] = (mask >> l) & 1 ? in.target : pc + 1; });
          w.group_valid = false;
        }
        return true;
      }
      case op::ret:
      case op::exit: {
        if (mask == 0) {
          ++w.group_pc;
          regroup_if_diverged(w);
          return true;
        }
        write_back(w);
        for_lanes(w.group_mask, [&](unsigned l) {
          if ((mask >> l) & 1) {
            w.state[l] = lane_state::done;
            --live_;
          } else {
            w.pc[l] = pc + 1;
          }
        });
        w.group_valid = false;
        maybe_release_barrier();
        return true;
      }
      case op::bar_sync: return bar_sync(w, in, pc, mask);
      case op::shfl:
      case op::bar_warp_sync: return warp_sync(w, in, pc, mask);
      default: break;
    }
    if (mask != 0) execute(w, in, pc, mask);
    ++w.group_pc;
    regroup_if_diverged(w);
    return true;
  }

  // ---- barriers --------------------------------------------------------------------------
  bool bar_sync(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
    const std::uint32_t tid0 = w.index * kLanes + static_cast<unsigned>(std::countr_zero(w.group_mask));
    if (in.ops.size() != 1 || in.ops[0].kind != operand::k_imm || in.ops[0].imm != 0) {
      fail_at(pc, tid0, "bar.sync with a barrier other than 0 or a thread count is not implemented");
    }
    std::uint32_t live_mask = 0;
    for (unsigned l = 0; l < kLanes; ++l) {
      if (w.state[l] != lane_state::done && w.state[l] != lane_state::absent) live_mask |= 1u << l;
    }
    if (mask != live_mask) {
      fail_at(pc, tid0,
              "bar.sync (aligned) reached by part of a warp only (lanes 0x" + hex(mask) + " of live lanes 0x" +
                  hex(live_mask) + "): every thread must reach the same barrier");
    }
    write_back(w);
    for_lanes(mask, [&](unsigned l) {
      w.state[l] = lane_state::wait_bar;
      w.pc[l] = pc + 1;
    });
    w.group_valid = false;
    bar_waiting_ += static_cast<unsigned>(std::popcount(mask));
    bar_instr_ = pc;
    maybe_release_barrier();
    return false;
  }

  void maybe_release_barrier() {
    if (bar_waiting_ == 0 || bar_waiting_ != live_) return;
    if (live_ != threads_) {
      fail("bar.sync at " + at(bar_instr_) + " completes after " + std::to_string(threads_ - live_) +
           " threads of block (" + std::to_string(cta_.x) + "," + std::to_string(cta_.y) + "," +
           std::to_string(cta_.z) + ") exited: every thread must reach the barrier");
    }
    for (warp& x : warps_) {
      for (unsigned l = 0; l < kLanes; ++l) {
        if (x.state[l] == lane_state::wait_bar) x.state[l] = lane_state::run;
      }
      x.group_valid = false;
    }
    bar_waiting_ = 0;
    ++epoch_;
  }

  static std::string hex(std::uint32_t v) {
    std::ostringstream os;
    os << std::hex << v;
    return os.str();
  }

  bool warp_sync(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
    const operand& member = in.ops.back();
    std::uint32_t dead = 0;
    for (unsigned l = 0; l < kLanes; ++l) {
      if (w.state[l] == lane_state::done || w.state[l] == lane_state::absent) dead |= 1u << l;
    }
    std::uint32_t masks[kLanes];
    for_lanes(mask, [&](unsigned l) {
      masks[l] = static_cast<std::uint32_t>(get(w, member, l));
      const std::uint32_t tid = w.index * kLanes + l;
      if (!((masks[l] >> l) & 1)) fail_at(pc, tid, "member mask 0x" + hex(masks[l]) + " does not name the lane itself");
      if (masks[l] & dead) {
        fail_at(pc, tid, "member mask 0x" + hex(masks[l]) + " names exited or absent lanes 0x" + hex(masks[l] & dead));
      }
    });
    // Fast path: the whole group arrives and every mask is within it.
    std::uint32_t waiting = 0;
    for (unsigned l = 0; l < kLanes; ++l) {
      if (w.state[l] == lane_state::wait_warp && w.pc[l] == pc) {
        waiting |= 1u << l;
        masks[l] = w.wait_mask[l];
      }
    }
    const std::uint32_t arrived = mask | waiting;
    std::uint32_t ready = arrived;
    for (bool changed = true; changed;) {
      changed = false;
      for_lanes(ready, [&](unsigned l) {
        if (masks[l] & ~ready) {
          ready &= ~(1u << l);
          changed = true;
        }
      });
    }
    if (ready == w.group_mask && waiting == 0 && mask == w.group_mask) {
      sync_execute(w, in, pc, ready, masks);
      ++w.group_pc;
      regroup_if_diverged(w);
      return true;
    }
    write_back(w);
    // Lanes of the group whose guard is false step over the instruction.
    for_lanes(w.group_mask & ~mask, [&](unsigned l) { w.pc[l] = pc + 1; });
    if (ready) sync_execute(w, in, pc, ready, masks);
    for_lanes(arrived, [&](unsigned l) {
      if ((ready >> l) & 1) {
        w.state[l] = lane_state::run;
        w.pc[l] = pc + 1;
      } else {
        w.state[l] = lane_state::wait_warp;
        w.pc[l] = pc;
        w.wait_mask[l] = masks[l];
      }
    });
    w.group_valid = false;
    return true;
  }

  void sync_execute(warp& w, const instr& in, std::uint32_t pc, std::uint32_t ready, const std::uint32_t* masks) {
    if (in.code == op::bar_warp_sync) {
      for_lanes(ready, [&](unsigned l) { ++w.wsc[l]; });
      for_lanes(ready, [&](unsigned a) { for_lanes(ready, [&](unsigned b) { w.pair_sync[a][b] = w.wsc[a]; }); });
      return;
    }
    // shfl.sync d(|p), a, b, c, membermask (PTX ISA: shfl.sync)
    std::uint32_t src[kLanes];
    for_lanes(ready, [&](unsigned l) { src[l] = static_cast<std::uint32_t>(get(w, in.ops[1], l)); });
    const operand& dst = in.ops[0];
    const operand& d = dst.kind == operand::k_vec ? dst.elems[0] : dst;
    const operand* p = dst.kind == operand::k_vec && dst.elems.size() > 1 ? &dst.elems[1] : nullptr;
    for_lanes(ready, [&](unsigned lane) {
      const std::uint32_t b = static_cast<std::uint32_t>(get(w, in.ops[2], lane));
      const std::uint32_t c = static_cast<std::uint32_t>(get(w, in.ops[3], lane));
      const int bval = static_cast<int>(b & 0x1f);
      const int cval = static_cast<int>(c & 0x1f);
      const int segmask = static_cast<int>((c >> 8) & 0x1f);
      const int l = static_cast<int>(lane);
      const int max_lane = (l & segmask) | (cval & ~segmask);
      const int min_lane = l & segmask;
      int j = 0;
      bool pval = false;
      switch (in.mode) {
        case shfl_mode::up: j = l - bval; pval = j >= max_lane; break;
        case shfl_mode::down: j = l + bval; pval = j <= max_lane; break;
        case shfl_mode::bfly: j = l ^ bval; pval = j <= max_lane; break;
        case shfl_mode::idx: j = min_lane | (bval & ~segmask); pval = j <= max_lane; break;
      }
      if (!pval) j = l;
      if (!((ready >> j) & 1)) {
        fail_at(pc, w.index * kLanes + lane,
                "shfl.sync reads lane " + std::to_string(j) + ", which does not take part (member mask 0x" +
                    hex(masks[lane]) + "): the value is undefined");
      }
      set(w, d, lane, src[j]);
      if (p && p->kind == operand::k_reg) set(w, *p, lane, pval ? 1 : 0);
    });
  }

  // ---- memory ----------------------------------------------------------------------------
  bool happens_before(const access_rec& a, std::uint32_t tid, const warp& w, unsigned lane) const {
    if (a.tid < 0 || static_cast<std::uint32_t>(a.tid) == tid) return true;
    if (a.epoch < epoch_) return true;
    const unsigned a_warp = static_cast<unsigned>(a.tid) / kLanes;
    if (a_warp == w.index) return w.pair_sync[static_cast<unsigned>(a.tid) % kLanes][lane] > a.wsc;
    return false;
  }

  [[noreturn]] void race(const access_rec& first, bool first_write, std::uint32_t instr_index, std::uint32_t tid,
                         bool write, std::size_t offset) const {
    std::ostringstream os;
    os << "shared-memory race on byte " << offset << ": " << (first_write ? "write" : "read") << " at "
       << at(first.instr) << " by " << thread_name(static_cast<std::uint32_t>(first.tid)) << " and "
       << (write ? "write" : "read") << " at " << at(instr_index) << " by " << thread_name(tid)
       << ", with no barrier between them";
    fail(os.str());
  }

  void shared_access(warp& w, unsigned lane, std::uint32_t instr_index, std::uint64_t offset, std::size_t size,
                     bool write) {
    const std::uint32_t tid = w.index * kLanes + lane;
    if (offset + size > shared_.size() || offset + size < offset) {
      fail_at(instr_index, tid,
              "shared-memory access [" + std::to_string(offset) + ", +" + std::to_string(size) +
                  ") outside the block's " + std::to_string(shared_.size()) + " bytes");
    }
    if (offset % size != 0) fail_at(instr_index, tid, "misaligned shared-memory access at " + std::to_string(offset));
    if (!shadow_on_) return;
    const access_rec me{static_cast<std::int32_t>(tid), instr_index, epoch_, w.wsc[lane]};
    for (std::size_t k = 0; k < size; ++k) {
      shadow_byte& s = shadow_[offset + k];
      if (s.pending) {
        if (static_cast<std::uint32_t>(s.w.tid) == tid) {
          fail_at(instr_index, tid,
                  "access to shared byte " + std::to_string(offset + k) + " of a cp.async (" + at(s.w.instr) +
                      ") before the cp.async.wait_group that completes it");
        }
        race(s.w, true, instr_index, tid, write, offset + k);
      }
      if (!write && sched_.uninitialized_check && s.w.tid < 0) {
        fail_at(instr_index, tid, "read of never-written shared byte " + std::to_string(offset + k));
      }
      if (sched_.race_check) {
        if (!happens_before(s.w, tid, w, lane)) race(s.w, true, instr_index, tid, write, offset + k);
        if (write) {
          if (!happens_before(s.r1, tid, w, lane)) race(s.r1, false, instr_index, tid, true, offset + k);
          if (!happens_before(s.r2, tid, w, lane)) race(s.r2, false, instr_index, tid, true, offset + k);
        }
      }
      if (write) {
        s.w = me;
        s.r1 = s.r2 = access_rec{};
      } else if (s.r1.tid < 0 || s.r1.tid == me.tid || s.r1.epoch < epoch_) {
        s.r1 = me;
      } else if (s.r2.tid < 0 || s.r2.tid == me.tid || s.r2.epoch < epoch_) {
        s.r2 = me;
      }  // a third reader: any later writer differs from r1 or r2, which is enough to report
    }
  }

  void global_check(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t addr, std::size_t size) const {
    if (addr % size != 0) {
      fail_at(instr_index, tid, "misaligned global access of " + std::to_string(size) + " bytes at 0x" + hex64(addr));
    }
    for (const auto& v : m_.variables) {  // the module's own .global/.const variables
      const auto base = reinterpret_cast<std::uintptr_t>(v.data.get());
      if (addr >= base && addr + size <= base + v.size) return;
    }
    if (!memory_.valid(addr, size)) {
      fail_at(instr_index, tid,
              "global access of " + std::to_string(size) + " bytes at 0x" + hex64(addr) + " outside every live allocation");
    }
  }
  static std::string hex64(std::uint64_t v) {
    std::ostringstream os;
    os << std::hex << v;
    return os.str();
  }

  std::uint64_t address(const warp& w, const operand& o, unsigned l) const {
    return (o.has_base ? w.regs[o.reg * kLanes + l] : 0) + o.imm;
  }

  unsigned char* local_at(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t offset, std::size_t size) {
    if (offset + size > f_.local_bytes || offset + size < offset) {
      fail_at(instr_index, tid, "local-memory access at " + std::to_string(offset) + " outside the thread's " +
                                    std::to_string(f_.local_bytes) + " bytes");
    }
    return local_.data() + std::size_t{tid} * f_.local_bytes + offset;
  }

  // ld/st of one lane: `n` elements of `esize` bytes at `addr` in space `sp`.
  void memory_op(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
    const bool load = in.code == op::ld;
    const operand& addr_op = in.ops[load ? 1 : 0];
    const operand& val_op = in.ops[load ? 0 : 1];
    const unsigned bits = type_bits(in.type);
    const std::size_t esize = bits / 8;
    const unsigned n = in.vec;
    const std::size_t total = esize * n;
    const bool sign = is_signed(in.type);
    std::uint64_t sectors[kLanes];
    unsigned nsectors = 0;
    for_lanes(mask, [&](unsigned l) {
      const std::uint32_t tid = w.index * kLanes + l;
      const std::uint64_t a = address(w, addr_op, l);
      unsigned char* base = nullptr;
      switch (in.where) {
        case space::global:
        case space::generic:
        case space::none:
          global_check(pc, tid, a, total);
          base = reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(a));
          sectors[nsectors++] = a / 32;
          break;
        case space::shared:
          shared_access(w, l, pc, a, total, !load);
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
          if (a % esize != 0) fail_at(pc, tid, "misaligned local access");
          base = local_at(pc, tid, a, total);
          break;
      }
      for (unsigned e = 0; e < n; ++e) {
        const operand& r = val_op.kind == operand::k_vec ? val_op.elems[e] : val_op;
        if (load) {
          std::uint64_t v = 0;
          std::memcpy(&v, base + e * esize, esize);
          if (sign) v = static_cast<std::uint64_t>(sext(v, bits));
          if (r.kind == operand::k_reg) set(w, r, l, v);
        } else {
          const std::uint64_t v = get(w, r, l);
          std::memcpy(base + e * esize, &v, esize);
        }
      }
    });
    if (nsectors > 0) {
      const std::uint64_t bytes = total * nsectors;
      std::sort(sectors, sectors + nsectors);
      const unsigned distinct = static_cast<unsigned>(std::unique(sectors, sectors + nsectors) - sectors);
      auto& set = load ? sectors_read_ : sectors_written_;
      set.insert(sectors, sectors + distinct);
      if (load) {
        result_.global.bytes_read += bytes;
        result_.global.sector_reads_total += distinct;
      } else {
        result_.global.bytes_written += bytes;
      }
    }
  }

  // ---- ldmatrix and mma: warp-wide (.sync.aligned) ------------------------------------
  // .aligned: all 32 lanes execute the instruction together, converged (the ISA leaves anything
  // else undefined); here anything else is a finding.
  void require_whole_warp(const warp& w, std::uint32_t pc, std::uint32_t mask) const {
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
  void ldmatrix(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
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
  // Every input is read before any output is written (d may be c). Each element is computed in
  // double (the 16 products of 16-bit values are exact) and rounded once to f32, nearest even;
  // NaN results are canonical. Tensor cores' accumulation order and intermediate rounding are
  // not specified by the ISA, so a kernel's result may differ in the last bits of f32 on a GPU.
  void mma(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
    require_whole_warp(w, pc, mask);
    if (mask == 0) return;  // predicated off in every lane
    const bool bf = in.type2 == vtype::bf16;
    auto element = [&](std::uint64_t reg, unsigned upper) -> double {
      const auto h = static_cast<std::uint16_t>(reg >> (16 * upper));
      return bf ? rungs::detail::bf16_bits_to_float(h) : rungs::detail::f16_bits_to_float(h);
    };
    double a[16][16], b[16][8], c[16][8];
    const auto& av = in.ops[1].elems;
    const auto& bv = in.ops[2].elems;
    const auto& cv = in.ops[3].elems;
    for (unsigned l = 0; l < kLanes; ++l) {
      const unsigned g = l / 4, t = l % 4;
      for (unsigned i = 0; i < 4; ++i) {
        const std::uint64_t reg = get(w, av[i], l);
        const unsigned row = g + ((i & 1) != 0 ? 8 : 0), col = 2 * t + (i >= 2 ? 8 : 0);
        a[row][col] = element(reg, 0);
        a[row][col + 1] = element(reg, 1);
      }
      for (unsigned i = 0; i < 2; ++i) {
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
        for (unsigned k = 0; k < 16; ++k) d += a[row][k] * b[k][col];
        set(w, in.ops[0].elems[i], l, f32_out(static_cast<float>(d), false, false));
      }
    }
  }

  // ---- cp.async ------------------------------------------------------------------------
  void cp_async(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
    std::uint64_t sectors[kLanes];
    unsigned nsectors = 0;
    for_lanes(mask, [&](unsigned l) {
      const std::uint32_t tid = w.index * kLanes + l;
      copy_op c;
      c.dst = static_cast<std::uint32_t>(address(w, in.ops[0], l));
      c.src = address(w, in.ops[1], l);
      c.size = static_cast<std::uint32_t>(get(w, in.ops[2], l));
      c.src_size = in.ops.size() > 3 ? static_cast<std::uint32_t>(get(w, in.ops[3], l)) : c.size;
      if (c.size != 4 && c.size != 8 && c.size != 16) fail_at(pc, tid, "cp.async size must be 4, 8 or 16");
      if (c.src_size > c.size) {
        fail_at(pc, tid, "cp.async src-size " + std::to_string(c.src_size) + " exceeds cp-size " + std::to_string(c.size));
      }
      if (c.dst + std::uint64_t{c.size} > shared_.size() || c.dst % c.size != 0) {
        fail_at(pc, tid, "cp.async destination " + std::to_string(c.dst) + " misaligned or outside shared memory");
      }
      if (c.src_size > 0) {
        if (c.src % c.size != 0) fail_at(pc, tid, "misaligned cp.async source 0x" + hex64(c.src));
        global_check(pc, tid, c.src, c.src_size);
        sectors[nsectors++] = c.src / 32;
        result_.global.bytes_read += c.src_size;
        result_.global.async_bytes_read += c.src_size;
      }
      c.tid = tid;
      c.instr = pc;
      c.group = async_[tid].open_group;
      c.epoch = epoch_;
      if (shadow_on_) issue_shadow(w, l, c);
      const auto index = static_cast<std::uint32_t>(copies_.size());
      copies_.push_back(c);
      async_[tid].pending.push_back(index);
      unlanded_.push_back(index);
    });
    if (nsectors > 0) {
      std::sort(sectors, sectors + nsectors);
      const unsigned distinct = static_cast<unsigned>(std::unique(sectors, sectors + nsectors) - sectors);
      sectors_read_.insert(sectors, sectors + distinct);
      async_sectors_.insert(sectors, sectors + distinct);
      result_.global.sector_reads_total += distinct;
    }
  }

  void land_random() {
    const std::size_t k = rng_() % unlanded_.size();
    const std::uint32_t index = unlanded_[k];
    unlanded_[k] = unlanded_.back();
    unlanded_.pop_back();
    land(index);
  }

  void land(std::uint32_t index) {
    copy_op& c = copies_[index];
    if (c.landed) return;
    c.landed = true;
    unsigned char* dst = shared_.data() + c.dst;
    if (c.src_size > 0) std::memcpy(dst, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(c.src)), c.src_size);
    std::memset(dst + c.src_size, 0, c.size - c.src_size);
  }

  // From its issue until the wait that completes it, a copy's destination is "pending": any
  // access to it by another thread is a race, and by the issuing thread a read of data that
  // may not have landed. The issue itself must be ordered after every earlier access by other
  // threads (a barrier between them).
  void issue_shadow(const warp& w, unsigned lane, const copy_op& c) {
    for (std::uint32_t k = 0; k < c.size; ++k) {
      shadow_byte& s = shadow_[c.dst + k];
      if (sched_.race_check) {
        if (s.pending && static_cast<std::uint32_t>(s.w.tid) != c.tid) race(s.w, true, c.instr, c.tid, true, c.dst + k);
        if (!happens_before(s.w, c.tid, w, lane)) race(s.w, true, c.instr, c.tid, true, c.dst + k);
        if (!happens_before(s.r1, c.tid, w, lane)) race(s.r1, false, c.instr, c.tid, true, c.dst + k);
        if (!happens_before(s.r2, c.tid, w, lane)) race(s.r2, false, c.instr, c.tid, true, c.dst + k);
      }
      s.w = access_rec{static_cast<std::int32_t>(c.tid), c.instr, c.epoch, w.wsc[lane]};
      s.r1 = s.r2 = access_rec{};
      s.pending = true;
    }
  }

  // The issuing thread's wait completes copies: they are landed now and ordered before what
  // follows the thread's next barrier (or warp sync).
  void complete(std::uint32_t index, const warp& w, unsigned lane) {
    land(index);
    if (!shadow_on_) return;
    const copy_op& c = copies_[index];
    for (std::uint32_t k = 0; k < c.size; ++k) {
      shadow_byte& s = shadow_[c.dst + k];
      if (s.pending && static_cast<std::uint32_t>(s.w.tid) == c.tid && s.w.instr == c.instr) {
        s.pending = false;
        s.w.epoch = epoch_;
        s.w.wsc = w.wsc[lane];
      }
    }
  }

  void wait_group(warp& w, std::uint32_t mask, std::uint64_t n_pending, bool commit_first) {
    for_lanes(mask, [&](unsigned l) {
      thread_async& t = async_[w.index * kLanes + l];
      if (commit_first) ++t.open_group;
      const std::uint64_t limit = t.open_group >= n_pending ? t.open_group - n_pending : 0;
      std::size_t keep = 0;
      for (const std::uint32_t index : t.pending) {
        if (copies_[index].group < limit) {
          complete(index, w, l);
        } else {
          t.pending[keep++] = index;
        }
      }
      t.pending.resize(keep);
    });
    if (!unlanded_.empty()) {
      std::erase_if(unlanded_, [&](std::uint32_t i) { return copies_[i].landed; });
    }
  }

  // ---- the ALU -----------------------------------------------------------------------------
  [[noreturn]] void unsupported(std::uint32_t pc, std::uint32_t tid, const std::string& why) const {
    fail_at(pc, tid, "not implemented: " + why);
  }

  void execute(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);

  const module& m_;
  const function& f_;
  dim3s grid_, block_, cta_{};
  const unsigned char* params_;
  const global_memory& memory_;
  const schedule& sched_;
  std::mt19937_64 rng_;
  unsigned threads_ = 0;
  std::size_t shared_bytes_ = 0;
  bool shadow_on_ = true;
  std::vector<warp> warps_;
  std::vector<unsigned char> shared_;
  std::vector<shadow_byte> shadow_;
  std::vector<unsigned char> local_;
  std::vector<thread_async> async_;
  std::vector<copy_op> copies_;
  std::vector<std::uint32_t> unlanded_;
  std::uint32_t epoch_ = 0;
  unsigned bar_waiting_ = 0, live_ = 0;
  std::uint32_t bar_instr_ = 0;
  std::unordered_set<std::uint64_t> sectors_read_, sectors_written_, async_sectors_;
  launch_result result_;
};

#include "alu.inc"

}  // namespace

launch_result launch(const module& m, std::string_view entry, dim3s grid, dim3s block, std::size_t dynamic_shared_bytes,
                     void* const* args, const global_memory& memory, const schedule& sched) {
  const function& f = entry_function(m, entry);
  const std::uint64_t threads = std::uint64_t{block.x} * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0) {
    throw sim_error("kernel " + f.name + ": empty grid or block");
  }
  if (threads > 1024) throw sim_error("kernel " + f.name + ": " + std::to_string(threads) + " threads per block exceed 1024");
  if (f.dynamic_shared_offset + dynamic_shared_bytes > 228 * 1024) {
    throw sim_error("kernel " + f.name + ": " + std::to_string(f.dynamic_shared_offset) + " bytes of static and " +
                    std::to_string(dynamic_shared_bytes) + " of dynamic shared memory exceed 228 KiB per block");
  }
  std::vector<unsigned char> params(f.param_bytes);
  for (std::size_t i = 0; i < f.params.size(); ++i) {
    if (args == nullptr || args[i] == nullptr) {
      throw sim_error("kernel " + f.name + ": argument " + std::to_string(i) + " is null");
    }
    std::memcpy(params.data() + f.params[i].offset, args[i], f.params[i].info.size);
  }
  return executor(m, f, grid, block, dynamic_shared_bytes, params.data(), memory, sched).run();
}

}  // namespace rungs::sim
