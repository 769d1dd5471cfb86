#!/usr/bin/env bash
# Builds the addon with AddressSanitizer + UBSan into build-asan-addon/ and runs the
# malformed-call fixture and the package's vitest files against it (libasan and
# libubsan preloaded into node, leak checks off: node itself is not instrumented).
#   packages/cpu-backend/scripts/test-asan-js.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$here/build-asan-addon"
(cd "$here" && npx cmake-js compile --out "$out" --CDEMBEDSTACK_ASAN=ON --log-level warn)
addon="$(find "$out" -name embedstack_cpu.node | head -1)"
export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export EMBEDSTACK_CPU_ADDON="$addon"
node "$here/test/fixtures/malformedCalls.cjs" "$addon" 11
(cd "$root" && npx vitest run packages/cpu-backend/test/conformance.test.ts packages/cpu-backend/test/concurrency.test.ts \
  packages/cpu-backend/test/extremeKeys.test.ts packages/cpu-backend/test/adapter.test.ts)
echo "JS tests passed against the ASan+UBSan addon"
