#!/usr/bin/python3
"""Compiles graphs with `kilnc --target=cuda` and assembles the PTX with ptxas (no GPU needed).

Usage: check_cuda_codegen.py --kilnc KILNC --ptxas PTXAS --source-dir SRC --work DIR [-j N]

Graphs: every op case of tests/interp/gen_cases.py, every tests/backends/patterns/*.graph,
tests/roundtrip/all_ops.graph (at -O0 and -O2), examples/*.graph and examples/onnx/*.onnx (when
kilnc has the ONNX importer). For each graph:
  1. `kilnc -S --target=cuda` must write <base>.cu and a non-empty <base>.ptx (NVRTC, PTX only);
  2. ptxas -arch=sm_80 and -arch=sm_90 must assemble that PTX;
  3. `kilnc --target=cuda -o <base>.kiln` (PTX + sm_80 + sm_90 cubins) must succeed — for every
     graph except the op cases, of which every third is taken (NVRTC runs 3 times per artifact).
Every failure is printed; exit status 1 if there is any. Prints the wall time of each stage
(kilnc -S, ptxas, kilnc .kiln) summed over graphs, so NVRTC's cost per graph is visible.
"""
import argparse
import concurrent.futures
import glob
import os
import subprocess
import sys
import time


def run(cmd, timeout=300):
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace"), time.monotonic() - start
    except subprocess.TimeoutExpired:
        return 124, "timed out after %ds: %s" % (timeout, " ".join(cmd)), time.monotonic() - start


def collect_graphs(src, work):
    """(name, path, extra kilnc flags, also build a .kiln) for every graph to check."""
    out_dir = os.path.join(work, "cases")
    rc, log, _ = run(["/usr/bin/python3", os.path.join(src, "tests/interp/gen_cases.py"), out_dir])
    if rc != 0:
        sys.exit("gen_cases.py failed:\n" + log)
    graphs = []
    with open(os.path.join(out_dir, "cases.txt")) as f:
        for i, line in enumerate(f):
            name = line.split()[0]
            graphs.append(("case_" + name, os.path.join(out_dir, name, "model.graph"), [], i % 3 == 0))
    for path in sorted(glob.glob(os.path.join(src, "tests/backends/patterns/*.graph"))):
        graphs.append(("pattern_" + os.path.basename(path)[:-6], path, [], True))
    all_ops = os.path.join(src, "tests/roundtrip/all_ops.graph")
    graphs.append(("all_ops_O0", all_ops, ["-O0"], True))
    graphs.append(("all_ops_O2", all_ops, [], True))
    for path in sorted(glob.glob(os.path.join(src, "examples/*.graph"))):
        graphs.append(("example_" + os.path.basename(path)[:-6], path, [], True))
    for path in sorted(glob.glob(os.path.join(src, "examples/onnx/*.onnx"))):
        graphs.append(("onnx_" + os.path.basename(path)[:-5], path, [], True))
    return graphs


def check(graph, kilnc, ptxas, work):
    """Returns (failures, skipped note or None, seconds per stage)."""
    name, path, flags, build_kiln = graph
    base = os.path.join(work, "out", name)
    times = {"kilnc -S": 0.0, "ptxas": 0.0, "kilnc .kiln": 0.0}
    rc, log, t = run([kilnc, path, "--target=cuda", "-S", "-o", base] + flags)
    times["kilnc -S"] += t
    if rc != 0 and path.endswith(".onnx") and "ONNX import is not available" in log:
        return [], "%s: this kilnc has no ONNX importer" % name, times
    if rc != 0:
        return ["%s: kilnc -S failed (exit %d):\n%s" % (name, rc, log[-4000:])], None, times
    failures = []
    ptx = base + ".ptx"
    if not os.path.isfile(base + ".cu"):
        failures.append("%s: kilnc -S wrote no %s" % (name, base + ".cu"))
    if not os.path.isfile(ptx) or os.path.getsize(ptx) == 0:
        return failures + ["%s: kilnc -S wrote no PTX (%s)" % (name, ptx)], None, times
    for arch in ("sm_80", "sm_90"):
        rc, log, t = run([ptxas, "-arch=" + arch, ptx, "-o", os.path.join(work, "out", name + "." + arch + ".cubin")])
        times["ptxas"] += t
        if rc != 0:
            failures.append("%s: ptxas -arch=%s failed (exit %d):\n%s" % (name, arch, rc, log[-4000:]))
    if build_kiln:
        rc, log, t = run([kilnc, path, "--target=cuda", "-o", base + ".kiln"] + flags)
        times["kilnc .kiln"] += t
        if rc != 0:
            failures.append("%s: kilnc to .kiln failed (exit %d):\n%s" % (name, rc, log[-4000:]))
        elif not os.path.isfile(base + ".kiln") or os.path.getsize(base + ".kiln") == 0:
            failures.append("%s: kilnc wrote no artifact" % name)
    return failures, None, times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--ptxas", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("-j", type=int, default=2)
    args = ap.parse_args()
    if not args.ptxas or not os.access(args.ptxas, os.X_OK):
        print("FAIL: the CUDA toolkit was found at configure time but ptxas was not (got '%s')" % args.ptxas)
        return 1
    os.makedirs(os.path.join(args.work, "out"), exist_ok=True)
    graphs = collect_graphs(args.source_dir, args.work)
    start = time.monotonic()
    failures, notes = [], []
    totals = {}
    kiln_count = sum(1 for g in graphs if g[3])
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.j) as pool:
        for fails, note, times in pool.map(lambda g: check(g, args.kilnc, args.ptxas, args.work), graphs):
            failures += fails
            if note:
                notes.append(note)
            for stage, t in times.items():
                totals[stage] = totals.get(stage, 0.0) + t
    for f in failures:
        print("FAIL " + f)
    for n in notes:
        print("note: " + n)
    print("cuda-codegen: %d graphs (-S + ptxas sm_80/sm_90), %d also to .kiln; %.1f s wall with -j %d"
          % (len(graphs), kiln_count, time.monotonic() - start, args.j))
    print("  summed per stage: kilnc -S %.1f s (%.0f ms/graph), ptxas %.1f s, kilnc .kiln %.1f s (%.0f ms/graph)"
          % (totals["kilnc -S"], 1e3 * totals["kilnc -S"] / max(len(graphs), 1), totals["ptxas"],
             totals["kilnc .kiln"], 1e3 * totals["kilnc .kiln"] / max(kiln_count, 1)))
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
