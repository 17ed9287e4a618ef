#!/usr/bin/env bash
# Builds Kiln on this (GPU-less) machine and packs gpu-bundle/ for a run on the GPU machine
# (docs: /work/shared/guide/gpu-machine.md; the device tool carries the folder, 64 MiB at most):
#
# bin/, lib/, python/ and pylib/ are packed into gpu-bundle/payload.txz (gpu-test.sh unpacks it):
#   gpu-bundle/bin/   kilnc, kiln-run, kiln-bench (tools/), kiln-embed, kiln-cuda-graph-check,
#                     kiln-unit-tests and kiln-onnx-conformance when built; debug info
#                     stripped; RPATH $ORIGIN/../lib
#   gpu-bundle/lib/   every shared library ldd names that the GPU machine lacks (fmt, shaderc,
#                     protobuf, onnx, SPIRV-Tools, flatbuffers, ...): not glibc/libstdc++/libgcc,
#                     which are newer there, and not the GPU APIs (libcuda, NVRTC, cuBLAS,
#                     OpenCL, Vulkan), which are there or are loaded with dlopen
#   gpu-bundle/onnx_node_tests[_latest].txz  the ONNX backend node tests of onnx 1.12 and of the
#                     newest onnx (kiln-onnx-conformance on cuda:0)
#   gpu-bundle/python/  the Python package kiln, built for Python 3.12 (the GPU machine's), and
#   gpu-bundle/pylib/   pytest to run python/tests there, and tritonclient (gRPC) for bench/serve_load.py
#                       (PYTHONPATH=gpu-bundle/python:gpu-bundle/pylib)
#   gpu-bundle/debs/  Debian's libvulkan1, libglvnd0, libglx0, libegl1 (the GPU machine has no
#                     Vulkan loader, and NVIDIA's Vulkan ICD needs libglvnd)
#
# Then, with the device tool: carry ["gpu-bundle"] and run `scripts/gpu-test.sh` from the
# repository root (it writes its logs to $OUT).
#
# Environment: BUILD_DIR (default build-gpu-bundle), BUNDLE (default gpu-bundle), JOBS.
# gpu-bundle/ is ignored by git (.gitignore).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-gpu-bundle}
BUNDLE=${BUNDLE:-gpu-bundle}
JOBS=${JOBS:-$(nproc)}
LIMIT_BYTES=$((60 * 1024 * 1024))  # the device tool carries 64 MiB with the working tree

# $ORIGIN stays literal: the loader expands it to the binary's folder at run time. An old-style
# DT_RPATH (--disable-new-dtags), unlike DT_RUNPATH, also serves the libraries' own dependencies
# (libonnx needs libprotobuf, ...), so lib/ needs no run path of its own.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo '-DCMAKE_BUILD_RPATH=$ORIGIN/../lib' \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags
TARGETS=(kilnc kiln-run kiln-bench kiln-embed kiln-cuda-graph-check kiln-unit-tests)
for optional in kiln-onnx-conformance kiln-serve kiln-serve-load; do
  if grep -q "$optional" "$BUILD_DIR/build.ninja" 2>/dev/null; then TARGETS+=("$optional"); fi
done
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${TARGETS[@]}"

# The Python package, built for the GPU machine's Python (3.12 there: KILN_BUNDLE_PYTHON names an
# interpreter of that version here, default python3.12 on PATH or pyenv's), when nanobind is in
# the test virtualenv: gpu-bundle/python/kiln, its extension with RPATH $ORIGIN/../../lib; and
# pytest with its dependencies (pure Python wheels) and tritonclient's HTTP and gRPC clients for
# bench/serve_load.py (grpcio, protobuf, rapidjson, gevent and its kin are binary wheels for 3.12)
# in gpu-bundle/pylib.
PY_BUILD_DIR="$BUILD_DIR-python"
# (sys.executable: a pyenv shim is not the interpreter CMake must see.)
BUNDLE_PYTHON=${KILN_BUNDLE_PYTHON:-$(for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3; do
  "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12); print(sys.executable)' 2>/dev/null && break
done || true)}
NANOBIND_DIR=$(.venv/bin/python -m nanobind --cmake_dir 2>/dev/null || true)
if [ -n "$BUNDLE_PYTHON" ] && [ -n "$NANOBIND_DIR" ]; then
  cmake -S . -B "$PY_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_TESTS=OFF \
    -DKILN_BUILD_FUZZERS=OFF "-DPython_EXECUTABLE=$BUNDLE_PYTHON" "-Dnanobind_DIR=$NANOBIND_DIR" \
    '-DCMAKE_BUILD_RPATH=$ORIGIN/../../lib' -DCMAKE_MODULE_LINKER_FLAGS=-Wl,--disable-new-dtags \
    -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags >/dev/null
  cmake --build "$PY_BUILD_DIR" -j "$JOBS" --target _kiln _kiln_stub
else
  echo "make-gpu-bundle: warning: no Python 3.12 or no nanobind here; the bundle has no Python package" >&2
  PY_BUILD_DIR=""
