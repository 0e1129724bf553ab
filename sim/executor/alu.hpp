// Helpers the ALU handlers share (alu.cpp, bits.cpp, convert.cpp): type classes and the
// PTX ISA's comparisons.
#pragma once

#include "machine.hpp"

#include <cmath>

namespace rungs::sim::detail {

__extension__ typedef __int128 int128;
__extension__ typedef unsigned __int128 uint128;

inline bool is_float(vtype t) { return t == vtype::f32 || t == vtype::f64; }
inline bool is_int(vtype t) { return !is_float(t) && t != vtype::pred && t != vtype::f16 && t != vtype::bf16 &&
                                     t != vtype::f16x2 && t != vtype::bf16x2 && t != vtype::tf32 &&
                                     t != vtype::none; }

inline bool float_compare(double a, double b, cmp c) {
  const bool un = std::isnan(a) || std::isnan(b);
  switch (c) {
    case cmp::eq: return !un && a == b;
    case cmp::ne: return !un && a != b;
    case cmp::lt: return !un && a < b;
    case cmp::le: return !un && a <= b;
    case cmp::gt: return !un && a > b;
    case cmp::ge: return !un && a >= b;
    case cmp::equ: return un || a == b;
    case cmp::neu: return un || a != b;
    case cmp::ltu: return un || a < b;
    case cmp::leu: return un || a <= b;
    case cmp::gtu: return un || a > b;
    case cmp::geu: return un || a >= b;
    case cmp::num: return !un;
    case cmp::nan: return un;
  }
  return false;
}

template <class T>
inline bool int_compare(T a, T b, cmp c) {
  switch (c) {
    case cmp::eq: return a == b;
    case cmp::ne: return a != b;
    case cmp::lt: return a < b;
    case cmp::le: return a <= b;
    case cmp::gt: return a > b;
    case cmp::ge: return a >= b;
    default: return false;
  }
}

}  // namespace rungs::sim::detail
