#!/usr/bin/env bash
# Builds the addon's host mode with AddressSanitizer + UBSan into build-asan-addon/
# and runs cpu-backend's malformed-call fixture and the package's conformance test
# against it (libasan and libubsan preloaded into node, leak checks off: node
# itself is not instrumented). Used by CI.
#   packages/cuda-backend/scripts/test-asan-js.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
out="build-asan-addon"
(cd "$here" && EMBEDSTACK_CUDA=off node scripts/build.cjs --out "$out" --asan)
addon="$(find "$here/$out" -name embedstack_cuda.node | head -1)"
export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export EMBEDSTACK_CUDA_ADDON="$addon"
node "$root/packages/cpu-backend/test/fixtures/malformedCalls.cjs" "$addon" 3
(cd "$root" && npx vitest run --project cuda-backend packages/cuda-backend/test/conformance.test.ts)
echo "cuda-backend: JS tests passed against the ASan+UBSan addon (host mode)"
