// The executor's machine (internal to sim/executor): the state of one launch (CTAs of 32-lane
// warps, shared memory and its shadow for the race checks, cp.async copies in flight) and the
// members that act on it. The model is described in execute.cpp; instruction semantics live
// in one file per instruction family, each a set of small handlers (handlers.cpp tables them
// by opcode; docs/sim.md, "Adding an opcode").
#pragma once

#include "numeric.hpp"
#include "ptx.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <cstdint>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rungs::sim::detail {

const function& entry_function(const module& m, std::string_view entry);

constexpr unsigned kLanes = 32;
// Generic addresses of local memory (cvta.local): the thread's own local bytes, at an offset
// from this base, which no host (global) address can equal (it is not canonical on x86-64 or
// AArch64). Generic accesses inside the window are local accesses.
constexpr std::uint64_t kLocalWindow = 0x00ff000000000000ull;
constexpr std::uint64_t kLocalWindowSize = std::uint64_t{1} << 32;
inline bool in_local_window(std::uint64_t a) { return a - kLocalWindow < kLocalWindowSize; }
// The generic window onto the CTA's shared memory (cvta.shared, cvta.to.shared): a generic
// address there is shared byte (a - kSharedWindow), checked and race-tracked as ld/st.shared.
// Like the local window it lies where no host allocation does (user space ends at 2^47).
constexpr std::uint64_t kSharedWindow = 0x00fe000000000000ull;
constexpr std::uint64_t kSharedWindowSize = std::uint64_t{1} << 32;
inline bool in_shared_window(std::uint64_t a) { return a - kSharedWindow < kSharedWindowSize; }

enum class lane_state : std::uint8_t { run, wait_warp, wait_bar, done, absent };

struct access_rec {
  std::int16_t tid = -1;    // thread (flat index in the CTA, < 1024); -1: none
  bool strong = false;      // an atomic, volatile, relaxed, acquire or release access
  // A write that stored undefined lanes (definedness.cpp): a read gives undefined lanes again. In
  // the record's spare byte, so that a write's new record clears it with no store of its own.
  bool undef = false;
  std::uint32_t instr = 0;
  std::uint32_t epoch = 0;  // CTA barriers completed before the access
  std::uint32_t wsc = 0;    // the thread's warp-sync count at the access
};  // 16 bytes: three per shared byte

struct shadow_byte {
  access_rec w, r1, r2;  // last write; up to two readers since it (distinct threads)
  bool pending = false;  // w is a cp.async that its thread has not waited for yet
};

// The shadow of one aligned 4-byte word of shared memory. Accesses of 4 bytes and more are
// aligned to their size, so they cover whole words, and while only they touch a word its 4
// bytes have the same records: the word holds them once (`split` false). A 1- or 2-byte
// access splits the word: its bytes' records then live in executor::shadow_bytes_ (until a
// whole-word write or cp.async makes them equal again). The checks are per byte either way.
// 56 bytes, not aligned to cache lines: aligned to 64 bytes (each word's records one line) the
// executor benchmark's checked launch was 8% slower (the shadow, larger than the second-level
// cache, grows by a seventh).
struct shadow_word : shadow_byte {
  bool split = false;
  // The CTA (executor::cta_epoch_) these records belong to; any other value: a word this CTA has
  // not accessed yet, whose records are empty (executor::shadow_at resets it at the first access,
  // so a CTA's start does not clear the whole shadow).
  std::uint32_t cta = 0;
};

// 32 bytes, aligned (a landing touches one cache line of the table, not two).
struct alignas(32) copy_op {
  static constexpr std::uint32_t kLanded = ~std::uint32_t{0};
  std::uint64_t src = 0;
  std::uint32_t dst = 0;
  std::uint8_t size = 0, src_size = 0;  // 4, 8 or 16 bytes; src_size <= size (checked at issue)
  std::uint16_t tid = 0;                // < 1024
  std::uint32_t instr = 0, group = 0, epoch = 0;
  std::uint32_t slot = 0;  // its index in executor::unlanded_ until it lands; kLanded after
  bool landed() const { return slot == kLanded; }
};
static_assert(sizeof(copy_op) == 32);
static_assert(sizeof(access_rec) == 16 && sizeof(shadow_word) == 56);

// Where an undefined value comes from (definedness.cpp): the instruction, thread and shared byte
// of the read of never-written shared memory (byte kNoByte: shfl.sync reading an exited or
// absent lane).
struct origin {
  static constexpr std::uint32_t kNoByte = ~std::uint32_t{0};
  std::uint32_t instr = 0, tid = 0, byte = kNoByte;
};

struct warp {
  std::vector<std::uint64_t> regs;  // slot-major: regs[slot * 32 + lane]
  // Per slot: the CTA (executor::cta_epoch_) whose first bits its lanes hold; any other value:
  // a register this CTA has not named yet (its bits are given at the first instruction naming it).
  std::vector<std::uint32_t> epoch;
  // Per instruction: the CTA whose registers named by it all have their first bits already (its
  // touch list done once in this CTA is done for the CTA: one load instead of the list's).
  std::vector<std::uint32_t> visited;
  std::uint32_t pc[kLanes] = {};
  lane_state state[kLanes] = {};
  std::uint32_t running = 0;  // the lanes whose state is run (the scheduler's test: one load)
  std::uint32_t wait_mask[kLanes] = {};
  std::uint32_t group_mask = 0, group_pc = 0;
  bool group_valid = false;
  bool diverged = false;  // running lanes outside the group
  // Definedness (definedness.cpp): the slots with undefined lanes. A warp with none (the common
  // case) skips every definedness step; next to the group, which the scheduler reads anyway.
  unsigned undef_live = 0;
  std::uint32_t wsc[kLanes] = {};
  std::uint32_t pair_sync[kLanes][kLanes] = {};
  unsigned index = 0;
  // Per slot, its undefined lanes, and where the first of them came from: empty until a value of
  // this CTA is undefined.
  std::vector<std::uint32_t> undef;
  std::vector<origin> undef_origin;
};

