// CUDA error checking for rungs' launchers, tests and benchmarks.
//
// RUNGS_CUDA_CHECK(expr) turns a failed CUDA runtime call into rungs::cuda_error carrying the
// call, the file and line, and the runtime's own message. Launchers report errors; they never
// abort the process, so an engine can fall back to eager execution when a capture fails.
//
// RUNGS_CUDA_RELEASE(expr) is for the calls that give something back (cudaFree, cudaFreeHost,
// cudaStreamDestroy, cudaEventDestroy, cudaGraphDestroy, cudaGraphExecDestroy) in destructors
// and cleanup paths: a failure is reported (release_failure_handler: one line on stderr by
// default), counted and cleared from the thread's last error, never thrown, and the caller
// forgets the handle. It must not release
// it again: CUDA does not say whether a failed destroy released anything, and a second
// cudaFree of the same address could free what a later allocation now holds.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace rungs {

class cuda_error : public std::runtime_error {
 public:
  cuda_error(cudaError_t code, const char* expr, const char* file, int line)
      : std::runtime_error(std::string(expr) + " failed at " + file + ":" + std::to_string(line) + ": " +
                           cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")"),
        code_(code),
        call_(std::string_view(expr).substr(0, std::string_view(expr).find('('))) {}
  cudaError_t code() const noexcept { return code_; }
  /// The runtime function that failed: "cudaMalloc" for `cudaMalloc(&p, n)`.
  const std::string& call() const noexcept { return call_; }

 private:
  cudaError_t code_;
  std::string call_;
};

/// Receives each failed release (RUNGS_CUDA_RELEASE); it must not throw (what it throws is dropped).
using release_failure_handler = std::function<void(const cuda_error&)>;

namespace detail {
struct release_failures_state {
  std::mutex mutex;
  release_failure_handler handler;  // empty: one line on stderr
  std::atomic<std::int64_t> count{0};
};
inline release_failures_state& release_failures_of_process() {
  static release_failures_state s;
  return s;
}
}  // namespace detail

/// Sets the handler of failed releases for the whole process (empty: one line on stderr) and
/// returns the previous one.
inline release_failure_handler set_release_failure_handler(release_failure_handler h) {
  detail::release_failures_state& s = detail::release_failures_of_process();
  std::lock_guard lock(s.mutex);
  return std::exchange(s.handler, std::move(h));
}

/// Failed releases since the process started.
inline std::int64_t release_failures() { return detail::release_failures_of_process().count.load(); }

namespace detail {
inline void cuda_check(cudaError_t code, const char* expr, const char* file, int line) {
  if (code != cudaSuccess) throw cuda_error(code, expr, file, line);
}

inline void cuda_release(cudaError_t code, const char* expr, const char* file, int line) noexcept {
  if (code == cudaSuccess) return;
  // The failed call also set the thread's last error: this report consumes it, or the next
  // RUNGS_CUDA_CHECK(cudaGetLastError()) would blame an unrelated launch for it. (A sticky
  // error stays: nothing clears it.)
  if (cudaPeekAtLastError() == code) (void)cudaGetLastError();
  release_failures_state& s = release_failures_of_process();
  ++s.count;
  try {
    const cuda_error e(code, expr, file, line);
    std::lock_guard lock(s.mutex);
    if (s.handler)
      s.handler(e);
    else
      std::fprintf(stderr, "rungs: %s (not released again)\n", e.what());
  } catch (...) {  // a handler that throws, or no memory for the message: the failure is still counted
  }
}
}  // namespace detail

}  // namespace rungs

#define RUNGS_CUDA_CHECK(expr) ::rungs::detail::cuda_check((expr), #expr, __FILE__, __LINE__)
#define RUNGS_CUDA_RELEASE(expr) ::rungs::detail::cuda_release((expr), #expr, __FILE__, __LINE__)
