#!/usr/bin/python3
"""kiln-run --check and --check-reference (issue 19): the reference interpreter's mode.

Runs f32_overflow.graph, whose inputs overflow f32 inside layer_norm and matmul, on each GPU
device present (OpenCL on PoCL, Vulkan on lavapipe, CUDA) and on the reference device:
  - a device running kernels computes in f32, so its outputs hold the overflow's values; --check
    compares them with the device-faithful interpreter by default and passes, while
    --check-reference=exact (double, no overflow) reports both outputs as FAIL;
  - the reference device computes exactly, so --check compares it with the exact mode by default
    and passes, and --check-reference=faithful reports it FAIL;
  - a mode other than exact/faithful, or --check-reference without --check, is a usage error.
Without any GPU device (and none required by KILN_REQUIRE_DRIVERS) the device part is skipped
and the script exits 77 after the reference part.
"""
import argparse
import os
import re
import sys

import numpy as np

from tool_checks import FAILURES, check, load_dir, run
from tool_checks import expect_user_error as _expect_user_error

DRIVERS = ("cuda", "opencl", "vulkan")


def expect_user_error(cmd, pattern, what):
    _expect_user_error("kiln-run", cmd, pattern, what, one_line=True)


def check_lines(out):
    """{output name: 'PASS' or 'FAIL'} from kiln-run's --check report."""
    return dict(re.findall(r"^\s+(\S+)\s+max abs err .*\b(PASS|FAIL)\b", out, re.M))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--graphs", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    kr = args.kiln_run
    os.makedirs(args.work, exist_ok=True)

    def path(*p):
        return os.path.join(args.work, *p)

    _, version, _ = run([args.kilnc, "--version"])
    m = re.search(r"targets:\s*(.*)", version)
    targets = [t.strip() for t in m.group(1).split(",")] if m else []
    art = path("f32_overflow.kiln")
    cmd = [args.kilnc, os.path.join(args.graphs, "f32_overflow.graph"), "-o", art]
    if targets:
        cmd.append("--target=" + ",".join(targets))
    rc, out, err = run(cmd)
    if not check(rc == 0, "kilnc f32_overflow.graph"):
        print(out, err)
        return 1

    x = np.array([[1e20, -1e20, 3e19, -3e19], [1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    a = np.array([[2e38, 2e38, -2e38, -2e38]], dtype=np.float32)
    b = np.ones((4, 1), dtype=np.float32)
    inputs = []
    for name, value in (("x", x), ("a", a), ("b", b)):
        np.save(path(name + ".npy"), value)
        inputs += ["--input", f"{name}={path(name + '.npy')}"]

    # The reference device computes in double: exact by default, and faithful blames it.
    base = [kr, art, "--device=reference"] + inputs
    rc, out, err = run(base + ["--check"])
    check(rc == 0 and "check against the reference interpreter (exact):" in out
          and check_lines(out) == {"normed": "PASS", "dot": "PASS"},
          "reference device: --check defaults to the exact mode and passes")
    rc, out, err = run(base + ["--check", "--check-reference=faithful"])
    check(rc == 1 and "(faithful):" in out and check_lines(out) == {"normed": "FAIL", "dot": "FAIL"}
          and "--check failed" in err, "reference device: --check-reference=faithful reports the overflow as FAIL")
    expect_user_error(base + ["--check", "--check-reference=double"], r"--check-reference.*exact or faithful",
                      "--check-reference takes exact or faithful")
    expect_user_error(base + ["--check-reference=exact"], r"--check-reference.*--check",
                      "--check-reference needs --check")

    _, listing, _ = run([kr, "--list-devices"])
    devices = [d for d, driver in re.findall(r"^((\w+):\d+)\s", listing, re.M) if driver in DRIVERS]
    devices = [d for d in devices if d.split(":")[0] in targets]
    required = [d for d in os.environ.get("KILN_REQUIRE_DRIVERS", "").split(",") if d in DRIVERS]
    for driver in required:
        check(any(d.startswith(driver + ":") for d in devices), f"a required {driver} device is present")

    for device in devices:
        base = [kr, art, "--device=" + device] + inputs
        d = path("out_" + device.replace(":", "_"))
        rc, out, err = run(base + ["--check", "--output-dir", d])
        ok = check(rc == 0 and "check against the reference interpreter (faithful):" in out
                   and check_lines(out) == {"normed": "PASS", "dot": "PASS"},
                   f"{device}: --check compares with the faithful mode and passes")
        if not ok:
            print(f"  stdout: {out}\n  stderr: {err}")
        got = load_dir(d)
        check(np.all(got["normed"][0] == 0.5) and np.all(np.isfinite(got["normed"][1]))
              and np.isinf(got["dot"][0, 0]),
              f"{device}: the kernels overflow f32 (row 0 is its bias, dot is inf)")
        rc, out, err = run(base + ["--check", "--check-reference=exact"])
        check(rc == 1 and "(exact):" in out and check_lines(out) == {"normed": "FAIL", "dot": "FAIL"},
              f"{device}: --check-reference=exact reports the overflow as FAIL")

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    if not devices:
        print("no GPU device: the device checks were skipped")
        return 77
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
