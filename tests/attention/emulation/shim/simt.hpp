// A small SIMT emulator that runs CUDA kernel source on the CPU, for tests on machines
// without a GPU. It is not a CUDA implementation: it provides exactly what rungs' attention
// kernels use, with the semantics they rely on, and checks those semantics as it goes.
//
//  * CTAs run one after another; the threads of a CTA are cooperative fibers (ucontext) on one
//    OS thread, so __shared__ variables (defined as function statics) are shared by a CTA's
//    threads, as on the GPU, and keep their contents between CTAs (never zeroed).
//  * __syncthreads() is a barrier of the CTA's live threads; shuffles and warp reductions are
//    barriers of the lanes named by their mask. A barrier nobody can complete (a lane named in
//    a mask that never arrives, a __syncthreads() some threads skip) is reported as a deadlock.
//  * cp.async copies (the device.cuh shim) are deferred until the issuing thread waits for
//    their group, so a read of a stage before its wait sees stale data.
//  * Global memory is host memory: run under AddressSanitizer, an out-of-bounds read of a
//    cache, a table or a query buffer is reported where it happens.
//
// What it cannot show: timing, occupancy, register pressure, real warp scheduling, memory
// ordering beyond the barriers above.
#pragma once

#include <ucontext.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define RUNGS_SIMT_ASAN 1
#else
#define RUNGS_SIMT_ASAN 0
#endif

// kernels.cuh leaves its tensor-core kernels out under this emulator (no mma, no ldmatrix).
#define RUNGS_ATTENTION_SIMT_EMULATION 1

// CUDA keywords and built-ins, as far as the kernels use them.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct uint3_emu {
  unsigned x = 0, y = 0, z = 0;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

inline uint3_emu threadIdx, blockIdx, blockDim, gridDim;

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
template <class T>
T __ldg(const T* p) {
  return *p;
}

