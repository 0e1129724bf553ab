// rungs' host CUDA runtime: the runtime calls rungs' CUDA tests, cuda_backend and the serving
// demo make, and nvcc's registration and launch ABI, implemented on the CPU. Kernels run as
// nvcc's own PTX (read from the fatbinary of the same compilation) on the PTX executor.
//
// The simulated device (docs/kernels.md, "The device half on the CPU"):
//  - one device, H100-like: 132 SMs, compute capability 9.0, 80 GiB, 48 KiB shared memory per
//    block by default; device memory is host memory handed out 256-byte aligned, between
//    64 KiB red zones, and filled with 0xff (NaN for every float type), tracked in a registry
//    every kernel access and every copy is checked against;
//  - every stream executes its work when it is issued (one legal serialisation of a single
//    device), so synchronisation calls only check their arguments and report errors;
//  - a kernel fault (a finding of the executor) is printed to stderr as "rungs-sim: ..." and
//    becomes a sticky cudaErrorLaunchFailure, as a device fault is on a GPU (a failed device
//    assert a sticky cudaErrorAssert);
//  - a refused launch (a kernel, or its whole module, holds a construct the executor cannot
//    parse) is printed the same way, naming kernel, PTX line and construct, and is a sticky
//    cudaErrorNoKernelImageForDevice: a program that checks only cudaDeviceSynchronize still
//    sees it (the other kernels of the module run);
//  - stream capture records kernel launches, memcpys and memsets into a graph instead of
//    running them; synchronous or allocating calls during a global or thread-local capture fail
//    with cudaErrorStreamCaptureUnsupported and invalidate the capture, as CUDA's do;
//  - events carry no device time: cudaEventElapsedTime is refused (cudaErrorNotSupported,
//    named) unless RUNGS_SIM_EVENT_TIME=host asks for the simulator's own elapsed host time;
//  - __device__ and __constant__ variables live in their PTX module's own storage, which the
//    symbol calls (cudaMemcpyToSymbol, cudaGetSymbolAddress, ...) reach through nvcc's
//    __cudaRegisterVar; an address from cudaGetSymbolAddress is device memory to the copy
//    calls and to kernels of every module;
//  - work that would run on another timeline (host functions, waits on events, on a capturing
//    stream) is refused by name rather than reordered.
// Environment: RUNGS_SIM_SEED (default 1) seeds the adversarial schedule of every launch;
// RUNGS_SIM_TRAFFIC=<file> appends one line of memory traffic per launch;
// RUNGS_SIM_CTA_LIMIT=<n> (default 2^27, 0: none) bounds each block's warp instructions, so
// that a block waiting for another (blocks run one at a time) is a finding, not a hang;
// RUNGS_SIM_BLOCK_ORDER=launch runs blocks in launch order (default random: CUDA's model);
// RUNGS_SIM_ABORT_ON_FINDING=1 aborts the process (SIGABRT) right after printing the first
// finding or refused launch, for CI that must not miss one; RUNGS_SIM_EVENT_TIME=host makes
// cudaEventElapsedTime report the host time between the two records (how long the CPU took to
// simulate the work, nothing about a GPU) instead of refusing; RUNGS_SIM_UNINITIALIZED_SHARED:
// report (the default) reports a value read from shared memory no thread of its block wrote where
// it is used (a branch, an address, a store to global memory: docs/sim.md, "Definedness"), load
// reports the read itself, allow reports neither (the read gets the block's garbage, as on a GPU);
// RUNGS_SIM_THREADS=<n> (default 0: every core) runs a launch's blocks on n threads, with the same
// results and findings as one (docs/sim.md, "Blocks in parallel").
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <rungs_sim/executor.hpp>

#include "faults.hpp"
#include "fatbin.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace rungs::sim::rt {
struct capture_state;
}

// The handle types are opaque in CUDA's headers; the runtime defines them.
struct CUstream_st {
  unsigned flags = 0;
  rungs::sim::rt::capture_state* capture = nullptr;
};
struct CUevent_st {
  unsigned flags = 0;
  bool recorded = false;
  std::chrono::steady_clock::time_point at;  // host time of the record (RUNGS_SIM_EVENT_TIME=host)
  // Recorded on a capturing stream: the capture, the stream and how much of that stream's
  // captured work it follows (a wait on it joins the stream's work so far; see capture_state).
  rungs::sim::rt::capture_state* capture = nullptr;
  CUstream_st* stream = nullptr;
  std::size_t seq = 0;
};

namespace rungs::sim::rt {
namespace {

constexpr int kSms = 132;
constexpr std::size_t kTotalMemory = std::size_t{80} << 30;
constexpr std::size_t kSharedPerBlock = 48 * 1024;
// The H100 SXM5's per-SM limits (CUDA C++ Programming Guide, "Technical Specifications per
// Compute Capability", 9.0; clock from NVIDIA's H100 datasheet), for the occupancy calls and
// device attributes. Occupancy is modelled from threads, blocks and shared memory: PTX's
// registers are virtual, so the register limit is not applied.
constexpr int kThreadsPerSm = 2048;
constexpr int kBlocksPerSm = 32;
constexpr std::size_t kSharedPerSm = 228 * 1024;
constexpr std::size_t kSharedPerBlockOptin = 227 * 1024;
constexpr std::size_t kReservedSharedPerBlock = 1024;  // the system's share of each block's shared memory
constexpr int kClockKhz = 1980000;
constexpr int kMemoryClockKhz = 2619000;
constexpr std::size_t kAlignment = 256;
// Unallocated bytes around every allocation, so that an access a little before or past one
// buffer never lands inside its neighbour (where the bounds check could not see it).
constexpr std::size_t kRedZone = 64 * 1024;

// ---------------------------------------------------------------------------------------
// Modules and kernels (filled by the registration ABI during static initialisation).
struct module_record {
  const void* wrapper = nullptr;
  std::size_t index = 0;  // registration order: which translation unit, in messages
  std::shared_ptr<const module> parsed;  // parsed at the first launch of one of its kernels
  std::string error;                     // why it cannot run
  bool loaded = false;
};
struct kernel_record {
  module_record* mod = nullptr;
  std::string name;  // the mangled .entry name
  // cudaFuncSetAttribute: the dynamic shared memory a launch may ask for (unset: 48 KiB less
  // the kernel's static shared memory, CUDA's default) and the carveout preference (kept,
  // reported, without effect: the executor has no L1).
  std::optional<std::size_t> max_dynamic_shared;
  int carveout = -1;
};
// A __device__ or __constant__ variable (nvcc's __cudaRegisterVar): its module and PTX name.
struct symbol_record {
  module_record* mod = nullptr;
  std::string name;
  std::size_t size = 0;
};

// ---------------------------------------------------------------------------------------
// Work recorded by stream capture.
struct node {
  enum kind_t { kernel, copy, set, host } kind = kernel;
  kernel_record* k = nullptr;
  dim3s grid, block;
  std::size_t shared = 0;
  std::vector<std::vector<unsigned char>> params;  // each parameter's bytes, copied at capture
  // copy and set: `rows` rows of `bytes` bytes, dst_pitch and src_pitch apart; a set writes
  // `value` as elements of `element` bytes (1, 2 or 4).
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  std::size_t rows = 1, dst_pitch = 0, src_pitch = 0;
  unsigned value = 0;
  unsigned element = 1;
  cudaHostFn_t fn = nullptr;  // host: fn(user)
  void* user = nullptr;
};

}  // namespace

// One capture sequence. Streams join it by waiting on an event recorded in it (a fork) and
// record their work into the same node list, in issue order: one legal serialisation of the
// graph's dependencies, since every stream issues its own work in order and a wait follows the
// record it waits on. A forked stream must be joined back (a member stream waits on an event
// recorded after that stream's last work or wait) before the origin ends the capture.
struct capture_state {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  std::vector<node> nodes;
  cudaError_t invalidated = cudaSuccess;
  unsigned long long id = 0;
  CUstream_st* origin = nullptr;
  struct member {
    std::size_t work = 0;  // nodes issued and waits made on the stream since it joined
    bool joined = true;    // a member stream has waited on all of it
  };
  std::map<CUstream_st*, member> forked;
  // Counts work on `s` (a forked stream's work must be joined back again).
  void worked(CUstream_st* s) {
    if (auto it = forked.find(s); it != forked.end()) {
      ++it->second.work;
      it->second.joined = false;
    }
  }
};

}  // namespace rungs::sim::rt

struct CUgraph_st {
  std::vector<rungs::sim::rt::node> nodes;
};
struct CUgraphExec_st {
  std::vector<rungs::sim::rt::node> nodes;
};
// A node handle (cudaGraphGetNodes): the node at `index` of `graph` (an instantiated graph's
// node at the same position). Handles are made once per node and kept for the process, so one
// that outlives its graph is refused, never dereferenced into freed memory.
struct CUgraphNode_st {
  const CUgraph_st* graph = nullptr;
  std::size_t index = 0;
  std::vector<void*> args;  // cudaGraphKernelNodeGetParams' kernelParams, into the node's bytes
};

namespace rungs::sim::rt {
namespace {

struct allocation {
  std::size_t size = 0;
  bool device = true;  // false: page-locked host memory (cudaHostAlloc), also kernel-visible
  bool symbol = false;  // a module variable's storage (cudaGetSymbolAddress): never freed
  bool managed = false;  // cudaMallocManaged (device memory the host may touch too)
  bool registered = false;  // cudaHostRegister: the caller's own memory, page-locked (never freed here)
};

class registry final : public global_memory {
 public:
  // Called by the executor's worker threads at once (schedule::threads): it only reads `live`,
  // which no launch changes while it runs.
  bool valid(std::uint64_t address, std::size_t size) const override {
    std::uint64_t start = 0;
    const allocation* a = find(address, &start);
    return a != nullptr && address + size <= start + a->size && address + size >= address;
  }
  // The allocation holding `address` (its first byte in *start when given), or null.
  const allocation* find(std::uint64_t address, std::uint64_t* start = nullptr) const {
    auto it = live.upper_bound(address);
    if (it == live.begin()) return nullptr;
    --it;
    if (address >= it->first + std::max<std::size_t>(it->second.size, 1)) return nullptr;
    if (start != nullptr) *start = it->first;
    return &it->second;
  }
  std::map<std::uint64_t, allocation> live;
  std::size_t device_bytes = 0;
};

// Environment settings: a bad value ends the process naming the variable and the rule.
std::uint64_t env_integer(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  char* end = nullptr;
  const std::uint64_t x = std::strtoull(v, &end, 10);
  if (*v == '\0' || *end != '\0') {
    std::fprintf(stderr, "rungs-sim: %s='%s' is not a decimal integer\n", name, v);
    std::exit(2);
  }
  return x;
}
std::string env_choice(const char* name, std::initializer_list<const char*> allowed, const char* fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  std::string list;
  for (const char* a : allowed) {
    if (std::strcmp(a, v) == 0) return v;
    list += list.empty() ? std::string("'") + a + "'" : std::string(", '") + a + "'";
  }
  std::fprintf(stderr, "rungs-sim: %s='%s' must be one of %s\n", name, v, list.c_str());
  std::exit(2);
}

struct state {
  std::recursive_mutex mutex;
  cudaFuncCache cache_config = cudaFuncCachePreferNone;  // cudaDeviceSetCacheConfig's hint, reported back
  std::deque<module_record> modules;
  std::map<const void*, kernel_record> kernels;  // host stub -> kernel
  std::map<const void*, symbol_record> symbols;  // host shadow variable -> device variable
  // cudaDeviceSetLimit's values (CUDA's defaults on an H100): kept and reported; the executor
  // bounds none of them (a deep call chain or a long printf is not cut short).
  static std::map<cudaLimit, std::size_t> default_limits() {
    return {{cudaLimitStackSize, 1024},
            {cudaLimitPrintfFifoSize, 1 << 20},
            {cudaLimitMallocHeapSize, 8 << 20},
            {cudaLimitDevRuntimeSyncDepth, 2},
            {cudaLimitDevRuntimePendingLaunchCount, 2048},
            {cudaLimitMaxL2FetchGranularity, 64},
            {cudaLimitPersistingL2CacheSize, 0}};
  }
  std::map<cudaLimit, std::size_t> limits = default_limits();
  registry memory;
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  std::set<CUgraph_st*> graphs;
  std::set<CUgraphExec_st*> execs;
  std::set<capture_state*> captures;
  cudaError_t sticky = cudaSuccess;
  std::uint64_t seed = 1;
  bool abort_on_finding = false;
  bool event_host_time = false;  // RUNGS_SIM_EVENT_TIME=host
  unsigned device_flags = 0;     // cudaSetDeviceFlags: kept and reported
  std::uint64_t cta_limit = schedule{}.cta_instruction_limit;
  unsigned threads = 0;  // RUNGS_SIM_THREADS (0: every core)
  bool blocks_in_launch_order = false;
  std::string uninitialized_shared = "report";  // RUNGS_SIM_UNINITIALIZED_SHARED: report, load or allow
  std::uint64_t launches = 0;
  unsigned long long capture_ids = 0;
  std::unique_ptr<std::ofstream> traffic;

