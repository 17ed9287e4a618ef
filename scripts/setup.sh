#!/usr/bin/env bash
# Installs everything Kiln needs to build and test on Debian 12. Idempotent: safe to re-run.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libfmt-dev doctest-dev
  flatbuffers-compiler libflatbuffers-dev
  nlohmann-json3-dev
  # SHA-256 for the compile cache's keys (codegen/compile_cache.cpp)
  libssl-dev
  llvm-14-tools clang libclang-rt-14-dev
  python3 python3-numpy python3-venv
  # OpenCL: headers, the ICD loader, and PoCL (OpenCL on the CPU) so tests run without a GPU
  opencl-headers ocl-icd-opencl-dev pocl-opencl-icd clinfo
  # Vulkan: headers and loader, lavapipe (Mesa's CPU Vulkan), shaderc and SPIRV-Tools
  libvulkan-dev mesa-vulkan-drivers vulkan-tools glslc libshaderc-dev spirv-tools
  # ONNX import: the ONNX library (protobuf), its Python package for test-data generation
  libonnx-dev libprotobuf-dev protobuf-compiler python3-onnx
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

# onnxruntime (CPU, pinned) from PyPI in .venv (gitignored): the second oracle beside NumPy for
# the ONNX example models (tests/onnx/check_examples.py). Offline, the check is skipped.
ORT_VERSION=1.16.3
# onnxruntime 1.16 is built against NumPy 1.x; an unpinned install pulls NumPy 2 and fails to import.
NUMPY_VERSION=1.26.4
VENV="$(cd "$(dirname "$0")/.." && pwd)/.venv"
if ! "$VENV/bin/python" -c "import onnxruntime" >/dev/null 2>&1; then
  echo "setup: installing onnxruntime==$ORT_VERSION into $VENV"
  (python3 -m venv --system-site-packages "$VENV" &&
   "$VENV/bin/python" -m pip install -q "onnxruntime==$ORT_VERSION" "numpy==$NUMPY_VERSION") ||
    { if [ "${CI:-}" = true ]; then
        echo "setup: error: could not install onnxruntime; CI requires the second ONNX oracle" >&2
        exit 1
      fi
      echo "setup: warning: could not install onnxruntime (offline?); its check will be skipped"; }
fi
