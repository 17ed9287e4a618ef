#!/usr/bin/env bash
# Builds Kiln with sanitizers in a tree of its own and runs the runtime-side tests under them.
#
#   scripts/sanitize.sh asan [BUILD_DIR]   AddressSanitizer + UndefinedBehaviorSanitizer (build-asan)
#   scripts/sanitize.sh tsan [BUILD_DIR]   ThreadSanitizer (build-tsan)
#
# scripts/test.sh runs the asan step after the ordinary suite; the tsan step is run by hand
# (docs/contributing.md says why). Both build the same subset, chosen to fit the CI time:
#   - the runtime (reference, OpenCL, Vulkan and CUDA drivers), the artifact reader, kiln-run,
#     kilnc (and so the whole compiler, which it links), kiln-concurrency-stress;
#   - kiln-unit-tests with the runtime side's tests only (KILN_UNIT_TESTS=runtime: artifact,
#     artifact corruption, runtime, C API, interpreter, npy, HAL conformance);
# and run these ctest entries (SANITIZED_TESTS below): the unit tests, the HAL conformance suite
# on every driver, the artifact-damage test, kiln-run's end-to-end tests (runtime), kilnc's
# diagnostics (errors) and the concurrency stress test.
#
# A sanitizer report fails the step even where a test would accept the tool's failure: every
# report is written to a file under BUILD_DIR/sanitizer-reports (log_path) and any such file fails
# it; reports also make the process exit with status 86 (which no Kiln tool uses) instead of
# continuing. The GPU drivers' own libraries (PoCL, Mesa's lavapipe, the ICD loaders, LLVM
# inside them) are not instrumented; the only suppressions are for leaks inside them
# (scripts/sanitize/lsan.supp), never for Kiln code.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
KIND=${1:-}
case "$KIND" in
  asan) SANITIZE="address,undefined" ;;
  tsan) SANITIZE="thread" ;;
  *) echo "usage: $0 asan|tsan [BUILD_DIR]" >&2; exit 2 ;;
esac
BUILD_DIR=${2:-build-$KIND}
SANITIZED_TARGETS=(kiln-unit-tests kilnc kiln-run kiln-concurrency-stress)
SANITIZED_TESTS='^(unit|hal-conformance-.*|artifact-damage|runtime|errors|concurrency-stress.*)$'

start=$SECONDS
# Debug: assertions on; cmake/Sanitize.cmake compiles it at -O1. The fuzzers have their own
# sanitized build (tests/fuzz) and the Python module cannot load a sanitized library into an
# uninstrumented interpreter: neither is built here.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE="$SANITIZE" \
  -DKILN_UNIT_TESTS=runtime -DKILN_BUILD_FUZZERS=OFF >/dev/null
cmake --build "$BUILD_DIR" -j2 --target "${SANITIZED_TARGETS[@]}"
built=$SECONDS

REPORTS="$(cd "$BUILD_DIR" && pwd)/sanitizer-reports"
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
COMMON="exitcode=86:log_path=$REPORTS/report:print_stacktrace=1"
export ASAN_OPTIONS="$COMMON:detect_leaks=1:check_initialization_order=1:strict_init_order=1"
export LSAN_OPTIONS="suppressions=$ROOT/scripts/sanitize/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="$COMMON:halt_on_error=1"
export TSAN_OPTIONS="$COMMON:second_deadlock_stack=1"
# kilnc's compile cache: the caller's (scripts/test.sh shares the ordinary tree's), else this tree's.
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-$(cd "$BUILD_DIR" && pwd)/kiln-cache}"
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 --timeout 900 -R "$SANITIZED_TESTS" || status=1
shopt -s nullglob
reports=("$REPORTS"/report*)
if [ ${#reports[@]} -gt 0 ]; then
  for r in "${reports[@]}"; do echo "==== $r"; cat "$r"; done
  echo "sanitize.sh: ${#reports[@]} sanitizer report(s) above ($SANITIZE)" >&2
  status=1
fi
echo "sanitize.sh $KIND: build $((built - start)) s, tests $((SECONDS - built)) s"
exit $status
