// rungs' version. Kept in step with project(VERSION) in CMakeLists.txt; a test checks it.
#pragma once

#define RUNGS_VERSION_MAJOR 0
#define RUNGS_VERSION_MINOR 1
#define RUNGS_VERSION_PATCH 0
#define RUNGS_VERSION (RUNGS_VERSION_MAJOR * 10000 + RUNGS_VERSION_MINOR * 100 + RUNGS_VERSION_PATCH)

namespace rungs {
inline constexpr int version_major = RUNGS_VERSION_MAJOR;
inline constexpr int version_minor = RUNGS_VERSION_MINOR;
inline constexpr int version_patch = RUNGS_VERSION_PATCH;
inline constexpr char version_string[] = "0.1.0";
}  // namespace rungs
