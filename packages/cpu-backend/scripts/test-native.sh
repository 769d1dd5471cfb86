#!/usr/bin/env bash
# Builds and runs the native unit tests twice: a normal optimised build and an
# AddressSanitizer + UndefinedBehaviorSanitizer build. cpu-backend's optimised build probes
# groups with SSE2, its sanitizer build with the portable SWAR matcher (EMBEDSTACK_FORCE_SWAR):
# each case the sanitizer build compiles runs over both (the cases it leaves out, 2^24 rows and
# address-space limits, over SSE2 only), and both read the same control bytes, so the sanitizers
# check the same addresses (native/CMakeLists.txt). cuda-backend's tables probe no groups (the
# option means nothing there). Each binary's case counts are printed after its run.
# Used by CI (for the CUDA backend's host mode too: its script passes its native dir
# and cmake options). With EMBEDSTACK_NATIVE_BUILD_ONLY=1 it configures and builds both
# trees and runs nothing (CI builds them early, in the background; the run that tests
# them later finds them built). EMBEDSTACK_NATIVE_ONLY=release or asan builds and runs that one
# tree only (CI runs the two in chains of their own); EMBEDSTACK_NATIVE_JOBS sets the compiles run
# at once (default: the cores).
#   packages/cpu-backend/scripts/test-native.sh [build-dir-prefix [native-dir [cmake options...]]]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-$here/build-native}"
source_dir="${2:-$here/native}"
extra=("${@:3}")
build_only="${EMBEDSTACK_NATIVE_BUILD_ONLY:-0}"
only="${EMBEDSTACK_NATIVE_ONLY:-}"
case "$only" in ''|release|asan) ;; *) echo "EMBEDSTACK_NATIVE_ONLY must be release, asan or empty, not '$only'" >&2; exit 2 ;; esac
jobs="${EMBEDSTACK_NATIVE_JOBS:-$(nproc 2>/dev/null || echo 2)}"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# The test binaries compile with a precompiled header (native/CMakeLists.txt): a compiler cache
# (ccache, when CMAKE_CXX_COMPILER_LAUNCHER names it) caches those compiles only with this
# sloppiness (no __DATE__/__TIME__ in these sources); without it, it just runs them.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:+$CCACHE_SLOPPINESS,}pch_defines,time_macros"

run() {
  local dir="$1"
  shift
  echo "== configure $dir $*"
  cmake -S "$source_dir" -B "$dir" "${generator[@]}" --no-warn-unused-cli -DEMBEDSTACK_TESTS=ON "${extra[@]}" "$@" >/dev/null
  echo "== build $dir"
  cmake --build "$dir" --parallel "$jobs"
  if [ "$build_only" = 1 ]; then return 0; fi
  echo "== test $dir"
  ctest --test-dir "$dir" --output-on-failure --parallel "$jobs"
  # how many cases each binary ran (its closing line), so the log shows the coverage of each build
  awk '/^[0-9]+\/[0-9]+ Testing: /{name=$3} /^[0-9]+ passed, [0-9]+ failed$/{print "== cases of " name ": " $0}' \
    "$dir/Testing/Temporary/LastTest.log" || true
}

if [ "$only" != asan ]; then run "$prefix" -DCMAKE_BUILD_TYPE=Release -DEMBEDSTACK_FORCE_SWAR=OFF; fi
if [ "$only" != release ]; then
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    run "$prefix-asan" -DCMAKE_BUILD_TYPE=Debug -DEMBEDSTACK_ASAN=ON -DEMBEDSTACK_FORCE_SWAR=ON
fi
trees="${only:-release and asan+ubsan}"
if [ "$build_only" = 1 ]; then echo "native tests of $source_dir built ($trees; not run)"
else echo "native tests of $source_dir passed ($trees)"; fi
