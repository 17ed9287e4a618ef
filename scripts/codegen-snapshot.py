#!/usr/bin/python3
"""Writes the generated sources of the whole test corpus, for every target, into one folder.

Usage: codegen-snapshot.py --kilnc build/bin/kilnc --out DIR [-j N] [--targets cuda,opencl,vulkan]

A refactor of the compiler that must not change generated code is checked by taking a snapshot
before and after and comparing the two folders (`diff -r BEFORE AFTER`). The corpus: every op
case of tests/interp/gen_cases.py, tests/backends/patterns, tests/golden, tests/runtime,
tests/roundtrip/all_ops.graph (-O0 and -O2), examples/*.graph, bench/graphs and
examples/onnx/*.onnx. For each graph and target, `kilnc -S` writes its sources (.cu/.ptx, .cl,
.comp/.spvasm) under DIR/<target>/<graph>; a compile failure is recorded as the file
<graph>.error holding kilnc's message, so failures are compared too.
"""
import argparse
import concurrent.futures
import glob
import os
import subprocess
import sys
import tempfile

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def corpus(work):
    cases = os.path.join(work, "cases")
    subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tests/interp/gen_cases.py"), cases],
                   check=True, stdout=subprocess.DEVNULL)
    graphs = []
    with open(os.path.join(cases, "cases.txt")) as f:
        for line in f:
            name = line.split()[0]
            graphs.append(("case_" + name, os.path.join(cases, name, "model.graph"), []))
    for folder, prefix in (("tests/backends/patterns", "pattern_"), ("tests/golden", "golden_"),
                           ("tests/runtime", "runtime_"), ("examples", "example_"),
                           ("bench/graphs", "bench_")):
        for path in sorted(glob.glob(os.path.join(SRC, folder, "*.graph"))):
            graphs.append((prefix + os.path.basename(path)[:-6], path, []))
    all_ops = os.path.join(SRC, "tests/roundtrip/all_ops.graph")
    graphs += [("all_ops_O0", all_ops, ["-O0"]), ("all_ops_O2", all_ops, [])]
    for path in sorted(glob.glob(os.path.join(SRC, "examples/onnx/*.onnx"))):
        graphs.append(("onnx_" + os.path.basename(path)[:-5], path, []))
    return graphs


def snapshot_one(kilnc, out, target, graph):
    name, path, flags = graph
    folder = os.path.join(out, target)
    p = subprocess.run([kilnc, path, "--target=" + target, "-S", "-o", os.path.join(folder, name)] + flags,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=os.path.dirname(path))
    if p.returncode != 0:
        with open(os.path.join(folder, name + ".error"), "w") as f:
            f.write(p.stdout.decode(errors="replace").replace(SRC, "<src>"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--targets", default="cuda,opencl,vulkan")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    kilnc = os.path.abspath(args.kilnc)
    with tempfile.TemporaryDirectory() as work:
        graphs = corpus(work)
        jobs = []
        with concurrent.futures.ThreadPoolExecutor(args.j) as pool:
            for target in args.targets.split(","):
                os.makedirs(os.path.join(args.out, target), exist_ok=True)
                jobs += [pool.submit(snapshot_one, kilnc, args.out, target, g) for g in graphs]
            for j in jobs:
                j.result()
    print("codegen-snapshot: %d graphs x %d targets in %s" % (len(graphs), len(args.targets.split(",")), args.out))


if __name__ == "__main__":
    sys.exit(main())
