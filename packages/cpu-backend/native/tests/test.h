// A minimal test harness: TEST(name) registers a case; EXPECT_* record failures
// with file:line and keep going; ASSERT_* stop the case. main() runs every case
// and exits non-zero when any failed.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "errors.h"

namespace estest {

struct Case {
  const char* name;
  std::function<void()> fn;
};
std::vector<Case>& registry();
void fail(const char* file, int line, const std::string& what);
struct Register {
  Register(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};
struct AssertionStop {};

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/** Elements of a and b whose bits differ (a length mismatch counts one more). */
inline size_t differingBits(const std::vector<float>& a, const std::vector<float>& b) {
  size_t n = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) n += floatBits(a[i]) != floatBits(b[i]) ? 1 : 0;
  return n;
}

}  // namespace estest

// A test file built on the table helpers puts its own names (helpers, constants, its TEST
// functions) between ES_TEST_FILE_BEGIN, after its #includes, and ES_TEST_FILE_END, at its end:
// a namespace of its own inside the file's anonymous namespace. Compiled alone, that is the
// file's anonymous namespace as before. In the test binary's CMake unity groups
// (CMakeLists.txt) several files share one translation unit, and one anonymous namespace would
// merge their names: two files' helpers of one name would become one overload set, and a call
// could silently take the other file's. There CMake defines EMBEDSTACK_UNITY_ID (the target's
// UNITY_BUILD_UNIQUE_ID) to a distinct identifier around each file, so each file's names sit
// in a namespace of their own and a file's lookups find its own names first. The marker
// constant turns two files that share a namespace into a compile error (a redefinition).
#define ES_TEST_FILE_BEGIN             \
  namespace {                          \
  namespace EMBEDSTACK_UNITY_ID {      \
  [[maybe_unused]] constexpr int es_one_test_file_per_namespace = 0;
#define ES_TEST_FILE_END \
  }                      \
  }

#define ES_TEST_CAT2(a, b) a##b
#define ES_TEST_CAT(a, b) ES_TEST_CAT2(a, b)
#define TEST(name)                                                        \
  static void name();                                                     \
  static ::estest::Register ES_TEST_CAT(es_register_, name)(#name, name); \
  static void name()

#define EXPECT_TRUE(cond)                                               \
  do {                                                                  \
    if (!(cond)) ::estest::fail(__FILE__, __LINE__, "expected " #cond); \
  } while (0)

#define EXPECT_EQ(a, b)                                                            \
  do {                                                                             \
    auto es_a_ = (a);                                                              \
    auto es_b_ = (b);                                                              \
    if (!(es_a_ == es_b_)) {                                                       \
      std::ostringstream es_s_;                                                    \
      es_s_ << "expected " #a " == " #b " but got " << +es_a_ << " vs " << +es_b_; \
      ::estest::fail(__FILE__, __LINE__, es_s_.str());                             \
    }                                                                              \
  } while (0)

#define ASSERT_TRUE(cond)                                             \
  do {                                                                \
    if (!(cond)) {                                                    \
      ::estest::fail(__FILE__, __LINE__, "assertion failed: " #cond); \
      throw ::estest::AssertionStop{};                                \
    }                                                                 \
  } while (0)

/** Same float bits (so NaN payloads and signed zeros count). */
#define EXPECT_FLOAT_BITS(a, b) EXPECT_EQ(::estest::floatBits(a), ::estest::floatBits(b))

#define EXPECT_THROW_CODE(expr, ecode)                                                          \
  do {                                                                                          \
    bool es_thrown_ = false;                                                                    \
    try {                                                                                       \
      (void)(expr);                                                                             \
    } catch (const ::embedstack::EmbedError& es_e_) {                                           \
      es_thrown_ = true;                                                                        \
      if (es_e_.code() != ::embedstack::ErrorCode::ecode)                                       \
        ::estest::fail(__FILE__, __LINE__, std::string("wrong error code: ") + es_e_.what());   \
    }                                                                                           \
    if (!es_thrown_) ::estest::fail(__FILE__, __LINE__, "expected " #expr " to throw " #ecode); \
  } while (0)
