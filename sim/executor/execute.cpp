// Executes a parsed PTX entry over a grid (executor.hpp). Model, also in docs/kernels.md:
//  - A CTA is a set of 32-lane warps. Each lane has its own PC; a warp issues the instruction
//    at the smallest PC of its runnable lanes for every lane at that PC (so lanes reconverge
//    where structured control flow joins), with per-lane guards.
//  - Warp-synchronous instructions (shfl, vote, match, redux .sync; bar.warp.sync) wait until
//    every non-exited lane named by each participant's member mask has reached the same
//    instruction (CUDA's rule; exited and absent lanes are not waited for); lanes that can
//    never arrive are a sim_error (deadlock). bar.sync is a CTA barrier reached by whole,
//    converged warps; a barrier some threads can never reach is a sim_error.
//  - Adversarial mode (schedule::randomize): CTAs and warps run in a seeded random order with
//    random quanta, and each cp.async lands at a random moment between its issue and the
//    wait that covers it; registers start with random bits.
//  - Shared-memory race detection is happens-before with barrier epochs: two accesses by
//    different threads to one byte, at least one a write, race unless a bar.sync completed
//    between them, or both threads are in one warp and took part in one bar.warp.sync
//    (__syncwarp) between them. shfl.sync orders no memory (CUDA: "no memory barrier"), so it
//    does not count. A cp.async write spans [issue, completing wait]: it races with accesses
//    by other threads in the epochs of that span, and reading it before the issuing thread's
//    wait is reported too. Two strong accesses (atomics; volatile, relaxed, acquire, release
//    ld/st) do not race with each other; a weak one races with either.
//  Instruction semantics: one handler per instruction family (alu.cpp, bits.cpp, call.cpp,
//  convert.cpp, memory.cpp, tensor.cpp, warp.cpp), tabled by opcode in handlers.cpp; this file holds the
//  scheduler (CTAs, warps, reconvergence), control flow and the barriers.
#include "machine.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace rungs::sim {
namespace detail {

launch_result executor::run() {
  std::vector<std::uint64_t> order;
  const std::uint64_t ctas = std::uint64_t{grid_.x} * grid_.y * grid_.z;
  for (std::uint64_t c = 0; c < ctas; ++c) order.push_back(c);
  if (sched_.randomize && !sched_.blocks_in_launch_order) {
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng_() % i]);
  }
  try {
    if (sched_.race_check && ctas > kRecordCtas) {
      fail("a grid of " + std::to_string(ctas) + " blocks: the missing-fence check (schedule::race_check) records at most " +
           std::to_string(kRecordCtas) + " blocks");
    }
    // Blocks in parallel where the kernel's code allows it; one at a time where it does not, or
    // where the parallel run found blocks touching each other's words or a finding (memory is
    // restored then, and this run, the seed's, gives the results and the first finding).
    const unsigned threads = std::min<std::uint64_t>(
        sched_.threads != 0 ? sched_.threads : std::max(1u, std::thread::hardware_concurrency()), ctas);
    bool done = false;
    if (threads > 1 && ctas <= footprint::kBlock && blocks_may_run_in_parallel()) {
      done = run_parallel(order, threads);
      if (!done) result_.ran_again_serially = true;
    }
    for (std::size_t i = 0; !done && i < order.size(); ++i) {
      run_block(order[i]);
      if (fence_check_) close_publications();
    }
  } catch (...) {
    flush_device_output();  // what the kernel printed before the finding
    throw;
  }
  flush_device_output();
  result_.global.sectors_read = sectors_read_.count();
  result_.global.sectors_written = sectors_written_.count();
  result_.global.async_sectors_read = async_sectors_.count();
  return result_;
}

namespace {
struct kept_shadow {
  std::vector<shadow_word> words;
  std::uint32_t epoch = 0;  // the last CTA epoch the words may hold
};
struct shadow_store {
  std::mutex lock;
  std::vector<kept_shadow> kept;  // at most kMost (the largest kernels' shadows are a few MB each)
  static constexpr std::size_t kMost = 8;
};
shadow_store& kept_shadows() {
  static shadow_store store;
  return store;
}
}  // namespace