struct thread_async {
  std::uint32_t open_group = 0;
  std::vector<std::uint32_t> pending;  // indices into cta::copies
};

template <class F>
inline void for_lanes(std::uint32_t mask, F&& f) {
  for (; mask; mask &= mask - 1) f(static_cast<unsigned>(std::countr_zero(mask)));
}

// Whether `a` is not a multiple of `size` (a mask for the power-of-two sizes of every access;
// a division per lane was a tenth of the shared-memory checks' time).
inline bool misaligned(std::uint64_t a, std::uint64_t size) {
  return (size & (size - 1)) == 0 ? (a & (size - 1)) != 0 : a % size != 0;
}

// Global memory's bytes as the executor reads and writes them: relaxed atomic loads and stores
// (plain loads and stores on x86-64 and AArch64). The blocks of a parallel launch run on several
// threads, and a block may read a word that another block writes at that moment (a conflict,
// undone afterwards: parallel.cpp); that must not be a data race of the executor's own. `p` is
// aligned to `n` (1, 2, 4 or 8 bytes: every global access is checked for alignment first); the
// value is little-endian, as the bytes are.
inline std::uint64_t load_global(const unsigned char* p, std::size_t n) {
  switch (n) {
    case 1: return __atomic_load_n(p, __ATOMIC_RELAXED);
    case 2: return __atomic_load_n(reinterpret_cast<const std::uint16_t*>(p), __ATOMIC_RELAXED);
    case 4: return __atomic_load_n(reinterpret_cast<const std::uint32_t*>(p), __ATOMIC_RELAXED);
    default: return __atomic_load_n(reinterpret_cast<const std::uint64_t*>(p), __ATOMIC_RELAXED);
  }
}
inline void store_global(unsigned char* p, std::uint64_t v, std::size_t n) {
  switch (n) {
    case 1: return __atomic_store_n(p, static_cast<unsigned char>(v), __ATOMIC_RELAXED);
    case 2: return __atomic_store_n(reinterpret_cast<std::uint16_t*>(p), static_cast<std::uint16_t>(v), __ATOMIC_RELAXED);
    case 4: return __atomic_store_n(reinterpret_cast<std::uint32_t*>(p), static_cast<std::uint32_t>(v), __ATOMIC_RELAXED);
    default: return __atomic_store_n(reinterpret_cast<std::uint64_t*>(p), v, __ATOMIC_RELAXED);
  }
}
static_assert(std::endian::native == std::endian::little, "the executor stores PTX's little-endian values natively");

inline std::uint64_t width_mask(unsigned bits) { return bits >= 64 ? ~0ull : ((1ull << bits) - 1); }

inline unsigned type_bits(vtype t) {
  switch (t) {
    case vtype::pred: return 1;
    case vtype::b8: case vtype::u8: case vtype::s8: return 8;
    case vtype::b16: case vtype::u16: case vtype::s16: case vtype::f16: case vtype::bf16: case vtype::e4m3x2:
    case vtype::e5m2x2: return 16;
    case vtype::b32: case vtype::u32: case vtype::s32: case vtype::f32: case vtype::f16x2: case vtype::bf16x2:
    case vtype::tf32: return 32;
    case vtype::b64: case vtype::u64: case vtype::s64: case vtype::f64: return 64;
    case vtype::none: return 0;
  }
  return 0;
}
inline bool is_signed(vtype t) { return t == vtype::s8 || t == vtype::s16 || t == vtype::s32 || t == vtype::s64; }
inline std::int64_t sext(std::uint64_t v, unsigned bits) {
  return bits >= 64 ? static_cast<std::int64_t>(v)
                    : static_cast<std::int64_t>(v << (64 - bits)) >> (64 - bits);
}

// A hash map from 64-bit keys to small values, open addressing (linear probing, a
// power-of-two table at most half full): one probe of a flat table where std::unordered_map
// allocates a node per key (its inserts, lookups and frees were 2-3% of a checked launch).
template <class V>
class word_map {
 public:
  V& operator[](std::uint64_t key) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    const std::size_t i = probe(key + 1);
    if (slots_[i].key == 0) {
      slots_[i].key = key + 1;
      ++used_;
    }
    return slots_[i].value;
  }
  const V* find(std::uint64_t key) const {
    if (slots_.empty()) return nullptr;
    const std::size_t i = probe(key + 1);
    return slots_[i].key == 0 ? nullptr : &slots_[i].value;
  }
  V* find(std::uint64_t key) { return const_cast<V*>(std::as_const(*this).find(key)); }
  template <class F>
  void for_each(F&& f) const {
    for (const slot& s : slots_) {
      if (s.key != 0) f(s.value);
    }
  }
  template <class F>
  void for_each_key(F&& f) const {
    for (const slot& s : slots_) {
      if (s.key != 0) f(s.key - 1, s.value);
    }
  }

 private:
  struct slot {
    std::uint64_t key = 0;  // the key + 1; 0: empty
    V value{};
  };
  // The slot holding `stored` (key + 1), or the empty slot where it would go. Keys are hashed in
  // aligned runs of 8, each run to 8 neighbouring slots: the words of one store (or of a warp's
  // neighbouring stores) share cache lines of the table instead of a miss each (a probe at a
  // random slot per word was 60% of recording a kernel's weak global stores).
  std::size_t probe(std::uint64_t stored) const {
    const std::size_t m = slots_.size() - 1;  // at least 255
    std::size_t i = ((static_cast<std::size_t>(((stored >> 3) * 0x9e3779b97f4a7c15ull) >> 20) << 3) | (stored & 7)) & m;
    while (slots_[i].key != stored && slots_[i].key != 0) i = (i + 1) & m;
    return i;
  }
  void grow() {
    std::vector<slot> old(std::max<std::size_t>(256, slots_.size() * 2));
    old.swap(slots_);
    for (slot& s : old) {
      if (s.key != 0) slots_[probe(s.key)] = std::move(s);
    }
  }
  std::vector<slot> slots_;
  std::size_t used_ = 0;
};

