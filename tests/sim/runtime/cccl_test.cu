// CCCL's device-wide algorithms as a user calls them, on the simulated device (label cuda-sim):
// CUB's DeviceReduce, DeviceScan, DeviceRadixSort and DeviceSegmentedReduce, Thrust's sort,
// reduce and transform; and cooperative groups' tiles and their collectives. Inputs are a permutation of 0..n-1, so every result is known exactly.
// n = 1000 keeps each algorithm to its single-tile path and the test to a fraction of a second.
#include <catch2/catch.hpp>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda_runtime.h>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <numeric>
#include <vector>

namespace {

constexpr int n = 1000;

std::vector<int> permutation() {  // 7919 is prime, so i * 7919 mod n visits every residue once
  std::vector<int> h(n);
  for (int i = 0; i < n; ++i) h[static_cast<std::size_t>(i)] = i * 7919 % n;
  return h;
}

// A device buffer holding `h`, freed at scope end.
struct device_ints {
  int* p = nullptr;
  explicit device_ints(const std::vector<int>& h) {
    REQUIRE(cudaMalloc(&p, h.size() * sizeof(int)) == cudaSuccess);
    REQUIRE(cudaMemcpy(p, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  explicit device_ints(std::size_t count) { REQUIRE(cudaMalloc(&p, count * sizeof(int)) == cudaSuccess); }
  ~device_ints() { cudaFree(p); }
  std::vector<int> download(std::size_t count) const {
    std::vector<int> h(count);
    REQUIRE(cudaMemcpy(h.data(), p, count * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }
};

// CUB's two-phase call: ask for the temporary storage, allocate it, run.
template <class F>
void with_temp_storage(F&& run) {
  std::size_t bytes = 0;
  REQUIRE(run(nullptr, bytes) == cudaSuccess);
  void* temp = nullptr;
  REQUIRE(cudaMalloc(&temp, bytes > 0 ? bytes : 1) == cudaSuccess);
  REQUIRE(run(temp, bytes) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaFree(temp) == cudaSuccess);
}

namespace cg = cooperative_groups;

// Tiles of 16 of a 64-thread block: each tile's sum and maximum, every thread's inclusive scan
// within its tile, and the size of the coalesced group: a whole warp, then thread 0 alone.
__global__ void tiles(const int* in, int* scan, int* per_tile, int* coalesced) {
  const cg::thread_block block = cg::this_thread_block();
  const cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
  const int v = in[block.thread_rank()];
  const int sum = cg::reduce(tile, v, cg::plus<int>());
  const int max = cg::reduce(tile, v, cg::greater<int>());
  scan[block.thread_rank()] = cg::inclusive_scan(tile, v);
  if (tile.thread_rank() == 0) {
    per_tile[2 * (block.thread_rank() / 16)] = sum;
    per_tile[2 * (block.thread_rank() / 16) + 1] = max;
  }
  const unsigned whole_warp = cg::coalesced_threads().size();
  if (block.thread_rank() == 0) {
    coalesced[0] = static_cast<int>(whole_warp);
    coalesced[1] = static_cast<int>(cg::coalesced_threads().size());  // only thread 0 is here
  }
}

}  // namespace

TEST_CASE("cooperative groups: tiled_partition, reduce, inclusive_scan, coalesced_threads") {
  std::vector<int> h(64);
  std::iota(h.begin(), h.end(), 0);
  const device_ints in(h), scan(64), per_tile(8), coalesced(2);
  tiles<<<1, 64>>>(in.p, scan.p, per_tile.p, coalesced.p);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  // Tile t holds 16t..16t+15: sum 256t + 120, maximum 16t + 15.
  CHECK(per_tile.download(8) == std::vector<int>{120, 15, 376, 31, 632, 47, 888, 63});
  const std::vector<int> scanned = scan.download(64);
  CHECK(scanned[0] == 0);
  CHECK(scanned[17] == 16 + 17);
  CHECK(scanned[63] == 888);
  CHECK(coalesced.download(2) == std::vector<int>{32, 1});
}

TEST_CASE("CUB device-wide reduce, scan, radix sort and segmented reduce") {
  const std::vector<int> h = permutation();
  const device_ints in(h), out(n), sums(4);
  with_temp_storage([&](void* t, std::size_t& b) { return cub::DeviceReduce::Sum(t, b, in.p, sums.p, n); });
  CHECK(sums.download(1)[0] == n * (n - 1) / 2);

  with_temp_storage([&](void* t, std::size_t& b) { return cub::DeviceScan::InclusiveSum(t, b, in.p, out.p, n); });
  std::vector<int> scan(n);
  std::inclusive_scan(h.begin(), h.end(), scan.begin());
  CHECK(out.download(n) == scan);

  with_temp_storage([&](void* t, std::size_t& b) { return cub::DeviceRadixSort::SortKeys(t, b, in.p, out.p, n); });
  std::vector<int> sorted(n);
  std::iota(sorted.begin(), sorted.end(), 0);
  CHECK(out.download(n) == sorted);

  // Segments [0, 100), [100, 400), [400, 1000) of the input.
  const device_ints offsets(std::vector<int>{0, 100, 400, n});
  with_temp_storage([&](void* t, std::size_t& b) {
    return cub::DeviceSegmentedReduce::Sum(t, b, in.p, sums.p, 3, offsets.p, offsets.p + 1);
  });
  const auto segment = [&](int from, int to) { return std::accumulate(h.begin() + from, h.begin() + to, 0); };
  CHECK(sums.download(3) == std::vector<int>{segment(0, 100), segment(100, 400), segment(400, n)});
}

TEST_CASE("Thrust sort, reduce and transform over device vectors") {
  const std::vector<int> h = permutation();
  thrust::device_vector<int> v(h.begin(), h.end());
  thrust::sort(v.begin(), v.end());
  std::vector<int> sorted(n);
  std::iota(sorted.begin(), sorted.end(), 0);
  CHECK(std::vector<int>(v.begin(), v.end()) == sorted);
  thrust::transform(v.begin(), v.end(), v.begin(), thrust::negate<int>());
  CHECK(thrust::reduce(v.begin(), v.end()) == -n * (n - 1) / 2);
  CHECK(cudaGetLastError() == cudaSuccess);
}