void executor::take_shadow() {
  shadow_store& s = kept_shadows();
  const std::lock_guard<std::mutex> hold(s.lock);
  if (s.kept.empty()) return;
  shadow_ = std::move(s.kept.back().words);
  cta_epoch_ = s.kept.back().epoch;
  s.kept.pop_back();
}

void executor::give_back_shadow() {
  if (shadow_.empty()) return;
  shadow_store& s = kept_shadows();
  const std::lock_guard<std::mutex> hold(s.lock);
  if (s.kept.size() < shadow_store::kMost) s.kept.push_back({std::move(shadow_), cta_epoch_});
}

// ---- messages ---------------------------------------------------------------------------
std::string executor::thread_name(std::uint32_t tid) const {
  std::ostringstream os;
  os << "thread (" << tid % block_.x << "," << tid / block_.x % block_.y << "," << tid / (block_.x * block_.y)
     << ") of block (" << cta_.x << "," << cta_.y << "," << cta_.z << ")";
  return os.str();
}

std::string executor::at(std::uint32_t instr_index) const {
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

// ---- CTA -------------------------------------------------------------------------------
namespace {
// Garbage register bits: four xorshift64 streams side by side (independent chains that
// vectorise), advanced in `x`. `n` is a multiple of 4.
inline void garbage(std::uint64_t* __restrict r, std::size_t n, std::uint64_t* x) {
  for (std::size_t i = 0; i < n; i += 4) {
    for (unsigned k = 0; k < 4; ++k) {
      x[k] ^= x[k] << 13;
      x[k] ^= x[k] >> 7;
      x[k] ^= x[k] << 17;
      r[i + k] = x[k];
    }
  }
}
}  // namespace

void executor::first_bits(warp& w, std::uint32_t slot) {
  std::uint64_t* r = w.regs.data() + std::size_t{slot} * kLanes;
  if (sched_.randomize) garbage(r, kLanes, garbage_);  // registers hold garbage on hardware; so do they here
  else std::fill(r, r + kLanes, std::uint64_t{0});
  w.epoch[slot] = cta_epoch_;
}

void executor::run_block(std::uint64_t index) {
  cta_index_ = index;
  run_cta({static_cast<unsigned>(index % grid_.x), static_cast<unsigned>(index / grid_.x % grid_.y),
           static_cast<unsigned>(index / (std::uint64_t{grid_.x} * grid_.y))});
}

void executor::run_cta(dim3s id) {
  cta_ = id;
  // The block's schedule from the seed and its index alone (not from the blocks before it), so
  // that it is the same whichever thread runs it (schedule::threads).
  rng_ = schedule_rng(sched_.seed ^ (cta_index_ + 1) * 0xd1342543de82ef95ull);
  coin_left_ = 0;
  cta_end_ = sched_.cta_instruction_limit == 0 ? ~std::uint64_t{0} : result_.warp_instructions + sched_.cta_instruction_limit;
  const unsigned nwarps = (threads_ + kLanes - 1) / kLanes;
  // The warps (and threads' cp.async state) of the last CTA are reset in place: their register
  // files keep their storage (allocating them afresh per CTA cost a tenth of a launch).
  warps_.resize(nwarps);
  const std::size_t slots = f_.slots;
  // A new epoch: every register of every warp is unnamed in this CTA (first_bits gives its bits
  // when an instruction first names it; step).
  if (++cta_epoch_ == 0) {
    for (warp& w : warps_) {
      std::fill(w.epoch.begin(), w.epoch.end(), 0u);
      std::fill(w.visited.begin(), w.visited.end(), 0u);
    }
    for (shadow_word& s : shadow_) s.cta = 0;
    cta_epoch_ = 1;
  }
  if (sched_.randomize)
    for (auto& s : garbage_) s = rng_() | 1;
  for (unsigned wi = 0; wi < nwarps; ++wi) {
    warp& w = warps_[wi];
    std::vector<std::uint64_t> regs = std::move(w.regs);
    std::vector<std::uint32_t> epoch = std::move(w.epoch), visited = std::move(w.visited), undef = std::move(w.undef);
    std::vector<origin> undef_origin = std::move(w.undef_origin);
    w = warp{};
    w.regs = std::move(regs);
    w.undef = std::move(undef);  // (emptied: allocated again at a value's first undefined lane)
    w.undef.clear();
    w.undef_origin = std::move(undef_origin);
    w.epoch = std::move(epoch);
    w.visited = std::move(visited);
    w.index = wi;
    w.regs.resize(slots * kLanes);
    w.epoch.resize(slots, 0u);
    w.visited.resize(f_.code.size(), 0u);
    for (const auto& [sp, slot] : f_.specials) w.epoch[slot] = cta_epoch_;
    for (unsigned l = 0; l < kLanes; ++l) {
      const unsigned tid = wi * kLanes + l;
      w.state[l] = tid < threads_ ? lane_state::run : lane_state::absent;
      w.running |= (tid < threads_ ? 1u : 0u) << l;
      w.pc[l] = 0;
      for (const auto& [sp, slot] : f_.specials) {
        w.regs[slot * kLanes + l] = special_value(sp, wi, l);
      }
    }
  }
  if (sched_.randomize) {
    // Shared memory holds garbage at a CTA's start on hardware; so does it here: the garbage
    // streams' bits (seeded from the launch's generator above), 512 bytes per batch.
    shared_.resize(shared_bytes_);
    std::uint64_t bits[64];
    for (std::size_t i = 0; i < shared_.size(); i += sizeof bits) {
      garbage(bits, 64, garbage_);
      std::memcpy(shared_.data() + i, bits, std::min(sizeof bits, shared_.size() - i));
    }
  } else {
    shared_.assign(shared_bytes_, 0);
  }
  // The shadow's words are emptied at their first access in this CTA (shadow_at), split words
  // with them, not here: a CTA's start no longer clears 52 bytes per word of shared memory.
  if (shadow_on_ && shadow_.size() < (shared_bytes_ + 3) / 4) shadow_.resize((shared_bytes_ + 3) / 4);
  local_.assign(std::size_t{threads_} * f_.local_bytes, 0);
  if (fence_check_) publications_.assign(threads_, 0);
  async_.resize(threads_);
  for (thread_async& t : async_) {
    t.open_group = 0;
    t.pending.clear();
  }
  copies_.clear();
  free_copies_.clear();
  unlanded_.clear();
  epoch_ = 0;
  bar_waiting_ = 0;
  live_ = threads_;
  bar_instr_ = 0;

  std::vector<unsigned> runnable;
  std::size_t rr = 0;
  for (;;) {
    // A parallel launch stopped by another worker (a conflict or a finding): this block's work
    // is rolled back anyway.
    if (par_ != nullptr && par_->stop.load(std::memory_order_relaxed)) throw parallel_abort{};
    runnable.clear();
    for (unsigned wi = 0; wi < nwarps; ++wi) {
      if (has_runnable(warps_[wi])) runnable.push_back(wi);
    }
    if (runnable.empty()) break;
    if (sched_.randomize) {
      warp& w = warps_[runnable[draw_below(runnable.size())]];
      const unsigned quantum = 1 + static_cast<unsigned>(draw_below(48));
      for (unsigned q = 0; q < quantum && step(w); ++q) {
        if (!unlanded_.empty() && one_in_four()) land_random();
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

bool executor::has_runnable(const warp& w) { return w.running != 0; }

[[noreturn]] void executor::deadlock() const {
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

void executor::regroup(warp& w) {
  // The running lanes at the smallest PC, in loops without branches (which the compiler
  // vectorises: a branch per lane was most of a divergent kernel's regrouping).
  std::uint32_t at[kLanes];
  std::uint32_t pc = ~0u;
  for (unsigned l = 0; l < kLanes; ++l) {
    at[l] = w.state[l] == lane_state::run ? w.pc[l] : ~0u;
    pc = std::min(pc, at[l]);
  }
  std::uint32_t mask = 0;
  for (unsigned l = 0; l < kLanes; ++l) mask |= (at[l] == pc && pc != ~0u ? 1u : 0u) << l;
  w.group_mask = mask;
  w.group_pc = pc;
  w.group_valid = true;
  // While some running lanes are elsewhere, regroup after every instruction so that lanes
  // merge as soon as the group reaches their PC (reconvergence).
  w.diverged = w.running != mask;
}

void executor::regroup_if_diverged(warp& w) {
  if (w.diverged) {
    write_back(w);
    w.group_valid = false;
  }
}

// The group's lanes keep their PC in group_pc while they run together; write it back
// before they part.
void executor::write_back(warp& w) {
  for_lanes(w.group_mask, [&](unsigned l) { w.pc[l] = w.group_pc; });
}

// One warp instruction. False when the warp cannot go on (all lanes done or waiting). Inline in
// run_cta's two loops (a call per warp instruction, its registers saved and restored, was about
// 1-2% of a launch).
[[gnu::always_inline]] inline bool executor::step(warp& w) {
  if (!w.group_valid) regroup(w);
  if (w.group_mask == 0) return false;
  const std::uint32_t pc = w.group_pc;
  // The scheduling fields from the instruction's decoded record (a compact array), not from its
  // `instr` (read only by the handlers that need it).
  const decoded& dc = f_.forms[pc];
  const instr& in = f_.code[pc];
  // A register's first bits, unless this instruction writes all its lanes before anything
  // reads them (an unguarded definition over the whole warp: kTouchDefines).
  if (w.visited[pc] != cta_epoch_) {
    const bool whole = dc.guard < 0 && w.group_mask == 0xffffffffu;
    for (std::uint32_t t = f_.touch_at[pc], end = f_.touch_at[pc + 1]; t != end; ++t) {
      const std::uint32_t e = f_.touch[t], slot = e & ~function::kTouchDefines;
      if (w.epoch[slot] == cta_epoch_) continue;
      if (whole && (e & function::kTouchDefines) != 0) w.epoch[slot] = cta_epoch_;
      else first_bits(w, slot);
    }
    w.visited[pc] = cta_epoch_;  // every slot it names has its bits now
  }
  std::uint32_t mask = w.group_mask;
  if (dc.guard >= 0) {
    // The predicate's bit of all 32 lanes in a loop without branches (a lane outside the group
    // reads bits that the mask then drops).
    std::uint32_t g = 0;
    const std::uint64_t* p = &w.regs[static_cast<std::size_t>(dc.guard) * kLanes];
    for (unsigned l = 0; l < kLanes; ++l) g |= static_cast<std::uint32_t>(p[l] & 1) << l;
    mask &= dc.guard_negate ? ~g : g;
  }
  if (++result_.warp_instructions > cta_end_) cta_overrun();
  // Definedness: only in a warp holding undefined lanes (none in the common case).
  if (w.undef_live != 0) defined_before(w, in, pc, mask);
  switch (dc.code) {
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
          w.running &= ~(1u << l);
          --live_;
        } else {
          w.pc[l] = pc + 1;
        }
      });
      w.group_valid = false;
      release_waiters(w);
      maybe_release_barrier();
      return true;
    }
    case op::bar_sync:
    case op::bar_red: return bar_sync(w, in, pc, mask);
    case op::shfl:
      // A decoded shfl over a whole converged warp (warp_sync's first case); a warp with
      // undefined lanes goes the way that marks them.
      if (dc.form == decoded::shfl && mask == 0xffffffffu && w.group_mask == 0xffffffffu && w.undef_live == 0 &&
          shfl_decoded(w, dc)) {
        ++w.group_pc;
        return true;
      }
      return warp_sync(w, in, pc, mask);
    case op::vote:
    case op::match:
    case op::redux:
    case op::bar_warp_sync: return warp_sync(w, in, pc, mask);
    default: break;
  }
  if (mask == 0xffffffffu && dc.form != decoded::none) exec_decoded(w, dc);
  else if (mask != 0) (this->*handlers[static_cast<std::size_t>(dc.code)])(w, in, pc, mask);
  ++w.group_pc;
  if (w.diverged) regroup_if_diverged(w);
  return true;
}

// ---- barriers --------------------------------------------------------------------------
bool executor::bar_sync(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const std::uint32_t tid0 = w.index * kLanes + static_cast<unsigned>(std::countr_zero(w.group_mask));
  const bool red = in.code == op::bar_red;  // bar.red: the barrier, and a reduction over its threads
  const operand& id = in.ops[red ? 1 : 0];
  if (in.ops.size() != (red ? 3u : 1u) || id.kind != operand::k_imm || id.imm != 0) {
    fail_at(pc, tid0, "bar.sync or bar.red with a barrier other than 0 or a thread count is not implemented");
  }
  std::uint32_t live_mask = 0;
  for (unsigned l = 0; l < kLanes; ++l) {
    if (w.state[l] != lane_state::done && w.state[l] != lane_state::absent) live_mask |= 1u << l;
  }
  // The aligned forms (bar.sync, barrier.sync.aligned) require every live lane of the warp at
  // this one instruction; barrier.sync lets lanes arrive apart, each waiting until every
  // thread of the CTA has reached a barrier 0 (CUDA's __syncthreads in divergent code, sm_70+).
  if (in.aligned && mask != live_mask) {
    fail_at(pc, tid0,
            "bar.sync (aligned) reached by part of a warp only (lanes 0x" + hex(mask) + " of live lanes 0x" +
                hex(live_mask) + "): every thread must reach the same barrier");
  }
  if (bar_waiting_ == 0) {
    bar_red_ = red;
    bar_count_ = 0;
  } else if (bar_red_ != red) {
    fail_at(pc, tid0, "bar.red and bar.sync meet at barrier 0 (the other at " + at(bar_instr_) + ")");
  }
  if (red) for_lanes(mask, [&](unsigned l) { bar_count_ += get_pred(w, in.ops[2], l) ? 1 : 0; });
  write_back(w);
  w.running &= ~mask;
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

void executor::maybe_release_barrier() {
  if (bar_waiting_ == 0 || bar_waiting_ != live_) return;
  if (live_ != threads_) {
    fail("bar.sync at " + at(bar_instr_) + " completes after " + std::to_string(threads_ - live_) +
         " threads of block (" + std::to_string(cta_.x) + "," + std::to_string(cta_.y) + "," +
         std::to_string(cta_.z) + ") exited: every thread must reach the barrier");
  }
  for (warp& x : warps_) {
    for (unsigned l = 0; l < kLanes; ++l) {
      if (x.state[l] != lane_state::wait_bar) continue;
      x.state[l] = lane_state::run;
      x.running |= 1u << l;
      if (bar_red_) {  // every thread gets the reduction, in its own bar.red's destination
        const instr& b = f_.code[x.pc[l] - 1];
        const std::uint64_t r = b.aop == atom_op::add ? bar_count_
                                : b.aop == atom_op::and_ ? (bar_count_ == threads_ ? 1 : 0)
                                                         : (bar_count_ > 0 ? 1 : 0);
        set(x, b.ops[0], l, r);
        if (x.undef_live != 0) set_marks(x, b.ops[0], 1u << l, 0, origin{});
      }
    }
    x.group_valid = false;
  }
  bar_waiting_ = 0;
  ++epoch_;
}

// CUDA's rule for the member mask (Programming Guide, "Warp Shuffle Functions", __syncwarp):
// every non-exited thread named in it must execute the same instruction with the same mask.
// Exited lanes, and the absent lanes of a partial last warp, are not waited for; a lane
// reading from one of them gets undefined bits (sync_execute).
std::uint32_t executor::dead_lanes(const warp& w) {
  std::uint32_t dead = 0;
  for (unsigned l = 0; l < kLanes; ++l) {
    if (w.state[l] == lane_state::done || w.state[l] == lane_state::absent) dead |= 1u << l;
  }
  return dead;
}

// The lanes of `arrived` whose member masks name only arrived lanes, repeatedly (a lane whose
// partner cannot go on cannot go on either).
std::uint32_t executor::ready_lanes(std::uint32_t arrived, const std::uint32_t* masks) {
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
  return ready;
}

bool executor::warp_sync(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  const operand& member = in.ops.back();
  if (mask == 0xffffffffu && w.group_mask == 0xffffffffu) {
    // The whole warp, converged (the usual case): no lane waits or is dead, so every lane whose
    // mask names itself has all the lanes it names, and is ready at once.
    std::uint32_t masks[kLanes];
    const lanes_in m(w.regs, member);
    std::uint32_t self = 0;
    for (unsigned l = 0; l < kLanes; ++l) {
      masks[l] = static_cast<std::uint32_t>(m[l]);
      self |= masks[l] & (1u << l);
    }
    if (self == 0xffffffffu) {
      sync_execute(w, in, pc, 0xffffffffu, masks);
      ++w.group_pc;
      return true;
    }
  }
  const std::uint32_t dead = dead_lanes(w);
  std::uint32_t masks[kLanes];
  for_lanes(mask, [&](unsigned l) {
    masks[l] = static_cast<std::uint32_t>(get(w, member, l));
    const std::uint32_t tid = w.index * kLanes + l;
    if (!((masks[l] >> l) & 1)) fail_at(pc, tid, "member mask 0x" + hex(masks[l]) + " does not name the lane itself");
    masks[l] &= ~dead;
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
  const std::uint32_t ready = ready_lanes(arrived, masks);
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
      w.running |= 1u << l;
      w.pc[l] = pc + 1;
    } else {
      w.state[l] = lane_state::wait_warp;
      w.running &= ~(1u << l);
      w.pc[l] = pc;
      w.wait_mask[l] = masks[l];
    }
  });
  w.group_valid = false;
  return true;
}

// Lanes exited: lanes waiting at a warp-synchronous instruction for them go on.
void executor::release_waiters(warp& w) {
  const std::uint32_t dead = dead_lanes(w);
  std::uint32_t waiting = 0;
  for (unsigned l = 0; l < kLanes; ++l) {
    if (w.state[l] == lane_state::wait_warp) waiting |= 1u << l;
  }
  while (waiting != 0) {
    const std::uint32_t pc = w.pc[std::countr_zero(waiting)];
    std::uint32_t at_pc = 0;
    std::uint32_t masks[kLanes];
    for_lanes(waiting, [&](unsigned l) {
      if (w.pc[l] != pc) return;
      at_pc |= 1u << l;
      w.wait_mask[l] &= ~dead;
      masks[l] = w.wait_mask[l];
    });
    waiting &= ~at_pc;
    const std::uint32_t ready = ready_lanes(at_pc, masks);
    if (ready == 0) continue;
    sync_execute(w, f_.code[pc], pc, ready, masks);
    w.running |= ready;
    for_lanes(ready, [&](unsigned l) {
      w.state[l] = lane_state::run;
      w.pc[l] = pc + 1;
    });
    w.group_valid = false;
  }
}

// CTAs run one at a time: a CTA that waits for another one (a spin on a flag in global memory,
// as decoupled look-back scans do) never ends. A limit turns that hang into a finding.
void executor::cta_overrun() const {
  fail("block (" + std::to_string(cta_.x) + "," + std::to_string(cta_.y) + "," + std::to_string(cta_.z) +
       ") ran past " + std::to_string(sched_.cta_instruction_limit) +
       " warp instructions without finishing: a loop waiting for another block? The executor runs blocks one at a "
       "time, to completion, so a block that waits for another never ends; blocks in launch order let a block "
       "wait for lower ones (schedule::blocks_in_launch_order, RUNGS_SIM_BLOCK_ORDER=launch in the runtime; "
       "schedule::cta_instruction_limit, RUNGS_SIM_CTA_LIMIT)");
}

// ---- refusals, special registers, time ---------------------------------------------------
[[noreturn]] void executor::unsupported(std::uint32_t pc, std::uint32_t tid, const std::string& why) const {
  fail_at(pc, tid, "not implemented: " + why);
}

// A special register's value for lane `lane` of warp `warp_index` of the current CTA (PTX ISA,
// "Special Registers"). The simulated device has 132 SMs (%nsmid) and places CTA c on SM
// c mod 132 (%smid); it reserves no shared memory (%reserved_smem_offset_* are 0).
std::uint64_t executor::special_value(special sp, unsigned warp_index, unsigned l) const {
  const std::uint64_t tid = std::uint64_t{warp_index} * kLanes + l;
  const std::uint64_t cta = cta_.x + std::uint64_t{grid_.x} * (cta_.y + std::uint64_t{grid_.y} * cta_.z);
  const std::uint32_t bit = 1u << l;
  switch (sp) {
    case special::tid_x: return tid % block_.x;
    case special::tid_y: return tid / block_.x % block_.y;
    case special::tid_z: return tid / (block_.x * block_.y);
    case special::ntid_x: return block_.x;
    case special::ntid_y: return block_.y;
    case special::ntid_z: return block_.z;
    case special::ctaid_x: return cta_.x;
    case special::ctaid_y: return cta_.y;
    case special::ctaid_z: return cta_.z;
    case special::nctaid_x: return grid_.x;
    case special::nctaid_y: return grid_.y;
    case special::nctaid_z: return grid_.z;
    case special::laneid: return l;
    case special::warpid: return warp_index;
    case special::nwarpid: return 64;  // warps per SM (compute capability 9.0)
    case special::lanemask_eq: return bit;
    case special::lanemask_le: return bit | (bit - 1);
    case special::lanemask_lt: return bit - 1;
    case special::lanemask_ge: return ~(bit - 1) & 0xffffffffu;
    case special::lanemask_gt: return ~(bit | (bit - 1)) & 0xffffffffu;
    case special::smid: return cta % 132;
    case special::nsmid: return 132;
    case special::gridid: return 1;
    case special::dynamic_smem_size: return dynamic_shared_;
    case special::total_smem_size: return shared_bytes_;
    case special::reserved_smem_begin:
    case special::reserved_smem_end:
    case special::reserved_smem_cap:
    case special::reserved_smem_0:
    case special::reserved_smem_1: return 0;
  }
  return 0;
}

// mov d, %clock / %clock64 / %globaltimer: a count that grows as the launch runs (the warp
// instructions issued so far; nanoseconds for %globaltimer), so timing loops end and two reads
// differ, reproducibly for a seed. Not a model of real time.
void executor::exec_clock(warp& w, const instr& in, std::uint32_t, std::uint32_t mask) {
  const std::uint64_t now = result_.warp_instructions;
  const auto kind = static_cast<clock_kind>(in.ops[1].imm);
  const std::uint64_t v = kind == clock_kind::clock32 ? now & 0xffffffffu : now;
  for_lanes(mask, [&](unsigned l) { set(w, in.ops[0], l, v); });
}

void executor::exec_unsupported(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  unsupported(pc, w.index * kLanes + static_cast<unsigned>(std::countr_zero(mask)), in.why + " (" + in.text + ")");
}

}  // namespace detail

launch_result launch(const module& m, std::string_view entry, dim3s grid, dim3s block, std::size_t dynamic_shared_bytes,
                     void* const* args, const global_memory& memory, const schedule& sched) {
  const detail::function& f = detail::entry_function(m, entry);
  if (!f.refused.empty()) throw sim_error(f.refused);
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
  return detail::executor(m, f, grid, block, dynamic_shared_bytes, params.data(), memory, sched).run();
}

}  // namespace rungs::sim
