#include "errors.h"

#include <cstring>

namespace embedstack {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case ErrorCode::kInvalidType:
      return "INVALID_TYPE";
    case ErrorCode::kShapeMismatch:
      return "SHAPE_MISMATCH";
    case ErrorCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case ErrorCode::kUnsupported:
      return "UNSUPPORTED";
    case ErrorCode::kDisposed:
      return "DISPOSED";
    case ErrorCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case ErrorCode::kInternal:
      return "INTERNAL";
  }
  return "INTERNAL";
}

std::string EmbedError::where() const {
  const char* base = std::strrchr(file_, '/');
  return std::string(base ? base + 1 : file_) + ":" + std::to_string(line_);
}

void throwOutOfMemory(size_t bytes, const char* what, const char* file, int line) {
  std::ostringstream s;
  s << "Out of memory: could not allocate " << bytes << " bytes for " << what;
  throw EmbedError(ErrorCode::kFailedPrecondition, s.str(), file, line);
}

}  // namespace embedstack