namespace simt {

struct fiber {
  ucontext_t context{};
  char* stack = nullptr;
  std::size_t stack_size = 0;
  bool done = false;
  bool blocked = false;
  std::uint64_t waiting_on = 0;
  // cp.async groups: copies issued since the last commit, and committed groups not yet waited for.
  struct copy {
    void* dst;
    const void* src;
    bool valid;
  };
  std::vector<copy> open_group;
  std::vector<std::vector<copy>> committed;
};

struct barrier_state {
  int arrived = 0;
  int expected = 0;
};

struct cta {
  std::vector<fiber> fibers;
  ucontext_t scheduler{};
  int current = 0;
  int live = 0;
  std::map<std::uint64_t, barrier_state> barriers;
  std::function<void()> body;
  std::string error;
  float exchange[32][32] = {};  // [warp][lane] values being shuffled
  const void* sched_stack_bottom = nullptr;
  std::size_t sched_stack_size = 0;
};

inline cta* current_cta = nullptr;
inline std::vector<std::unique_ptr<char[]>> stack_pool;  // reused by every CTA
inline constexpr std::uint64_t kSyncThreads = std::uint64_t{1} << 48;
inline constexpr std::size_t kStackBytes = std::size_t{128} << 10;  // kernels use a few KiB; ASan more

inline fiber& self() { return current_cta->fibers[static_cast<std::size_t>(current_cta->current)]; }

// Fiber -> scheduler.
inline void yield_to_scheduler(bool finishing) {
  cta& c = *current_cta;
  fiber& f = self();
#if RUNGS_SIMT_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(finishing ? nullptr : &fake, c.sched_stack_bottom, c.sched_stack_size);
  swapcontext(&f.context, &c.scheduler);
  __sanitizer_finish_switch_fiber(fake, &c.sched_stack_bottom, &c.sched_stack_size);
#else
  (void)finishing;
  swapcontext(&f.context, &c.scheduler);
#endif
}

/// Records an error and ends the calling thread (exceptions cannot cross fiber stacks); the
/// launch rethrows it.
[[noreturn]] inline void fail(const std::string& message) {
  if (current_cta->error.empty()) current_cta->error = message;
  self().done = true;
  yield_to_scheduler(true);
  std::abort();  // never resumed
}

inline void release(std::uint64_t key) {
  cta& c = *current_cta;
  for (fiber& f : c.fibers) {
    if (f.blocked && f.waiting_on == key) f.blocked = false;
  }
  c.barriers[key].arrived = 0;
}

/// Arrive at barrier `key` of `expected` threads and wait for the others.
inline void arrive(std::uint64_t key, int expected) {
  barrier_state& b = current_cta->barriers[key];
  if (key == kSyncThreads) {
    b.expected = expected = current_cta->live;  // threads that returned do not take part
  } else if (b.arrived == 0) {
    b.expected = expected;
  } else if (b.expected != expected) {
    fail("barrier " + std::to_string(key) + ": threads disagree on its size (" + std::to_string(b.expected) + " vs " +
         std::to_string(expected) + ")");
  }
  if (++b.arrived == b.expected) {
    release(key);
    return;
  }
  fiber& f = self();
  f.blocked = true;
  f.waiting_on = key;
  yield_to_scheduler(false);
}

inline unsigned lane() { return threadIdx.x % 32u; }
inline unsigned warp() { return threadIdx.x / 32u; }

inline std::uint64_t warp_key(unsigned mask) { return (std::uint64_t{warp()} << 32) | mask; }

inline void check_member(unsigned mask, const char* what) {
  if (((mask >> lane()) & 1u) == 0) {
    fail(std::string(what) + ": lane " + std::to_string(lane()) + " is not in its own mask");
  }
}

/// Sum over the lanes of `mask` (every lane of the mask gets it).
inline float group_sum(float v, unsigned mask) {
  check_member(mask, "lane-group sum");
  cta& c = *current_cta;
  c.exchange[warp()][lane()] = v;
  arrive(warp_key(mask), std::popcount(mask));
  float sum = 0.0f;
  for (unsigned l = 0; l < 32; ++l) {
    if ((mask >> l) & 1u) sum += c.exchange[warp()][l];
  }
  arrive(warp_key(mask), std::popcount(mask));  // all have read before anyone writes again
  return sum;
}

/// Value of lane `source` of `mask` (every lane of the mask gets it).
inline float shuffle(float v, unsigned mask, int source) {
  check_member(mask, "__shfl_sync");
  cta& c = *current_cta;
  c.exchange[warp()][lane()] = v;
  arrive(warp_key(mask), std::popcount(mask));
  const float out = c.exchange[warp()][static_cast<unsigned>(source) % 32u];
  arrive(warp_key(mask), std::popcount(mask));
  return out;
}

inline void fiber_entry() {
  cta& c = *current_cta;
#if RUNGS_SIMT_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &c.sched_stack_bottom, &c.sched_stack_size);
#endif
  c.body();
  self().done = true;
  yield_to_scheduler(true);
}

inline void run_cta(int threads, const std::function<void()>& body) {
  cta c;
  current_cta = &c;
  c.body = body;
  c.fibers.resize(static_cast<std::size_t>(threads));
  c.live = threads;
  while (stack_pool.size() < static_cast<std::size_t>(threads)) stack_pool.emplace_back(new char[kStackBytes]);
  for (std::size_t t = 0; t < c.fibers.size(); ++t) {
    fiber& f = c.fibers[t];
    f.stack = stack_pool[t].get();
    f.stack_size = kStackBytes;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_entry, 0);
  }
  int next = 0;
  for (;;) {
    int pick = -1;
    for (int i = 0; i < threads; ++i) {
      const int t = (next + i) % threads;
      const fiber& f = c.fibers[static_cast<std::size_t>(t)];
      if (!f.done && !f.blocked) {
        pick = t;
        break;
      }
    }
    if (pick < 0) {
      if (c.live == 0) break;
      std::string waits;
      for (std::size_t t = 0; t < c.fibers.size(); ++t) {
        if (c.fibers[t].blocked && waits.size() < 200) waits += " t" + std::to_string(t) + "@" + std::to_string(c.fibers[t].waiting_on);
      }
      current_cta = nullptr;
      throw std::runtime_error("simt: deadlock in CTA (" + std::to_string(blockIdx.x) + ", " + std::to_string(blockIdx.y) +
                               ", " + std::to_string(blockIdx.z) + "): threads wait at barriers no one completes:" + waits);
    }
    c.current = pick;
    threadIdx = {static_cast<unsigned>(pick) % blockDim.x, static_cast<unsigned>(pick) / blockDim.x, 0};
    fiber& f = c.fibers[static_cast<std::size_t>(pick)];
#if RUNGS_SIMT_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f.stack, f.stack_size);
    swapcontext(&c.scheduler, &f.context);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    swapcontext(&c.scheduler, &f.context);
#endif
    if (f.done) {
      --c.live;
      // __syncthreads() counts live threads: a thread that returned no longer holds others.
      barrier_state& b = c.barriers[kSyncThreads];
      if (b.arrived > 0 && b.arrived == c.live) release(kSyncThreads);
    }
    if (!c.error.empty()) {
      current_cta = nullptr;
      throw std::runtime_error("simt: CTA (" + std::to_string(blockIdx.x) + ", " + std::to_string(blockIdx.y) + ", " +
                               std::to_string(blockIdx.z) + "), thread " + std::to_string(pick) + ": " + c.error);
    }
    next = pick + 1;
  }
  current_cta = nullptr;
}

/// Runs `body` (a kernel call) for every CTA of the grid, `threads` threads each (1-D blocks).
inline void launch(uint3_emu grid, int threads, const std::function<void()>& body) {
  gridDim = grid;
  blockDim = {static_cast<unsigned>(threads), 1, 1};
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        run_cta(threads, body);
      }
    }
  }
}

}  // namespace simt

inline void __syncthreads() { simt::arrive(simt::kSyncThreads, simt::current_cta->live); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  simt::check_member(mask, "__syncwarp");
  simt::arrive(simt::warp_key(mask), std::popcount(mask));
}
inline float __shfl_sync(unsigned mask, float v, int source) { return simt::shuffle(v, mask, source); }
// Integers (the KV pipeline's block ids) travel as the float exchange's bits, unconverted.
inline int __shfl_sync(unsigned mask, int v, int source) {
  return std::bit_cast<int>(simt::shuffle(std::bit_cast<float>(v), mask, source));
}
inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
  return simt::shuffle(v, mask, static_cast<int>(simt::lane()) ^ lane_mask);
}
