// rungs' PTX executor: the interface between the executor (sim/executor) and the host
// CUDA runtime (sim/runtime) that runs nvcc's own PTX for the kernels on the CPU.
//
// Contract (both sides code against exactly this; extend, do not change):
//  - load_ptx parses one PTX module as nvcc 13 emits it. Parsing is per function: a construct
//    it cannot parse inside a function refuses only that function (refusal() says why, and
//    launching it is a sim_error naming kernel, PTX line and construct); one at module scope
//    is a sim_error of load_ptx naming the module, line and text.
//  - launch executes one grid. Global memory is plain host memory: a pointer argument is the
//    host address the runtime handed out from cudaMalloc. Every global access is checked
//    against `memory` first; an access outside every live allocation is a sim_error naming
//    kernel, PTX line, thread (block and thread index) and address.
//  - An opcode or modifier the executor does not implement is a sim_error naming the
//    instruction and its PTX line, never a silent no-op.
//  - Races, uses of undefined values (read from never-written shared memory) and bad accesses
//    are reported through sim_error (the launch stops at the first finding) so a test fails
//    with the finding as its message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rungs::sim {

struct sim_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A failed device assert (__assertfail): the launch's finding, which CUDA reports as
// cudaErrorAssert rather than as a fault.
struct device_assertion : sim_error {
  using sim_error::sim_error;
};

// The runtime's view of device memory, consulted on every global access.
class global_memory {
 public:
  virtual ~global_memory() = default;
  // True when [address, address + size) lies inside one live allocation. Called from several
  // threads at once while a launch runs its blocks in parallel (schedule::threads), so it must
  // not change state; nothing allocates or frees during a launch.
  [[nodiscard]] virtual bool valid(std::uint64_t address, std::size_t size) const = 0;
};

struct module;  // a parsed PTX module (opaque)

[[nodiscard]] std::shared_ptr<const module> load_ptx(std::string text, std::string name);

// The .entry names of a module, and the byte size and alignment of each parameter of one entry
// (the runtime copies cudaLaunchKernel's args[i] into a parameter buffer with these).
struct param_info {
  std::size_t size = 0;
  std::size_t align = 1;
};
[[nodiscard]] std::vector<std::string> entries(const module& m);
[[nodiscard]] std::vector<param_info> entry_params(const module& m, std::string_view entry);

// Why entry `entry` of `m` cannot run (the construct of its body the executor cannot parse,
// naming kernel, PTX line and construct), or empty when it can.
[[nodiscard]] std::string refusal(const module& m, std::string_view entry);

// What an entry needs per block and per thread, as PTX states it (cudaFuncGetAttributes):
// static shared memory (module- and function-scope .shared), .local bytes per thread and the
// parameter buffer. Registers are PTX's virtual ones, so no count is given.
struct entry_resources {
  std::size_t static_shared = 0, local_bytes = 0, param_bytes = 0;
};
[[nodiscard]] entry_resources resources(const module& m, std::string_view entry);

// A module-scope .global or .const variable's storage (the symbol calls: cudaMemcpyToSymbol,
// cudaGetSymbolAddress): its bytes, owned by the module and read and written by its kernels
// (initialised from the declaration). Null data when the module declares no such variable.
struct variable_storage {
  unsigned char* data = nullptr;
  std::size_t size = 0;
};
[[nodiscard]] variable_storage variable(const module& m, std::string_view name);

struct dim3s {
  unsigned x = 1, y = 1, z = 1;
  friend bool operator==(const dim3s&, const dim3s&) = default;
};

// How adversarial the schedule is. The same seed gives the same schedule and the same findings,
// whatever the number of threads (schedule::threads).
struct schedule {
  std::uint64_t seed = 0;
  bool randomize = true;          // warp order and CTA order shuffled; cp.async lands at a random legal moment
  bool race_check = true;         // shared-memory races between barriers
  // Shared memory no thread of the block wrote (docs/sim.md, "Definedness"). A read of such bytes
  // gives undefined register lanes, which propagate through instructions and shared memory; the
  // finding is the first use that can change what the kernel does or outputs (a branch or guard,
  // an address, a store to global or local memory, an atomic's operand), naming the use and the
  // read the value comes from. Off (false): no check.
  bool uninitialized_check = true;
  // With uninitialized_check: report the read itself instead (the strict check: every read of a
  // never-written byte, harmless or not, is a finding).
  bool uninitialized_at_load = false;
  // Blocks run one at a time, to completion: one that waits for another never ends. A block
  // issuing more warp instructions than this is a finding instead of a hang (0: no limit).
  std::uint64_t cta_instruction_limit = std::uint64_t{1} << 27;
  // Run blocks in launch order (x fastest) even when randomized: the order a GPU dispatches them
  // in, which decoupled look-back (CUB's scans) relies on for forward progress; CUDA's model
  // lets blocks run in any order, which the default explores.
  bool blocks_in_launch_order = false;
  // Write device printf's output to stdout when the launch ends (or before its finding is
  // thrown); launch_result::device_output holds it either way.
  bool print_device_output = true;
  // Threads that run the launch's blocks (0: std::thread::hardware_concurrency()). Each block's
  // schedule comes from the seed and the block's index alone, so it is the same on any thread;
  // where blocks of a kernel may communicate (its code has global atomics, strong global
  // accesses, gpu- or sys-scope fences or clock reads), or turn out to (one block writes a
  // global word another block reads or writes), or one stops with a finding, the blocks run one
  // at a time in the seed's order instead, global memory first restored to its state before the
  // launch: results and findings are those of that order (docs/sim.md, "Blocks in parallel").
  unsigned threads = 0;
};

// Global-memory traffic of one launch.
struct traffic {
  std::uint64_t bytes_read = 0, bytes_written = 0;      // bytes requested by the kernel's threads
  std::uint64_t sectors_read = 0, sectors_written = 0;  // distinct 32-byte sectors touched
  std::uint64_t sector_reads_total = 0;                 // sectors per warp-instruction, summed (re-reads counted)
  // Of the reads, those of cp.async (rungs' KV stream): bytes with their src-size, distinct sectors.
  std::uint64_t async_bytes_read = 0, async_sectors_read = 0;
};

struct launch_result {
  std::uint64_t warp_instructions = 0;  // warp-level instructions issued
  traffic global;
  // What the launch's device printf calls wrote: by block (in launch order, x fastest), then by
  // thread (x fastest), then in each thread's own order, whatever order the schedule ran them in.
  std::string device_output;
  // How the blocks ran: on this many threads at once (1: one at a time); and whether they ran
  // in parallel first and then again one at a time (they touched each other's global words, or
  // one stopped with a finding).
  unsigned threads = 1;
  bool ran_again_serially = false;
};

// Runs entry `entry` of `m` over `grid` x `block` threads. `args[i]` points at the value of
// parameter i (as cudaLaunchKernel's kernelParams do). Blocks until the grid has finished.
launch_result launch(const module& m, std::string_view entry, dim3s grid, dim3s block,
                     std::size_t dynamic_shared_bytes, void* const* args, const global_memory& memory,
                     const schedule& sched);

}  // namespace rungs::sim
