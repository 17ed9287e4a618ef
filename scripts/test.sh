#!/usr/bin/env bash
# Builds Kiln and runs every test (unit, golden, diagnostics, interpreter-vs-NumPy, artifact,
# runtime, examples, fuzz smoke run). Installs missing packages first (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${KILN_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j2
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 --timeout 900