// A 64-bit record per 4-byte word of global memory (0: none), in pages of 2^14 words (64 KiB of
// memory) allocated zeroed at a page's first record: 8 bytes per word recorded. A hash map of
// records per word cost 40 (its slots and a per-thread list of the words), and a kernel that
// writes a large output spent half its time there, in page faults of the map's growth.
class word_records {
 public:
  std::uint64_t& at(std::uint64_t word) {
    const std::uint64_t page = word >> kPageBits;
    if (page != last_page_) {
      std::uint32_t& slot = index_[page];
      if (slot == 0) {
        pages_.emplace_back(static_cast<std::uint64_t*>(std::calloc(kPageWords, sizeof(std::uint64_t))));
        if (pages_.back() == nullptr) throw std::bad_alloc();
        slot = static_cast<std::uint32_t>(pages_.size());
      }
      last_page_ = page;
      last_ = pages_[slot - 1].get();
    }
    return last_[word & (kPageWords - 1)];
  }
  std::uint64_t find(std::uint64_t word) const {
    const std::uint64_t page = word >> kPageBits;
    if (page == last_page_) return last_[word & (kPageWords - 1)];
    const std::uint32_t* slot = index_.find(page);
    return slot == nullptr ? 0 : pages_[*slot - 1].get()[word & (kPageWords - 1)];
  }

 private:
  static constexpr unsigned kPageBits = 14;
  static constexpr std::uint64_t kPageWords = std::uint64_t{1} << kPageBits;
  struct release {
    void operator()(std::uint64_t* p) const { std::free(p); }
  };
  word_map<std::uint32_t> index_;  // page number -> its index in pages_ + 1
  std::vector<std::unique_ptr<std::uint64_t[], release>> pages_;
  std::uint64_t last_page_ = ~std::uint64_t{0};  // the page of the last at(): most accesses stay in it
  std::uint64_t* last_ = nullptr;
};

// The distinct 32-byte sectors a launch touches, as a bitmap per run of 64 sectors (2 KiB):
// an instruction's lanes mostly touch neighbouring sectors, so one probe of a small, cached
// table serves several. A sorted list compacted on doubling cost 2% of a checked launch in its
// sorts, std::unordered_set 4-5% in its nodes, a hash set of single sectors its cache misses.
class sector_set {
 public:
  void insert(const std::uint64_t* first, const std::uint64_t* last) {
    for (; first != last; ++first) {
      const std::uint64_t run = *first >> 6;
      if (last_ == nullptr || run != last_run_) {
        last_ = &runs_[run];  // stays valid until the next insertion of a new run
        last_run_ = run;
      }
      *last_ |= std::uint64_t{1} << (*first & 63);
    }
  }
  // The union with `other`'s sectors (the sets of a parallel launch's workers).
  void merge(const sector_set& other) {
    other.runs_.for_each_key([&](std::uint64_t run, std::uint64_t bits) { runs_[run] |= bits; });
    last_ = nullptr;
  }
  std::size_t count() const {
    std::size_t n = 0;
    runs_.for_each([&](std::uint64_t bits) { n += static_cast<std::size_t>(std::popcount(bits)); });
    return n;
  }

 private:
  word_map<std::uint64_t> runs_;  // run of 64 sectors -> its sectors touched
  std::uint64_t* last_ = nullptr;
  std::uint64_t last_run_ = 0;
};

// One source operand's 32 lanes, resolved once per instruction: a register's lanes in place,
// or an immediate broadcast (so a handler's lane loop reads p[l] without a branch per lane).
struct lanes_in {
  const std::uint64_t* p;
  std::uint64_t buf[kLanes];
  lanes_in(const std::vector<std::uint64_t>& regs, const operand& o) {
    if (o.kind == operand::k_reg) {
      p = regs.data() + std::size_t{o.reg} * kLanes;
    } else {
      std::fill(buf, buf + kLanes, o.imm);
      p = buf;
    }
  }
  lanes_in(const lanes_in&) = delete;
  lanes_in& operator=(const lanes_in&) = delete;
  std::uint64_t operator[](unsigned l) const { return p[l]; }
};

// Runs f(lane) for the lanes of `mask`: a plain loop over the whole warp (which the compiler
// can unroll and vectorise) when every lane runs.
template <class F>
inline void for_mask(std::uint32_t mask, F&& f) {
  if (mask == 0xffffffffu) {
    for (unsigned l = 0; l < kLanes; ++l) f(l);
  } else {
    for_lanes(mask, f);
  }
}

