// The PTX inside the fatbinary nvcc embeds in every translation unit (the argument of
// __cudaRegisterFatBinary). The layout is undocumented; this reads the fields nvcc 13 writes,
// checked against `nvcc --keep` output (k.fatbin) of the same compilation:
//   wrapper  {u32 magic 0x466243b1, u32 version, const void* fatbin, void* unused}
//   fatbin   {u32 magic 0xba55ed50, u16 version, u16 header_size, u64 entries_size}
//   entry    {u16 kind (1 PTX, 2 ELF), u16 -, u32 header_size, u64 payload_size,
//             u32 compressed_size, u32 -, u16 minor, u16 major, u32 arch, ...,
//             u64 flags at +0x28 (0x8000: payload compressed)}
// A PTX payload is NUL-padded text.
#pragma once

#include <cstdint>
#include <string>

namespace rungs::sim::rt {

struct fatbin_ptx {
  std::string ptx;    // the PTX text, empty when `error` is set
  unsigned arch = 0;  // the virtual architecture, e.g. 80 for compute_80
  std::string error;  // why no PTX could be read
};

// The PTX entry of the highest virtual architecture in the fatbinary behind `wrapper`.
// Compressed entries are refused (the sim build passes --compress-mode=none, see
// docs/kernels.md), as are fatbinaries without PTX.
fatbin_ptx read_fatbin_ptx(const void* wrapper);

}  // namespace rungs::sim::rt