  state() {
    seed = env_integer("RUNGS_SIM_SEED", seed);
    cta_limit = env_integer("RUNGS_SIM_CTA_LIMIT", cta_limit);
    const std::uint64_t t = env_integer("RUNGS_SIM_THREADS", threads);
    if (t > 4096) {
      std::fprintf(stderr, "rungs-sim: RUNGS_SIM_THREADS='%llu' is more than 4096 threads\n", static_cast<unsigned long long>(t));
      std::exit(2);
    }
    threads = static_cast<unsigned>(t);
    abort_on_finding = env_choice("RUNGS_SIM_ABORT_ON_FINDING", {"0", "1"}, "0") == "1";
    event_host_time = env_choice("RUNGS_SIM_EVENT_TIME", {"none", "host"}, "none") == "host";
    blocks_in_launch_order = env_choice("RUNGS_SIM_BLOCK_ORDER", {"random", "launch"}, "random") == "launch";
    uninitialized_shared = env_choice("RUNGS_SIM_UNINITIALIZED_SHARED", {"report", "load", "allow"}, "report");
    if (const char* t = std::getenv("RUNGS_SIM_TRAFFIC")) {
      traffic = std::make_unique<std::ofstream>(t, std::ios::app);
      if (!*traffic) {
        std::fprintf(stderr, "rungs-sim: RUNGS_SIM_TRAFFIC='%s' cannot be opened for appending\n", t);
        std::exit(2);
      }
    }
  }
};

state& S() {
  static state* s = new state;  // never destroyed: atexit unregistration may run after statics die
  return *s;
}

thread_local cudaError_t last_error = cudaSuccess;
struct call_config {
  dim3 grid, block;
  std::size_t shared;
  void* stream;
};
thread_local std::vector<call_config> configs;
// cudaThreadExchangeStreamCaptureMode: how this thread's unsafe calls meet ongoing captures.
thread_local cudaStreamCaptureMode thread_capture_mode = cudaStreamCaptureModeGlobal;

// Every failing call sets the thread's last error, as CUDA's do.
cudaError_t fail(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}
cudaError_t fail(cudaError_t e, const std::string& why) {
  std::fprintf(stderr, "rungs-sim: %s\n", why.c_str());
  return fail(e);
}

// The capture that forbids the calling thread's unsafe calls. CUDA's rule: a capture begun in
// relaxed mode forbids nothing; a thread in relaxed mode (cudaThreadExchangeStreamCaptureMode)
// is never forbidden; in thread-local mode only its own captures forbid; in global mode (the
// default) its own captures and every other thread's global-mode capture.
capture_state* forbidding_capture() {
  if (thread_capture_mode == cudaStreamCaptureModeRelaxed) return nullptr;
  for (capture_state* c : S().captures) {
    if (c->invalidated != cudaSuccess || c->mode == cudaStreamCaptureModeRelaxed) continue;
    if (c->thread == std::this_thread::get_id()) return c;
    if (thread_capture_mode == cudaStreamCaptureModeGlobal && c->mode == cudaStreamCaptureModeGlobal) return c;
  }
  return nullptr;
}

// A synchronous or allocating call during capture: invalidates the capture, as CUDA does.
cudaError_t unsafe_during_capture(const char* api) {
  if (capture_state* c = forbidding_capture()) {
    c->invalidated = cudaErrorStreamCaptureInvalidated;
    return fail(cudaErrorStreamCaptureUnsupported,
                std::string(api) + " during stream capture: not permitted (the capture is invalidated)");
  }
  return cudaSuccess;
}

bool is_legacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }

// Checks a stream handle; work on the legacy stream while a blocking stream captures fails.
cudaError_t check_stream(cudaStream_t s) {
  if (s == cudaStreamPerThread) return fail(cudaErrorNotSupported, "cudaStreamPerThread is not simulated");
  if (is_legacy(s)) {
    for (CUstream_st* other : S().streams) {
      if (other->capture && (other->flags & cudaStreamNonBlocking) == 0) {
        other->capture->invalidated = cudaErrorStreamCaptureInvalidated;
        return fail(cudaErrorStreamCaptureImplicit);
      }
    }
    return cudaSuccess;
  }
  if (!S().streams.count(s)) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

capture_state* capture_of(cudaStream_t s) { return is_legacy(s) ? nullptr : s->capture; }

cudaError_t sticky() { return S().sticky == cudaSuccess ? cudaSuccess : fail(S().sticky); }

// A finding of the executor or a refused launch: printed, sticky (as a device fault is on a
// GPU), and under RUNGS_SIM_ABORT_ON_FINDING=1 the end of the process.
cudaError_t finding(cudaError_t e, const std::string& what) {
  std::fprintf(stderr, "rungs-sim: %s\n", what.c_str());
  std::fflush(stderr);
  if (S().abort_on_finding) {
    std::fprintf(stderr, "rungs-sim: RUNGS_SIM_ABORT_ON_FINDING=1: aborting\n");
    std::abort();
  }
  if (S().sticky == cudaSuccess) S().sticky = e;
  return fail(e);
}

// A fault injected at this call (rungs_sim/faults.hpp). A sticky one poisons the device; at a
// launch it is a kernel fault, which the asynchronous launch does not report (later calls do).
cudaError_t injected(const faults::detail::call_scope& call, bool launch = false) {
  if (!call.sticky) return fail(call.error);
  if (S().sticky == cudaSuccess) S().sticky = call.error;
  fail(call.error);
  return launch ? cudaSuccess : call.error;
}

// ---------------------------------------------------------------------------------------
// Memory checks for copies and memsets: the device side must lie inside one live allocation.
bool inside_allocation(const void* p, std::size_t bytes) {
  return S().memory.valid(reinterpret_cast<std::uint64_t>(p), bytes);
}

cudaError_t check_copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, const char* api) {
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue, std::string(api) + ": a null pointer");
  const bool dst_dev = inside_allocation(dst, bytes), src_dev = inside_allocation(src, bytes);
  auto bad = [&](const char* side, const void* p) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: %s range [%p, +%zu) is not inside one live allocation", api, side, p, bytes);
    return fail(cudaErrorInvalidValue, buf);
  };
  switch (kind) {
    case cudaMemcpyHostToDevice:
      return dst_dev ? cudaSuccess : bad("destination", dst);
    case cudaMemcpyDeviceToHost:
      return src_dev ? cudaSuccess : bad("source", src);
    case cudaMemcpyDeviceToDevice:
      if (!dst_dev) return bad("destination", dst);
      return src_dev ? cudaSuccess : bad("source", src);
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault:
      return cudaSuccess;
  }
  return fail(cudaErrorInvalidMemcpyDirection);
}

// Pitched copy and memset nodes (the 2D calls and graph nodes): `rows` rows of `width` bytes,
// `pitch` apart, every row checked (as cudaMemcpy and cudaMemset check their ranges) before the
// node exists. The caller has checked the pitches.
cudaError_t pitched_copy(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                         std::size_t rows, cudaMemcpyKind kind, const char* api, node& n) {
  for (std::size_t r = 0; r < rows; ++r) {
    if (cudaError_t e = check_copy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch,
                                   width, kind, api)) {
      return e;
    }
  }
  n = node{};
  n.kind = node::copy;
  n.dst = dst;
  n.src = src;
  n.bytes = width;
  n.rows = rows;
  n.dst_pitch = dpitch;
  n.src_pitch = spitch;
  return cudaSuccess;
}

cudaError_t pitched_set(void* dst, std::size_t pitch, std::size_t width, std::size_t rows, unsigned value,
                        unsigned element, const char* api, node& n) {
  for (std::size_t r = 0; r < rows; ++r) {
    if (width > 0 && !inside_allocation(static_cast<char*>(dst) + r * pitch, width)) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "[%p, +%zu) is not inside one live allocation",
                    static_cast<void*>(static_cast<char*>(dst) + r * pitch), width);
      return fail(cudaErrorInvalidValue,
                  std::string(api) + ": " + (rows > 1 ? "row " + std::to_string(r) + " " : std::string()) + buf);
    }
  }
  n = node{};
  n.kind = node::set;
  n.dst = dst;
  n.bytes = width;
  n.rows = rows;
  n.dst_pitch = pitch;
  n.value = value;
  n.element = element;
  return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// Kernels.
// Parses a module at the first use of one of its kernels or variables; why it cannot run, or
// empty.
const std::string& load_module(module_record& m) {
  if (!m.loaded) {
    m.loaded = true;
    fatbin_ptx f = read_fatbin_ptx(m.wrapper);
    if (!f.error.empty()) {
      m.error = f.error;
    } else {
      try {
        m.parsed = load_ptx(std::move(f.ptx), "fatbinary " + std::to_string(m.index));
      } catch (const std::exception& e) {
        m.error = e.what();
      }
    }
  }
  return m.error;
}

cudaError_t load(kernel_record& k) {
  module_record& m = *k.mod;
  if (!load_module(m).empty()) return finding(cudaErrorNoKernelImageForDevice, "cannot load " + k.name + ": " + m.error);
  if (std::string why = refusal(*m.parsed, k.name); !why.empty()) return finding(cudaErrorNoKernelImageForDevice, why);
  return cudaSuccess;
}

cudaError_t check_config(const kernel_record& k, dim3 grid, dim3 block, std::size_t shared) {
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || block.z > 64 ||
      grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "launch of %s: grid (%u,%u,%u) x block (%u,%u,%u) breaks the launch limits",
                  k.name.c_str(), grid.x, grid.y, grid.z, block.x, block.y, block.z);
    return fail(cudaErrorInvalidConfiguration, buf);
  }
  if (k.max_dynamic_shared ? shared > *k.max_dynamic_shared : shared > kSharedPerBlock) {
    return fail(cudaErrorInvalidValue,
                "launch of " + k.name + ": " + std::to_string(shared) + " bytes of dynamic shared memory exceed " +
                    (k.max_dynamic_shared ? "the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize, " +
                                                std::to_string(*k.max_dynamic_shared)
                                          : std::string("the 48 KiB default (cudaFuncSetAttribute raises it)")));
  }
  return cudaSuccess;
}

void run_kernel(const node& n) {
  state& s = S();
  std::vector<void*> args;
  for (const auto& p : n.params) args.push_back(const_cast<unsigned char*>(p.data()));
  schedule sched;
  const std::uint64_t index = s.launches++;
  sched.seed = s.seed * 0x9e3779b97f4a7c15ull + index;
  sched.cta_instruction_limit = s.cta_limit;
  sched.threads = s.threads;
  sched.blocks_in_launch_order = s.blocks_in_launch_order;
  sched.uninitialized_check = s.uninitialized_shared != "allow";
  sched.uninitialized_at_load = s.uninitialized_shared == "load";
  try {
    const launch_result r = launch(*n.k->mod->parsed, n.k->name, n.grid, n.block, n.shared, args.data(), s.memory, sched);
    if (s.traffic) {
      *s.traffic << n.k->name << '\t' << n.grid.x << ',' << n.grid.y << ',' << n.grid.z << '\t' << n.block.x << ','
                 << n.block.y << ',' << n.block.z << '\t' << r.warp_instructions << '\t' << r.global.bytes_read << '\t'
                 << r.global.bytes_written << '\t' << r.global.sectors_read << '\t' << r.global.sectors_written << '\t'
                 << r.global.sector_reads_total << '\n';
      s.traffic->flush();
    }
  } catch (const std::exception& e) {
    const bool assertion = dynamic_cast<const device_assertion*>(&e) != nullptr;  // CUDA: its own error
    finding(assertion ? cudaErrorAssert : cudaErrorLaunchFailure,
            std::string(e.what()) + " (launch " + std::to_string(index) + " of " + n.k->name +
                ", RUNGS_SIM_SEED=" + std::to_string(s.seed) + ")");
  }
}

