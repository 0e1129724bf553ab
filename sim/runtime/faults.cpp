// Fault injection in rungs' host CUDA runtime (rungs_sim/faults.hpp): the injectable calls,
// the schedule (from the environment or the test API) and the per-call decision.
#include "faults.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>

namespace rungs::sim::faults {
namespace {

// Each call's usual failure on a GPU: out of memory for whatever allocates (instantiation and
// upload allocate the graph's device copy), an invalidated capture at its end, a launch that
// did not get its resources, for the synchronising calls the kernel fault they report, a bad
// handle for the destroy calls, no context for the device queries.
const std::vector<injectable> kCalls = {
    {"cudaMalloc", cudaErrorMemoryAllocation},
    {"cudaMallocHost", cudaErrorMemoryAllocation},
    {"cudaHostAlloc", cudaErrorMemoryAllocation},
    {"cudaFree", cudaErrorInvalidValue},
    {"cudaFreeHost", cudaErrorInvalidValue},
    {"cudaMemGetInfo", cudaErrorInvalidValue},
    {"cudaMemcpy", cudaErrorInvalidValue},
    {"cudaMemcpyAsync", cudaErrorInvalidValue},
    {"cudaMemset", cudaErrorInvalidValue},
    {"cudaMemsetAsync", cudaErrorInvalidValue},
    {"cudaLaunchKernel", cudaErrorLaunchOutOfResources},
    // Calls rungs itself does not make, for users' tests of their own CUDA code.
    {"cudaMemcpy2D", cudaErrorInvalidValue},
    {"cudaMemcpy2DAsync", cudaErrorInvalidValue},
    {"cudaMemset2D", cudaErrorInvalidValue},
    {"cudaMemset2DAsync", cudaErrorInvalidValue},
    {"cudaMemcpyToSymbol", cudaErrorInvalidValue},
    {"cudaMemcpyToSymbolAsync", cudaErrorInvalidValue},
    {"cudaMemcpyFromSymbol", cudaErrorInvalidValue},
    {"cudaMemcpyFromSymbolAsync", cudaErrorInvalidValue},
    {"cudaMallocAsync", cudaErrorMemoryAllocation},
    {"cudaFreeAsync", cudaErrorInvalidValue},
    {"cudaFuncSetAttribute", cudaErrorInvalidValue},
    {"cudaStreamWaitEvent", cudaErrorInvalidResourceHandle},
    {"cudaStreamQuery", cudaErrorLaunchFailure},
    {"cudaLaunchHostFunc", cudaErrorInvalidValue},
    {"cudaStreamAddCallback", cudaErrorInvalidValue},
    {"cudaGraphExecUpdate", cudaErrorGraphExecUpdateFailure},
    {"cudaStreamCreateWithFlags", cudaErrorMemoryAllocation},
    {"cudaStreamSynchronize", cudaErrorLaunchFailure},
    {"cudaDeviceSynchronize", cudaErrorLaunchFailure},
    {"cudaEventCreateWithFlags", cudaErrorMemoryAllocation},
    {"cudaEventRecord", cudaErrorInvalidValue},
    {"cudaEventSynchronize", cudaErrorLaunchFailure},
    {"cudaStreamBeginCapture", cudaErrorIllegalState},
    {"cudaStreamEndCapture", cudaErrorStreamCaptureInvalidated},
    {"cudaGraphInstantiate", cudaErrorMemoryAllocation},
    {"cudaGraphUpload", cudaErrorMemoryAllocation},
    {"cudaGraphLaunch", cudaErrorLaunchOutOfResources},
    // Destroy calls: a failed one destroys nothing (the handle stays live), so a caller that
    // destroys again double-frees and one that forgets it leaks exactly one object.
    {"cudaStreamDestroy", cudaErrorInvalidResourceHandle},
    {"cudaEventDestroy", cudaErrorInvalidResourceHandle},
    {"cudaGraphDestroy", cudaErrorInvalidResourceHandle},
    {"cudaGraphExecDestroy", cudaErrorInvalidResourceHandle},
    // Device queries: the context could not be created.
    {"cudaGetDeviceCount", cudaErrorInitializationError},
    {"cudaGetDevice", cudaErrorInitializationError},
    {"cudaDeviceGetAttribute", cudaErrorInitializationError},
    {"cudaGetDeviceProperties", cudaErrorInitializationError},
    // Error queries: the error a launch reports after the fact.
    {"cudaGetLastError", cudaErrorLaunchOutOfResources},
    {"cudaPeekAtLastError", cudaErrorLaunchOutOfResources},
};

const injectable* find_call(std::string_view name) {
  for (const injectable& c : kCalls)
    if (name == c.call) return &c;
  return nullptr;
}

std::string call_list() {
  std::string s;
  for (const injectable& c : kCalls) s += (s.empty() ? "" : ", ") + std::string(c.call);
  return s;
}

// An error by its name (cudaGetErrorName's spelling), or nullopt.
bool error_named(std::string_view name, cudaError_t& out) {
  for (int i = 1; i < 1000; ++i) {
    const auto e = static_cast<cudaError_t>(i);
    if (name == cudaGetErrorName(e) && (name != "cudaErrorUnknown" || e == cudaErrorUnknown)) {
      out = e;
      return true;
    }
  }
  return false;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

[[noreturn]] void bad_env(const char* var, const std::string& value, const std::string& rule) {
  std::fprintf(stderr, "rungs-sim: %s='%s': %s\n", var, value.c_str(), rule.c_str());
  std::exit(2);
}

struct schedule {
  std::mutex mutex;
  std::map<std::string, std::uint64_t, std::less<>> counts;            // calls made, per call
  std::map<std::pair<std::string, std::uint64_t>, cudaError_t> nth;    // (call, nth) -> error
  bool random = false;
  std::uint64_t seed = 0;
  double rate = 0;
  std::map<std::string, cudaError_t, std::less<>> random_calls;  // call -> error (random schedule)
  std::uint64_t index = 0;                                       // injectable calls made (random draws)
  std::vector<injected> made;

  schedule() {
    if (const char* v = std::getenv("RUNGS_SIM_FAULTS")) parse_nth(v);
    const char* seed_v = std::getenv("RUNGS_SIM_FAULT_SEED");
    const char* rate_v = std::getenv("RUNGS_SIM_FAULT_RATE");
    const char* calls_v = std::getenv("RUNGS_SIM_FAULT_CALLS");
    if ((seed_v == nullptr) != (rate_v == nullptr))
      bad_env(seed_v ? "RUNGS_SIM_FAULT_SEED" : "RUNGS_SIM_FAULT_RATE", seed_v ? seed_v : rate_v,
              "RUNGS_SIM_FAULT_SEED and RUNGS_SIM_FAULT_RATE go together");
    if (calls_v != nullptr && seed_v == nullptr)
      bad_env("RUNGS_SIM_FAULT_CALLS", calls_v, "needs RUNGS_SIM_FAULT_SEED and RUNGS_SIM_FAULT_RATE");
    if (seed_v == nullptr) return;
    char* end = nullptr;
    const std::uint64_t s = std::strtoull(seed_v, &end, 10);
    if (*seed_v == '\0' || *end != '\0') bad_env("RUNGS_SIM_FAULT_SEED", seed_v, "not a decimal integer");
    const double r = std::strtod(rate_v, &end);
    if (*rate_v == '\0' || *end != '\0' || !(r >= 0 && r <= 1))
      bad_env("RUNGS_SIM_FAULT_RATE", rate_v, "not a probability from 0 to 1");
    std::vector<std::string> names;
    for (const std::string& item : split(calls_v ? calls_v : "")) names.push_back(item);
    set_random(s, r, names, "RUNGS_SIM_FAULT_CALLS");
  }

  static std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at < s.size()) {
      std::size_t comma = s.find(',', at);
      if (comma == std::string::npos) comma = s.size();
      if (comma > at) out.push_back(s.substr(at, comma - at));
      at = comma + 1;
    }
    return out;
  }

