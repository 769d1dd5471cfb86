// Elementwise kernels used everywhere.
#pragma once

#include "launch.h"

namespace embedstack {
namespace cuda {

template <class T>
struct Fill {
  static constexpr const char* kName = "fill";
  struct Args {
    T* p;
    T value;
  };
  ES_HD static void thread(const Args& a, size_t i) { a.p[i] = a.value; }
};

/** out[i] = i (the values of a sort by key). */
struct Iota {
  static constexpr const char* kName = "iota";
  struct Args {
    uint32_t* out;
  };
  ES_HD static void thread(const Args& a, size_t i) { a.out[i] = static_cast<uint32_t>(i); }
};

/** out[k] = in[at[k]]. */
template <class T>
struct Gather {
  static constexpr const char* kName = "gather";
  struct Args {
    const uint32_t* at;
    const T* in;
    T* out;
  };
  ES_HD static void thread(const Args& a, size_t k) { a.out[k] = a.in[a.at[k]]; }
};

}  // namespace cuda
}  // namespace embedstack
