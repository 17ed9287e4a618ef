#!/usr/bin/env bash
# Runs Kiln's GPU checks ON the GPU machine, from the repository root, with the bundle that
# scripts/make-gpu-bundle.sh packed here (carry it with the device tool: carry ["gpu-bundle"]).
#
#   1. sets up the NVIDIA OpenCL ICD and the Vulkan loader (per gpu-machine.md) and makes
#      cuBLASLt and NVRTC findable;
#   2. kiln-run --list-devices;
#   3. the CUDA unit tests (kiln-unit-tests -tc='cuda*'), the HAL conformance suite on the CUDA
#      devices (KILN_CONFORMANCE_DRIVER=cuda kiln-unit-tests -ts=hal-conformance) and the C API
#      device tests (-tc='c_api*');
#   4. tests/cuda/run_cuda_checks.py on cuda:0 (graph replay vs direct launches, re-capture,
#      cuBLASLt and cuDNN vs the generated kernels, 8 threads x 12 runs with graphs on and off);
#   5. the cross-backend suite tests/backends/run_backends.py (cuda:0 and the NVIDIA Vulkan and
#      OpenCL devices, each against the reference interpreter);
#   6. the examples on cuda:0: --check, then --bench with and without CUDA graphs;
#   7. bench/sass_report.py: registers, spills and instruction mix of the benchmarked kernels;
#   8. bench/gpu_bench.py, when present, then bench/onnx_models.py (the example ONNX models);
#   9. (STEPS "compile" only) bench/compile_time.py on real models, cold and warm, their load
#      times on cuda:0, and bench/upload_reference.py, PyTorch's upload of the same weight
#      sizes (compile/);
#  10. (STEPS "models" only) bench/real_models.py: torchvision and BERT-style models exported
#      here, Kiln beside torch eager and torch.compile, f32 and f16 (models/).
# Each step's log goes to $OUT (the device tool brings back at most 8 files): setup.txt (devices
# and unit tests), cuda_checks.txt, backends.txt, examples.txt, sass.txt, summary.txt, and bench/
# (what gpu_bench.py writes, and bench.txt, the log of both benchmark programs). Exit status 1
# when a step failed (the summary says which).
#
# Environment: BUNDLE (default gpu-bundle), OUT (default gpu-test-out), STEPS (default
# "unit cuda backends examples sass bench": a subset runs only those), BACKENDS_ARGS (extra
# run_backends.py arguments, e.g. "--filter matmul"), MODELS_ARGS (extra real_models.py
# arguments, e.g. "--models resnet50_b1 --dtypes f16").
set -uo pipefail
cd "$(dirname "$0")/.."

BUNDLE=${BUNDLE:-gpu-bundle}
OUT=${OUT:-gpu-test-out}
STEPS=${STEPS:-unit cuda backends examples sass bench}
BIN="$PWD/$BUNDLE/bin"
WORK=/tmp/kiln-gpu-test
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
failed=0
note() { echo "$*" | tee -a "$SUMMARY"; }
wants() { [[ " $STEPS " == *" $1 "* ]]; }
step() {  # step NAME LOG COMMAND...: runs COMMAND, logs to LOG, records pass/fail/skip
  local name=$1 log=$2
  shift 2
  local start=$SECONDS
  "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then note "PASS $name ($((SECONDS - start)) s)"
  elif [ "$rc" -eq 77 ]; then note "SKIP $name"
  else note "FAIL $name (exit $rc, $((SECONDS - start)) s)"; failed=1; fi
}

# make-gpu-bundle.sh packs the binaries, libraries and the Python package into payload.txz.
if [ ! -x "$BIN/kiln-run" ] && [ -f "$BUNDLE/payload.txz" ]; then
  tar xJf "$BUNDLE/payload.txz" -C "$BUNDLE"
fi
if [ ! -x "$BIN/kiln-run" ]; then
  echo "gpu-test: $BIN/kiln-run not found: run scripts/make-gpu-bundle.sh here and carry $BUNDLE" >&2
  exit 1
fi

# ---- 1. setup ----
if [ -f /usr/local/nvidia/lib64/libnvidia-opencl.so.1 ]; then
  mkdir -p /etc/OpenCL/vendors
  echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 >/etc/OpenCL/vendors/nvidia.icd
