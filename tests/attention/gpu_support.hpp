// Support for the GPU attention tests: device buffers, poisoning, comparison with the host
// reference, and the instantiation set under test (default, or full with
// -DRUNGS_KERNEL_INSTANTIATIONS=full).
#pragma once

#include <rungs/attention/dispatch.hpp>
#include <rungs/cuda/error.hpp>
#include <rungs/numeric/float16.hpp>

#include "compare.hpp"

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

#ifndef RUNGS_TEST_REDUCED_BLOCK_SIZES
#define RUNGS_TEST_REDUCED_BLOCK_SIZES 0
#endif

namespace rungs_test {

namespace ra = rungs::attention;

/// The block sizes the decode and prefill checks run: all five, or under
/// RUNGS_TEST_REDUCED_BLOCK_SIZES (the cuda-sim build, where the CPU executes every launch)
/// the smallest and the largest, blocks below and above a KV tile; every kernel instance still
/// runs, as block sizes are a run-time value of the default set.
inline constexpr int all_block_sizes[] = {8, 16, 32, 64, 128};
inline constexpr int reduced_block_sizes[] = {8, 128};
inline constexpr std::span<const int> checked_block_sizes =
    RUNGS_TEST_REDUCED_BLOCK_SIZES != 0 ? std::span<const int>(reduced_block_sizes) : std::span<const int>(all_block_sizes);

/// The set the GPU tests compile and check, restricted to one element type per translation
/// unit so that the two types compile in parallel.
using tested_set = std::conditional_t<RUNGS_KERNEL_INSTANTIATIONS_FULL != 0, ra::full_instantiations,
                                      ra::default_instantiations>;
template <ra::dtype D>
using tested_set_of = ra::instantiation_set<
    ra::dtypes<D>, tested_set::head_dims, tested_set::block_sizes, tested_set::decode_groups, ra::no_fp8_kv,
    ra::tensor_core_decode_instances<ra::dtypes<D>, tested_set::tensor_core_decode::head_dims,
                                     tested_set::tensor_core_decode::decode_groups,
                                     tested_set::tensor_core_decode::split_groups>,
    ra::tensor_core_prefill_instances<ra::dtypes<D>, tested_set::tensor_core_prefill::head_dims>>;

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

/// A device copy of `host`, or no buffer (data() null) when it is empty: the kernels' optional
/// per-head arrays (attention sinks, an fp8 cache's scales), which a run without them passes as
/// null pointers.
template <class T>
device_buffer<T> device_copy_or_none(const std::vector<T>& host) {
  return host.empty() ? device_buffer<T>() : device_buffer<T>(host);
}

/// Bytes of device memory free now.
inline std::size_t free_device_memory() {
  std::size_t free = 0, total = 0;
  RUNGS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

}  // namespace rungs_test
