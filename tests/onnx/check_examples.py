#!/usr/bin/env python3
"""Checks the example ONNX models (examples/onnx/*.onnx) end to end:

1. the committed .onnx files are what examples/onnx/make_models.py builds (regenerated here into
   the work directory and compared byte for byte);
2. each compiles at -O2 (`kilnc --emit=plan MODEL.onnx`) and, run on seeded inputs by the
   reference interpreter (the conformance runner's --run mode), matches the NumPy reference
   implementation in make_models.py;
3. `kilnc --emit=ir MODEL.onnx` prints .graph text that kilnc compiles again, and that graph
   computes the same outputs;
4. with --ort-python (a Python that has onnxruntime, the .venv scripts/setup.sh creates), Kiln's
   outputs also match onnxruntime's (CPU); without it this check is skipped, saying so.

Usage: check_examples.py --kilnc K --runner kiln-onnx-conformance --examples DIR --work DIR
"""
import argparse
import os
import subprocess
import sys

import numpy as np


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + proc.stdout + proc.stderr)
    return proc.stdout


def compile_and_run(args, source, name, inputs, work):
    run([args.kilnc, "--emit=plan", source, "-o", os.path.join(work, name + ".plan")])
    out_dir = os.path.join(work, name + "_out")
    os.makedirs(out_dir, exist_ok=True)
    cmd = [args.runner, "--run", source, "--output-dir", out_dir]
    for input_name, path in inputs.items():
        cmd += ["--input", input_name + "=" + path]
    run(cmd)
    files = sorted(f for f in os.listdir(out_dir) if f.endswith(".npy"))
    if len(files) != 1:
        sys.exit(f"FAILED: {name}: expected one output, got {files}")
    return np.load(os.path.join(out_dir, files[0]))


ORT_SCRIPT = """
import sys, numpy as np, onnxruntime as ort
model, out = sys.argv[1], sys.argv[2]
feeds = dict(arg.split("=", 1) for arg in sys.argv[3:])
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
res = sess.run(None, {k: np.load(v) for k, v in feeds.items()})
np.save(out, res[0])
"""


def ort_python_usable(path):
    if not path or not os.path.exists(path):
        return False
    return subprocess.run([path, "-c", "import onnxruntime"], capture_output=True).returncode == 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--runner", required=True)
    p.add_argument("--examples", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--ort-python", default="")
    args = p.parse_args()
    use_ort = ort_python_usable(args.ort_python)
    if not use_ort:
        print(f"SKIP onnxruntime comparison: no Python with onnxruntime at '{args.ort_python}' "
              "(scripts/setup.sh creates .venv)")
    os.makedirs(args.work, exist_ok=True)
    sys.path.insert(0, args.examples)
    import make_models  # noqa: E402

    regen = os.path.join(args.work, "regenerated")
    run([sys.executable, os.path.join(args.examples, "make_models.py"), regen])
    failures = 0
    for name, (_, _, input_shapes) in make_models.MODELS.items():
        model = os.path.join(args.examples, name + ".onnx")
        with open(model, "rb") as a, open(os.path.join(regen, name + ".onnx"), "rb") as b:
            if a.read() != b.read():
                print(f"FAILED {name}: {model} differs from what make_models.py builds")
                failures += 1
        rng = np.random.default_rng(42)
        arrays = {k: rng.standard_normal(shape).astype(np.float32) for k, shape in input_shapes.items()}
        paths = {}
        for k, a in arrays.items():
            paths[k] = os.path.join(args.work, f"{name}_{k}.npy")
            np.save(paths[k], a)
        want = make_models.reference(name, arrays)
        got = compile_and_run(args, model, name, paths, args.work)
        err = np.max(np.abs(got.astype(np.float64) - want))
        ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-4)
        print(f"{'PASS' if ok else 'FAIL'} {name}: shape {got.shape}, max abs error vs NumPy {err:.3g}")
        failures += not ok
        if use_ort:
            ort_out = os.path.join(args.work, name + "_ort.npy")
            run([args.ort_python, "-c", ORT_SCRIPT, model, ort_out] + [f"{k}={v}" for k, v in paths.items()])
            ref = np.load(ort_out)
            ok = ref.shape == got.shape and np.allclose(got, ref, rtol=1e-3, atol=1e-4)
            print(f"{'PASS' if ok else 'FAIL'} {name}: max abs error vs onnxruntime "
                  f"{np.max(np.abs(got.astype(np.float64) - ref)):.3g}")
            failures += not ok
        # The printed IR recompiles and computes the same thing.
        graph_path = os.path.join(args.work, name + ".graph")
        run([args.kilnc, "--emit=ir", model, "-o", graph_path])
        again = compile_and_run(args, graph_path, name + "_from_ir", paths, args.work)
        ok = again.shape == got.shape and np.allclose(again, got, rtol=1e-5, atol=1e-6)
        print(f"{'PASS' if ok else 'FAIL'} {name}: --emit=ir output recompiles and matches")
        failures += not ok
    if failures:
        sys.exit(f"{failures} check(s) failed")


if __name__ == "__main__":
    main()
