#!/usr/bin/env python3
"""Compile and run times of the example ONNX models (examples/onnx/), printed as a markdown table.

For each model of examples/onnx/make_models.py, with the inputs tests/onnx/check_examples.py uses
(NumPy seed 42, standard normal, the shapes in make_models.MODELS):
  - kilnc: wall time of `kilnc MODEL.onnx --target=T -o X.kiln` for each target T of the build
    (opencl: OpenCL C text; vulkan: GLSL compiled to SPIR-V by shaderc; cuda: CUDA C compiled by
    NVRTC to PTX and cubins), median of --compile-reps runs;
  - Kiln latency per device: `kiln-bench X.kiln --device=D --input x=X.npy` (tools/kiln-bench/main.cpp,
    the C API with inputs and outputs in device buffers: warm-up of at least 10 runs and 200 ms,
    then 30 repetitions of K back-to-back runs filling about 20 ms; the median per-run time), for
    the reference interpreter and the first device of each GPU driver present;
  - onnxruntime CPU latency: InferenceSession.run on the same inputs, CPUExecutionProvider with its
    default threading, timed the same way (warm-up of at least 10 runs and 200 ms, 30 repetitions
    of K runs filling about 20 ms, median per-run time), with the Python in --ort-python (the .venv
    with the pinned onnxruntime that scripts/setup.sh installs).
This is a program, not a test: nothing is asserted about the numbers.

Usage: bench/onnx_models.py [--build DIR] [--compile-reps N] [--ort-python PY]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "onnx")
GPU_DRIVERS = ("cuda", "vulkan", "opencl")

ORT_SCRIPT = r"""
import statistics, sys, time, numpy as np, onnxruntime as ort
model = sys.argv[1]
feeds = {k: np.load(v) for k, v in (a.split("=", 1) for a in sys.argv[2:])}
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
start, warm = time.perf_counter(), 0
while warm < 10 or time.perf_counter() - start < 0.2:
    sess.run(None, feeds)
    warm += 1
per_run = (time.perf_counter() - start) / warm
k = max(1, int(0.02 / per_run))
reps = []
for _ in range(30):
    t = time.perf_counter()
    for _ in range(k):
        sess.run(None, feeds)
    reps.append((time.perf_counter() - t) / k)
print("median_ms %.6f" % (1e3 * statistics.median(reps)))
print("version %s" % ort.__version__)
"""


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("bench failed: " + " ".join(cmd) + "\n" + proc.stdout + proc.stderr)
    return proc.stdout


def build_targets(kilnc):
    m = re.search(r"targets:\s*(.*)", run([kilnc, "--version"]))
    return [t.strip() for t in m.group(1).split(",")] if m else []


def devices(targets, kiln_run):
    found = {}
    listing = subprocess.run([kiln_run, "--list-devices"], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        d = re.match(r"\s*(([a-z]+):\d+)\s+\S+\s+(.*)", line)
        if d and d.group(2) not in found and d.group(2) in targets:
            found[d.group(2)] = (d.group(1), d.group(3).strip())
    out = [("reference", "reference interpreter")]
    for driver in GPU_DRIVERS:
        if driver in found:
            out.append(found[driver])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--compile-reps", type=int, default=5)
    ap.add_argument("--ort-python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    args = ap.parse_args()
    kilnc = os.path.join(args.build, "bin", "kilnc")
    kiln_run = os.path.join(args.build, "bin", "kiln-run")
    kiln_bench = os.path.join(args.build, "bin", "kiln-bench")
    for tool in (kilnc, kiln_run, kiln_bench):
        if not os.access(tool, os.X_OK):
            sys.exit(f"no {tool}: build first, or pass --build DIR")
    have_ort = os.path.exists(args.ort_python) and subprocess.run(
        [args.ort_python, "-c", "import onnxruntime"], capture_output=True).returncode == 0
    if not have_ort:
        print(f"note: no onnxruntime in {args.ort_python} (scripts/setup.sh installs it); its column is empty",
              file=sys.stderr)
    sys.path.insert(0, EXAMPLES)
    import make_models  # noqa: E402

    targets = build_targets(kilnc)
    devs = devices(targets, kiln_run)
    ort_version = ""
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name, (_, _, input_shapes) in make_models.MODELS.items():
            model = os.path.join(EXAMPLES, name + ".onnx")
            rng = np.random.default_rng(42)
            paths = {}
            for k, shape in input_shapes.items():
                paths[k] = os.path.join(work, f"{name}_{k}.npy")
                np.save(paths[k], rng.standard_normal(shape).astype(np.float32))
            row = [name, "x".join(map(str, next(iter(input_shapes.values()))))]
            for target in targets:
                compile_times = []
                for _ in range(args.compile_reps):
                    start = time.perf_counter()
                    run([kilnc, model, "--target=" + target, "-o", os.path.join(work, "one_target.kiln")])
                    compile_times.append(time.perf_counter() - start)
                row.append("%.3f s" % statistics.median(compile_times))
            artifact = os.path.join(work, name + ".kiln")
            run([kilnc, model, "-o", artifact])
            for dev, _ in devs:
                result = os.path.join(work, f"{name}_{dev.replace(':', '_')}.json")
                cmd = [kiln_bench, artifact, "--device=" + dev, "--json=" + result]
                for k, p in paths.items():
                    cmd += ["--input", f"{k}={p}"]
                run(cmd)
                with open(result) as f:
                    row.append("%.3f ms" % json.load(f)["median_ms"])
            if have_ort:
                out = run([args.ort_python, "-c", ORT_SCRIPT, model] + [f"{k}={p}" for k, p in paths.items()])
                row.append("%.3f ms" % float(re.search(r"median_ms ([0-9.]+)", out).group(1)))
                ort_version = re.search(r"version (\S+)", out).group(1)
            else:
                row.append("-")
            rows.append(row)

    header = ["model", "input"] + ["kilnc --target=%s" % t for t in targets]
    header += [dev for dev, _ in devs]
    header += ["onnxruntime %s CPU" % ort_version if ort_version else "onnxruntime CPU"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    for dev, description in devs:
        print(f"- {dev}: {description}")
    print("- latency: median per-run time (kiln-bench; the same scheme for onnxruntime); "
          "kilnc: wall time of the whole process, median of %d" % args.compile_reps)


if __name__ == "__main__":
    main()