void run(const node& n) {
  switch (n.kind) {
    case node::kernel:
      run_kernel(n);
      break;
    case node::copy:
      for (std::size_t r = 0; r < n.rows; ++r) {
        std::memmove(static_cast<char*>(n.dst) + r * n.dst_pitch, static_cast<const char*>(n.src) + r * n.src_pitch, n.bytes);
      }
      break;
    case node::set:
      for (std::size_t r = 0; r < n.rows; ++r) {
        auto* row = static_cast<unsigned char*>(n.dst) + r * n.dst_pitch;
        if (n.element == 1) {
          std::memset(row, static_cast<int>(n.value & 0xffu), n.bytes);
        } else {
          for (std::size_t i = 0; i < n.bytes; i += n.element) std::memcpy(row + i, &n.value, n.element);  // little-endian
        }
      }
      break;
    case node::host:
      n.fn(n.user);
      break;
  }
}

// Runs `n` now, or records it when `stream` is capturing.
cudaError_t issue(node n, cudaStream_t stream) {
  if (cudaError_t e = sticky()) return e;
  if (cudaError_t e = check_stream(stream)) return e;
  if (capture_state* c = capture_of(stream)) {
    if (c->invalidated == cudaSuccess) {
      c->nodes.push_back(std::move(n));
      c->worked(stream);
    }
    return c->invalidated == cudaSuccess ? cudaSuccess : fail(cudaErrorStreamCaptureInvalidated);
  }
  run(n);
  return cudaSuccess;
}

// Kernel node `n`'s kernel, launch shape and arguments (a launch, or a graph's or an instantiated
// graph's node taking new parameters), all checked before anything changes.
cudaError_t set_kernel_params(node& n, const kernel_record& kernel, const cudaKernelNodeParams& p,
                              const std::string& api) {
  if (p.extra != nullptr) return fail(cudaErrorInvalidValue, api + ": 'extra' is not simulated (use kernelParams)");
  const dim3 grid = p.gridDim, block = p.blockDim;
  if (cudaError_t e = check_config(kernel, grid, block, p.sharedMemBytes)) return e;
  const auto params = rungs::sim::entry_params(*kernel.mod->parsed, kernel.name);
  if (!params.empty() && p.kernelParams == nullptr) {
    return fail(cudaErrorInvalidValue, api + ": " + std::to_string(params.size()) + " parameters of " + kernel.name +
                                           " but no argument array");
  }
  n.kind = node::kernel;
  n.k = const_cast<kernel_record*>(&kernel);
  n.grid = {grid.x, grid.y, grid.z};
  n.block = {block.x, block.y, block.z};
  n.shared = p.sharedMemBytes;
  n.params.resize(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto* bytes = static_cast<const unsigned char*>(p.kernelParams[i]);
    n.params[i].assign(bytes, bytes + params[i].size);
  }
  return cudaSuccess;
}

// A kernel node for a launch: the kernel loaded, the shape checked, the arguments' bytes copied.
cudaError_t kernel_node_for(const void* stub, dim3 grid, dim3 block, void** args, std::size_t shared, node& n) {
  auto it = S().kernels.find(stub);
  if (it == S().kernels.end()) return fail(cudaErrorInvalidDeviceFunction, "launch of an unregistered kernel");
  kernel_record& k = it->second;
  if (cudaError_t e = load(k)) return e;
  if (shared > std::numeric_limits<unsigned>::max()) return check_config(k, grid, block, shared);  // refused: past every limit
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(stub);
  p.gridDim = grid;
  p.blockDim = block;
  p.sharedMemBytes = static_cast<unsigned>(shared);
  p.kernelParams = args;
  n = node{};
  return set_kernel_params(n, k, p, "launch of " + k.name);
}

cudaError_t launch_kernel(const void* stub, dim3 grid, dim3 block, void** args, std::size_t shared, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaLaunchKernel");
  if (call.error != cudaSuccess) return injected(call, true);
  node n;
  if (cudaError_t e = kernel_node_for(stub, grid, block, args, shared, n)) return e;
  return issue(std::move(n), stream);
}

template <class T, class Set>
cudaError_t destroy(T* h, Set& live) {
  if (!live.erase(h)) return fail(cudaErrorInvalidResourceHandle);
  delete h;
  return cudaSuccess;
}

#define RUNGS_SIM_ERRORS(X)                                                                                       \
  X(cudaSuccess, "no error")                                                                                      \
  X(cudaErrorInvalidValue, "invalid argument")                                                                    \
  X(cudaErrorMemoryAllocation, "out of memory")                                                                   \
  X(cudaErrorInitializationError, "initialization error")                                                         \
  X(cudaErrorInvalidConfiguration, "invalid configuration argument")                                             \
  X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                                         \
  X(cudaErrorInvalidPitchValue, "invalid pitch argument")                                                         \
  X(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version")                 \
  X(cudaErrorInvalidDeviceFunction, "invalid device function")                                                    \
  X(cudaErrorInvalidSymbol, "invalid device symbol")                                                              \
  X(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped")        \
  X(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region")              \
  X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                                      \
  X(cudaErrorInvalidDevice, "invalid device ordinal")                                                             \
  X(cudaErrorNoKernelImageForDevice, "no kernel image is available for execution on the device")                  \
  X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                                    \
  X(cudaErrorIllegalState, "the operation cannot be performed in the present state")                             \
  X(cudaErrorNotReady, "device not ready")                                                                        \
  X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                                          \
  X(cudaErrorLaunchFailure, "unspecified launch failure")                                                         \
  X(cudaErrorLaunchOutOfResources, "too many resources requested for launch")                                    \
  X(cudaErrorLaunchTimeout, "the launch timed out and was terminated")                                          \
  X(cudaErrorAssert, "device-side assert triggered")                                                             \
  X(cudaErrorHardwareStackError, "an illegal memory access was encountered (hardware stack error)")               \
  X(cudaErrorIllegalInstruction, "an illegal instruction was encountered")                                       \
  X(cudaErrorMisalignedAddress, "misaligned address")                                                            \
  X(cudaErrorInvalidAddressSpace, "operation not supported on global/shared address space")                      \
  X(cudaErrorInvalidPc, "invalid program counter")                                                               \
  X(cudaErrorUnknown, "unknown error")                                                                           \
  X(cudaErrorNotSupported, "operation not supported")                                                             \
  X(cudaErrorGraphExecUpdateFailure, "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update") \
  X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")                        \
  X(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture")                 \
  X(cudaErrorStreamCaptureUnmatched, "capture was not ended in the same stream as it began")                      \
  X(cudaErrorStreamCaptureImplicit, "operation would make the legacy stream depend on a capturing blocking stream") \
  X(cudaErrorStreamCaptureMerge, "operation would have resulted in a merge of two independent capture sequences") \
  X(cudaErrorStreamCaptureUnjoined, "capturing stream has unjoined work")                                           \
  X(cudaErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream")                   \
  X(cudaErrorStreamCaptureWrongThread, "attempt to terminate a thread-local capture sequence from another thread")

// Kernel attributes and occupancy (modelled on the H100's per-SM limits, constants above).
kernel_record* loaded_kernel(const void* func, const char* api) {
  auto it = S().kernels.find(func);
  if (it == S().kernels.end()) {
    fail(cudaErrorInvalidDeviceFunction, std::string(api) + ": not a registered kernel");
    return nullptr;
  }
  return load(it->second) == cudaSuccess ? &it->second : nullptr;
}

// Blocks of `block_size` threads with `dynamic_shared` bytes that fit on one SM at once.
int blocks_per_sm(const kernel_record& k, int block_size, std::size_t dynamic_shared) {
  const int warps = (block_size + 31) / 32;
  const std::size_t shared = resources(*k.mod->parsed, k.name).static_shared + dynamic_shared + kReservedSharedPerBlock;
  const int by_threads = kThreadsPerSm / (warps * 32);
  const int by_shared = static_cast<int>(kSharedPerSm / shared);
  return std::min({kBlocksPerSm, by_threads, by_shared});
}

}  // namespace
}  // namespace rungs::sim::rt

using namespace rungs::sim::rt;
using rungs::sim::rt::S;
namespace faults = rungs::sim::faults;

extern "C" {

// ---------------------------------------------------------------------------------------
// nvcc's registration and launch ABI (crt/host_runtime.h, crt/device_functions.h).
void** __cudaRegisterFatBinary(void* fatCubin) {
  std::lock_guard lock(S().mutex);
  module_record& m = S().modules.emplace_back();
  m.wrapper = fatCubin;
  m.index = S().modules.size();
  return reinterpret_cast<void**>(&m);
}

void __cudaRegisterFatBinaryEnd(void**) {}

void __cudaUnregisterFatBinary(void** handle) {
  std::lock_guard lock(S().mutex);
  auto* m = reinterpret_cast<module_record*>(handle);
  std::erase_if(S().kernels, [&](const auto& k) { return k.second.mod == m; });
  std::erase_if(S().symbols, [&](const auto& v) { return v.second.mod == m; });
  m->parsed.reset();
}

void __cudaRegisterFunction(void** handle, const char* hostFun, char*, const char* deviceName, int, uint3*, uint3*,
                            dim3*, dim3*, int*) {
  std::lock_guard lock(S().mutex);
  S().kernels[hostFun] = kernel_record{reinterpret_cast<module_record*>(handle), deviceName};
}

// Module-scope __device__ and __constant__ variables: their storage is the PTX module's own
// .global/.const declaration (parsed with the module); the host shadow variable's address is
// the symbol the symbol calls take.
void __cudaRegisterVar(void** handle, char* hostVar, char*, const char* deviceName, int, size_t size, int, int) {
  std::lock_guard lock(S().mutex);
  S().symbols[hostVar] = symbol_record{reinterpret_cast<module_record*>(handle), deviceName, size};
}

char __cudaInitModule(void**) { return 1; }

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* stub) {
  std::lock_guard lock(S().mutex);
  if (!S().kernels.count(stub)) return fail(cudaErrorInvalidDeviceFunction);
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(stub));  // the handle is the stub
  return cudaSuccess;
}

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st* stream) {
  configs.push_back({gridDim, blockDim, sharedMem, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem, void* stream) {
  if (configs.empty()) return fail(cudaErrorInvalidConfiguration);
  const call_config c = configs.back();
  configs.pop_back();
  *gridDim = c.grid;
  *blockDim = c.block;
  *sharedMem = c.shared;
  *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                               cudaStream_t stream) {
  return launch_kernel(reinterpret_cast<const void*>(kernel), gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t) {
  return fail(cudaErrorNotSupported, "per-thread default streams are not simulated");
}

cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                             cudaStream_t stream) {
  return launch_kernel(func, gridDim, blockDim, args, sharedMem, stream);
}

// cudaLaunchKernelEx (a template in cuda_runtime.h) calls this. Launch attributes that only
// permit overlap or hint at caching hold on a device that runs work in issue order; those that
// change what a kernel may do (cooperative grid sync, clusters) are refused by name.
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  if (config == nullptr) return fail(cudaErrorInvalidValue, "cudaLaunchKernelExC: a null config");
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const cudaLaunchAttribute& a = config->attrs[i];
    switch (a.id) {
      case cudaLaunchAttributeIgnore:
      case cudaLaunchAttributeAccessPolicyWindow:
      case cudaLaunchAttributeSynchronizationPolicy:
      case cudaLaunchAttributePriority:
      case cudaLaunchAttributeProgrammaticStreamSerialization:
        break;
      case cudaLaunchAttributeClusterDimension:
        if (a.val.clusterDim.x * a.val.clusterDim.y * a.val.clusterDim.z <= 1) break;
        return fail(cudaErrorNotSupported, "cudaLaunchKernelExC: thread-block clusters are not simulated");
      case cudaLaunchAttributeCooperative:
        if (a.val.cooperative == 0) break;
        return fail(cudaErrorNotSupported, "cudaLaunchKernelExC: cooperative launches (grid sync) are not simulated");
      default:
        return fail(cudaErrorNotSupported,
                    "cudaLaunchKernelExC: launch attribute " + std::to_string(static_cast<int>(a.id)) + " is not simulated");
    }
  }
  return launch_kernel(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes, config->stream);
}

