#!/usr/bin/env bash
# Builds Kiln with sanitizers in a tree of its own and runs tests under them.
#
#   scripts/sanitize.sh asan|tsan [--subset=full|runtime] [--kilnc=PATH] [BUILD_DIR]
#
#   asan: AddressSanitizer + UndefinedBehaviorSanitizer (default tree build-asan)
#   tsan: ThreadSanitizer (default tree build-tsan)
#
# Subsets (what is built sanitized, and which ctest entries run under it):
#   full (default): the runtime (reference, OpenCL, Vulkan and CUDA drivers), the artifact reader,
#     kiln-run, kiln-concurrency-stress, kilnc (and so the whole compiler it links) and
#     kiln-unit-tests with the runtime side's tests only (KILN_UNIT_TESTS=runtime: artifact,
#     artifact corruption, runtime, C API, interpreter, npy, HAL conformance); runs the unit
#     tests, the HAL conformance suite on every driver, artifact-damage, kiln-run's end-to-end
#     tests (runtime), kilnc's diagnostics (errors), artifact-format1 and concurrency-stress.
#   runtime: the runtime, the artifact reader, kiln-run and kiln-concurrency-stress only (no
#     compiler: about a third of full's build); the tests' inputs are compiled by --kilnc, an
#     ordinary kilnc (KILN_TEST_KILNC); runs artifact-damage, runtime, artifact-format1 and
#     concurrency-stress. scripts/test.sh runs this subset (the CI time limit); full is run by hand.
#
# A sanitizer report fails the step even where a test accepts the tool's failure: every report is
# written to a file under BUILD_DIR/sanitizer-reports (log_path), and any such file fails it;
# reports also make the process exit with status 86, which no Kiln tool uses. The GPU drivers'
# own libraries (PoCL, Mesa's lavapipe, the ICD loaders, the LLVM inside them) are not
# instrumented. Leak detection is off: Debian 12's Vulkan stack leaks 128 bytes in every process
# that opens lavapipe (Debian's own vulkaninfo shows it under LeakSanitizer), from a library
# unloaded by exit, so no suppression can name it. Nothing of Kiln is suppressed; TSan suppresses
# one race inside lavapipe (scripts/sanitizers/tsan.supp).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: $0 asan|tsan [--subset=full|runtime] [--kilnc=PATH] [BUILD_DIR]" >&2; exit 2; }
KIND=${1:-}
case "$KIND" in
  asan) SANITIZE="address,undefined" ;;
  tsan) SANITIZE="thread" ;;
  *) usage ;;
esac
shift
SUBSET=full
TEST_KILNC=""
BUILD_DIR=build-$KIND
for arg in "$@"; do
  case "$arg" in
    --subset=full|--subset=runtime) SUBSET=${arg#--subset=} ;;
    --kilnc=*) TEST_KILNC=$(realpath "${arg#--kilnc=}") ;;
    -*) usage ;;
    *) BUILD_DIR=$arg ;;
  esac
done
if [ "$SUBSET" = full ]; then
  SANITIZED_TARGETS=(kiln-unit-tests kilnc kiln-run kiln-concurrency-stress)
  SANITIZED_TESTS='^(unit|hal-conformance-.*|artifact-damage|runtime|errors|artifact-format1-.*|concurrency-stress.*)$'
  TEST_KILNC=""  # this tree's, sanitized
else
  if [ -z "$TEST_KILNC" ] || [ ! -x "$TEST_KILNC" ]; then
    echo "sanitize.sh: --subset=runtime needs --kilnc=PATH, an ordinary kilnc" >&2
    exit 2
  fi
  SANITIZED_TARGETS=(kiln-run kiln-concurrency-stress)
  SANITIZED_TESTS='^(artifact-damage|runtime|artifact-format1-.*|concurrency-stress.*)$'
fi

start=$SECONDS
# Debug: assertions on; cmake/Sanitize.cmake compiles it at -O1. The fuzzers have their own
# sanitized build (tests/fuzz) and the Python module cannot load a sanitized library into an
# uninstrumented interpreter: neither is built here.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE="$SANITIZE" \
  -DKILN_UNIT_TESTS=runtime -DKILN_BUILD_FUZZERS=OFF -DKILN_TEST_KILNC="$TEST_KILNC" -DKILN_DAMAGE_FLIPS=150 >/dev/null
cmake --build "$BUILD_DIR" -j2 --target "${SANITIZED_TARGETS[@]}"
built=$SECONDS

REPORTS="$(cd "$BUILD_DIR" && pwd)/sanitizer-reports"
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
COMMON="exitcode=86:log_path=$REPORTS/report:print_stacktrace=1"
export ASAN_OPTIONS="$COMMON:detect_leaks=0:check_initialization_order=1:strict_init_order=1"
export UBSAN_OPTIONS="$COMMON:halt_on_error=1"
# Races inside third-party drivers only (scripts/sanitizers/tsan.supp says which and why).
export TSAN_OPTIONS="$COMMON:second_deadlock_stack=1:suppressions=$(pwd)/scripts/sanitizers/tsan.supp"
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
echo "sanitize.sh $KIND ($SUBSET): build $((built - start)) s, tests $((SECONDS - built)) s"
exit $status
