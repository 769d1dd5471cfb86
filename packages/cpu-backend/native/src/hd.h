// ES_HD marks the small pure functions that both native backends compile: the CPU
// backend as plain C++, the CUDA backend (packages/cuda-backend) for the host and,
// under nvcc, for the device too (the counter-based generator, key hashing, score
// rules). Such a function uses no host-only library call and no exception.
// ES_FORCE_INLINE: inlined into every caller (the CPU backend's multiversioned
// loops must get each dispatch inlined to be vectorised per target). ES_ALWAYS_INLINE:
// the same request as an attribute alone (for lambdas and `static inline` members).
// Under AddressSanitizer (the native test builds and the ASan addons) both drop the
// attribute, leaving C++'s `inline`, a hint: forcing the instrumented kernels into one
// body made GCC take 2-4x longer on their files (-O1: combine.cc 48 -> 13 s,
// dynamic_read.cc 75 -> 37 s) and those builds test memory safety, not speed (their
// tests ran no slower). The Release builds and the prebuilt binaries are unchanged.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define ES_ALWAYS_INLINE
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ES_ALWAYS_INLINE
#endif
#endif
#ifndef ES_ALWAYS_INLINE
#define ES_ALWAYS_INLINE __attribute__((always_inline))
#endif

#if defined(__CUDACC__)
#define ES_HD __host__ __device__
#define ES_FORCE_INLINE __forceinline__
#else
#define ES_HD
#define ES_FORCE_INLINE ES_ALWAYS_INLINE inline
#endif