// ---------------------------------------------------------------------------------------
// Kernel attributes and occupancy (modelled on the H100's per-SM limits, constants above).

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* attr, const void* func) {
  std::lock_guard lock(S().mutex);
  if (attr == nullptr) return fail(cudaErrorInvalidValue, "cudaFuncGetAttributes: a null attribute pointer");
  const kernel_record* k = loaded_kernel(func, "cudaFuncGetAttributes");
  if (k == nullptr) return last_error;
  const rungs::sim::entry_resources r = resources(*k->mod->parsed, k->name);
  *attr = cudaFuncAttributes{};
  attr->sharedSizeBytes = r.static_shared;
  attr->localSizeBytes = r.local_bytes;
  attr->constSizeBytes = 0;
  attr->maxThreadsPerBlock = 1024;
  attr->numRegs = 0;  // PTX's registers are virtual: no count (occupancy ignores registers)
  attr->ptxVersion = 80;
  attr->binaryVersion = 80;
  attr->maxDynamicSharedSizeBytes =
      static_cast<int>(k->max_dynamic_shared.value_or(kSharedPerBlock - std::min(kSharedPerBlock, r.static_shared)));
  attr->preferredShmemCarveout = k->carveout;
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks, const void* func, int blockSize,
                                                                  size_t dynamicSMemSize, unsigned int flags) {
  std::lock_guard lock(S().mutex);
  if (numBlocks == nullptr) return fail(cudaErrorInvalidValue, "cudaOccupancyMaxActiveBlocksPerMultiprocessor: a null result pointer");
  if (flags != cudaOccupancyDefault && flags != cudaOccupancyDisableCachingOverride) {
    return fail(cudaErrorInvalidValue, "cudaOccupancyMaxActiveBlocksPerMultiprocessor: flags " + std::to_string(flags));
  }
  if (blockSize <= 0 || blockSize > 1024) {
    return fail(cudaErrorInvalidValue, "cudaOccupancyMaxActiveBlocksPerMultiprocessor: block size " +
                                           std::to_string(blockSize) + " is outside 1..1024");
  }
  const kernel_record* k = loaded_kernel(func, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (k == nullptr) return last_error;
  *numBlocks = dynamicSMemSize > kSharedPerBlockOptin ? 0 : blocks_per_sm(*k, blockSize, dynamicSMemSize);
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func, int blockSize,
                                                          size_t dynamicSMemSize) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize,
                                                                cudaOccupancyDefault);
}

cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize, const void* func, int numBlocks,
                                                      int blockSize) {
  std::lock_guard lock(S().mutex);
  if (dynamicSmemSize == nullptr || numBlocks <= 0 || blockSize <= 0 || blockSize > 1024) {
    return fail(cudaErrorInvalidValue, "cudaOccupancyAvailableDynamicSMemPerBlock: bad arguments");
  }
  const kernel_record* k = loaded_kernel(func, "cudaOccupancyAvailableDynamicSMemPerBlock");
  if (k == nullptr) return last_error;
  const int warps = (blockSize + 31) / 32;
  if (numBlocks > kBlocksPerSm || numBlocks * warps * 32 > kThreadsPerSm) {
    *dynamicSmemSize = 0;
    return cudaSuccess;
  }
  const std::size_t per_block = kSharedPerSm / static_cast<std::size_t>(numBlocks);
  const std::size_t used = resources(*k->mod->parsed, k->name).static_shared + kReservedSharedPerBlock;
  *dynamicSmemSize = per_block > used ? std::min(per_block - used, kSharedPerBlockOptin) : 0;
  return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// Errors.
// An injected fault at either is an error a launch reported after the fact: it becomes the
// last error (cudaGetLastError returns and clears it; cudaPeekAtLastError leaves it).
cudaError_t cudaGetLastError(void) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaGetLastError");
  if (call.error != cudaSuccess) injected(call);
  const cudaError_t e = S().sticky != cudaSuccess ? S().sticky : last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaPeekAtLastError");
  if (call.error != cudaSuccess) injected(call);
  return S().sticky != cudaSuccess ? S().sticky : last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define RUNGS_SIM_NAME(code, text) \
  case code:                       \
    return #code;
    RUNGS_SIM_ERRORS(RUNGS_SIM_NAME)
#undef RUNGS_SIM_NAME
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
#define RUNGS_SIM_TEXT(code, text) \
  case code:                       \
    return text;
    RUNGS_SIM_ERRORS(RUNGS_SIM_TEXT)
#undef RUNGS_SIM_TEXT
    default:
      return "unrecognized error code";
  }
}

// ---------------------------------------------------------------------------------------
// The device.
cudaError_t cudaGetDeviceCount(int* count) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaGetDeviceCount");
  if (call.error != cudaSuccess) return injected(call);
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaGetDevice");
  if (call.error != cudaSuccess) return injected(call);
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

// The runtime's version is the CUDA headers' it was built with (CUDART_VERSION); the simulated
// driver reports the same, as a driver that supports exactly that runtime.
cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (runtimeVersion == nullptr) return fail(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return fail(cudaErrorInvalidValue);
  *driverVersion = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice); }

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaDeviceGetAttribute");
  if (call.error != cudaSuccess) return injected(call);
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  if (device != 0) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = kSms; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(kSharedPerBlock); return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrComputeMode: *value = cudaComputeModeDefault; return cudaSuccess;
    case cudaDevAttrClockRate: *value = kClockKhz; return cudaSuccess;
    case cudaDevAttrMemoryClockRate: *value = kMemoryClockKhz; return cudaSuccess;
    case cudaDevAttrGlobalMemoryBusWidth: *value = 5120; return cudaSuccess;
    case cudaDevAttrL2CacheSize: *value = 50 * 1024 * 1024; return cudaSuccess;
    case cudaDevAttrIntegrated: *value = 0; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = kThreadsPerSm; return cudaSuccess;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = kBlocksPerSm; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = static_cast<int>(kSharedPerSm); return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(kSharedPerBlockOptin); return cudaSuccess;
    case cudaDevAttrReservedSharedMemoryPerBlock: *value = static_cast<int>(kReservedSharedPerBlock); return cudaSuccess;
    case cudaDevAttrMaxRegistersPerBlock:
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = 65536; return cudaSuccess;
    case cudaDevAttrTotalConstantMemory: *value = 65536; return cudaSuccess;
    case cudaDevAttrMaxBlockDimX:
    case cudaDevAttrMaxBlockDimY: *value = 1024; return cudaSuccess;
    case cudaDevAttrMaxBlockDimZ: *value = 64; return cudaSuccess;
    case cudaDevAttrMaxGridDimX: *value = 0x7fffffff; return cudaSuccess;
    case cudaDevAttrMaxGridDimY:
    case cudaDevAttrMaxGridDimZ: *value = 65535; return cudaSuccess;
    case cudaDevAttrConcurrentKernels:
    case cudaDevAttrUnifiedAddressing: *value = 1; return cudaSuccess;
    case cudaDevAttrManagedMemory:
    case cudaDevAttrConcurrentManagedAccess: *value = 1; return cudaSuccess;  // one memory: always coherent
    case cudaDevAttrCanMapHostMemory: *value = 1; return cudaSuccess;  // cudaHostAlloc(Mapped), cudaHostGetDevicePointer
    case cudaDevAttrGpuOverlap: *value = 1; return cudaSuccess;        // copies on streams, in stream order
    case cudaDevAttrAsyncEngineCount: *value = 2; return cudaSuccess;  // the H100's copy engines
    case cudaDevAttrCooperativeLaunch:   // grid-wide sync is not simulated
    case cudaDevAttrMemoryPoolsSupported: *value = 0; return cudaSuccess;  // nor pools (cudaMallocAsync allocates at the call)
    default:
      return fail(cudaErrorNotSupported, "cudaDeviceGetAttribute: attribute " + std::to_string(attr) + " is not simulated");
  }
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaGetDeviceProperties");
  if (call.error != cudaSuccess) return injected(call);
  if (prop == nullptr) return fail(cudaErrorInvalidValue);
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "rungs-sim: CPU PTX executor, H100-like");
  prop->totalGlobalMem = kTotalMemory;
  prop->sharedMemPerBlock = kSharedPerBlock;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = kSms;
  prop->maxThreadsPerMultiProcessor = kThreadsPerSm;
  prop->maxBlocksPerMultiProcessor = kBlocksPerSm;
  prop->sharedMemPerMultiprocessor = kSharedPerSm;
  prop->sharedMemPerBlockOptin = kSharedPerBlockOptin;
  prop->reservedSharedMemPerBlock = kReservedSharedPerBlock;
  prop->regsPerMultiprocessor = 65536;
  prop->totalConstMem = 65536;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->memoryBusWidth = 5120;
  prop->integrated = 0;
  prop->concurrentKernels = 1;
  prop->unifiedAddressing = 1;
  prop->managedMemory = 1;
  prop->concurrentManagedAccess = 1;
  prop->canMapHostMemory = 1;
  prop->asyncEngineCount = 2;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaDeviceSynchronize");
  if (call.error != cudaSuccess) return injected(call);
  if (cudaError_t e = unsafe_during_capture("cudaDeviceSynchronize")) return e;
  return sticky();
}

// ---------------------------------------------------------------------------------------
// Memory.
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemGetInfo");
  if (call.error != cudaSuccess) return injected(call);
  if (free == nullptr || total == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = sticky()) return e;
  *total = kTotalMemory;
  *free = kTotalMemory - S().memory.device_bytes;
  return cudaSuccess;
}

static cudaError_t allocate(void** ptr, size_t size, bool device, const char* api) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call(api);
  if (call.error != cudaSuccess) return injected(call);
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = unsafe_during_capture(api)) return e;
  if (cudaError_t e = sticky()) return e;
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  if (device && size > kTotalMemory - S().memory.device_bytes) return fail(cudaErrorMemoryAllocation);
  if (size > kTotalMemory) return fail(cudaErrorMemoryAllocation);
  void* base = std::aligned_alloc(kAlignment, (size + kAlignment - 1) / kAlignment * kAlignment + 2 * kRedZone);
  if (base == nullptr) return fail(cudaErrorMemoryAllocation);
  void* p = static_cast<char*>(base) + kRedZone;
  std::memset(p, 0xff, size);
  S().memory.live[reinterpret_cast<std::uint64_t>(p)] = allocation{size, device};
  if (device) S().memory.device_bytes += size;
  *ptr = p;
  return cudaSuccess;
}

static cudaError_t release(void* ptr, bool device, const char* api) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call(api);
  if (call.error != cudaSuccess) return injected(call);
  if (ptr == nullptr) return cudaSuccess;
  if (cudaError_t e = unsafe_during_capture(api)) return e;
  auto& live = S().memory.live;
  auto it = live.find(reinterpret_cast<std::uint64_t>(ptr));
  if (it != live.end() && it->second.registered) {
    return fail(cudaErrorInvalidValue, std::string(api) + ": memory registered with cudaHostRegister (cudaHostUnregister it)");
  }
  if (it != live.end() && it->second.symbol) {
    return fail(cudaErrorInvalidValue, std::string(api) + ": a __device__ variable's storage (cudaGetSymbolAddress), not an allocation");
  }
  if (it == live.end() || it->second.device != device) {
    return fail(cudaErrorInvalidValue, std::string(api) + ": " +
                                           (it == live.end() ? "not the start of a live allocation"
                                                             : "an allocation of the other kind"));
  }
  if (device) S().memory.device_bytes -= it->second.size;
  live.erase(it);
  std::free(static_cast<char*>(ptr) - kRedZone);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** devPtr, size_t size) { return allocate(devPtr, size, true, "cudaMalloc"); }
cudaError_t cudaFree(void* devPtr) { return release(devPtr, true, "cudaFree"); }
cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int) { return allocate(pHost, size, false, "cudaHostAlloc"); }
cudaError_t cudaMallocHost(void** ptr, size_t size) { return allocate(ptr, size, false, "cudaMallocHost"); }
cudaError_t cudaFreeHost(void* ptr) { return release(ptr, false, "cudaFreeHost"); }

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemcpyAsync");
  if (call.error != cudaSuccess) return injected(call);
  node n;
  if (cudaError_t e = pitched_copy(dst, 0, src, 0, count, 1, kind, "cudaMemcpyAsync", n)) return e;
  return issue(std::move(n), stream);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemcpy");
  if (call.error != cudaSuccess) return injected(call);
  if (cudaError_t e = unsafe_during_capture("cudaMemcpy")) return e;
  return cudaMemcpyAsync(dst, src, count, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemsetAsync");
  if (call.error != cudaSuccess) return injected(call);
  node n;
  if (cudaError_t e = pitched_set(devPtr, 0, count, 1, static_cast<unsigned char>(value), 1, "cudaMemset", n)) return e;
  return issue(std::move(n), stream);
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemset");
  if (call.error != cudaSuccess) return injected(call);
  if (cudaError_t e = unsafe_during_capture("cudaMemset")) return e;
  return cudaMemsetAsync(devPtr, value, count, nullptr);
}

// Pitched copies: `height` rows of `width` bytes, each row checked as cudaMemcpy checks its
// range, all before any is copied; one copy node (captured as such).
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemcpy2DAsync");
  if (call.error != cudaSuccess) return injected(call);
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > dpitch || width > spitch) {
    return fail(cudaErrorInvalidPitchValue, "cudaMemcpy2D: width " + std::to_string(width) + " exceeds dpitch " +
                                                std::to_string(dpitch) + " or spitch " + std::to_string(spitch));
  }
  node n;
  if (cudaError_t e = pitched_copy(dst, dpitch, src, spitch, width, height, kind, "cudaMemcpy2D", n)) return e;
  return issue(std::move(n), stream);
}

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemcpy2D");
  if (call.error != cudaSuccess) return injected(call);
  if (cudaError_t e = unsafe_during_capture("cudaMemcpy2D")) return e;
  return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, nullptr);
}