fi

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/debs"
if [ -n "$PY_BUILD_DIR" ]; then
  mkdir -p "$BUNDLE/python/kiln" "$BUNDLE/pylib"
  for f in "$PY_BUILD_DIR"/python/kiln/*; do
    case "$f" in *.so) objcopy --strip-debug "$f" "$BUNDLE/python/kiln/$(basename "$f")" ;; *) cp "$f" "$BUNDLE/python/kiln/" ;; esac
  done
  VENV_PYTHON="$PWD/.venv/bin/python"
  (cd "$BUNDLE/pylib" &&
   "$VENV_PYTHON" -m pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --no-deps -d wheels \
     pytest==8.3.4 pluggy==1.5.0 iniconfig==2.0.0 packaging==24.2 \
     tritonclient==2.73.0 grpcio==1.85.3 protobuf==6.33.6 python-rapidjson==1.25 certifi==2022.9.24 \
     typing_extensions==4.16.0 urllib3==2.8.0 \
     gevent==26.9.0 geventhttpclient==2.6.1 greenlet==3.5.6 zope.event==6.2 zope.interface==8.7 brotli==1.2.1 &&
   for w in wheels/*.whl; do "$VENV_PYTHON" -m zipfile -e "$w" .; done && rm -rf wheels) ||
    echo "make-gpu-bundle: warning: could not fetch pytest for the bundle" >&2
fi
for name in "${TARGETS[@]}"; do
  objcopy --strip-debug "$BUILD_DIR/bin/$name" "$BUNDLE/bin/$name"
  if ! readelf -d "$BUNDLE/bin/$name" | grep -q '(RPATH).*\$ORIGIN/../lib'; then
    echo "make-gpu-bundle: $name has no \$ORIGIN/../lib run path" >&2
    exit 1
  fi
done

# Libraries the loader finds here; the system ones (same ABI, newer there) and GPU APIs stay.
SYSTEM='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so'
GPU_API='^(libcuda|libnvrtc|libnvJitLink|libcublas|libcublasLt|libcudart|libOpenCL|libvulkan|libnvidia)'
for file in "${TARGETS[@]/#/$BUILD_DIR/bin/}" ${PY_BUILD_DIR:+"$PY_BUILD_DIR"/python/kiln/*.so}; do
  ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r soname path; do
  if [[ $soname =~ $SYSTEM || $soname =~ $GPU_API ]]; then continue; fi
  objcopy --strip-debug "$path" "$BUNDLE/lib/$soname"
done
# The Vulkan loader and the GL vendor-neutral dispatch libraries that NVIDIA's Vulkan ICD
# (libGLX_nvidia.so.0) needs, unpacked on the GPU machine by gpu-test.sh.
if ! (cd "$BUNDLE/debs" && apt-get download libvulkan1 libglvnd0 libglx0 libegl1 >/dev/null 2>&1); then
  echo "make-gpu-bundle: warning: could not download the Vulkan loader debs (Vulkan will be unavailable there)" >&2
fi

# The ONNX backend node tests, both sets (generated here by python3-onnx 1.12 and by the test
# virtualenv's pinned onnx, which the GPU machine's own onnx would not reproduce), packed for
# kiln-onnx-conformance on cuda:0: about 1.5 and 2.5 MiB with xz.
if [[ " ${TARGETS[*]} " == *" kiln-onnx-conformance "* ]]; then
  ctest --test-dir "$BUILD_DIR" -R '^onnx_node_data(_latest)?$' >/dev/null
  tar cJf "$BUNDLE/onnx_node_tests.txz" -C "$BUILD_DIR/tests/onnx/onnx_tests" node
  if [ -d "$BUILD_DIR/tests/onnx/onnx_tests_latest/node" ]; then
    tar cJf "$BUNDLE/onnx_node_tests_latest.txz" -C "$BUILD_DIR/tests/onnx/onnx_tests_latest" node
  fi
fi

# The binaries, libraries and the Python package travel as one xz archive (a third of their
# size); scripts/gpu-test.sh unpacks it there.
ls -la "$BUNDLE/bin" "$BUNDLE/lib" ${PY_BUILD_DIR:+"$BUNDLE/python/kiln"} | sed 's/^/  /'
PACKED=(bin lib)
[ -d "$BUNDLE/python" ] && PACKED+=(python pylib)
tar cf - -C "$BUNDLE" "${PACKED[@]}" | xz -T0 -6 > "$BUNDLE/payload.txz"
(cd "$BUNDLE" && rm -rf "${PACKED[@]}")
size=$(du -sb "$BUNDLE" | cut -f1)
echo "make-gpu-bundle: $BUNDLE is $((size / 1024 / 1024)) MiB:"
ls -la "$BUNDLE" | sed 's/^/  /'
if [ "$size" -gt "$LIMIT_BYTES" ]; then
  echo "make-gpu-bundle: error: the bundle is larger than $((LIMIT_BYTES / 1024 / 1024)) MiB" >&2
  exit 1
fi