// Whether the processor has AVX2, FMA and F16C (every AVX2 processor has the other two): lane
// loops compiled for them (target attributes) are used where it does, with the same results
// as the plain loops.
inline bool cpu_has_avx2() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  }();
  return has;
#else
  return false;
#endif
}

// The schedule's random numbers: xoshiro256** (Blackman and Vigna), its state seeded from the
// launch's seed by splitmix64. A few instructions per draw where std::mt19937_64 refilled a
// 2.5 KB table every 312 draws (2% of a checked launch); a seed still gives one sequence.
class schedule_rng {
 public:
  explicit schedule_rng(std::uint64_t seed) {
    for (std::uint64_t& x : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      x = z ^ (z >> 31);
    }
  }
  std::uint64_t operator()() {
    const std::uint64_t r = std::rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return r;
  }

 private:
  std::uint64_t s_[4];
};

// ---- blocks in parallel (parallel.cpp) ------------------------------------------------
// The global words the blocks of a parallel launch wrote, per 4-byte word: the block that wrote
// it (its launch index + 1; 0: none) and the written flag. A block writing a word another block
// wrote is a conflict, found at the write; a block reading a word another block wrote (before or
// after the read) is one too, found when the launch ends from each worker's log of the ranges its
// blocks read (executor::read_runs_). Either way the blocks may communicate, so the launch runs
// again one block at a time (execute.cpp, "Blocks in parallel"). Shared by the workers: a cell
// changes only by compare-and-swap, pages are created under a lock and never move; only pages
// holding written words exist.
class footprint {
 public:
  static constexpr std::uint32_t kWritten = 1u << 31, kBlock = kWritten - 1;
  static constexpr unsigned kPageBits = 14;
  static constexpr std::uint64_t kPageWords = std::uint64_t{1} << kPageBits;
  // The cells of page `page` (words page << kPageBits ...), zeroed when created.
  std::uint32_t* page(std::uint64_t page);
  // The cells of page `page`, or null where no block wrote a word of it (once the workers are done).
  const std::uint32_t* find(std::uint64_t page) const;

 private:
  struct release {
    void operator()(std::uint32_t* p) const { std::free(p); }
  };
  std::mutex lock_;
  word_map<std::uint32_t> index_;  // page number -> its index in pages_ + 1
  std::vector<std::unique_ptr<std::uint32_t[], release>> pages_;
};

// The launch-wide state of a parallel launch: the blocks' order (workers take the next one),
// the footprint, and the stop every worker obeys once one of them found a conflict or a finding.
struct parallel_launch {
  const std::vector<std::uint64_t>& order;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  footprint words;
};

// Thrown inside a worker of a parallel launch: its block touched another block's words, or
// another worker stopped the launch. Never leaves the executor.
struct parallel_abort {};

