#!/usr/bin/python3
"""The cross-backend suite: every op case of tests/interp/gen_cases.py plus the fused patterns in
tests/backends/patterns/, compiled with `kilnc --target=<every GPU target>` and run with
`kiln-run --device=<each available cuda/opencl/vulkan device> --check` against the reference
interpreter in its device-faithful mode (kiln-run's default on a device running kernels: f32
intermediates and accumulators, as the kernels compute, so an f32 overflow inside an op is
inf/nan on both sides) with kiln-run's per-dtype tolerances (f32 rtol 1e-4 atol 1e-5, f16
1e-2/1e-3, bf16 2e-2/1e-2, the relative term taken of max(|ref|, the output's RMS); integers
and bool exact).

Usage: run_backends.py --kilnc KILNC --kiln-run KILN_RUN --work DIR [--filter REGEX] [-j N]
                       [--all] [--drivers LIST]

--drivers vulkan (a comma list) runs on those drivers' devices only; with it, finding none of
them (and none required) exits with status 77, which CMake reports as a skipped test. The
environment reaches kilnc and kiln-run unchanged, so e.g. KILN_VULKAN_HIDE_FEATURES (see
runtime/drivers/vulkan/vulkan_context.h) makes the Vulkan device run its fallback kernels.

A driver listed in the environment variable KILN_REQUIRE_DRIVERS (e.g. "vulkan,opencl") must
have a device: when it has none, that is a failure rather than a skip. Prints one line per
failure, then `N passed, M failed` (and skipped drivers); exits 1 on any failure.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
DRIVERS = ("cuda", "opencl", "vulkan", "cpu")


def run(cmd, timeout=120):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return 124, "timed out after %ds: %s" % (timeout, " ".join(cmd))


def list_devices(kiln_run):
    _, out = run([kiln_run, "--list-devices"])
    devices = {}
    for line in out.splitlines():
        m = re.match(r"\s*((cuda|opencl|vulkan|cpu):\d+)\b", line)
        if m and m.group(2) not in devices:
            devices[m.group(2)] = m.group(1)
    return devices


def build_targets(kilnc):
    _, out = run([kilnc, "--version"])
    m = re.search(r"targets:\s*(.*)", out)
    return [t.strip() for t in m.group(1).split(",")] if m else []


def interp_cases(work, everything):
    """(name, graph path, [("--input", "NAME=FILE.npy")]) per generated op case. Unless
    `everything`, keeps the first two cases of each op plus every symbolic-shape case and every
    case of several ops (gen_added_dtypes groups one dtype's ops in one case), which covers every
    op and dtype on both devices in a few minutes on 2 cores (KILN_BACKENDS_ALL=1: all)."""
    out_dir = os.path.join(work, "cases")
    rc, log = run(["/usr/bin/python3", os.path.join(SOURCE_DIR, "tests/interp/gen_cases.py"), out_dir])
    if rc != 0:
        sys.exit("gen_cases.py failed:\n" + log)
    cases, per_op = [], {}
    with open(os.path.join(out_dir, "cases.txt")) as f:
        for line in f:
            name = line.split()[0]
            d = os.path.join(out_dir, name)
            inputs = []
            for fn in sorted(os.listdir(d)):
                if fn.endswith(".npy") and not fn.startswith("expected_"):
                    inputs.append(("--input", "%s=%s" % (fn[:-4], os.path.join(d, fn))))
            graph = os.path.join(d, "model.graph")
            with open(graph) as g:
                ops = re.findall(r"=\s*([a-z_0-9]+)\(", g.read())
            op = ops[0] if ops else name
            per_op[op] = per_op.get(op, 0) + 1
            if everything or per_op[op] <= 2 or "sym" in name or len(ops) > 1:
                cases.append((name, graph, inputs, []))
    return cases


def pattern_cases():
    """Fused patterns: each file says `# dims: N=5 S=3` for its symbols (random inputs), and
    may say `# kilnc: FLAGS` for flags of its compile (e.g. -fchannels-last). A pattern with
    symbols also runs once per symbol with that symbol 0 (`pattern_norms_S0`): empty tensors,
    launches with no work and zero-byte arena values must work on every device."""
    cases = []
    pdir = os.path.join(HERE, "patterns")
    for fn in sorted(os.listdir(pdir)):
        if not fn.endswith(".graph"):
            continue
        path = os.path.join(pdir, fn)
        args, flags = [], []
        with open(path) as f:
            for line in f:
                m = re.match(r"#\s*dims:\s*(.*)", line)
                if m:
                    for binding in m.group(1).split():
                        args.append(("--dim", binding))
                m = re.match(r"#\s*kilnc:\s*(.*)", line)
                if m:
                    flags += m.group(1).split()
        cases.append(("pattern_" + fn[:-6], path, args, flags))
        for i, (_, binding) in enumerate(args):
            symbol = binding.split("=")[0]
            zero = args[:i] + [("--dim", symbol + "=0")] + args[i + 1:]
            cases.append(("pattern_%s_%s0" % (fn[:-6], symbol), path, zero, flags))
    return cases


def check_case(case, targets, devices, kilnc, kiln_run, work):
    name, graph, inputs, flags = case
    art = os.path.join(work, "artifacts", name + ".kiln")
    rc, out = run([kilnc, graph, "--target=" + ",".join(targets), "-o", art] + flags)
    if rc != 0:
        return [(name, d, False, "kilnc failed (exit %d):\n%s" % (rc, out)) for d in devices]
    results = []
    for device in devices:
        cmd = [kiln_run, art, "--device=" + device, "--check"]
        for flag, value in inputs:
            cmd += [flag, value]
        rc, out = run(cmd)
        ok = rc == 0 and "FAIL" not in out and "PASS" in out
        results.append((name, device, ok, out))
    return results


def select_devices(kilnc, kiln_run, drivers_option):
    """The devices to run on: one per driver of `drivers_option` (a comma list, "" = every driver)
    whose device is present and whose target kilnc has. A driver that KILN_REQUIRE_DRIVERS names
    and that has no device (or target) is a failure, printed here. Returns (devices, targets of
    kilnc, failures, drivers skipped); exits on an unknown driver name."""
    required = [d.strip() for d in os.environ.get("KILN_REQUIRE_DRIVERS", "").split(",") if d.strip()]
    drivers = [d.strip() for d in drivers_option.split(",") if d.strip()] or list(DRIVERS)
    unknown = [d for d in drivers if d not in DRIVERS]
    if unknown:
        sys.exit("unknown driver(s) %s (known: %s)" % (", ".join(unknown), ", ".join(DRIVERS)))
    targets = [t for t in build_targets(kilnc) if t in DRIVERS]
    found = list_devices(kiln_run)
    devices, failed, skipped = [], 0, []
    for driver in drivers:
        if driver in found and driver in targets:
            devices.append(found[driver])
        elif driver in required:
            why = "no %s device" % driver if driver not in found else "kilnc lacks the %s target" % driver
            print("FAIL %s: required by KILN_REQUIRE_DRIVERS, but %s" % (driver, why))
            failed += 1
        else:
            skipped.append(driver)
    return devices, targets, failed, skipped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--filter", default="")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--all", action="store_true", help="every generated case (also KILN_BACKENDS_ALL=1)")
    ap.add_argument("--drivers", default="", help="comma list: run on these drivers only (default: %s)"
                    % ",".join(DRIVERS))
    args = ap.parse_args()
    os.makedirs(os.path.join(args.work, "artifacts"), exist_ok=True)

    devices, targets, failed, skipped = select_devices(args.kilnc, args.kiln_run, args.drivers)
    drivers = [d.strip() for d in args.drivers.split(",") if d.strip()] or list(DRIVERS)
    everything = args.all or os.environ.get("KILN_BACKENDS_ALL", "") == "1"
    cases = interp_cases(args.work, everything) + pattern_cases()
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c[0])]
    print("backends: devices %s; %d cases" % (", ".join(devices) or "none", len(cases)))
    if args.drivers and not devices and not failed:
        print("skipped: no device of %s (set KILN_REQUIRE_DRIVERS to make this fail)" % ", ".join(drivers))
        return 77

    passed = 0
    per_device = {d: [0, 0] for d in devices}
    if devices:
        usable = [t for t in targets if any(d.startswith(t + ":") for d in devices)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.j) as pool:
            futures = [pool.submit(check_case, c, usable, devices, args.kilnc, args.kiln_run, args.work)
                       for c in cases]
            for fut in futures:
                for name, device, ok, out in fut.result():
                    per_device[device][0 if ok else 1] += 1
                    if ok:
                        passed += 1
                    else:
                        failed += 1
                        tail = "\n".join("    " + l for l in out.strip().splitlines()[-6:])
                        print("FAIL %s on %s\n%s" % (name, device, tail))
    for d, (p, f) in per_device.items():
        print("  %s: %d passed, %d failed" % (d, p, f))
    for d in skipped:
        print("  %s: skipped (no device or target; set KILN_REQUIRE_DRIVERS to make this fail)" % d)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
