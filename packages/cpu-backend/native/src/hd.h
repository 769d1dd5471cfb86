// ES_HD marks the small pure functions that both native backends compile: the CPU
// backend as plain C++, the CUDA backend (packages/cuda-backend) for the host and,
// under nvcc, for the device too (the counter-based generator, key hashing, score
// rules). Such a function uses no host-only library call and no exception.
#pragma once

#if defined(__CUDACC__)
#define ES_HD __host__ __device__
#else
#define ES_HD
#endif
