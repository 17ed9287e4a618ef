#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds Kiln, and runs the main job on a real example:
# compiles examples/mlp.graph (with its safetensors weights) and runs it on the best available
# device on a batch of 4 seeded random images, checking the result against the reference
# interpreter and printing a summary of the outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j2 --target kilnc kiln-run
mkdir -p out
build/bin/kilnc examples/mlp.graph -o out/mlp.kiln -v
build/bin/kiln-run out/mlp.kiln --dim N=4 --seed=1 --check
