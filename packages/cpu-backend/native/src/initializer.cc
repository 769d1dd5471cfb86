#include "initializer.h"

#include <cstring>

namespace embedstack {

void Initializer::fill(int64_t key, size_t row, size_t dim, float* out) const {
  switch (kind) {
    case InitKind::kZeros:
      std::memset(out, 0, dim * sizeof(float));
      return;
    case InitKind::kOnes:
      for (size_t c = 0; c < dim; ++c) out[c] = 1.0f;
      return;
    case InitKind::kConstant: {
      const float v = static_cast<float>(a);
      for (size_t c = 0; c < dim; ++c) out[c] = v;
      return;
    }
    case InitKind::kRow:
      std::memcpy(out, values.data(), dim * sizeof(float));
      return;
    case InitKind::kArray:
      std::memcpy(out, values.data() + row * dim, dim * sizeof(float));
      return;
    default:
      break;
  }
  const uint32_t prefix = keyPrefix(seed, stream, key);
  for (size_t c = 0; c < dim; ++c) out[c] = randomColumn(kind, a, b, prefix, static_cast<uint32_t>(c));
}

}  // namespace embedstack
