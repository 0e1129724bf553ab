// Emulation shim of cub::WarpReduce (see ../../simt.hpp): a full-warp reduction whose result,
// as in CUB, is only defined in lane 0 (the other lanes get NaN, so a missing broadcast shows).
#pragma once

#include <simt.hpp>

#include <limits>

namespace cub {

template <class T>
class WarpReduce {
 public:
  struct TempStorage {};
  explicit WarpReduce(TempStorage&) {}

  template <class Op>
  T Reduce(T v, Op op) {
    auto& c = *simt::current_cta;
    c.exchange[simt::warp()][simt::lane()] = v;
    simt::arrive(simt::warp_key(0xffffffffu), 32);
    T out = c.exchange[simt::warp()][0];
    for (unsigned l = 1; l < 32; ++l) out = op(out, c.exchange[simt::warp()][l]);
    simt::arrive(simt::warp_key(0xffffffffu), 32);
    return simt::lane() == 0 ? out : std::numeric_limits<T>::quiet_NaN();
  }
  T Sum(T v) {
    return Reduce(v, [](T a, T b) { return a + b; });
  }
};

}  // namespace cub
