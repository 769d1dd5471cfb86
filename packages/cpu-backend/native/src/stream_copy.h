// Copies into large result buffers with non-temporal (streaming) stores: a fresh
// multi-megabyte output would otherwise be read from memory line by line before
// being overwritten (read-for-ownership), doubling the traffic of a gather. Used
// only above kStreamingBytes of output, where the result cannot stay in cache anyway
// (below it, normal stores into a cache-resident buffer measured faster).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace embedstack {

/** Outputs at least this large are written with streaming stores. */
#ifndef ES_STREAM_MIN
#define ES_STREAM_MIN (size_t{64} << 20)
#endif
constexpr size_t kStreamingBytes = ES_STREAM_MIN;

/** dst[0..n) = src[0..n); streams when `stream` and dst is 16-byte aligned. */
inline void copyFloats(float* dst, const float* src, size_t n, bool stream) {
#if defined(__SSE2__)
  if (stream && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    size_t c = 0;
    for (; c + 4 <= n; c += 4) _mm_stream_ps(dst + c, _mm_loadu_ps(src + c));
    for (; c < n; ++c) dst[c] = src[c];
    return;
  }
#endif
  (void)stream;
  std::memcpy(dst, src, n * sizeof(float));
}

/** Orders a thread's streaming stores before the result is handed over. */
inline void streamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace embedstack
