// The calls nvcc emits for the device side of the CUDA runtime (PTX ISA, "call"; CUDA C++
// Programming Guide, "Formatted Output" and "Assertion"): vprintf(format, args) for printf, and
// __assertfail(message, file, line, function, char_size) for a failed assert; and trap.
//  - vprintf's argument buffer follows nvcc's layout: each argument aligned to its own size,
//    after C's default promotions (char and short as int, float as double). The output is kept
//    per thread and written when the launch ends (flush_device_output), so its order is fixed
//    (block, then thread, then the thread's own order) whatever the seed's schedule.
//  - A failed assert stops the launch with a finding naming the assertion, its source line and
//    function, and the kernel, block and thread (a GPU traps the kernel likewise).
#include "machine.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

namespace rungs::sim::detail {

std::string executor::device_string(std::uint32_t pc, std::uint32_t tid, std::uint64_t addr) {
  std::string out;
  for (;; ++addr) {
    if (out.size() >= (std::size_t{1} << 20)) fail_at(pc, tid, "a device printf or assert string longer than 1 MiB");
    const char c = static_cast<char>(load_global(generic_at(pc, tid, addr, 1), 1));  // (local bytes too: harmless)
    if (c == '\0') return out;
    out += c;
  }
}

namespace {

template <class T>
std::string format_one(const std::string& spec, T value) {
  const int n = std::snprintf(nullptr, 0, spec.c_str(), value);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::snprintf(out.data(), out.size() + 1, spec.c_str(), value);
  return out;
}

}  // namespace

// One printf: `format` and `args` are generic addresses (the format string in global or constant
// memory, the arguments in the thread's local bytes). `parsed` is printf's result: the number of
// arguments read.
std::string executor::vprintf(std::uint32_t pc, std::uint32_t tid, std::uint64_t format, std::uint64_t args,
                              std::int32_t& parsed) {
  const std::string f = device_string(pc, tid, format);
  std::string out;
  std::uint64_t at = 0;
  parsed = 0;
  const auto arg = [&](std::size_t size) {
    at = (at + size - 1) / size * size;
    std::uint64_t v = 0;
    std::memcpy(&v, generic_at(pc, tid, args + at, size), size);
    at += size;
    ++parsed;
    return v;
  };
  const auto bad = [&](const std::string& why) { fail_at(pc, tid, "device printf format \"" + f + "\": " + why); };
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    std::size_t j = i + 1;
    std::string spec = "%";
    while (j < f.size() && std::strchr("-+ #0", f[j]) && f[j] != '\0') spec += f[j++];
    while (j < f.size() && std::isdigit(static_cast<unsigned char>(f[j]))) spec += f[j++];
    if (j < f.size() && f[j] == '.') {
      spec += f[j++];
      while (j < f.size() && std::isdigit(static_cast<unsigned char>(f[j]))) spec += f[j++];
    }
    if (j < f.size() && f[j] == '*') bad("'*' widths and precisions are not supported");
    std::string length;
    while (j < f.size() && std::strchr("hlLjzt", f[j]) && f[j] != '\0') length += f[j++];
    if (j >= f.size()) bad("it ends inside a conversion");
    const char conv = f[j];
    const bool wide = length == "l" || length == "ll" || length == "j" || length == "z" || length == "t";
    switch (conv) {
      case '%': out += '%'; break;
      case 'd': case 'i': {
        const std::uint64_t v = arg(wide ? 8 : 4);
        out += wide ? format_one(spec + "ll" + conv, static_cast<long long>(v))
                    : format_one(spec + length + conv, static_cast<int>(static_cast<std::uint32_t>(v)));
        break;
      }
      case 'u': case 'o': case 'x': case 'X': {
        const std::uint64_t v = arg(wide ? 8 : 4);
        out += wide ? format_one(spec + "ll" + conv, static_cast<unsigned long long>(v))
                    : format_one(spec + length + conv, static_cast<unsigned>(v));
        break;
      }
      case 'c': out += format_one(spec + conv, static_cast<int>(static_cast<std::uint32_t>(arg(4)))); break;
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case 'a': case 'A': {
        if (!length.empty() && length != "l") bad("length '" + length + "' on a floating-point conversion");
        out += format_one(spec + conv, std::bit_cast<double>(arg(8)));
        break;
      }
      case 's': {
        const std::uint64_t p = arg(8);
        out += format_one(spec + 's', p == 0 ? std::string("(null)").c_str() : device_string(pc, tid, p).c_str());
        break;
      }
      case 'p': out += format_one(spec + 'p', reinterpret_cast<void*>(static_cast<std::uintptr_t>(arg(8)))); break;
      default: bad(std::string("conversion '%") + conv + "' is not supported");
    }
    i = j;
  }
  return out;
}

void executor::exec_call(warp& w, const instr& in, std::uint32_t pc, std::uint32_t mask) {
  for_lanes(mask, [&](unsigned l) {
    const std::uint32_t tid = w.index * kLanes + l;
    const auto param = [&](unsigned k, std::size_t size) {
      std::uint64_t v = 0;
      std::memcpy(&v, local_at(pc, tid, in.ops[k].imm, size), size);
      return v;
    };
    if (in.fn == callee::vprintf) {
      std::int32_t parsed = -1;  // CUDA: -1 for a null format
      if (const std::uint64_t format = param(1, 8); format != 0) {
        const std::uint64_t cta = cta_.x + std::uint64_t{grid_.x} * (cta_.y + std::uint64_t{grid_.y} * cta_.z);
        printed_.push_back({cta, tid, vprintf(pc, tid, format, param(2, 8), parsed)});
      }
      if (in.ops[0].kind == operand::k_addr) std::memcpy(local_at(pc, tid, in.ops[0].imm, 4), &parsed, 4);
      return;
    }
    std::string file = device_string(pc, tid, param(2, 8));
    file = file.substr(file.find_last_of('/') + 1);
    throw device_assertion("kernel " + f_.name + " (module " + m_.name + "): device assertion `" +
                           device_string(pc, tid, param(1, 8)) + "` failed (" + file + ":" +
                           std::to_string(static_cast<std::uint32_t>(param(3, 4))) + ", in " +
                           device_string(pc, tid, param(4, 8)) + ") at " + at(pc) + ", " + thread_name(tid));
  });
}

// trap (__trap()): the kernel stops itself; on a GPU the launch fails (cudaErrorLaunchFailure).
void executor::exec_trap(warp& w, const instr&, std::uint32_t pc, std::uint32_t mask) {
  fail_at(pc, w.index * kLanes + static_cast<unsigned>(std::countr_zero(mask)), "trap: the kernel stopped itself (__trap())");
}

// Writes the launch's printf output in its fixed order (see the top of this file).
void executor::flush_device_output() {
  std::stable_sort(printed_.begin(), printed_.end(),
                   [](const printed& a, const printed& b) { return a.cta != b.cta ? a.cta < b.cta : a.tid < b.tid; });
  std::string text;
  for (const printed& p : printed_) text += p.text;
  printed_.clear();
  if (sched_.print_device_output && !text.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  result_.device_output += text;
}

}  // namespace rungs::sim::detail