  // "call[=error]": the call and its error (the call's usual one by default).
  static std::pair<const injectable*, cudaError_t> call_and_error(const std::string& item, std::string& why) {
    const std::size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const injectable* c = find_call(name);
    if (c == nullptr) {
      why.assign(1, '\'').append(name).append("' is not an injectable call (").append(call_list()).append(")");
      return {nullptr, cudaSuccess};
    }
    cudaError_t e = c->error;
    if (eq != std::string::npos && !error_named(item.substr(eq + 1), e)) {
      why.assign(1, '\'').append(item, eq + 1).append("' is not a CUDA error name other than cudaSuccess (e.g. cudaErrorMemoryAllocation)");
      return {nullptr, cudaSuccess};
    }
    return {c, e};
  }

  void parse_nth(const std::string& v) {
    for (const std::string& item : split(v)) {
      const std::size_t colon = item.find(':');
      if (colon == std::string::npos)
        bad_env("RUNGS_SIM_FAULTS", v, "'" + item + "' is not call:N[=error]");
      const std::size_t eq = item.find('=', colon);
      const std::string n = item.substr(colon + 1, eq == std::string::npos ? std::string::npos : eq - colon - 1);
      char* end = nullptr;
      const std::uint64_t k = std::strtoull(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || k == 0)
        bad_env("RUNGS_SIM_FAULTS", v, "in '" + item + "', N = '" + n + "' is not a positive decimal integer");
      std::string why;
      auto [c, e] = call_and_error(item.substr(0, colon) + (eq == std::string::npos ? "" : item.substr(eq)), why);
      if (c == nullptr) bad_env("RUNGS_SIM_FAULTS", v, why);
      nth[{c->call, k}] = e;
    }
  }

