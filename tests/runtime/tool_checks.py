"""What the tool test scripts share (run_runtime_tests.py for kiln-run, run_bench_tests.py for
kiln-bench): running a command, PASS/FAIL lines with the failures kept in FAILURES, the usage
error check, and reading a folder of .npy outputs."""
import os
import re
import subprocess

import numpy as np

FAILURES = []


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def check(cond, what):
    print(("PASS " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)
    return cond


def run_ok(cmd, what):
    rc, out, err = run(cmd)
    if not check(rc == 0, f"{what} (exit 0)"):
        print(f"  command: {' '.join(cmd)}\n  stdout: {out}\n  stderr: {err}")
    return out


def expect_user_error(tool, cmd, pattern, what, one_line=False):
    """`cmd` exits 1 with `<tool>: error: ` and a message matching `pattern` (on one line when
    `one_line`)."""
    rc, out, err = run(cmd)
    ok = rc == 1 and err.startswith(f"{tool}: error: ") and re.search(pattern, err) is not None
    ok = ok and (not one_line or len(err.strip().splitlines()) == 1)
    if not check(ok, f"error: {what}"):
        print(f"  command: {' '.join(cmd)}\n  exit {rc}\n  stderr: {err!r}\n  expected /{pattern}/")


def load_dir(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}