// Stream-ordered allocation: a stream runs its work when it is issued, so the memory exists
// (and is gone) at the call, which is one legal order. A graph's memory nodes are not
// simulated: on a capturing stream both calls are refused and invalidate the capture.
static cudaError_t stream_ordered(cudaStream_t stream, const char* api) {
  if (cudaError_t e = check_stream(stream)) return e;
  if (capture_state* c = capture_of(stream)) {
    c->invalidated = cudaErrorStreamCaptureInvalidated;
    return fail(cudaErrorStreamCaptureUnsupported,
                std::string(api) + " on a capturing stream: graph memory nodes are not simulated (the capture is invalidated)");
  }
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  if (cudaError_t e = stream_ordered(stream, "cudaMallocAsync")) return e;
  return allocate(devPtr, size, true, "cudaMallocAsync");
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  if (cudaError_t e = stream_ordered(stream, "cudaFreeAsync")) return e;
  return release(devPtr, true, "cudaFreeAsync");
}

// ---------------------------------------------------------------------------------------
// Streams and events.
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaStreamCreateWithFlags");
  if (call.error != cudaSuccess) return injected(call);
  if (pStream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) return fail(cudaErrorInvalidValue);
  *pStream = new CUstream_st{flags, nullptr};
  S().streams.insert(*pStream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) { return cudaStreamCreateWithFlags(pStream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaStreamDestroy");
  if (call.error != cudaSuccess) return injected(call);
  if (S().streams.count(stream) && stream->capture) {
    return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamDestroy of a capturing stream");
  }
  return destroy(stream, S().streams);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaStreamSynchronize");
  if (call.error != cudaSuccess) return injected(call);
  if (!is_legacy(stream) && !S().streams.count(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (capture_state* c = capture_of(stream)) {
    c->invalidated = cudaErrorStreamCaptureInvalidated;
    return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize of a capturing stream (the capture is invalidated)");
  }
  if (is_legacy(stream)) {
    if (cudaError_t e = unsafe_during_capture("cudaStreamSynchronize(legacy stream)")) return e;
  }
  return sticky();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaEventCreateWithFlags");
  if (call.error != cudaSuccess) return injected(call);
  if (event == nullptr || (flags & ~(cudaEventBlockingSync | cudaEventDisableTiming)) != 0) return fail(cudaErrorInvalidValue);
  *event = new CUevent_st{flags, false};
  S().events.insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaEventDestroy");
  if (call.error != cudaSuccess) return injected(call);
  return destroy(event, S().events);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaEventRecord");
  if (call.error != cudaSuccess) return injected(call);
  if (!S().events.count(event)) return fail(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = check_stream(stream)) return e;
  if (capture_state* c = capture_of(stream)) {  // a record in the graph: what a wait on it joins
    if (c->invalidated != cudaSuccess) return fail(cudaErrorStreamCaptureInvalidated);
    const auto it = c->forked.find(stream);
    event->capture = c;
    event->stream = stream;
    event->seq = it == c->forked.end() ? 0 : it->second.work;
    return cudaSuccess;
  }
  event->capture = nullptr;
  event->recorded = true;  // the stream's work has already run
  event->at = std::chrono::steady_clock::now();
  return sticky();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaEventSynchronize");
  if (call.error != cudaSuccess) return injected(call);
  if (!S().events.count(event)) return fail(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = unsafe_during_capture("cudaEventSynchronize")) return e;
  return sticky();
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  std::lock_guard lock(S().mutex);
  if (!S().events.count(event)) return fail(cudaErrorInvalidResourceHandle);
  return sticky();
}

// Events carry no device time on the simulated device: a clear refusal, never a made-up
// duration, unless RUNGS_SIM_EVENT_TIME=host asks for the host time between the records (the
// time the CPU took to simulate the work in between, which programs that only print a timing
// need to run to their end).
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  std::lock_guard lock(S().mutex);
  if (ms == nullptr) return fail(cudaErrorInvalidValue, "cudaEventElapsedTime: a null result pointer");
  if (!S().events.count(start) || !S().events.count(end)) return fail(cudaErrorInvalidResourceHandle);
  if (!S().event_host_time) {
    return fail(cudaErrorNotSupported,
                "cudaEventElapsedTime: events carry no time on the simulated device (the CPU runs the kernels; "
                "a duration would be made up; RUNGS_SIM_EVENT_TIME=host gives the simulator's own host time)");
  }
  if ((start->flags | end->flags) & cudaEventDisableTiming) {
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event created with cudaEventDisableTiming");
  }
  if (!start->recorded || !end->recorded) return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event never recorded");
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return sticky();
}

// Profiler ranges have nothing to delimit here (no profiler attaches to the simulated device).
cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

// ---------------------------------------------------------------------------------------
// Stream capture and graphs.
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaStreamBeginCapture");
  if (call.error != cudaSuccess) return injected(call);
  if (is_legacy(stream)) return fail(cudaErrorStreamCaptureUnsupported, "capture of the legacy stream");
  if (!S().streams.count(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (stream->capture) return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: the stream is already capturing");
  auto* c = new capture_state{mode, std::this_thread::get_id(), {}, cudaSuccess, ++S().capture_ids, stream, {}};
  stream->capture = c;
  S().captures.insert(c);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  std::lock_guard lock(S().mutex);
  // An injected fault fails it as CUDA's fails: the capture still ends, with no graph.
  const faults::detail::call_scope call("cudaStreamEndCapture");
  if (pGraph == nullptr) return fail(cudaErrorInvalidValue);
  if (is_legacy(stream) || !S().streams.count(stream)) return fail(cudaErrorInvalidResourceHandle);
  capture_state* c = stream->capture;
  if (c == nullptr) return fail(cudaErrorIllegalState, "cudaStreamEndCapture: the stream is not capturing");
  if (c->mode == cudaStreamCaptureModeThreadLocal && c->thread != std::this_thread::get_id()) {
    return fail(cudaErrorStreamCaptureWrongThread);
  }
  if (stream != c->origin) {  // CUDA: the capture is invalidated, and ends only at its origin
    c->invalidated = cudaErrorStreamCaptureInvalidated;
    return fail(cudaErrorStreamCaptureUnmatched,
                "cudaStreamEndCapture on a stream forked into the capture, not the stream that began it");
  }
  std::string unjoined;
  for (auto& [forked, m] : c->forked) {
    forked->capture = nullptr;
    if (!m.joined) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%p", unjoined.empty() ? "" : ", ", static_cast<void*>(forked));
      unjoined += buf;
    }
  }
  for (CUevent_st* e : S().events) {
    if (e->capture == c) e->capture = nullptr;  // recorded in a graph: nothing to wait on now
  }
  stream->capture = nullptr;
  S().captures.erase(c);
  std::unique_ptr<capture_state> done(c);
  *pGraph = nullptr;
  if (call.error != cudaSuccess) return injected(call);
  if (c->invalidated != cudaSuccess) return fail(c->invalidated);
  if (!unjoined.empty()) {
    return fail(cudaErrorStreamCaptureUnjoined,
                "cudaStreamEndCapture: forked stream(s) " + unjoined +
                    " not joined back (no member stream waited on an event recorded after their last work)");
  }
  *pGraph = new CUgraph_st{std::move(c->nodes)};
  S().graphs.insert(*pGraph);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status) {
  std::lock_guard lock(S().mutex);
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  if (!is_legacy(stream) && !S().streams.count(stream)) return fail(cudaErrorInvalidResourceHandle);
  const capture_state* c = capture_of(stream);
  *status = c == nullptr ? cudaStreamCaptureStatusNone
            : c->invalidated == cudaSuccess ? cudaStreamCaptureStatusActive
                                            : cudaStreamCaptureStatusInvalidated;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaGraphDestroy");
  if (call.error != cudaSuccess) return injected(call);
  return destroy(graph, S().graphs);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaGraphInstantiate");
  if (call.error != cudaSuccess) return injected(call);
  if (pGraphExec == nullptr || flags != 0) return fail(cudaErrorInvalidValue);
  if (!S().graphs.count(graph)) return fail(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = unsafe_during_capture("cudaGraphInstantiate")) return e;
  *pGraphExec = new CUgraphExec_st{graph->nodes};
  S().execs.insert(*pGraphExec);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaGraphExecDestroy");
  if (call.error != cudaSuccess) return injected(call);
  return destroy(graphExec, S().execs);
}

cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaGraphUpload");
  if (call.error != cudaSuccess) return injected(call);
  if (!S().execs.count(graphExec)) return fail(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = check_stream(stream)) return e;
  return sticky();
}

// An instantiated graph takes the parameters of `graph` when both have the same nodes in the
// same order, of the same kinds, the kernel nodes launching the same kernels and the copy and
// memset nodes moving as many bytes (CUDA's rules, for the linear graphs capture records);
// otherwise nothing changes and resultInfo says why (no node handles: errorNode is null).
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph, cudaGraphExecUpdateResultInfo* resultInfo) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaGraphExecUpdate");
  if (call.error != cudaSuccess) return injected(call);
  if (resultInfo == nullptr) return fail(cudaErrorInvalidValue);
  if (!S().execs.count(hGraphExec) || !S().graphs.count(hGraph)) return fail(cudaErrorInvalidResourceHandle);
  *resultInfo = {};
  const auto& from = hGraph->nodes;
  auto& to = hGraphExec->nodes;
  cudaGraphExecUpdateResult why = cudaGraphExecUpdateSuccess;
  std::string what;
  if (from.size() != to.size()) {
    why = cudaGraphExecUpdateErrorTopologyChanged;
    what = "the graph has " + std::to_string(from.size()) + " nodes, the instantiated one " + std::to_string(to.size());
  }
  for (std::size_t i = 0; i < from.size() && why == cudaGraphExecUpdateSuccess; ++i) {
    const std::string at = "node " + std::to_string(i) + " is ";
    if (from[i].kind != to[i].kind) {
      why = cudaGraphExecUpdateErrorNodeTypeChanged;
      what = at + "another kind of node than the instantiated one";
    } else if (from[i].kind == node::kernel && from[i].k != to[i].k) {
      why = cudaGraphExecUpdateErrorFunctionChanged;
      what = at + "kernel " + from[i].k->name + ", not " + to[i].k->name;
    } else if (from[i].kind != node::kernel && from[i].bytes != to[i].bytes) {
      why = cudaGraphExecUpdateErrorParametersChanged;
      what = at + "a copy or memset of " + std::to_string(from[i].bytes) + " bytes, not " + std::to_string(to[i].bytes);
    }
  }
  resultInfo->result = why;
  if (why != cudaGraphExecUpdateSuccess) {
    return fail(cudaErrorGraphExecUpdateFailure, "cudaGraphExecUpdate: " + what + " (nothing updated)");
  }
  to = from;
  return cudaSuccess;
}

static CUgraphNode_st* node_handle(const CUgraph_st* graph, std::size_t index) {
  static std::map<std::pair<const CUgraph_st*, std::size_t>, std::unique_ptr<CUgraphNode_st>> handles;
  auto& h = handles[{graph, index}];
  if (!h) h = std::make_unique<CUgraphNode_st>(CUgraphNode_st{graph, index, {}});
  return h.get();
}

// The kernel node a handle names, or null (a stale handle, or a node of another kind).
static rungs::sim::rt::node* kernel_node(cudaGraphNode_t h) {
  if (h == nullptr || !S().graphs.count(const_cast<CUgraph_st*>(h->graph))) return nullptr;
  auto& nodes = const_cast<CUgraph_st*>(h->graph)->nodes;
  if (h->index >= nodes.size() || nodes[h->index].kind != rungs::sim::rt::node::kernel) return nullptr;
  return &nodes[h->index];
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* numNodes) {
  std::lock_guard lock(S().mutex);
  if (numNodes == nullptr) return fail(cudaErrorInvalidValue);
  if (!S().graphs.count(graph)) return fail(cudaErrorInvalidResourceHandle);
  const std::size_t count = graph->nodes.size();
  if (nodes != nullptr) {  // CUDA: at most *numNodes handles, the rest of the array null
    for (std::size_t i = 0; i < *numNodes; ++i) nodes[i] = i < count ? node_handle(graph, i) : nullptr;
  }
  *numNodes = nodes == nullptr ? count : std::min(*numNodes, count);
  return cudaSuccess;
}

cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, cudaKernelNodeParams* pNodeParams) {
  std::lock_guard lock(S().mutex);
  const rungs::sim::rt::node* n = kernel_node(node);
  if (n == nullptr || pNodeParams == nullptr) return fail(cudaErrorInvalidValue);
  *pNodeParams = {};
  for (auto& [stub, k] : S().kernels) {
    if (&k == n->k) pNodeParams->func = const_cast<void*>(stub);
  }
  pNodeParams->gridDim = dim3(n->grid.x, n->grid.y, n->grid.z);
  pNodeParams->blockDim = dim3(n->block.x, n->block.y, n->block.z);
  pNodeParams->sharedMemBytes = static_cast<unsigned>(n->shared);
  node->args.clear();
  for (const auto& p : n->params) node->args.push_back(const_cast<unsigned char*>(p.data()));
  pNodeParams->kernelParams = node->args.data();
  return cudaSuccess;
}

// New arguments and launch shape for one kernel node of an instantiated graph (the kernel itself
// stays: changing it is refused, not simulated).
cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                             const cudaKernelNodeParams* pNodeParams) {
  std::lock_guard lock(S().mutex);
  if (!S().execs.count(hGraphExec)) return fail(cudaErrorInvalidResourceHandle);
  const rungs::sim::rt::node* from = kernel_node(node);
  if (from == nullptr || pNodeParams == nullptr || node->index >= hGraphExec->nodes.size() ||
      hGraphExec->nodes[node->index].kind != rungs::sim::rt::node::kernel) {
    return fail(cudaErrorInvalidValue, "cudaGraphExecKernelNodeSetParams: not a kernel node of a live graph");
  }
  rungs::sim::rt::node& n = hGraphExec->nodes[node->index];
  const auto it = S().kernels.find(pNodeParams->func);
  if (it == S().kernels.end() || &it->second != n.k) {
    return fail(cudaErrorInvalidValue, "cudaGraphExecKernelNodeSetParams: another kernel than the node's " + n.k->name +
                                           " (changing a node's kernel is not simulated)");
  }
  return set_kernel_params(n, *n.k, *pNodeParams, "cudaGraphExecKernelNodeSetParams");
}

// New parameters for a kernel node of a graph (not yet instantiated, or to be carried into an
// instantiated one by cudaGraphExecUpdate). Unlike an instantiated graph's node, a graph's node
// may change its kernel, as in CUDA; the kernel must be one the program registered.
cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node, const cudaKernelNodeParams* pNodeParams) {
  std::lock_guard lock(S().mutex);
  rungs::sim::rt::node* n = kernel_node(node);
  if (n == nullptr || pNodeParams == nullptr) {
    return fail(cudaErrorInvalidValue, "cudaGraphKernelNodeSetParams: not a kernel node of a live graph");
  }
  const auto it = S().kernels.find(pNodeParams->func);
  if (it == S().kernels.end()) {
    return fail(cudaErrorInvalidDeviceFunction, "cudaGraphKernelNodeSetParams: func is not a kernel of this program");
  }
  return set_kernel_params(*n, it->second, *pNodeParams, "cudaGraphKernelNodeSetParams");
}

// What kind of node a handle names: kernel, memcpy, memset or host (the kinds this runtime builds).
cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* pType) {
  std::lock_guard lock(S().mutex);
  if (node == nullptr || pType == nullptr || !S().graphs.count(const_cast<CUgraph_st*>(node->graph)) ||
      node->index >= node->graph->nodes.size()) {
    return fail(cudaErrorInvalidValue, "cudaGraphNodeGetType: not a node of a live graph");
  }
  switch (node->graph->nodes[node->index].kind) {
    case rungs::sim::rt::node::kernel: *pType = cudaGraphNodeTypeKernel; break;
    case rungs::sim::rt::node::copy: *pType = cudaGraphNodeTypeMemcpy; break;
    case rungs::sim::rt::node::set: *pType = cudaGraphNodeTypeMemset; break;
    case rungs::sim::rt::node::host: *pType = cudaGraphNodeTypeHost; break;
  }
  return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// Graphs built node by node. Dependencies must be nodes of the same graph, which exist before
// the node that depends on them, so insertion order is a topological order: the graph runs its
// nodes in it (one legal order of the dependencies).
static cudaError_t add_node(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* deps,
                            std::size_t num_deps, rungs::sim::rt::node n, const char* api) {
  if (pGraphNode == nullptr) return fail(cudaErrorInvalidValue, std::string(api) + ": a null node pointer");
  if (!S().graphs.count(graph)) return fail(cudaErrorInvalidResourceHandle, std::string(api) + ": not a live graph");
  if (num_deps > 0 && deps == nullptr) return fail(cudaErrorInvalidValue, std::string(api) + ": dependencies missing");
  for (std::size_t i = 0; i < num_deps; ++i) {
    if (deps[i] == nullptr || deps[i]->graph != graph || deps[i]->index >= graph->nodes.size()) {
      return fail(cudaErrorInvalidValue, std::string(api) + ": dependency " + std::to_string(i) + " is not a node of this graph");
    }
  }
  graph->nodes.push_back(std::move(n));
  *pGraphNode = node_handle(graph, graph->nodes.size() - 1);
  return cudaSuccess;
}

cudaError_t cudaGraphCreate(cudaGraph_t* pGraph, unsigned int flags) {
  std::lock_guard lock(S().mutex);
  if (pGraph == nullptr || flags != 0) return fail(cudaErrorInvalidValue, "cudaGraphCreate: a null pointer or flags other than 0");
  *pGraph = new CUgraph_st{};
  S().graphs.insert(*pGraph);
  return cudaSuccess;
}

cudaError_t cudaGraphClone(cudaGraph_t* pGraphClone, cudaGraph_t originalGraph) {
  std::lock_guard lock(S().mutex);
  if (pGraphClone == nullptr) return fail(cudaErrorInvalidValue, "cudaGraphClone: a null result pointer");
  if (!S().graphs.count(originalGraph)) return fail(cudaErrorInvalidResourceHandle, "cudaGraphClone: not a live graph");
  *pGraphClone = new CUgraph_st{originalGraph->nodes};
  S().graphs.insert(*pGraphClone);
  return cudaSuccess;
}

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                   size_t numDependencies, const struct cudaKernelNodeParams* pNodeParams) {
  std::lock_guard lock(S().mutex);
  if (pNodeParams == nullptr) return fail(cudaErrorInvalidValue, "cudaGraphAddKernelNode: null parameters");
  if (pNodeParams->extra != nullptr) return fail(cudaErrorInvalidValue, "cudaGraphAddKernelNode: 'extra' is not simulated (use kernelParams)");
  rungs::sim::rt::node n;
  if (cudaError_t e = kernel_node_for(pNodeParams->func, pNodeParams->gridDim, pNodeParams->blockDim,
                                      pNodeParams->kernelParams, pNodeParams->sharedMemBytes, n)) {
    return e;
  }
  return add_node(pGraphNode, graph, pDependencies, numDependencies, std::move(n), "cudaGraphAddKernelNode");
}

// Linear memory only: pitched pointers with a depth of 1 (a 3D extent and CUDA arrays are
// refused by name); every row is checked as cudaMemcpy checks its range.
cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                   size_t numDependencies, const struct cudaMemcpy3DParms* p) {
  std::lock_guard lock(S().mutex);
  if (p == nullptr) return fail(cudaErrorInvalidValue, "cudaGraphAddMemcpyNode: null parameters");
  if (p->srcArray != nullptr || p->dstArray != nullptr) {
    return fail(cudaErrorNotSupported, "cudaGraphAddMemcpyNode: CUDA arrays are not simulated");
  }
  if (p->extent.depth != 1 || p->srcPos.z != 0 || p->dstPos.z != 0) {
    return fail(cudaErrorNotSupported, "cudaGraphAddMemcpyNode: depth " + std::to_string(p->extent.depth) +
                                           " (only 1D and 2D copies are simulated)");
  }
  const std::size_t width = p->extent.width, rows = p->extent.height;
  const std::size_t spitch = p->srcPtr.pitch, dpitch = p->dstPtr.pitch;
  if (rows > 1 && (width > spitch || width > dpitch)) {
    return fail(cudaErrorInvalidPitchValue, "cudaGraphAddMemcpyNode: width " + std::to_string(width) +
                                                " exceeds a pitch (" + std::to_string(spitch) + ", " + std::to_string(dpitch) + ")");
  }
  auto* dst = static_cast<char*>(p->dstPtr.ptr) + p->dstPos.y * dpitch + p->dstPos.x;
  const auto* src = static_cast<const char*>(p->srcPtr.ptr) + p->srcPos.y * spitch + p->srcPos.x;
  rungs::sim::rt::node n;
  if (cudaError_t e = pitched_copy(dst, dpitch, src, spitch, width, rows, p->kind, "cudaGraphAddMemcpyNode", n)) return e;
  return add_node(pGraphNode, graph, pDependencies, numDependencies, std::move(n), "cudaGraphAddMemcpyNode");
}

// A 1D copy node: cudaGraphAddMemcpyNode's one row of `count` bytes.
cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                     size_t numDependencies, void* dst, const void* src, size_t count,
                                     enum cudaMemcpyKind kind) {
  std::lock_guard lock(S().mutex);
  rungs::sim::rt::node n;
  if (cudaError_t e = pitched_copy(dst, count, src, count, count, 1, kind, "cudaGraphAddMemcpyNode1D", n)) return e;
  return add_node(pGraphNode, graph, pDependencies, numDependencies, std::move(n), "cudaGraphAddMemcpyNode1D");
}

// Graph memory nodes (allocations owned by a graph) are not simulated; refused by name, as
// stream-ordered allocation on a capturing stream is.
cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t*, cudaGraph_t, const cudaGraphNode_t*, size_t,
                                     struct cudaMemAllocNodeParams*) {
  return fail(cudaErrorNotSupported, "cudaGraphAddMemAllocNode: graph memory nodes are not simulated");
}
cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t*, cudaGraph_t, const cudaGraphNode_t*, size_t, void*) {
  return fail(cudaErrorNotSupported, "cudaGraphAddMemFreeNode: graph memory nodes are not simulated");
}

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                   size_t numDependencies, const struct cudaMemsetParams* p) {
  std::lock_guard lock(S().mutex);
  if (p == nullptr) return fail(cudaErrorInvalidValue, "cudaGraphAddMemsetNode: null parameters");
  if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) {
    return fail(cudaErrorInvalidValue, "cudaGraphAddMemsetNode: element size " + std::to_string(p->elementSize) +
                                           " (must be 1, 2 or 4)");
  }
  const std::size_t bytes = p->width * p->elementSize;
  if (p->height > 1 && bytes > p->pitch) {
    return fail(cudaErrorInvalidPitchValue, "cudaGraphAddMemsetNode: a row of " + std::to_string(bytes) +
                                                " bytes exceeds the pitch " + std::to_string(p->pitch));
  }
  const unsigned value = p->elementSize == 4 ? p->value : p->value & ((1u << (8 * p->elementSize)) - 1);
  rungs::sim::rt::node n;
  if (cudaError_t e = pitched_set(p->dst, p->pitch, bytes, p->height, value, p->elementSize, "cudaGraphAddMemsetNode", n)) {
    return e;
  }
  return add_node(pGraphNode, graph, pDependencies, numDependencies, std::move(n), "cudaGraphAddMemsetNode");
}

cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph, const cudaGraphNode_t* pDependencies,
                                 size_t numDependencies, const struct cudaHostNodeParams* p) {
  std::lock_guard lock(S().mutex);
  if (p == nullptr || p->fn == nullptr) return fail(cudaErrorInvalidValue, "cudaGraphAddHostNode: a null function");
  rungs::sim::rt::node n;
  n.kind = rungs::sim::rt::node::host;
  n.fn = p->fn;
  n.user = p->userData;
  return add_node(pGraphNode, graph, pDependencies, numDependencies, std::move(n), "cudaGraphAddHostNode");
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaGraphLaunch");
  if (call.error != cudaSuccess) return injected(call, true);
  if (!S().execs.count(graphExec)) return fail(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = check_stream(stream)) return e;
  if (capture_of(stream)) return fail(cudaErrorNotSupported, "cudaGraphLaunch into a capturing stream is not simulated");
  if (cudaError_t e = sticky()) return e;
  for (const node& n : graphExec->nodes) {
    run(n);
    if (S().sticky != cudaSuccess) break;
  }
  return cudaSuccess;
}