  void set_random(std::uint64_t s, double r, const std::vector<std::string>& names, const char* var) {
    random_calls.clear();
    for (const std::string& item : names) {
      std::string why;
      auto [c, e] = call_and_error(item, why);
      if (c == nullptr) {
        if (var) bad_env(var, item, why);
        throw std::invalid_argument("rungs::sim::faults::fail_randomly: " + why);
      }
      random_calls[c->call] = e;
    }
    if (names.empty())
      for (const injectable& c : kCalls) random_calls[c.call] = c.error;
    random = true;
    seed = s;
    rate = r;
  }

  // Counts a call of `api` and returns the fault due at it, or cudaSuccess.
  cudaError_t due(const char* api) {
    std::lock_guard lock(mutex);
    const std::uint64_t k = ++counts[api];
    const std::uint64_t draw = index++;
    cudaError_t e = cudaSuccess;
    if (auto it = nth.find({api, k}); it != nth.end()) {
      e = it->second;
      nth.erase(it);
    } else if (random && rate > 0) {
      if (auto it = random_calls.find(api); it != random_calls.end()) {
        const double u = static_cast<double>(mix(seed ^ mix(draw)) >> 11) * 0x1.0p-53;
        if (u < rate) e = it->second;
      }
    }
    if (e != cudaSuccess) {
      made.push_back({api, k, e, is_sticky(e)});
      std::fprintf(stderr, "rungs-sim: injected fault: %s call %llu -> %s%s\n", api, static_cast<unsigned long long>(k),
                   cudaGetErrorName(e), is_sticky(e) ? " (sticky)" : "");
      std::fflush(stderr);
    }
    return e;
  }
};

schedule& F() {
  static schedule* s = new schedule;  // never destroyed, as the runtime's state
  return *s;
}

thread_local int depth = 0;  // runtime calls open on this thread

}  // namespace

const std::vector<injectable>& injectable_calls() { return kCalls; }

void fail_nth(std::string_view call, std::uint64_t nth, cudaError_t error) {
  const injectable* c = find_call(call);
  if (c == nullptr)
    throw std::invalid_argument("rungs::sim::faults::fail_nth: '" + std::string(call) + "' is not an injectable call (" +
                                call_list() + ")");
  if (nth == 0) throw std::invalid_argument("rungs::sim::faults::fail_nth: nth = 0 (the next call is nth = 1)");
  if (error == cudaSuccess) throw std::invalid_argument("rungs::sim::faults::fail_nth: cudaSuccess is not a fault");
  schedule& s = F();
  std::lock_guard lock(s.mutex);
  auto it = s.counts.find(call);
  s.nth[{c->call, (it == s.counts.end() ? 0 : it->second) + nth}] = error;
}

void fail_randomly(std::uint64_t seed, double rate, std::vector<std::string> calls) {
  if (!(rate >= 0 && rate <= 1))
    throw std::invalid_argument("rungs::sim::faults::fail_randomly: rate = " + std::to_string(rate) +
                                " is not a probability from 0 to 1");
  schedule& s = F();
  std::lock_guard lock(s.mutex);
  s.set_random(seed, rate, calls, nullptr);
}

void clear() {
  schedule& s = F();
  std::lock_guard lock(s.mutex);
  s.nth.clear();
  s.random = false;
  s.random_calls.clear();
}

std::vector<injected> log() {
  schedule& s = F();
  std::lock_guard lock(s.mutex);
  return s.made;
}

std::uint64_t calls(std::string_view call) {
  schedule& s = F();
  std::lock_guard lock(s.mutex);
  auto it = s.counts.find(call);
  return it == s.counts.end() ? 0 : it->second;
}

bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
      return true;
    default:
      return false;
  }
}

namespace detail {

call_scope::call_scope(const char* api) {
  if (depth++ == 0) {
    error = F().due(api);
    sticky = is_sticky(error);
  }
}

call_scope::~call_scope() { --depth; }

}  // namespace detail
}  // namespace rungs::sim::faults
