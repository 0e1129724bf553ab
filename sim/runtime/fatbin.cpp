#include "fatbin.hpp"

#include <cstring>
#include <sstream>

namespace rungs::sim::rt {

namespace {

constexpr std::uint32_t kWrapperMagic = 0x466243b1;
constexpr std::uint32_t kFatbinMagic = 0xba55ed50;
constexpr std::uint16_t kKindPtx = 1;
constexpr std::uint64_t kFlagCompressed = 0x8000;

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string hex(std::uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

}  // namespace

fatbin_ptx read_fatbin_ptx(const void* wrapper) {
  fatbin_ptx out;
  if (wrapper == nullptr) {
    out.error = "the fatbinary wrapper is null";
    return out;
  }
  const auto* w = static_cast<const unsigned char*>(wrapper);
  if (auto magic = load<std::uint32_t>(w); magic != kWrapperMagic) {
    out.error = "fatbinary wrapper magic " + hex(magic) + " is not " + hex(kWrapperMagic);
    return out;
  }
  const auto* fb = load<const unsigned char*>(w + 8);
  if (fb == nullptr) {
    out.error = "the fatbinary wrapper points at no fatbinary (relocatable device code is not supported)";
    return out;
  }
  if (auto magic = load<std::uint32_t>(fb); magic != kFatbinMagic) {
    out.error = "fatbinary magic " + hex(magic) + " is not " + hex(kFatbinMagic);
    return out;
  }
  const auto header = load<std::uint16_t>(fb + 6);
  const auto size = load<std::uint64_t>(fb + 8);
  bool compressed_ptx = false;
  for (std::uint64_t at = header; at + 0x40 <= header + size;) {
    const unsigned char* e = fb + at;
    const auto kind = load<std::uint16_t>(e);
    const auto entry_header = load<std::uint32_t>(e + 4);
    const auto payload = load<std::uint64_t>(e + 8);
    if (entry_header < 0x40 || payload > size) {
      out.error = "fatbinary entry at offset " + std::to_string(at) + " has header size " +
                  std::to_string(entry_header) + " and payload " + std::to_string(payload) + ": not a layout this reads";
      return out;
    }
    if (kind == kKindPtx) {
      const auto compressed_size = load<std::uint32_t>(e + 0x10);
      const auto arch = load<std::uint32_t>(e + 0x1c);
      const auto flags = load<std::uint64_t>(e + 0x28);
      if ((flags & kFlagCompressed) != 0 || compressed_size != 0) {
        compressed_ptx = true;
      } else if (arch >= out.arch) {
        const char* text = reinterpret_cast<const char*>(e + entry_header);
        out.ptx.assign(text, strnlen(text, payload));
        out.arch = arch;
      }
    }
    at += entry_header + payload;
  }
  if (out.ptx.empty()) {
    out.error = compressed_ptx ? "the fatbinary's PTX is compressed: compile with nvcc --compress-mode=none"
                               : "the fatbinary holds no PTX: compile with -gencode arch=compute_80,code=compute_80";
  }
  return out;
}

}  // namespace rungs::sim::rt
