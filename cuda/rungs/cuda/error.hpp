// CUDA error checking for rungs' launchers, tests and benchmarks.
//
// RUNGS_CUDA_CHECK(expr) turns a failed CUDA runtime call into rungs::cuda_error carrying the
// call, the file and line, and the runtime's own message. Launchers report errors; they never
// abort the process, so an engine can fall back to eager execution when a capture fails.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace rungs {

class cuda_error : public std::runtime_error {
 public:
  cuda_error(cudaError_t code, const char* expr, const char* file, int line)
      : std::runtime_error(std::string(expr) + " failed at " + file + ":" + std::to_string(line) + ": " +
                           cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")"),
        code_(code) {}
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

namespace detail {
inline void cuda_check(cudaError_t code, const char* expr, const char* file, int line) {
  if (code != cudaSuccess) throw cuda_error(code, expr, file, line);
}
}  // namespace detail

}  // namespace rungs

#define RUNGS_CUDA_CHECK(expr) ::rungs::detail::cuda_check((expr), #expr, __FILE__, __LINE__)
