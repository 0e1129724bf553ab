// Portability macros shared by host headers and device code.
//
// Host headers stay plain C++20: nothing here includes CUDA. RUNGS_HOST_DEVICE expands to
// __host__ __device__ only under nvcc, so a header can offer functions usable on both sides
// without breaking a plain C++ compiler. Class layouts never depend on these macros (an
// #ifdef __CUDACC__ inside a class would be an ODR violation between .cu and .cpp files).
#pragma once

#if defined(__CUDACC__)
#define RUNGS_HOST_DEVICE __host__ __device__
#define RUNGS_DEVICE __device__
#else
#define RUNGS_HOST_DEVICE
#define RUNGS_DEVICE
#endif

#if defined(__GNUC__) || defined(__clang__)
#define RUNGS_ALWAYS_INLINE inline __attribute__((always_inline))
#define RUNGS_LIKELY(x) __builtin_expect(!!(x), 1)
#define RUNGS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RUNGS_ALWAYS_INLINE inline
#define RUNGS_LIKELY(x) (x)
#define RUNGS_UNLIKELY(x) (x)
#endif
