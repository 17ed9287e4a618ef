#!/usr/bin/env bash
# Builds Kiln and runs every test (unit, golden, diagnostics, interpreter-vs-NumPy, artifact,
# runtime, examples, fuzz smoke run), then kiln-run's and the runtime's tests again under
# AddressSanitizer and UndefinedBehaviorSanitizer in a tree of their own (scripts/sanitize.sh).
# Installs missing packages first (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# In CI (CI=true, set by .ci/run and by most CI services) lavapipe, PoCL and the cpu driver must be present and
# used: KILN_REQUIRE_DRIVERS makes a missing Vulkan, OpenCL or cpu device an error instead of a skip,
# and KILN_REQUIRE_AARCH64 a missing AArch64 cross harness (qemu-user and the arm64 cross C library).
# Developers without them (CI unset) still run every test that their machine supports.
if [[ "${CI:-}" == "true" && -z "${KILN_REQUIRE_DRIVERS:-}" ]]; then
  export KILN_REQUIRE_DRIVERS=vulkan,opencl,cpu
fi
if [[ "${CI:-}" == "true" ]]; then export KILN_REQUIRE_AARCH64=${KILN_REQUIRE_AARCH64:-1}; fi
BUILD_DIR=${KILN_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j2
# The tests' kilnc runs share a compile cache in the build folder (not the user's): a second run
# of the suite recompiles only what changed.
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-$(cd "$BUILD_DIR" && pwd)/kiln-cache}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 --timeout 900
# The sanitizer step: the runtime side (runtime, artifact reader, kiln-run, the concurrency
# stress test) in its own tree, its tests' inputs compiled by the kilnc built above; the full
# subset (with kilnc and the unit tests) does not fit the CI time (docs/contributing.md).
# KILN_ASAN_BUILD_DIR moves its tree like KILN_BUILD_DIR.
bash scripts/sanitize.sh asan --subset=runtime --kilnc="$BUILD_DIR/bin/kilnc" "${KILN_ASAN_BUILD_DIR:-build-asan}"
