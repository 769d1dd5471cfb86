#!/usr/bin/env bash
# Builds and runs the native unit tests twice: a normal optimised build and an
# AddressSanitizer + UndefinedBehaviorSanitizer build. Used by CI.
#   packages/cpu-backend/scripts/test-native.sh [build-dir-prefix]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-$here/build-native}"
jobs="$(nproc 2>/dev/null || echo 2)"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

run() {
  local dir="$1"
  shift
  echo "== configure $dir $*"
  cmake -S "$here/native" -B "$dir" "${generator[@]}" -DEMBEDSTACK_TESTS=ON "$@" >/dev/null
  echo "== build $dir"
  cmake --build "$dir" --parallel "$jobs"
  echo "== test $dir"
  ctest --test-dir "$dir" --output-on-failure
}

run "$prefix" -DCMAKE_BUILD_TYPE=Release
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  run "$prefix-asan" -DCMAKE_BUILD_TYPE=Debug -DEMBEDSTACK_ASAN=ON
echo "native tests passed (release and asan+ubsan)"
