// RUNGS_KV_ASSERT: internal invariants of the KV allocators, checked in debug builds.
//
// Caller mistakes (a stale sequence id, a block id out of range) are reported as errc results
// in every build. These assertions guard what the allocator itself promises (a block on the
// free list has no user, a released block had one), so a violation is a rungs bug or memory
// corruption; the message names the invariant so the report says which promise broke.
#pragma once

#include <cstdio>
#include <cstdlib>

#if !defined(NDEBUG) && !defined(RUNGS_KV_NO_ASSERT)
#define RUNGS_KV_ASSERT(cond, invariant)                                                     \
  do {                                                                                      \
    if (!(cond)) ::rungs::kv::detail::assert_fail(invariant, #cond, __FILE__, __LINE__);    \
  } while (0)
#else
#define RUNGS_KV_ASSERT(cond, invariant) ((void)0)
#endif

namespace rungs::kv::detail {
[[noreturn]] inline void assert_fail(const char* invariant, const char* cond, const char* file,
                                     int line) {
  std::fprintf(stderr, "rungs::kv invariant violated: %s\n  check: %s\n  at %s:%d\n", invariant,
               cond, file, line);
  std::abort();
}
}  // namespace rungs::kv::detail