class executor;
struct lane_io;
// One instruction's handler: runs `in` (at index pc) for the lanes of `mask` (guards applied).
using handler = void (executor::*)(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
// Each opcode's handler (handlers.cpp), indexed by op; control flow and warp-synchronous
// opcodes are the scheduler's (executor::step) and have exec_unsupported there.
extern const std::array<handler, static_cast<std::size_t>(op::unsupported) + 1> handlers;

class executor {
 public:
  executor(const module& m, const function& f, dim3s grid, dim3s block, std::size_t dynamic_shared, const void* params,
           const global_memory& memory, const schedule& sched)
      : m_(m), f_(f), grid_(grid), block_(block), params_(static_cast<const unsigned char*>(params)),
        memory_(memory), sched_(sched), rng_(sched.seed) {
    threads_ = block.x * block.y * block.z;
    shared_bytes_ = dynamic_shared > 0 ? f.dynamic_shared_offset + dynamic_shared : f.static_shared;
    dynamic_shared_ = dynamic_shared;
    shadow_on_ = sched.race_check || sched.uninitialized_check;
    fence_check_ = sched.race_check;
    track_defined_ = sched.uninitialized_check && !sched.uninitialized_at_load;
    if (shadow_on_) take_shadow();
  }
  ~executor() { give_back_shadow(); }
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;

  launch_result run();

  // ---- handlers, one per instruction family (files named after the family) --------------
  // alu.cpp
  void exec_mov(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_arith(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void arith_f32(const lane_io& io);
  void arith_f64(const lane_io& io);
  void arith_f16(const lane_io& io);
  void arith_int(const lane_io& io);
  void exec_rem(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_minmax(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_negabs(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_logic(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_shift(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_setp(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_selp(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_ex2(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_math(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_copysign(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  // A decoded form (decoded::form not none) over a whole warp: what its opcode's handler does,
  // with the operands resolved at parse.
  void exec_decoded(warp& w, const decoded& dc);
  void exec_decoded_more(warp& w, const decoded& dc);
  // bits.cpp
  void exec_bit_count(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_brev(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_bfe(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_bfi(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_prmt(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_lop3(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_bmsk(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  // convert.cpp
  void exec_cvt(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_cvta(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  // memory.cpp
  void exec_ld_st(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_cp_async(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_cp_async_commit(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_cp_async_wait(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_atom(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_fence(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_prefetch(warp&, const instr&, std::uint32_t, std::uint32_t) {}  // a hint: no effect, nothing checked
  // nanosleep: the ISA allows any duration from 0 to twice the operand, so none (the schedule,
  // randomized or not, already lets every other warp run before the thread's next instruction).
  void exec_nanosleep(warp&, const instr&, std::uint32_t, std::uint32_t) {}
  // warp.cpp (vote and match run through warp_sync, like shfl)
  void exec_activemask(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  // tensor.cpp
  void exec_ldmatrix(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
    ldmatrix(w, in, pc, mask);
    if (undef_after_) defined_after(w, in, pc, mask);
  }
  void exec_mma(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) { mma(w, in, pc, mask); }
  void exec_wmma(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
    wmma_load_store(w, in, pc, mask);
    if (undef_after_) defined_after(w, in, pc, mask);
  }
  void exec_wmma_mma(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) { wmma_mma(w, in, pc, mask); }
  // call.cpp: the calls nvcc emits for device printf and assert
  void exec_call(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_trap(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  // definedness.cpp: what an instruction does to undefined lanes (before its handler runs,
  // in warps with undefined lanes), and the undefined bytes it read or stored (after it)
  void defined_before(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void defined_after(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  // execute.cpp
  void exec_clock(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void exec_unsupported(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);

 private:
  friend struct lane_io;
  // ---- messages ---------------------------------------------------------------------------
  std::string thread_name(std::uint32_t tid) const;
  std::string at(std::uint32_t instr_index) const;
  // ---- CTA -------------------------------------------------------------------------------
  void run_block(std::uint64_t index);  // block `index` of the launch (x fastest): cta_index_, then run_cta
  void run_cta(dim3s id);
  static bool has_runnable(const warp& w);
  [[noreturn]] void deadlock() const;
  void regroup(warp& w);
  static void regroup_if_diverged(warp& w);
  static void write_back(warp& w);
  bool step(warp& w);
  // ---- barriers --------------------------------------------------------------------------
  bool bar_sync(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void maybe_release_barrier();
  static std::uint32_t dead_lanes(const warp& w);
  static std::uint32_t ready_lanes(std::uint32_t arrived, const std::uint32_t* masks);
  bool warp_sync(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void release_waiters(warp& w);
  [[noreturn]] void cta_overrun() const;
  void sync_execute(warp& w, const instr& in, std::uint32_t pc, std::uint32_t ready, const std::uint32_t* masks);
  // ---- memory ----------------------------------------------------------------------------
  bool happens_before(const access_rec& a, std::uint32_t tid, const warp& w, unsigned lane) const;
  [[noreturn]] void race(const access_rec& first, bool first_write, std::uint32_t instr_index, std::uint32_t tid,
                         bool write, std::size_t offset) const;
  // One lane's shared access: the bounds and alignment inline (every lane of every ld/st.shared),
  // the shadow's checks and records out of line.
  void shared_access(warp& w, unsigned lane, std::uint32_t instr_index, std::uint64_t offset, std::size_t size,
                     bool write, bool strong = false) {
    if (offset + size > shared_.size() || offset + size < offset || misaligned(offset, size)) {
      shared_bounds_finding(instr_index, w.index * kLanes + lane, offset, size);
    }
    if (shadow_on_) shadow_access(w, lane, instr_index, offset, size, write, strong);
  }
  void shadow_access(warp& w, unsigned lane, std::uint32_t instr_index, std::uint64_t offset, std::size_t size,
                     bool write, bool strong);
  void shadow_lanes(warp& w, std::uint32_t instr_index, std::uint32_t mask, const std::uint64_t* addr, std::size_t size,
                    bool write, bool strong);
  [[noreturn, gnu::cold, gnu::noinline]] void shadow_finding(const shadow_byte& s, access_rec me, bool write,
                                                             std::size_t byte) const;
  [[gnu::cold, gnu::noinline]] void undefined_read(const shadow_byte& s, access_rec me, std::size_t byte);
  void shadow_cell(shadow_byte& s, access_rec me, const warp& w, unsigned lane, bool write, bool strong,
                   std::size_t byte);
  // The shadow's storage, kept from one executor to the next (a few per process, execute.cpp):
  // allocating and zeroing it for every launch (and every worker of a parallel one) cost its
  // page faults each time. It comes with the last CTA epoch its words may hold, and this
  // executor's CTAs count on from there, so none of its words belongs to them (shadow_at).
  void take_shadow();
  void give_back_shadow();
  // Word `word`'s shadow in this CTA: its records, emptied at the CTA's first access to it.
  shadow_word& shadow_at(std::size_t word) {
    shadow_word& s = shadow_[word];
    if (s.cta != cta_epoch_) {
      s = shadow_word{};
      s.cta = cta_epoch_;
    }
    return s;
  }
  // Requests the shadow words of [offset, offset + size) of shared memory (the first and the
  // last) ahead of their checks: the shadow (14 bytes per byte of shared memory) is larger than
  // the second-level cache, and a warp's lanes' words are requested together this way. A hint.
  void prefetch_shadow(std::uint64_t offset, std::size_t size) const {
    const std::uint64_t first = offset / 4, last = (offset + size - 1) / 4;
    if (first <= last && last < shadow_.size()) {  // (a bad offset is reported by the check itself)
      __builtin_prefetch(&shadow_[first], 1);
      __builtin_prefetch(&shadow_[last], 1);
    }
  }
  shadow_byte* split_word(std::size_t word);
  void unsplit_if_uniform(std::size_t word);
  bool conflicts(const access_rec& a, std::uint32_t tid, const warp& w, unsigned lane, bool strong) const;
  // ---- definedness (definedness.cpp) -----------------------------------------------------
  std::uint32_t marks(const warp& w, const operand& o) const;
  const origin& origin_of(const warp& w, const operand& o, std::uint32_t lanes) const;
  void set_marks(warp& w, std::uint32_t slot, std::uint32_t written, std::uint32_t undefined, const origin& o);
  void set_marks(warp& w, const operand& dst, std::uint32_t written, std::uint32_t undefined, const origin& o);
  void sync_marks(warp& w, const instr& in, std::uint32_t ready);
  void shfl_marks(warp& w, const instr& in, std::uint32_t ready, const std::uint32_t* from, std::uint32_t dead_from);
  bool shared_undefined(std::uint32_t pc, std::uint32_t tid, std::uint64_t offset, std::size_t size, origin& o);
  void mark_shared(std::uint64_t offset, std::size_t size, const origin& o);
  void check_defined(const warp& w, std::uint32_t pc, const operand& o, std::uint32_t lanes, const char* use) const;
  [[noreturn, gnu::cold, gnu::noinline]] void undefined_use(std::uint32_t pc, std::uint32_t tid, const std::string& use,
                                                            const origin& o) const;
  unsigned char* atomic_target(warp& w, const instr& in, std::uint32_t pc, unsigned lane, std::uint64_t addr, std::size_t size);
  void sync_shfl(warp& w, const instr& in, std::uint32_t pc, std::uint32_t ready, const std::uint32_t* masks);
  void shfl_whole_warp(warp& w, const instr& in);
  bool shfl_decoded(warp& w, const decoded& dc);
  void sync_vote(warp& w, const instr& in, std::uint32_t ready);
  void sync_match(warp& w, const instr& in, std::uint32_t ready);
  void sync_redux(warp& w, const instr& in, std::uint32_t ready);
  std::uint64_t special_value(special sp, unsigned warp_index, unsigned lane) const;
  void global_check(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t addr, std::size_t size) const;
  // Whether [addr, addr + size) lies in one module variable or one live allocation: then so does
  // every access inside it, and one look-up serves a warp's lanes (global_check finds the first
  // bad lane where it does not).
  bool global_range_valid(std::uint64_t addr, std::size_t size) const;
  [[noreturn, gnu::cold, gnu::noinline]] void global_finding(std::uint32_t instr_index, std::uint32_t tid,
                                                             std::uint64_t addr, std::size_t size) const;
  [[noreturn, gnu::cold, gnu::noinline]] void shared_bounds_finding(std::uint32_t instr_index, std::uint32_t tid,
                                                                    std::uint64_t offset, std::size_t size) const;
  [[noreturn, gnu::cold, gnu::noinline]] void cp_async_finding(std::uint32_t pc, std::uint32_t tid, std::uint32_t size,
                                                               std::uint32_t src_size, std::uint32_t dst,
                                                               std::uint64_t src) const;
  unsigned char* local_at(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t offset, std::size_t size);
  void memory_op(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  // `size` bytes at generic address `addr` as thread `tid` sees them (global, or its local window), checked.
  unsigned char* generic_at(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t addr, std::size_t size);
  // ---- device printf and assert (call.cpp) ---------------------------------------------
  std::string device_string(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t addr);
  std::string vprintf(std::uint32_t instr_index, std::uint32_t tid, std::uint64_t format, std::uint64_t args,
                      std::int32_t& parsed);
  void flush_device_output();
  // ---- ldmatrix and mma: warp-wide (.sync.aligned) ------------------------------------
  void require_whole_warp(const warp& w, std::uint32_t pc, std::uint32_t mask) const;
  void ldmatrix(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void mma(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void wmma_load_store(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void wmma_mma(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void count_global(bool load, std::uint64_t* sectors, unsigned n, std::uint64_t bytes);
  unsigned char* wmma_element(warp& w, unsigned lane, std::uint32_t pc, space where, std::uint64_t addr,
                              std::size_t size, bool write);
  // ---- cp.async ------------------------------------------------------------------------
  void cp_async(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask);
  void land_random();
  void land(std::uint32_t index);
  void issue_shadow(const warp& w, unsigned lane, const copy_op& c);
  void complete(std::uint32_t index, const warp& w, unsigned lane);
  void wait_group(warp& w, std::uint32_t mask, std::uint64_t n_pending, bool commit_first);
  // ---- the ALU -----------------------------------------------------------------------------
  [[noreturn]] void unsupported(std::uint32_t pc, std::uint32_t tid, const std::string& why) const;
  // ---- blocks in parallel (parallel.cpp) -----------------------------------------------------
  // Whether the kernel's code lets its blocks run on several threads: no global atomic, strong
  // global access, fence of gpu or sys scope, or clock read (blocks that use them communicate or
  // see the launch's progress; they run one at a time).
  bool blocks_may_run_in_parallel() const;
  // Runs the blocks of `order` on `threads` workers. True when done (the results merged into
  // result_); false when blocks touched each other's words or one stopped with a finding: global
  // memory is then as it was before the launch, and the blocks must run one at a time.
  bool run_parallel(const std::vector<std::uint64_t>& order, unsigned threads);
  void run_blocks(parallel_launch& p);  // a worker: the next block of the order, until none is left
  void claim(std::uint64_t word);
  // Whether a block read a word another block wrote (the read logs against the footprint).
  static bool reads_conflict(const parallel_launch& p, const std::vector<std::unique_ptr<executor>>& workers);
  void save_old(std::uint64_t addr, std::size_t size);
  void roll_back() const;
  // A global read or write of the current block, in a parallel launch's worker. A write claims
  // its words (a word another block wrote ends the worker before the write) and saves their old
  // bytes; a read is logged, merged with the last range where it extends or lies in it (a warp's
  // neighbouring lanes), and ends the worker where the page it reads is at hand and another block
  // wrote the word (the log, checked at the end, finds the rest). Inline: the common case is a
  // compare or two.
  void parallel_read(std::uint64_t addr, std::size_t size) {
    if (par_ == nullptr) return;
    const auto me = static_cast<std::uint32_t>(cta_index_ + 1);
    read_run* r = read_runs_.empty() ? nullptr : &read_runs_.back();
    if (r != nullptr && r->block == me && addr >= r->lo && addr <= r->lo + r->size &&
        addr + size - r->lo <= ~std::uint32_t{0}) {
      r->size = std::max(r->size, static_cast<std::uint32_t>(addr + size - r->lo));
    } else {
      read_runs_.push_back({addr, static_cast<std::uint32_t>(size), me});
    }
    read_check(addr, size);
  }
  void read_check(std::uint64_t addr, std::size_t size) const {
    const auto me = static_cast<std::uint32_t>(cta_index_ + 1);
    for (std::uint64_t word = addr / 4, last = (addr + size - 1) / 4; word <= last; ++word) {
      if ((word >> footprint::kPageBits) != fp_page_) continue;
      const std::uint32_t now =
          std::atomic_ref<std::uint32_t>(fp_cells_[word & (footprint::kPageWords - 1)]).load(std::memory_order_relaxed);
      if ((now & footprint::kWritten) != 0 && (now & footprint::kBlock) != me) throw parallel_abort{};
    }
  }
  void parallel_write(std::uint64_t addr, std::size_t size) {
    if (par_ == nullptr) return;
    const auto mine = static_cast<std::uint32_t>(cta_index_ + 1) | footprint::kWritten;
    for (std::uint64_t word = addr / 4, last = (addr + size - 1) / 4; word <= last; ++word) {
      if ((word >> footprint::kPageBits) != fp_page_ ||
          std::atomic_ref<std::uint32_t>(fp_cells_[word & (footprint::kPageWords - 1)]).load(std::memory_order_relaxed) !=
              mine) {
        claim(word);
      }
    }
    save_old(addr, size);
  }
  // ---- publication of global stores between blocks (memory.cpp) --------------------------
  void note_weak_store(std::uint32_t tid, std::uint64_t addr, std::size_t bytes);
  void check_published(std::uint32_t pc, std::uint32_t tid, std::uint64_t addr, std::size_t bytes) const;
  void publish(std::uint32_t tid);
  void close_publications();

  [[noreturn]] void fail(const std::string& what) const {
    throw sim_error("kernel " + f_.name + " (module " + m_.name + "): " + what);
  }
  [[noreturn]] void fail_at(std::uint32_t instr_index, std::uint32_t tid, const std::string& what) const {
    fail(what + " at " + at(instr_index) + ", " + thread_name(tid));
  }

  std::uint64_t get(const warp& w, const operand& o, unsigned l) const {
    return o.kind == operand::k_reg ? w.regs[o.reg * kLanes + l] : o.imm;
  }
  bool get_pred(const warp& w, const operand& o, unsigned l) const { return ((get(w, o, l) & 1) != 0) != o.negate; }
  static void set(warp& w, const operand& o, unsigned l, std::uint64_t v) { w.regs[o.reg * kLanes + l] = v; }

  static std::string hex(std::uint32_t v) {
    std::ostringstream os;
    os << std::hex << v;
    return os.str();
  }
  static std::string hex64(std::uint64_t v) {
    std::ostringstream os;
    os << std::hex << v;
    return os.str();
  }

  std::uint64_t address(const warp& w, const operand& o, unsigned l) const {
    return (o.has_base ? w.regs[o.reg * kLanes + l] : 0) + o.imm;
  }

  const module& m_;
  const function& f_;
  dim3s grid_, block_, cta_{};
  const unsigned char* params_;
  const global_memory& memory_;
  const schedule& sched_;
  schedule_rng rng_;
  // A register's first bits in a CTA (first_bits): given at the first instruction that names
  // it, not for the whole register file at the CTA's start (nvcc declares thousands of
  // registers; filling them all was a fifth of a short CTA). Garbage from four xorshift64
  // streams seeded per CTA from rng_, or zeros without randomize.
  std::uint32_t cta_epoch_ = 0;
  std::uint64_t garbage_[4] = {};
  void first_bits(warp& w, std::uint32_t slot);
  // A 1-in-4 chance per instruction (landing a cp.async) from 2 bits of a 64-bit draw: a draw
  // per instruction was 3% of a checked launch.
  std::uint64_t coin_bits_ = 0;
  unsigned coin_left_ = 0;
  // A draw in [0, n) by a multiply and a shift (Lemire's reduction: a division per draw was
  // most of a random landing's cost).
  std::uint64_t draw_below(std::uint64_t n) {
    __extension__ using u128 = unsigned __int128;
    return static_cast<std::uint64_t>((u128{rng_()} * n) >> 64);
  }
  bool one_in_four() {
    if (coin_left_ == 0) {
      coin_bits_ = rng_();
      coin_left_ = 32;
    }
    --coin_left_;
    const bool hit = (coin_bits_ & 3) == 0;
    coin_bits_ >>= 2;
    return hit;
  }
  unsigned threads_ = 0;
  std::size_t shared_bytes_ = 0, dynamic_shared_ = 0;
  bool shadow_on_ = true;
  // Definedness (definedness.cpp): on with uninitialized_check unless uninitialized_at_load.
  // undef_read_: the current instruction read undefined shared bytes (the first one's origin in
  // undef_origin_); undef_after_: it has definedness work after its handler (defined_after).
  bool track_defined_ = true;
  bool undef_read_ = false, undef_after_ = false;
  origin undef_origin_;
  std::vector<origin> shared_origin_;  // per word of shared memory written with undefined lanes
  std::vector<warp> warps_;
  std::vector<unsigned char> shared_;
  std::vector<shadow_word> shadow_;        // per 4-byte word of shared memory (shadow_at)
  std::vector<shadow_byte> shadow_bytes_;  // per byte, for split words (allocated at the first split)
  std::vector<unsigned char> local_;
  std::vector<thread_async> async_;
  std::vector<copy_op> copies_;            // cp.async copies in flight or not yet waited for
  std::vector<std::uint32_t> free_copies_;  // entries of copies_ whose copy is complete (reused:
                                            // a small table stays in cache)
  std::vector<std::uint32_t> unlanded_;
  std::uint32_t epoch_ = 0;
  unsigned bar_waiting_ = 0, live_ = 0;
  std::uint32_t bar_instr_ = 0;
  bool bar_red_ = false;       // the waiting threads are at bar.red (else bar.sync)
  unsigned bar_count_ = 0;     // bar.red: the threads whose predicate is true
  std::uint64_t cta_end_ = 0;  // result_.warp_instructions at which the current CTA overruns
  sector_set sectors_read_, sectors_written_, async_sectors_;
  // Weak global stores of this launch, per 4-byte word: their writer (block and thread) and how
  // many times that thread had published (a fence of gpu or sys scope, or a release) before the
  // store. Blocks of one launch share data only through published stores (CUDA's memory model),
  // so a block reading a word another block wrote, whose writer did not publish after the
  // store, is a missing fence (or a race). Strong stores (relaxed, volatile, atomics) are not
  // recorded: one word of them is coherent by itself. With race_check. A record: bits 0-9 the
  // thread, 10-25 its publications before the store (saturating: a store after 65,535 of them
  // counts as published), 26-63 the block's launch index + 1 (x fastest).
  static constexpr unsigned kRecordCtaShift = 26;
  static constexpr std::uint64_t kRecordCtas = (std::uint64_t{1} << (64 - kRecordCtaShift)) - 1;
  static constexpr std::uint32_t kMostPublications = 0xffff;
  word_records weak_writes_;
  std::uint64_t weak_lo_ = ~std::uint64_t{0}, weak_hi_ = 0;  // their words' range: a cheap filter for loads
  std::uint64_t cta_index_ = 0;                  // the current block's launch index (x fastest)
  std::vector<std::uint16_t> publications_;      // per thread of the current block: its publications so far
  word_map<std::uint16_t> published_by_;         // (block index << 10 | thread) of finished blocks -> publications, if any
  struct printed {  // one device printf call's text, with where it comes from (the output's order)
    std::uint64_t cta;
    std::uint32_t tid;
    std::string text;
  };
  std::vector<printed> printed_;
  launch_result result_;
  // The missing-fence check's records (note_weak_store, check_published): with race_check, but
  // not in a parallel launch's workers, where a block reading another's store is a conflict
  // (and the run one block at a time that follows checks it).
  bool fence_check_ = true;
  // A parallel launch's worker (null otherwise): the shared state, this worker's footprint pages
  // (the last one, and all it has used), and the old bytes of every global write it made, in
  // order (runs of neighbouring bytes): rolled back when the launch runs again one at a time.
  parallel_launch* par_ = nullptr;
  std::uint64_t fp_page_ = ~std::uint64_t{0};
  std::uint32_t* fp_cells_ = nullptr;
  word_map<std::uint32_t*> fp_pages_;
  struct undo_run {
    std::uint64_t addr;
    std::size_t at, size;  // its old bytes: undo_bytes_[at, at + size)
  };
  std::vector<undo_run> undo_;
  std::vector<unsigned char> undo_bytes_;
  struct read_run {
    std::uint64_t lo;
    std::uint32_t size, block;  // bytes [lo, lo + size) read by block (launch index + 1)
  };
  std::vector<read_run> read_runs_;
};

// A handler's view of its instruction's operands, lane by lane: read as raw bits (rd), or
// sign-extended through the instruction's type (rs); results stored truncated to it (wr).
struct lane_io {
  executor& x;
  warp& w;
  const instr& in;
  std::uint32_t pc, mask;
  vtype t = in.type;
  unsigned bits = type_bits(in.type);
  std::uint64_t wm = width_mask(bits);
  bool sgn = is_signed(in.type);

  std::uint64_t rd(unsigned k, unsigned l) const { return x.get(w, in.ops[k], l); }
  std::int64_t rs(unsigned k, unsigned l) const { return sext(x.get(w, in.ops[k], l), bits); }
  bool pred(unsigned k, unsigned l) const { return x.get_pred(w, in.ops[k], l); }
  void wr(unsigned l, std::uint64_t v) const { executor::set(w, in.ops[0], l, v & wm); }
  std::uint32_t tid(unsigned l) const { return w.index * kLanes + l; }
  // A form of the instruction the executor does not implement: a finding naming it.
  [[noreturn]] void no(const std::string& why) const {
    x.unsupported(pc, tid(static_cast<unsigned>(std::countr_zero(mask))), why + " (" + in.text + ")");
  }
  [[noreturn]] void fail(unsigned l, const std::string& what) const { x.fail_at(pc, tid(l), what); }
};

}  // namespace rungs::sim::detail
