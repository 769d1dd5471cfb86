// ES_MULTIVERSION: compiles a hot kernel for AVX-512, AVX2 and baseline x86-64 and
// picks one at load time (GCC function multiversioning). Results are identical
// across versions: only IEEE add/mul/div/sqrt and conversions are used, and the
// build disables floating-point contraction (-ffp-contract=off). Off under
// sanitizers and on other compilers/architectures.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(EMBEDSTACK_NO_CLONES) && \
    defined(__linux__)
#define ES_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ES_MULTIVERSION
#endif