// ---------------------------------------------------------------------------------------
// Module variables: __device__ and __constant__ symbols (registered by __cudaRegisterVar).
static cudaError_t symbol_storage(const void* symbol, const char* api, unsigned char*& data, std::size_t& size) {
  const auto it = S().symbols.find(symbol);
  if (it == S().symbols.end()) {
    return fail(cudaErrorInvalidSymbol, std::string(api) + ": not a registered __device__ or __constant__ variable");
  }
  symbol_record& v = it->second;
  if (!load_module(*v.mod).empty()) {
    return finding(cudaErrorNoKernelImageForDevice, std::string(api) + ": cannot load the module of " + v.name + ": " + v.mod->error);
  }
  const rungs::sim::variable_storage st = rungs::sim::variable(*v.mod->parsed, v.name);
  if (st.data == nullptr) {
    return fail(cudaErrorInvalidSymbol, std::string(api) + ": the module's PTX declares no variable " + v.name);
  }
  data = st.data;
  size = st.size;
  return cudaSuccess;
}

// A copy into or out of a variable: [offset, offset + count) must lie inside it, the other side
// inside one live allocation when it is device memory; issued like cudaMemcpyAsync.
static cudaError_t symbol_copy(const void* symbol, void* other, std::size_t count, std::size_t offset,
                               cudaMemcpyKind kind, bool to_symbol, cudaStream_t stream, const char* api) {
  unsigned char* data = nullptr;
  std::size_t size = 0;
  if (cudaError_t e = symbol_storage(symbol, api, data, size)) return e;
  if (offset > size || count > size - offset) {
    return fail(cudaErrorInvalidValue, std::string(api) + ": bytes [" + std::to_string(offset) + ", " +
                                           std::to_string(offset + count) + ") outside the variable's " +
                                           std::to_string(size));
  }
  const cudaMemcpyKind host_side = to_symbol ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  if (kind != host_side && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) {
    return fail(cudaErrorInvalidMemcpyDirection, std::string(api) + ": kind " + std::to_string(kind) + " is not " +
                                                     (to_symbol ? "HostToDevice" : "DeviceToHost") +
                                                     ", DeviceToDevice or Default");
  }
  if (count == 0) return cudaSuccess;
  if (other == nullptr) return fail(cudaErrorInvalidValue, std::string(api) + ": a null pointer");
  if (kind == cudaMemcpyDeviceToDevice && !inside_allocation(other, count)) {
    return fail(cudaErrorInvalidValue, std::string(api) + ": the device range is not inside one live allocation");
  }
  node n;
  n.kind = node::copy;
  n.dst = to_symbol ? static_cast<void*>(data + offset) : other;
  n.src = to_symbol ? static_cast<const void*>(other) : data + offset;
  n.bytes = count;
  return issue(std::move(n), stream);
}

cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemcpyToSymbolAsync");
  if (call.error != cudaSuccess) return injected(call);
  return symbol_copy(symbol, const_cast<void*>(src), count, offset, kind, true, stream, "cudaMemcpyToSymbolAsync");
}

cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemcpyFromSymbolAsync");
  if (call.error != cudaSuccess) return injected(call);
  return symbol_copy(symbol, dst, count, offset, kind, false, stream, "cudaMemcpyFromSymbolAsync");
}

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset, enum cudaMemcpyKind kind) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemcpyToSymbol");
  if (call.error != cudaSuccess) return injected(call);
  if (cudaError_t e = unsafe_during_capture("cudaMemcpyToSymbol")) return e;
  return symbol_copy(symbol, const_cast<void*>(src), count, offset, kind, true, nullptr, "cudaMemcpyToSymbol");
}

cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset, enum cudaMemcpyKind kind) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemcpyFromSymbol");
  if (call.error != cudaSuccess) return injected(call);
  if (cudaError_t e = unsafe_during_capture("cudaMemcpyFromSymbol")) return e;
  return symbol_copy(symbol, dst, count, offset, kind, false, nullptr, "cudaMemcpyFromSymbol");
}

// The variable's device address: from then on it is device memory to the copy calls and to
// kernels of every module (cudaFree refuses it).
cudaError_t cudaGetSymbolAddress(void** devPtr, const void* symbol) {
  std::lock_guard lock(S().mutex);
  if (devPtr == nullptr) return fail(cudaErrorInvalidValue, "cudaGetSymbolAddress: a null result pointer");
  unsigned char* data = nullptr;
  std::size_t size = 0;
  if (cudaError_t e = symbol_storage(symbol, "cudaGetSymbolAddress", data, size)) return e;
  S().memory.live[reinterpret_cast<std::uint64_t>(data)] = allocation{.size = size, .device = true, .symbol = true};
  *devPtr = data;
  return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  std::lock_guard lock(S().mutex);
  if (size == nullptr) return fail(cudaErrorInvalidValue, "cudaGetSymbolSize: a null result pointer");
  unsigned char* data = nullptr;
  return symbol_storage(symbol, "cudaGetSymbolSize", data, *size);
}

// ---------------------------------------------------------------------------------------
// Kernel attributes a program sets.
cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaFuncSetAttribute");
  if (call.error != cudaSuccess) return injected(call);
  kernel_record* k = loaded_kernel(func, "cudaFuncSetAttribute");
  if (k == nullptr) return last_error;
  switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize: {
      const std::size_t static_shared = rungs::sim::resources(*k->mod->parsed, k->name).static_shared;
      if (value < 0 || static_shared + static_cast<std::size_t>(value) > kSharedPerBlockOptin) {
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute(" + k->name + ", MaxDynamicSharedMemorySize, " +
                                               std::to_string(value) + "): with its " + std::to_string(static_shared) +
                                               " static bytes it must fit the " +
                                               std::to_string(kSharedPerBlockOptin) + "-byte opt-in limit");
      }
      k->max_dynamic_shared = static_cast<std::size_t>(value);
      return cudaSuccess;
    }
    case cudaFuncAttributePreferredSharedMemoryCarveout:
      if (value < -1 || value > 100) {
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute(" + k->name + ", PreferredSharedMemoryCarveout, " +
                                               std::to_string(value) + "): must be -1 or a percentage 0..100");
      }
      k->carveout = value;
      return cudaSuccess;
    default:
      return fail(cudaErrorNotSupported, "cudaFuncSetAttribute(" + k->name + "): attribute " +
                                             std::to_string(static_cast<int>(attr)) +
                                             " is not simulated (thread-block clusters and scheduling policies)");
  }
}

// ---------------------------------------------------------------------------------------
// More of streams: waits, queries, host functions, pitched memsets, capture modes, limits.

// Every stream's work has run when it was issued, so a wait outside capture is met already. A
// wait on an event recorded in a capture forks the waiting stream into it, or joins a forked
// stream's work back (capture_state); a capture cannot wait on work outside it.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaStreamWaitEvent");
  if (call.error != cudaSuccess) return injected(call);
  if (!S().events.count(event)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: not a live event");
  if (flags != cudaEventWaitDefault) {
    return fail(cudaErrorInvalidValue, "cudaStreamWaitEvent: flags " + std::to_string(flags) + " (only cudaEventWaitDefault is simulated)");
  }
  if (cudaError_t e = check_stream(stream)) return e;
  capture_state* waiter = capture_of(stream);
  if (capture_state* c = event->capture) {  // an event recorded in a capture: fork or join
    if (c->invalidated != cudaSuccess) return fail(cudaErrorStreamCaptureInvalidated);
    if (waiter != nullptr && waiter != c) {
      c->invalidated = waiter->invalidated = cudaErrorStreamCaptureInvalidated;
      return fail(cudaErrorStreamCaptureMerge, "cudaStreamWaitEvent: joins two captures (both are invalidated)");
    }
    if (is_legacy(stream)) {
      c->invalidated = cudaErrorStreamCaptureInvalidated;
      return fail(cudaErrorStreamCaptureImplicit, "cudaStreamWaitEvent: the legacy stream cannot join a capture");
    }
    if (waiter == nullptr) {  // a fork: the stream joins the capture
      stream->capture = c;
      c->forked[stream] = {};
      return cudaSuccess;
    }
    if (auto it = c->forked.find(event->stream); it != c->forked.end() && event->stream != stream &&
                                                 it->second.work == event->seq) {
      it->second.joined = true;  // all of that stream's work is behind this wait
    }
    c->worked(stream);  // the waiter's later work depends on more: it must be joined back again
    return cudaSuccess;
  }
  if (waiter != nullptr) {  // CUDA: a capture cannot depend on work outside it
    waiter->invalidated = cudaErrorStreamCaptureInvalidated;
    return fail(cudaErrorStreamCaptureIsolation,
                "cudaStreamWaitEvent: a capturing stream waits on an event recorded outside the capture (the capture is invalidated)");
  }
  return sticky();
}

// A stream's work has run when it was issued: ready, unless the device has faulted. Querying a
// capturing stream is an unsafe call: it fails and invalidates the capture, as CUDA's does.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaStreamQuery");
  if (call.error != cudaSuccess) return injected(call);
  if (!is_legacy(stream) && !S().streams.count(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (capture_state* c = capture_of(stream)) {
    c->invalidated = cudaErrorStreamCaptureInvalidated;
    return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamQuery of a capturing stream (the capture is invalidated)");
  }
  return sticky();
}

// The host function runs when it is issued, after the stream's earlier work (which has run);
// on a capturing stream it is recorded as a host node, run when the graph is.
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaLaunchHostFunc");
  if (call.error != cudaSuccess) return injected(call);
  if (fn == nullptr) return fail(cudaErrorInvalidValue, "cudaLaunchHostFunc: a null function");
  node n;
  n.kind = node::host;
  n.fn = fn;
  n.user = userData;
  return issue(std::move(n), stream);  // after a device fault it is not run, as on CUDA
}

// The legacy form of cudaLaunchHostFunc: the callback runs when it is issued, after the
// stream's earlier work (which has run), and is told the device's state: cudaSuccess, or the
// sticky error of an earlier fault (CUDA passes it too). CUDA refuses it on a capturing stream
// (use cudaLaunchHostFunc); so does this runtime, invalidating the capture.
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* userData, unsigned int flags) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaStreamAddCallback");
  if (call.error != cudaSuccess) return injected(call);
  if (callback == nullptr || flags != 0) {
    return fail(cudaErrorInvalidValue, "cudaStreamAddCallback: a null callback or flags other than 0");
  }
  if (cudaError_t e = check_stream(stream)) return e;
  if (capture_state* c = capture_of(stream)) {
    c->invalidated = cudaErrorStreamCaptureInvalidated;
    return fail(cudaErrorStreamCaptureUnsupported,
                "cudaStreamAddCallback on a capturing stream (cudaLaunchHostFunc records a host node; the capture is invalidated)");
  }
  callback(stream, S().sticky, userData);
  return cudaSuccess;
}

// Cache and shared-memory carve-out preferences are hints on a GPU; here there is no L1 to
// divide. A value outside the enumeration is refused, as CUDA does.
static cudaError_t cache_config(enum cudaFuncCache config, const char* api) {
  if (config != cudaFuncCachePreferNone && config != cudaFuncCachePreferShared && config != cudaFuncCachePreferL1 &&
      config != cudaFuncCachePreferEqual) {
    return fail(cudaErrorInvalidValue, std::string(api) + ": cache config " + std::to_string(static_cast<int>(config)) +
                                           " is not a cudaFuncCache value");
  }
  return cudaSuccess;
}

cudaError_t cudaFuncSetCacheConfig(const void* func, enum cudaFuncCache cacheConfig) {
  std::lock_guard lock(S().mutex);
  if (!S().kernels.count(func)) return fail(cudaErrorInvalidDeviceFunction, "cudaFuncSetCacheConfig: not a kernel of this program");
  return cache_config(cacheConfig, "cudaFuncSetCacheConfig");
}

cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig) {
  std::lock_guard lock(S().mutex);
  if (cudaError_t e = cache_config(cacheConfig, "cudaDeviceSetCacheConfig")) return e;
  S().cache_config = cacheConfig;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache* pCacheConfig) {
  std::lock_guard lock(S().mutex);
  if (pCacheConfig == nullptr) return fail(cudaErrorInvalidValue);
  *pCacheConfig = S().cache_config;
  return cudaSuccess;
}

// Cooperative launches let a kernel synchronise its whole grid (cg::this_grid().sync()); the
// executor runs blocks one at a time, so a grid barrier could never complete. Refused by name,
// as cudaLaunchKernelExC refuses cudaLaunchAttributeCooperative (the device attribute
// cudaDevAttrCooperativeLaunch is 0).
cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                                        cudaStream_t stream) {
  (void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
  return fail(cudaErrorNotSupported,
              "cudaLaunchCooperativeKernel: cooperative launches (grid sync) are not simulated; blocks run one at a time");
}

// Memory pools: cudaDevAttrMemoryPoolsSupported is 0 (cudaMallocAsync allocates at the call),
// so the pool calls are refused by name rather than missing at link time.
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  (void)memPool, (void)device;
  return fail(cudaErrorNotSupported, "cudaDeviceGetDefaultMemPool: memory pools are not simulated "
                                     "(cudaMallocAsync and cudaFreeAsync allocate and free at the call)");
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void* value) {
  (void)memPool, (void)attr, (void)value;
  return fail(cudaErrorNotSupported, "cudaMemPoolSetAttribute: memory pools are not simulated");
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void* value) {
  (void)memPool, (void)attr, (void)value;
  return fail(cudaErrorNotSupported, "cudaMemPoolGetAttribute: memory pools are not simulated");
}

