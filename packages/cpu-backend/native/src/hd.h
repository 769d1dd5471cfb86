// ES_HD marks the small pure functions that both native backends compile: the CPU
// backend as plain C++, the CUDA backend (packages/cuda-backend) for the host and,
// under nvcc, for the device too (the counter-based generator, key hashing, score
// rules). Such a function uses no host-only library call and no exception.
// ES_FORCE_INLINE: inlined into every caller (the CPU backend's multiversioned
// loops must get each dispatch inlined to be vectorised per target).
#pragma once

#if defined(__CUDACC__)
#define ES_HD __host__ __device__
#define ES_FORCE_INLINE __forceinline__
#else
#define ES_HD
#define ES_FORCE_INLINE __attribute__((always_inline)) inline
#endif
