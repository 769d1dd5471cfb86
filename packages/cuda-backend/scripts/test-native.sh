#!/usr/bin/env bash
# Builds and runs the CUDA backend's native unit tests in host mode (its kernels on
# CPU threads), an optimised build and an AddressSanitizer + UBSan build, with
# cpu-backend's test runner. Used by CI; the device code is compiled by the package
# build when nvcc is present.
#   packages/cuda-backend/scripts/test-native.sh [build-dir-prefix]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec bash "$here/../cpu-backend/scripts/test-native.sh" "${1:-$here/build-native}" "$here/native" -DEMBEDSTACK_CUDA=off
