// Which explicit-ISA narrow-row kernels a build compiles (storage.cc's widening kernels,
// combine_narrow.cc's fused bag sums; WidenIsa in storage.h picks one per process). A
// source build (GCC, x86-64 Linux) compiles the AVX2 + F16C and AVX-512 ones and checks
// the CPU at first use (as multiversion.h); elsewhere, and in prebuilt levels
// (EMBEDSTACK_NO_CLONES with -march), the ones the compiler's target has.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && \
    !defined(EMBEDSTACK_NO_CLONES)
#define ES_WIDEN_RUNTIME 1
#define ES_WIDEN_AVX2 1
#define ES_WIDEN_AVX512 1
#else
#define ES_WIDEN_RUNTIME 0
#if defined(__x86_64__) && defined(__GNUC__) && defined(__AVX2__) && defined(__F16C__)
#define ES_WIDEN_AVX2 1
#else
#define ES_WIDEN_AVX2 0
#endif
#if defined(__x86_64__) && defined(__GNUC__) && defined(__AVX512F__) && defined(__F16C__)
#define ES_WIDEN_AVX512 1
#else
#define ES_WIDEN_AVX512 0
#endif
#endif

#if ES_WIDEN_AVX2 || ES_WIDEN_AVX512
#include <immintrin.h>
#endif
#if ES_WIDEN_AVX2
#define ES_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#endif
#if ES_WIDEN_AVX512
#define ES_TARGET_AVX512 __attribute__((target("avx512f,avx2,f16c")))
#endif
