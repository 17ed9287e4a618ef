#!/usr/bin/env python3
"""What the GPU really runs: compiles graphs for the cuda target, assembles the PTX for one
architecture with `ptxas -v`, disassembles the cubin with `cuobjdump -sass`, and prints per
kernel the resources (registers, spills, shared memory) and the counts of the instructions that
decide memory-bound speed: 16-byte global loads/stores (LDG.E.128 / STG.E.128) against narrower
ones, warp shuffles, barriers and tensor-core MMAs. Run it where cuobjdump exists (the CUDA
toolkit of the GPU machine); the full SASS of every kernel goes to --out.

Usage: sass_report.py --kilnc KILNC --out DIR [--arch sm_90] GRAPH [GRAPH...]
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

CUDA_BIN = "/usr/local/cuda/bin"
# Opcode families worth counting (the SASS mnemonic up to its first '.', plus the width suffix
# for global memory accesses).
COUNTED = ("LDG.128", "LDG.64", "LDG.32", "LDG.16", "LDG.8", "STG.128", "STG.64", "STG.32",
           "STG.16", "STG.8", "SHFL", "BAR", "HMMA", "FFMA", "MUFU")


def tool(name):
    path = shutil.which(name) or os.path.join(CUDA_BIN, name)
    if not os.path.exists(path):
        sys.exit(f"sass_report: {name} not found (looked on PATH and in {CUDA_BIN})")
    return path


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"sass_report: failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}")
    return p.stdout


def opcode_key(instruction):
    """'LDG.E.128.CONSTANT R4, desc[...]' -> 'LDG.128'; 'SHFL.BFLY PT, ...' -> 'SHFL'."""
    mnemonic = instruction.split()[0]
    family = mnemonic.split(".")[0]
    if family in ("LDG", "STG"):
        width = next((p for p in mnemonic.split(".")[1:] if p in ("128", "64", "U16", "S16", "U8", "S8")), "32")
        width = {"U16": "16", "S16": "16", "U8": "8", "S8": "8"}.get(width, width)
        return f"{family}.{width}"
    return family


def parse_sass(text):
    """{function: Counter of opcode keys} from cuobjdump -sass output."""
    kernels, current = {}, None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            current = kernels.setdefault(m.group(1), collections.Counter())
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*[^;]*);", line)
        if m and current is not None:
            current[opcode_key(m.group(1))] += 1
    return kernels


def parse_resources(ptxas_log):
    """{function: 'R regs, S spill bytes, M smem bytes'} from ptxas -v."""
    resources, current = {}, None
    for line in ptxas_log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = m.group(1)
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes spill stores", line)
        if m:
            resources.setdefault(current, {})["spill"] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            resources.setdefault(current, {})["regs"] = int(m.group(1))
            m2 = re.search(r"(\d+) bytes smem", line)
            resources[current]["smem"] = int(m2.group(1)) if m2 else 0
    return resources


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("graphs", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    ptxas, cuobjdump = tool("ptxas"), tool("cuobjdump")

    header = ["kernel", "regs", "spill B", "smem B"] + list(COUNTED)
    print("| graph | " + " | ".join(header) + " |")
    print("|---|" + "---:|" * len(header))
    for graph in args.graphs:
        name = os.path.splitext(os.path.basename(graph))[0]
        base = os.path.join(args.out, name)
        run([args.kilnc, graph, "--target=cuda", "-S", "-o", base])
        log = run([ptxas, f"-arch={args.arch}", "-v", base + ".ptx", "-o", base + ".cubin"])
        sass = run([cuobjdump, "-sass", base + ".cubin"])
        with open(base + ".sass", "w") as f:
            f.write(sass)
        resources = parse_resources(log)
        for kernel, counts in sorted(parse_sass(sass).items()):
            r = resources.get(kernel, {})
            row = [kernel, str(r.get("regs", "?")), str(r.get("spill", "?")), str(r.get("smem", "?"))]
            row += [str(counts.get(k, 0)) for k in COUNTED]
            print(f"| {name} | " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
