#!/usr/bin/env python3
"""Checks the example ONNX models (examples/onnx/*.onnx) end to end, on every available device:

1. the committed .onnx files are what examples/onnx/make_models.py builds (regenerated here into
   the work directory and compared byte for byte);
2. each compiles with `kilnc MODEL.onnx` (every target of the build) and, run with
   `kiln-run --device=D` on seeded inputs, matches the NumPy reference implementation in
   make_models.py (the exporting framework's outputs) on every device D: the reference
   interpreter and the first device of each driver (opencl, vulkan, cuda, cpu) that has one;
3. with --ort-python (a Python that has onnxruntime, the .venv scripts/setup.sh creates), each
   device's outputs also match onnxruntime's (CPU); without it this check is skipped, saying so
   (under CI=true, where scripts/setup.sh must install it, a missing onnxruntime is a failure);
4. `kilnc --emit=ir MODEL.onnx` prints .graph text that kilnc compiles again, and that graph
   computes the same outputs on the reference interpreter.

A driver named in KILN_REQUIRE_DRIVERS (e.g. "vulkan,opencl") must have a device: when it has
none, that is a failure, not a skip.

Usage: check_examples.py --kilnc K --kiln-run R --examples DIR --work DIR [--ort-python PY]
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

DRIVERS = ("cuda", "vulkan", "opencl", "cpu")
RTOL, ATOL = 1e-3, 1e-4


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + proc.stdout + proc.stderr)
    return proc.stdout


def devices_to_check(kilnc, kiln_run):
    """(devices, failures): 'reference' plus the first device of each driver that both has a
    device and is a target of this kilnc; a driver in KILN_REQUIRE_DRIVERS without one fails."""
    m = re.search(r"targets:\s*(.*)", run([kilnc, "--version"]))
    targets = [t.strip() for t in m.group(1).split(",")] if m else []
    listing = subprocess.run([kiln_run, "--list-devices"], capture_output=True, text=True)
    found = {}
    for line in listing.stdout.splitlines():
        d = re.match(r"\s*(([a-z]+):\d+)\s", line)
        if d and d.group(2) not in found:
            found[d.group(2)] = d.group(1)
    required = [d.strip() for d in os.environ.get("KILN_REQUIRE_DRIVERS", "").split(",") if d.strip()]
    devices, failures = ["reference"], 0
    for driver in DRIVERS:
        if driver in found and driver in targets:
            devices.append(found[driver])
        elif driver in required:
            why = "no %s device" % driver if driver not in found else "kilnc lacks the %s target" % driver
            print("FAIL %s: required by KILN_REQUIRE_DRIVERS, but %s\n%s" % (driver, why, listing.stderr.strip()))
            failures += 1
        else:
            print("SKIP %s: no device or no kilnc target (KILN_REQUIRE_DRIVERS makes this a failure)" % driver)
    return devices, failures


def kiln_outputs(kiln_run, artifact, device, inputs, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    cmd = [kiln_run, artifact, "--device=" + device, "--output-dir", out_dir]
    for name, path in inputs.items():
        cmd += ["--input", name + "=" + path]
    run(cmd)
    files = sorted(f for f in os.listdir(out_dir) if f.endswith(".npy"))
    if len(files) != 1:
        sys.exit(f"FAILED: {artifact} on {device}: expected one output, got {files}")
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


def compare(label, got, want, rtol=RTOL, atol=ATOL):
    ok = got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=atol)
    err = np.max(np.abs(got.astype(np.float64) - want)) if got.shape == want.shape else float("inf")
    print(f"{'PASS' if ok else 'FAIL'} {label}: shape {got.shape}, max abs error {err:.3g}")
    return ok


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-run", required=True)
    p.add_argument("--examples", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--ort-python", default="")
    args = p.parse_args()
    failures = 0
    use_ort = ort_python_usable(args.ort_python)
    if not use_ort:
        msg = f"onnxruntime comparison: no Python with onnxruntime at '{args.ort_python}' (scripts/setup.sh creates .venv)"
        if os.environ.get("CI", "") == "true":
            print("FAIL " + msg + "; CI requires it")
            failures += 1
        else:
            print("SKIP " + msg)
    devices, device_failures = devices_to_check(args.kilnc, args.kiln_run)
    failures += device_failures
    print("devices: " + ", ".join(devices))
    os.makedirs(args.work, exist_ok=True)
    sys.path.insert(0, args.examples)
    import make_models  # noqa: E402

    regen = os.path.join(args.work, "regenerated")
    run([sys.executable, os.path.join(args.examples, "make_models.py"), regen])
    for name, (_, _, make_inputs) in make_models.MODELS.items():
        model = os.path.join(args.examples, name + ".onnx")
        with open(model, "rb") as a, open(os.path.join(regen, name + ".onnx"), "rb") as b:
            if a.read() != b.read():
                print(f"FAIL {name}: {model} differs from what make_models.py builds")
                failures += 1
        artifact = os.path.join(args.work, name + ".kiln")
        run([args.kilnc, model, "-o", artifact])
        # One compile, every input case (models with dynamic sizes list several).
        for case, arrays in enumerate(make_inputs(np.random.default_rng(42))):
            label = name if case == 0 else f"{name} case {case}"
            sizes = ", ".join(f"{k}{list(a.shape)}" for k, a in arrays.items())
            paths = {}
            for k, a in arrays.items():
                paths[k] = os.path.join(args.work, f"{name}_{case}_{k}.npy")
                np.save(paths[k], a)
            want = make_models.reference(name, arrays)
            ort_ref = None
            if use_ort:
                ort_out = os.path.join(args.work, f"{name}_{case}_ort.npy")
                run([args.ort_python, "-c", ORT_SCRIPT, model, ort_out] + [f"{k}={v}" for k, v in paths.items()])
                ort_ref = np.load(ort_out)
                failures += not compare(f"{label} ({sizes}): onnxruntime vs NumPy", ort_ref, want)
            for device in devices:
                got = kiln_outputs(args.kiln_run, artifact, device, paths,
                                   os.path.join(args.work, f"{name}_{case}_{device.replace(':', '_')}"))
                if device == "reference" and case == 0:
                    reference_out, first_paths = got, paths
                failures += not compare(f"{label} ({sizes}) on {device} vs NumPy", got, want)
                if ort_ref is not None:
                    failures += not compare(f"{label} ({sizes}) on {device} vs onnxruntime", got, ort_ref)
        # The printed IR recompiles and computes the same thing.
        graph_path = os.path.join(args.work, name + ".graph")
        run([args.kilnc, "--emit=ir", model, "-o", graph_path])
        graph_artifact = os.path.join(args.work, name + "_from_ir.kiln")
        run([args.kilnc, graph_path, "-o", graph_artifact])
        again = kiln_outputs(args.kiln_run, graph_artifact, "reference", first_paths,
                             os.path.join(args.work, name + "_from_ir"))
        failures += not compare(f"{name}: --emit=ir output recompiled, vs the model on reference",
                                again, reference_out, rtol=1e-5, atol=1e-6)
    if failures:
        sys.exit(f"{failures} check(s) failed")
    print("all checks passed")


if __name__ == "__main__":
    main()