// Pitched memsets: `height` rows of `width` bytes, each row checked as cudaMemset checks its
// range, all before any is set; one memset node (captured as such).
cudaError_t cudaMemset2DAsync(void* devPtr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemset2DAsync");
  if (call.error != cudaSuccess) return injected(call);
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > pitch) {
    return fail(cudaErrorInvalidPitchValue,
                "cudaMemset2D: width " + std::to_string(width) + " exceeds pitch " + std::to_string(pitch));
  }
  node n;
  if (cudaError_t e = pitched_set(devPtr, pitch, width, height, static_cast<unsigned char>(value), 1, "cudaMemset2D", n)) {
    return e;
  }
  return issue(std::move(n), stream);
}

cudaError_t cudaMemset2D(void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  std::lock_guard lock(S().mutex);
  const faults::detail::call_scope call("cudaMemset2D");
  if (call.error != cudaSuccess) return injected(call);
  if (cudaError_t e = unsafe_during_capture("cudaMemset2D")) return e;
  return cudaMemset2DAsync(devPtr, pitch, value, width, height, nullptr);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode) {
  if (mode == nullptr) return fail(cudaErrorInvalidValue, "cudaThreadExchangeStreamCaptureMode: a null mode pointer");
  if (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
      *mode != cudaStreamCaptureModeRelaxed) {
    return fail(cudaErrorInvalidValue, "cudaThreadExchangeStreamCaptureMode: mode " + std::to_string(*mode));
  }
  std::swap(*mode, thread_capture_mode);
  return cudaSuccess;
}

cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) {
  std::lock_guard lock(S().mutex);
  auto it = S().limits.find(limit);
  if (it == S().limits.end()) return fail(cudaErrorNotSupported, "cudaDeviceSetLimit: limit " + std::to_string(limit) + " is not simulated");
  it->second = value;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetLimit(size_t* pValue, enum cudaLimit limit) {
  std::lock_guard lock(S().mutex);
  if (pValue == nullptr) return fail(cudaErrorInvalidValue, "cudaDeviceGetLimit: a null result pointer");
  auto it = S().limits.find(limit);
  if (it == S().limits.end()) return fail(cudaErrorNotSupported, "cudaDeviceGetLimit: limit " + std::to_string(limit) + " is not simulated");
  *pValue = it->second;
  return cudaSuccess;
}

// What a pointer is: device memory (an allocation or a variable's storage), page-locked host
// memory, or memory the runtime does not know (unregistered: CUDA 11's answer, not an error).
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr) {
  std::lock_guard lock(S().mutex);
  if (attributes == nullptr) return fail(cudaErrorInvalidValue, "cudaPointerGetAttributes: a null result pointer");
  *attributes = {};
  attributes->type = cudaMemoryTypeUnregistered;
  attributes->device = 0;
  if (const allocation* a = S().memory.find(reinterpret_cast<std::uint64_t>(ptr))) {
    attributes->type = a->managed ? cudaMemoryTypeManaged : a->device ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    attributes->devicePointer = const_cast<void*>(ptr);
    attributes->hostPointer = a->device && !a->managed ? nullptr : const_cast<void*>(ptr);
  }
  return cudaSuccess;
}


// ---------------------------------------------------------------------------------------
// Managed memory: device memory the host may read and write too (the simulated device's memory
// is host memory, so both sides always see the same bytes, as on a GPU with concurrent managed
// access). Prefetches, advice and stream attachment are hints: checked, then nothing to do.
cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  std::lock_guard lock(S().mutex);
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost) {
    return fail(cudaErrorInvalidValue, "cudaMallocManaged: flags " + std::to_string(flags) +
                                           " (cudaMemAttachGlobal or cudaMemAttachHost)");
  }
  if (cudaError_t e = allocate(devPtr, size, true, "cudaMallocManaged")) return e;
  if (*devPtr != nullptr) S().memory.live[reinterpret_cast<std::uint64_t>(*devPtr)].managed = true;
  return cudaSuccess;
}

static cudaError_t check_managed_range(const void* p, std::size_t count, const char* api) {
  const allocation* a = S().memory.find(reinterpret_cast<std::uint64_t>(p));
  if (a == nullptr || !a->managed || !inside_allocation(p, count)) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s: [%p, +%zu) is not inside one managed allocation", api, p, count);
    return fail(cudaErrorInvalidValue, buf);
  }
  return cudaSuccess;
}

static cudaError_t check_location(const cudaMemLocation& l, const char* api) {
  if (l.type == cudaMemLocationTypeHost || (l.type == cudaMemLocationTypeDevice && l.id == 0)) return cudaSuccess;
  if (l.type == cudaMemLocationTypeDevice) return fail(cudaErrorInvalidDevice, std::string(api) + ": device " + std::to_string(l.id));
  return fail(cudaErrorInvalidValue, std::string(api) + ": location type " + std::to_string(l.type) + " (device 0 or host)");
}

cudaError_t cudaMemPrefetchAsync(const void* devPtr, size_t count, struct cudaMemLocation location, unsigned int flags,
                                 cudaStream_t stream) {
  std::lock_guard lock(S().mutex);
  if (cudaError_t e = check_managed_range(devPtr, count, "cudaMemPrefetchAsync")) return e;
  if (cudaError_t e = check_location(location, "cudaMemPrefetchAsync")) return e;
  if (flags != 0) return fail(cudaErrorInvalidValue, "cudaMemPrefetchAsync: flags " + std::to_string(flags) + " (must be 0)");
  if (cudaError_t e = check_stream(stream)) return e;
  return sticky();
}

cudaError_t cudaMemAdvise(const void* devPtr, size_t count, enum cudaMemoryAdvise advice, struct cudaMemLocation location) {
  std::lock_guard lock(S().mutex);
  if (cudaError_t e = check_managed_range(devPtr, count, "cudaMemAdvise")) return e;
  if (advice < cudaMemAdviseSetReadMostly || advice > cudaMemAdviseUnsetAccessedBy) {
    return fail(cudaErrorInvalidValue, "cudaMemAdvise: advice " + std::to_string(advice));
  }
  if (advice == cudaMemAdviseSetReadMostly || advice == cudaMemAdviseUnsetReadMostly) return cudaSuccess;  // no location
  return check_location(location, "cudaMemAdvise");
}

cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* devPtr, size_t length, unsigned int flags) {
  std::lock_guard lock(S().mutex);
  if (cudaError_t e = check_stream(stream)) return e;
  const allocation* a = S().memory.find(reinterpret_cast<std::uint64_t>(devPtr));
  if (a == nullptr || !a->managed || (length != 0 && length != a->size)) {
    return fail(cudaErrorInvalidValue, "cudaStreamAttachMemAsync: not a whole managed allocation");
  }
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle) {
    return fail(cudaErrorInvalidValue, "cudaStreamAttachMemAsync: flags " + std::to_string(flags));
  }
  return cudaSuccess;
}

// Everything the device holds is released (allocations, streams, events, graphs, captures), the
// sticky error and the limits and kernel attributes are cleared, and every module is parsed
// afresh at its next use, so __device__ variables start from their initialisers again.
cudaError_t cudaDeviceReset(void) {
  std::lock_guard lock(S().mutex);
  state& st = S();
  for (auto& [address, a] : st.memory.live) {
    if (!a.symbol && !a.registered) std::free(reinterpret_cast<char*>(address) - kRedZone);
  }
  st.memory.live.clear();
  st.memory.device_bytes = 0;
  for (CUstream_st* s : st.streams) delete s;
  for (CUevent_st* e : st.events) delete e;
  for (CUgraph_st* g : st.graphs) delete g;
  for (CUgraphExec_st* x : st.execs) delete x;
  for (capture_state* c : st.captures) delete c;
  st.streams.clear();
  st.events.clear();
  st.graphs.clear();
  st.execs.clear();
  st.captures.clear();
  for (module_record& m : st.modules) {
    m.loaded = false;
    m.parsed.reset();
    m.error.clear();
  }
  for (auto& [stub, k] : st.kernels) {
    k.max_dynamic_shared.reset();
    k.carveout = -1;
  }
  st.limits = state::default_limits();
  st.device_flags = 0;
  st.cache_config = cudaFuncCachePreferNone;
  st.sticky = cudaSuccess;
  last_error = cudaSuccess;
  return cudaSuccess;
}


// ---------------------------------------------------------------------------------------
// Page-locked registration of the caller's own memory: kernels and copies may use the range
// as they use cudaHostAlloc's (the device pointer is the host pointer, as with unified
// addressing); the memory stays the caller's (cudaFreeHost refuses it).
cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  std::lock_guard lock(S().mutex);
  if (ptr == nullptr || size == 0) return fail(cudaErrorInvalidValue, "cudaHostRegister: a null pointer or no bytes");
  if ((flags & ~(cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterReadOnly)) != 0) {
    return fail(cudaErrorInvalidValue, "cudaHostRegister: flags " + std::to_string(flags) +
                                           " (I/O memory is not simulated; Portable, Mapped and ReadOnly are)");
  }
  const auto start = reinterpret_cast<std::uint64_t>(ptr);
  auto& live = S().memory.live;
  const auto next = live.lower_bound(start);
  const bool overlaps_next = next != live.end() && next->first < start + size;
  const bool overlaps_prev = next != live.begin() && std::prev(next)->first + std::prev(next)->second.size > start;
  if (overlaps_next || overlaps_prev) {
    return fail(cudaErrorHostMemoryAlreadyRegistered, "cudaHostRegister: the range overlaps memory the runtime already knows");
  }
  live[start] = allocation{.size = size, .device = false, .registered = true};
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* ptr) {
  std::lock_guard lock(S().mutex);
  auto& live = S().memory.live;
  const auto it = live.find(reinterpret_cast<std::uint64_t>(ptr));
  if (it == live.end() || !it->second.registered) {
    return fail(cudaErrorHostMemoryNotRegistered, "cudaHostUnregister: not the start of a range registered with cudaHostRegister");
  }
  live.erase(it);
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  std::lock_guard lock(S().mutex);
  if (pDevice == nullptr || flags != 0) return fail(cudaErrorInvalidValue, "cudaHostGetDevicePointer: a null result pointer or flags other than 0");
  const allocation* a = S().memory.find(reinterpret_cast<std::uint64_t>(pHost));
  if (a == nullptr || a->device) {
    return fail(cudaErrorInvalidValue, "cudaHostGetDevicePointer: not page-locked host memory (cudaHostAlloc, cudaHostRegister)");
  }
  *pDevice = pHost;
  return cudaSuccess;
}

cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  std::lock_guard lock(S().mutex);
  const unsigned schedule = flags & cudaDeviceScheduleMask;
  if ((flags & ~static_cast<unsigned>(cudaDeviceMask)) != 0 || schedule == 3 || schedule > cudaDeviceScheduleBlockingSync) {
    return fail(cudaErrorInvalidValue, "cudaSetDeviceFlags: flags " + std::to_string(flags));
  }
  S().device_flags = flags;  // scheduling hints and mapped host memory (always on here): kept, reported
  return cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  std::lock_guard lock(S().mutex);
  if (flags == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDeviceFlags: a null result pointer");
  *flags = S().device_flags | cudaDeviceMapHost;
  return cudaSuccess;
}

}  // extern "C"

// What the device holds now (rungs_sim/faults.hpp).
rungs::sim::faults::live_objects rungs::sim::faults::live() {
  std::lock_guard lock(S().mutex);
  live_objects l;
  for (const auto& [address, a] : S().memory.live) {
    if (!a.symbol && !a.registered) ++(a.device ? l.device_allocations : l.host_allocations);
  }
  l.device_bytes = S().memory.device_bytes;
  l.streams = S().streams.size();
  l.events = S().events.size();
  l.graphs = S().graphs.size();
  l.graph_execs = S().execs.size();
  return l;
}

// A test's stand-in for a new process after a fatal fault (rungs_sim/faults.hpp).
void rungs::sim::faults::reset_device() {
  std::lock_guard lock(S().mutex);
  S().sticky = cudaSuccess;
  last_error = cudaSuccess;
}
