// Support for the GPU attention tests: device buffers, poisoning, comparison with the host
// reference, and the instantiation set under test (default, or full with
// -DRUNGS_KERNEL_INSTANTIATIONS=full).
#pragma once

#include <rungs/attention/dispatch.hpp>
#include <rungs/cuda/error.cuh>
#include <rungs/numeric/float16.hpp>

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <sstream>
#include <type_traits>
#include <vector>

#ifndef RUNGS_KERNEL_INSTANTIATIONS_FULL
#define RUNGS_KERNEL_INSTANTIATIONS_FULL 0
#endif

namespace rungs_test {

namespace ra = rungs::attention;

/// The set the GPU tests compile and check, restricted to one element type per translation
/// unit so that the two types compile in parallel.
using tested_set = std::conditional_t<RUNGS_KERNEL_INSTANTIATIONS_FULL != 0, ra::full_instantiations,
                                      ra::default_instantiations>;
template <ra::dtype D>
using tested_set_of = ra::instantiation_set<ra::dtypes<D>, tested_set::head_dims, tested_set::block_sizes,
                                            tested_set::decode_groups>;

template <auto... V, class F>
void for_each_value(ra::values<V...>, F&& f) {
  (f(V), ...);
}

/// Owning device allocation of n elements.
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t n) : n_(n) {
    if (n > 0) RUNGS_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T)));
  }
  explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) { upload(host); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~device_buffer() {
    if (p_ != nullptr) cudaFree(p_);
  }

  T* data() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(std::span<const T> host) {
    REQUIRE(host.size() <= n_);
    RUNGS_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    RUNGS_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  /// Every byte 0xff: NaN for f16, bf16 and float, -1 for integers.
  void poison() { RUNGS_CUDA_CHECK(cudaMemset(p_, 0xff, n_ * sizeof(T))); }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Bytes of device memory free now.
inline std::size_t free_device_memory() {
  std::size_t free = 0, total = 0;
  RUNGS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

/// Per-element tolerance of a kernel output against the float64 reference: the output's
/// rounding to 16 bits dominates (half an ulp: 2^-11 relative for f16, 2^-8 for bf16, of values
/// of magnitude <= 1 here), with a 2x margin for the fp32 accumulation and ex2.approx.
template <class HostT>
constexpr double tolerance() {
  return std::is_same_v<HostT, rungs::f16> ? 1e-3 : 1e-2;
}

/// Compares rows [row_begin, row_end) of `got` (16-bit) with `want` (double), row_elements
/// apart; every element must be finite and within tol * max(1, |want|).
template <class HostT>
void require_close(const std::vector<HostT>& got, const std::vector<double>& want, std::int64_t row_elements,
                   std::int64_t row_begin, std::int64_t row_end, const std::string& what) {
  const double tol = tolerance<HostT>();
  double worst = 0;
  std::int64_t bad = 0, first_bad = -1;
  for (std::int64_t i = row_begin * row_elements; i < row_end * row_elements; ++i) {
    const double g = rungs::to_double(got[static_cast<std::size_t>(i)]);
    const double w = want[static_cast<std::size_t>(i)];
    const double err = std::abs(g - w);
    if (!(err <= tol * std::max(1.0, std::abs(w)))) {  // NaN fails too
      if (bad++ == 0) first_bad = i;
    }
    if (std::isfinite(err)) worst = std::max(worst, err);
  }
  INFO(what << ": max error " << worst << ", " << bad << " elements out of tolerance " << tol
            << (bad ? ", first at element " + std::to_string(first_bad) + " (row " +
                          std::to_string(first_bad / row_elements) + ", got " +
                          std::to_string(rungs::to_double(got[static_cast<std::size_t>(first_bad)])) + ", want " +
                          std::to_string(want[static_cast<std::size_t>(first_bad)]) + ")"
                    : std::string()));
  CHECK(bad == 0);
}

/// Rows [row_begin, row_end) must be exactly +0 or -0.
template <class HostT>
void require_zero_rows(const std::vector<HostT>& got, std::int64_t row_elements, std::int64_t row_begin,
                       std::int64_t row_end, const std::string& what) {
  std::int64_t nonzero = 0;
  for (std::int64_t i = row_begin * row_elements; i < row_end * row_elements; ++i) {
    nonzero += (got[static_cast<std::size_t>(i)].bits & 0x7fff) != 0;
  }
  INFO(what);
  CHECK(nonzero == 0);
}

}  // namespace rungs_test
