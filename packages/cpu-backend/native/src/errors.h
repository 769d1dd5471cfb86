// Native errors: one exception type with a stable code (the same strings as core's
// ErrorCodes) and the file:line of the failed check, like HierarchicalKV's
// MERLIN_CHECK. The N-API layer converts it to a coded JS error. Nothing here
// exits the process; destructors never throw.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace embedstack {

enum class ErrorCode {
  kInvalidArgument,
  kInvalidType,
  kShapeMismatch,
  kOutOfRange,
  kUnsupported,
  kDisposed,
  kFailedPrecondition,
  kInternal,
};

/** The core ErrorCodes string of a code ("INVALID_ARGUMENT", ...). */
const char* errorCodeName(ErrorCode code);

class EmbedError : public std::runtime_error {
 public:
  EmbedError(ErrorCode code, const std::string& message, const char* file, int line)
      : std::runtime_error(message), code_(code), file_(file), line_(line) {}
  ErrorCode code() const { return code_; }
  /** "file.cc:123" of the check that failed. */
  std::string where() const;

 private:
  ErrorCode code_;
  const char* file_;
  int line_;
};

/** Thrown when a large allocation fails; carries the byte count and what it was for. */
[[noreturn]] void throwOutOfMemory(size_t bytes, const char* what, const char* file, int line);

}  // namespace embedstack

// ES_CHECK(cond, code, message-stream): throws EmbedError(code, message) at file:line
// when cond is false. The message is built only on failure:
//   ES_CHECK(n <= max, kOutOfRange, "Expected n to be <= " << max << " but received " << n);
#define ES_CHECK(cond, code, msg)                                                                                \
  do {                                                                                                           \
    if (__builtin_expect(!(cond), 0)) {                                                                          \
      std::ostringstream es_check_stream_;                                                                       \
      es_check_stream_ << msg;                                                                                   \
      throw ::embedstack::EmbedError(::embedstack::ErrorCode::code, es_check_stream_.str(), __FILE__, __LINE__); \
    }                                                                                                            \
  } while (0)

#define ES_FAIL(code, msg) ES_CHECK(false, code, msg)
