#!/usr/bin/python3
"""CUDA driver checks on a machine with a CUDA GPU (see tests/cuda/CMakeLists.txt).

Usage: run_cuda_checks.py --bin-dir BIN --graph-check KILN_CUDA_GRAPH_CHECK --work DIR [--device cuda:0]

For each case (examples and backend patterns with matrix products, symbolic sizes and long
elementwise chains), compiled with `kilnc --target=cuda`:
  1. kiln-cuda-graph-check: graph replay == kernel-by-kernel launches, byte for byte, and
     re-capture after a size change;
  2. kiln-run --check against the reference interpreter, with the vendor library its kernels may
     use (cuBLASLt for matrix products, cuDNN for convolutions; the default) and with the
     generated kernels alone (KILN_CUBLASLT=0, KILN_CUDNN=0); with KILN_EXPECT_CUBLASLT=1 or
     KILN_EXPECT_CUDNN=1, the --profile of a case using that library must show it ran;
  3. kiln-embed (C API only): T threads x M runs byte-identical to a single-threaded run, with
     graphs on and with KILN_CUDA_GRAPHS=0.
Exit 0 when all pass, 1 on a failure, 77 (skipped) without a CUDA device or the cuda target,
unless KILN_REQUIRE_DRIVERS names cuda (then that is a failure).
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))

# name, graph, dims, other dims (re-capture), the vendor library it may use (or None),
# kiln-embed --dim (or None)
CASES = [
    ("mlp", "examples/mlp.graph", ["N=8"], ["N=33"], "cuBLASLt", "8"),
    ("ew_chain", "examples/ew_chain.graph", ["N=5"], ["N=1000"], None, "700"),
    ("encoder_block", "examples/encoder_block.graph", ["B=2", "S=7"], ["B=3", "S=5"], "cuBLASLt", None),
    ("matmul_epilogue", "tests/backends/patterns/matmul_epilogue.graph", ["N=19"], ["N=40"], "cuBLASLt", None),
    ("norms", "tests/backends/patterns/norms.graph", None, None, None, None),
    ("matmul_16bit", "tests/backends/patterns/matmul_16bit.graph", None, None, "cuBLASLt", None),
    ("matmul_library_epilogue", "tests/backends/patterns/matmul_library_epilogue.graph", ["N=37"], ["N=5"],
     "cuBLASLt", None),
    ("conv_implicit_gemm", "tests/backends/patterns/conv_implicit_gemm.graph", None, None, "cuDNN", None),
    ("conv_pool", "tests/backends/patterns/conv_pool.graph", None, None, "cuDNN", None),
    ("conv_library_epilogue", "tests/backends/patterns/conv_library_epilogue.graph", None, None, "cuDNN", None),
    ("conv_nhwc", "tests/backends/patterns/conv_nhwc.graph", None, None, "cuDNN", None),
]
# Per library: the switch that turns it off, and the variable saying it must run here.
LIBRARIES = {"cuBLASLt": ("KILN_CUBLASLT", "KILN_EXPECT_CUBLASLT"), "cuDNN": ("KILN_CUDNN", "KILN_EXPECT_CUDNN")}


def run(cmd, env=None, timeout=300):
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, env=full_env)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return 124, "timed out after %ds: %s" % (timeout, " ".join(cmd))


def pattern_dims(path):
    with open(path) as f:
        for line in f:
            m = re.match(r"#\s*dims:\s*(.*)", line)
            if m:
                return m.group(1).split()
    return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--graph-check", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()
    kilnc = os.path.join(args.bin_dir, "kilnc")
    kiln_run = os.path.join(args.bin_dir, "kiln-run")
    kiln_embed = os.path.join(args.bin_dir, "kiln-embed")
    os.makedirs(args.work, exist_ok=True)
    required = "cuda" in [d.strip() for d in os.environ.get("KILN_REQUIRE_DRIVERS", "").split(",")]

    _, listing = run([kiln_run, "--list-devices"], env={"KILN_REQUIRE_DRIVERS": ""})
    if not re.search(r"^%s\b" % re.escape(args.device), listing, re.M):
        print("no device %s:\n%s" % (args.device, listing))
        return 1 if required else 77
    _, version = run([kilnc, "--version"])
    if not re.search(r"targets:.*\bcuda\b", version):
        print("kilnc has no cuda target:\n%s" % version)
        return 1 if required else 77

    failures = []
    passed = 0

    def check(label, ok, output):
        nonlocal passed
        if ok:
            passed += 1
            print("PASS %s" % label)
        else:
            failures.append(label)
            print("FAIL %s\n%s" % (label, "\n".join("    " + l for l in output.strip().splitlines()[-12:])))

    for name, graph, dims, alt_dims, library, embed_dim in CASES:
        graph_path = os.path.join(SOURCE_DIR, graph)
        if dims is None:
            dims = pattern_dims(graph_path)
        art = os.path.join(args.work, name + ".kiln")
        rc, out = run([kilnc, graph_path, "--target=cuda", "-o", art])
        check("%s: kilnc --target=cuda" % name, rc == 0, out)
        if rc != 0:
            continue
        dim_flags = ["--dim=" + d for d in dims]
        alt_flags = ["--alt-dim=" + d for d in (alt_dims or [])]
        rc, out = run([args.graph_check, art, "--device=" + args.device, "--runs=6"] + dim_flags + alt_flags)
        check("%s: graph replay == direct launches%s" % (name, ", re-capture" if alt_dims else ""), rc == 0, out)

        run_dims = []
        for d in dims:
            run_dims += ["--dim", d]
        variants = [("default", {})]
        if library:
            switch, expect_variable = LIBRARIES[library]
            variants.append(("generated kernels, %s=0" % switch, {switch: "0"}))
        for label, env in variants:
            rc, out = run([kiln_run, art, "--device=" + args.device, "--check", "--profile"] + run_dims, env=env)
            ok = rc == 0 and "PASS" in out and "FAIL" not in out
            if ok and library and label == "default" and os.environ.get(expect_variable, "") == "1":
                ok = "(%s" % library in out
                if not ok:
                    out += "\n(expected a %s launch in the profile: %s=1)" % (library, expect_variable)
            if ok and library and label != "default":
                ok = "(%s" % library not in out
            check("%s: kiln-run --check (%s)" % (name, label), ok, out)

        if embed_dim:
            for label, env in (("graphs on", {}), ("graphs off", {"KILN_CUDA_GRAPHS": "0"})):
                rc, out = run([kiln_embed, art, "--device=" + args.device, "--threads=8", "--runs=12",
                               "--dim=" + embed_dim], env=env)
                ok = rc == 0 and re.search(r"threads x \d+ runs: all identical", out) is not None
                check("%s: kiln-embed 8 threads x 12 runs (%s)" % (name, label), ok, out)

    print("%d passed, %d failed" % (passed, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