fi
if ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
  for deb in "$BUNDLE"/debs/*.deb; do [ -f "$deb" ] && dpkg -x "$deb" /; done
  ldconfig
fi
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
# cuBLASLt and NVRTC live under /usr/local/cuda there, which need not be in the loader's cache.
for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$dir" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir"
done
if ldconfig -p | grep -q 'libcublasLt\.so\.1[23]' ||
   ls /usr/local/cuda/lib64/libcublasLt.so.1[23]* >/dev/null 2>&1; then
  export KILN_EXPECT_CUBLASLT=1
fi
if ldconfig -p | grep -q 'libcudnn\.so\.9'; then
  export KILN_EXPECT_CUDNN=1
fi
export KILN_REQUIRE_DRIVERS=cuda  # a missing CUDA device is a failure here, not a skip
# run_backends.py runs tests/interp/gen_cases.py with /usr/bin/python3, which may lack NumPy
# there while the python3 on PATH (with PyTorch) has it: lend it NumPy when the versions match.
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null && python3 -c 'import numpy' 2>/dev/null &&
   [ "$(/usr/bin/python3 -c 'import sys; print(sys.version_info[:2])')" = \
     "$(python3 -c 'import sys; print(sys.version_info[:2])')" ]; then
  export PYTHONPATH="$(python3 -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')${PYTHONPATH:+:$PYTHONPATH}"
fi
{
  echo "== $(date -u) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} KILN_EXPECT_CUBLASLT=${KILN_EXPECT_CUBLASLT:-0} KILN_EXPECT_CUDNN=${KILN_EXPECT_CUDNN:-0}"
  echo "python3: $(command -v python3) $(python3 --version 2>&1); /usr/bin/python3: $(/usr/bin/python3 --version 2>&1)"
  "$BIN/kilnc" --version
} 2>&1 | tee -a "$OUT/setup.txt"

# ---- 2. devices ----
step "kiln-run --list-devices" "$OUT/setup.txt" "$BIN/kiln-run" --list-devices

# ---- 3. unit tests ----
if wants unit && [ -x "$BIN/kiln-unit-tests" ]; then
  step "unit tests (cuda*)" "$OUT/setup.txt" "$BIN/kiln-unit-tests" -tc='cuda*'
  step "HAL conformance (cuda)" "$OUT/setup.txt" env KILN_CONFORMANCE_DRIVER=cuda KILN_REQUIRE_DRIVERS=cuda \
    "$BIN/kiln-unit-tests" -ts=hal-conformance
  step "unit tests (c_api*)" "$OUT/setup.txt" "$BIN/kiln-unit-tests" -tc='c_api*'
fi
# The Python package (built for this machine's Python by make-gpu-bundle.sh) with PyTorch's CUDA
# tensors through DLPack.
# The machine's own pytest when it has one (the bundled one only otherwise: its plugins expect
# their pytest), without the machine's plugins.
if wants unit && [ -d "$BUNDLE/python/kiln" ]; then
  PY_PATH="$PWD/$BUNDLE/python"
  python3 -c "import pytest" 2>/dev/null || PY_PATH="$PY_PATH:$PWD/$BUNDLE/pylib"
  step "python/tests (pytest)" "$OUT/setup.txt" env PYTHONPATH="$PY_PATH" PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 \
    KILN_SOURCE_DIR="$PWD" python3 -m pytest python/tests -q -rs -p no:cacheprovider
fi

# ---- 4. CUDA checks ----
if wants cuda; then
  step "tests/cuda/run_cuda_checks.py" "$OUT/cuda_checks.txt" python3 tests/cuda/run_cuda_checks.py \
    --bin-dir "$BIN" --graph-check "$BIN/kiln-cuda-graph-check" --work "$WORK/cuda"
fi

# ---- 5. cross-backend suite ----
if wants backends; then
  # shellcheck disable=SC2086
  step "tests/backends/run_backends.py" "$OUT/backends.txt" python3 tests/backends/run_backends.py \
    --kilnc "$BIN/kilnc" --kiln-run "$BIN/kiln-run" --work "$WORK/backends" -j 8 ${BACKENDS_ARGS:-}
fi

# ---- 6. examples ----
# The GPU devices of every driver (cuda:0, and NVIDIA's Vulkan and OpenCL devices): the same
# artifact (every target) runs on each, checked against the reference and profiled.
GPU_DEVICES=$("$BIN/kiln-run" --list-devices | awk '$2 == "gpu" {print $1}')
run_example() {  # run_example GRAPH DIMS...
  local graph=$1
  shift
  local name art device
  name=$(basename "$graph" .graph)
  art="$WORK/examples/$name.kiln"
  mkdir -p "$WORK/examples"
  "$BIN/kilnc" "$graph" -o "$art" || return 1
  for device in $GPU_DEVICES; do
    echo "-- $name on $device"
    "$BIN/kiln-run" "$art" --device="$device" "$@" --check --profile || return 1
    "$BIN/kiln-run" "$art" --device="$device" "$@" --bench=500 | grep -A3 '^bench' || return 1
  done
  "$BIN/kiln-run" "$art" --device=cuda:0 "$@" --bench=500 --no-cuda-graph | grep -A3 '^bench' || return 1
}
if wants examples; then
  step "example mlp (N=64)" "$OUT/examples.txt" run_example examples/mlp.graph --dim N=64
  step "example ew_chain (N=4096)" "$OUT/examples.txt" run_example examples/ew_chain.graph --dim N=4096
  step "example encoder_block (B=8 S=128)" "$OUT/examples.txt" run_example examples/encoder_block.graph \
    --dim B=8 --dim S=128
  # The same with the generated GEMM kernels instead of cuBLASLt, for comparing their errors.
  KILN_CUBLASLT=0 step "example encoder_block (B=8 S=128), KILN_CUBLASLT=0" "$OUT/examples.txt" \
    "$BIN/kiln-run" "$WORK/examples/encoder_block.kiln" --device=cuda:0 --dim B=8 --dim S=128 --check
  # The ONNX backend node tests on cuda:0 (both sets), held to the same expected-pass lists as
  # every device.
  for set in "" _latest; do
    if [ -x "$BIN/kiln-onnx-conformance" ] && [ -f "$BUNDLE/onnx_node_tests$set.txz" ]; then
      mkdir -p "$WORK/onnx_node$set" && tar xJf "$BUNDLE/onnx_node_tests$set.txz" -C "$WORK/onnx_node$set"
      step "ONNX node tests$set (cuda:0)" "$OUT/examples.txt" "$BIN/kiln-onnx-conformance" "$WORK/onnx_node$set/node" \
        --device cuda:0 --expected tests/onnx/expected_pass$set.txt --exceptions tests/onnx/device_exceptions.txt -j 16
    fi
  done
  # The ONNX example models on every device against NumPy and onnxruntime (python3 has it there).
  step "ONNX examples (every device)" "$OUT/examples.txt" python3 tests/onnx/check_examples.py \
    --kilnc "$BIN/kilnc" --kiln-run "$BIN/kiln-run" --examples examples/onnx --work "$WORK/onnx" \
    --ort-python python3
fi

# ---- 7. SASS of the hot kernels ----
# Registers, spills and the instruction mix (16-byte loads, shuffles, barriers) of the kernels
# the benchmarks time, read off the cubin with the GPU machine's cuobjdump.
if wants sass; then
  step "bench/sass_report.py" "$OUT/sass.txt" python3 bench/sass_report.py --kilnc "$BIN/kilnc" \
    --out "$WORK/sass" bench/graphs/ew_chain.graph bench/graphs/softmax_f32.graph \
    bench/graphs/softmax_f16.graph bench/graphs/layer_norm_f32.graph bench/graphs/layer_norm_f16.graph \
    examples/mlp.graph examples/encoder_block.graph
fi

# ---- 8. benchmarks ----
if wants bench && [ -f bench/gpu_bench.py ]; then
  mkdir -p "$OUT/bench"
  step "bench/gpu_bench.py" "$OUT/bench/bench.txt" python3 bench/gpu_bench.py --bin-dir "$BIN" --out "$OUT/bench" \
    --no-markdown-file
  # The example ONNX models: kilnc times per target, latency per device, onnxruntime CPU beside.
  step "bench/onnx_models.py" "$OUT/bench/bench.txt" python3 bench/onnx_models.py --build "$BUNDLE" \
    --ort-python python3
fi

# ---- 9. compile and load time (issue 15) ----
# bench/compile_time.py on the real models (built here with seeded weights): kilnc cold and warm
# for the cuda target, and -j1 vs -j<ncpu> byte-identity; then each model's load time on cuda:0
# (kiln-bench: artifact read, session creation, first result) beside its steady-state latency.
if wants compile; then
  mkdir -p "$OUT/compile"
  step "bench/compile_time.py" "$OUT/compile/compile.txt" python3 bench/compile_time.py --kilnc "$BIN/kilnc" \
    --models "$WORK/compile-models" --generator-python python3 --targets cuda --no-extra-graphs --repeats 3 \
    --jobs-check --jobs-model resnet50 --work-dir "$WORK/compile-work" --out "$OUT/compile/compile.json"
  for model in resnet18 resnet50 mobilenetv2 bert_encoder; do
    step "load time $model" "$OUT/compile/load.txt" bash -c "'$BIN/kilnc' --target=cuda '$WORK/compile-models/$model.onnx' \
      -o '$WORK/$model.kiln' && '$BIN/kiln-bench' '$WORK/$model.kiln' --device cuda:0 \
      --json '$OUT/compile/load-$model.json'"
  done
  # The weight-upload reference of the load-time target: PyTorch copying the models' weight
  # sizes from pageable host memory to the GPU.
  step "upload reference" "$OUT/compile/load.txt" python3 bench/upload_reference.py 46.8 102.4 14.2 170.1
fi

# ---- 10. real models against PyTorch (issue 13) ----
if wants models; then
  mkdir -p "$OUT/models"
  # shellcheck disable=SC2086  # MODELS_ARGS is a list of words
  step "bench/real_models.py" "$OUT/models/models.txt" python3 bench/real_models.py --bin-dir "$BIN" \
    --out "$OUT/models" ${MODELS_ARGS:-}
fi

echo "== summary"
cat "$SUMMARY"
exit $failed
