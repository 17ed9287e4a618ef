#!/usr/bin/env bash
# Builds Kiln and runs every test (unit, golden, diagnostics, interpreter-vs-NumPy, artifact,
# runtime, examples, fuzz smoke run), then the runtime-side tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer in a tree of their own (scripts/sanitize.sh asan, in build-asan).
# Installs missing packages first (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# In CI (CI=true, set by .ci/run and by most CI services) lavapipe and PoCL must be present and
# used: KILN_REQUIRE_DRIVERS makes a missing Vulkan or OpenCL device an error instead of a skip.
# Developers without them (CI unset) still run every test that their machine supports.
if [[ "${CI:-}" == "true" && -z "${KILN_REQUIRE_DRIVERS:-}" ]]; then
  export KILN_REQUIRE_DRIVERS=vulkan,opencl
fi
BUILD_DIR=${KILN_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j2
# The tests' kilnc runs share a compile cache in the build folder (not the user's): a second run
# of the suite recompiles only what changed.
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-$(cd "$BUILD_DIR" && pwd)/kiln-cache}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 --timeout 900
# The sanitizer step: its own build tree (a subset of the targets, to fit the CI time; the script
# lists it) and its own report files. KILN_ASAN_BUILD_DIR moves it like KILN_BUILD_DIR.
bash scripts/sanitize.sh asan "${KILN_ASAN_BUILD_DIR:-build-asan}"
