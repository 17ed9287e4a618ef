#!/usr/bin/python3
"""The printer/parser fixpoint: print(parse(print(parse(f)))) == print(parse(f)) at -O0.

Each argument is a .graph file or a folder of them. The first print is written next to a copy
(symlink) of the graph's weights file, so relative `weights` paths still resolve.
"""
import argparse
import os
import re
import subprocess
import sys


def emit_ir(kilnc, path, level):
    proc = subprocess.run([kilnc, path, level, "--emit=ir", "-o", "-"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"kilnc {level} {path} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("inputs", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    files = []
    for p in args.inputs:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".graph"))
        else:
            files.append(p)
    passed = failed = 0
    for src in files:
        name = os.path.basename(src)
        try:
            with open(src) as f:
                m = re.search(r'^\s*weights\s+"([^"]+)"', f.read(), re.M)
            if m:
                link = os.path.join(args.work, m.group(1))
                if not os.path.lexists(link):
                    os.symlink(os.path.join(os.path.dirname(os.path.abspath(src)), m.group(1)), link)
            first = emit_ir(args.kilnc, src, "-O0")
            printed = os.path.join(args.work, name + ".printed.graph")
            with open(printed, "w") as f:
                f.write(first)
            second = emit_ir(args.kilnc, printed, "-O0")
            if first != second:
                import difflib
                diff = "".join(difflib.unified_diff(first.splitlines(True), second.splitlines(True), "print1", "print2"))
                raise RuntimeError("printing is not a fixpoint:\n" + diff)
            # The optimized print must be valid .graph text too (kernels appear as comments).
            optimized = emit_ir(args.kilnc, src, "-O2")
            opt_path = os.path.join(args.work, name + ".o2.graph")
            with open(opt_path, "w") as f:
                f.write(optimized)
            emit_ir(args.kilnc, opt_path, "-O0")
            print(f"PASS {name}")
            passed += 1
        except Exception as e:
            print(f"FAIL {name}: {e}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
