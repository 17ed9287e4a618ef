#!/usr/bin/python3
"""kiln-run end to end on the reference device.

Compiles the .graph files next to this script with kilnc, then runs kiln-run with every option
(--input, --output-dir, --check, --dim, --seed, --bench, --bench-json, --profile,
--profile-trace, --info, --info-json, --list-devices, --help, --version), checks outputs against
NumPy and the JSON reports' contents, and checks that each user mistake exits with status 1 and
a message that says what is wrong.
"""
import argparse
import json
import os
import re
import sys

import numpy as np

from tool_checks import FAILURES, check, load_dir, run, run_ok
from tool_checks import expect_user_error as _expect_user_error


def expect_user_error(cmd, pattern, what):
    _expect_user_error("kiln-run", cmd, pattern, what, one_line=False)


def affine_reference(x, y):
    scale = np.array([0.5, -2.0, 1.5], dtype=np.float64)
    out = np.tanh(x.astype(np.float64) * scale + y)
    return out, (out * out).sum(axis=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--graphs", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    kr = args.kiln_run
    work = args.work
    os.makedirs(work, exist_ok=True)

    def path(*p):
        return os.path.join(work, *p)

    # --help / --version / --list-devices need no artifact.
    out = run_ok([kr, "--help"], "--help")
    check(out.startswith("usage: kiln-run [options] ARTIFACT.kiln\n")
          and all(f in out for f in ("--bench=N", "--bench-json=FILE", "--profile-trace=FILE", "--info-json=FILE",
                                      "--input NAME=FILE.npy", "--dim SYMBOL=SIZE", "exit status")),
          "--help shows usage and every option")
    out = run_ok([kr, "--version"], "--version")
    check(re.match(r"kiln-run \d+\.\d+\.\d+", out) is not None, "--version format")
    out = run_ok([kr, "--list-devices"], "--list-devices")
    check(re.search(r"^reference\s+cpu\s+Kiln reference interpreter$", out, re.M) is not None,
          "--list-devices lists the reference device")

    # Compile the test graphs.
    artifacts = {}
    for name in ("affine", "dtypes", "gather"):
        for level in ("-O0", "-O2"):
            art = path(f"{name}{level}.kiln")
            rc, o, e = run([args.kilnc, os.path.join(args.graphs, name + ".graph"), level, "-o", art])
            if not check(rc == 0, f"kilnc {name}.graph {level}"):
                print(e)
                return 1
            artifacts[name + level] = art
    affine = artifacts["affine-O2"]

    # --input / --output-dir against NumPy, options before and after the artifact.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 3)).astype(np.float32)
    np.save(path("x.npy"), x)
    np.save(path("y.npy"), y)
    want_out, want_total = affine_reference(x, y)
    for level in ("-O0", "-O2"):
        d = path(f"affine_out{level}")
        run_ok([kr, "--input", f"x={path('x.npy')}", artifacts["affine" + level], f"--input=y={path('y.npy')}",
                "--output-dir", d, "--device=reference"], f"affine {level} with --input files")
        got = load_dir(d)
        check(set(got) == {"out", "total"}, f"affine {level}: one .npy per output")
        check(got["out"].dtype == np.float32 and got["out"].shape == (4, 3), f"affine {level}: out dtype/shape")
        check(np.allclose(got["out"], want_out, rtol=1e-5, atol=1e-6), f"affine {level}: out matches NumPy")
        check(np.allclose(got["total"], want_total, rtol=1e-5, atol=1e-6), f"affine {level}: total matches NumPy")

    # Summary printing without --output-dir.
    out = run_ok([kr, affine, "--input", f"x={path('x.npy')}", "--input", f"y={path('y.npy')}"], "summary")
    m = re.search(r"output total: f32\[4\]  min (\S+)  max (\S+)  mean (\S+)  \[", out)
    check(m is not None and abs(float(m.group(2)) - want_total.max()) < 1e-4
          and abs(float(m.group(3)) - want_total.mean()) < 1e-4, "summary shows min/max/mean")

    # Random inputs: --dim, --seed; deterministic per seed, and in the documented ranges.
    d1, d2, d3 = path("rand1"), path("rand2"), path("rand3")
    run_ok([kr, affine, "--dim", "N=5", "--seed=3", "--output-dir", d1], "random inputs seed 3")
    run_ok([kr, affine, "--dim=N=5", "--seed", "3", "--output-dir", d2], "random inputs seed 3 again")
    run_ok([kr, affine, "--dim", "N=5", "--seed=4", "--output-dir", d3], "random inputs seed 4")
    r1, r2, r3 = load_dir(d1), load_dir(d2), load_dir(d3)
    check(r1["out"].shape == (5, 3), "--dim N=5 sets the batch")
    check(np.array_equal(r1["out"], r2["out"]), "same seed, same outputs")
    check(not np.array_equal(r1["out"], r3["out"]), "another seed, other outputs")
    # A given input binds N; a random y follows it.
    d4 = path("half_given")
    run_ok([kr, affine, "--input", f"x={path('x.npy')}", "--output-dir", d4], "x given, y random")
    check(load_dir(d4)["out"].shape == (4, 3), "random y takes N from the given x")
    run_ok([kr, affine, "--input", f"x={path('x.npy')}", "--dim", "N=4"], "--dim agreeing with an input")

    d5 = path("gather_out")
    run_ok([kr, artifacts["gather-O2"], "--dim", "K=7", "--output-dir", d5, "--check"], "gather with random indices")
    check(load_dir(d5)["rows"].shape == (7, 2), "gather output shape")

    # dtypes: .npy in and out for every dtype.
    inputs = {
        "h": np.array([0.5, -1.25, 3.0, 100.0], dtype=np.float16),
        "b": np.array([True, False, False, True]),
        "i": np.array([1, -2, 2147483647, 0], dtype=np.int32),
        "bf": np.array([1.5, -0.25], dtype=np.float32),  # bf16 inputs come as f32 files
        "s": np.array([-128, 0, 127], dtype=np.int8),
        "u": np.array([0, 55, 56], dtype=np.uint8),
        "l": np.array([-(2**40), 7], dtype=np.int64),
    }
    cmd = [kr, artifacts["dtypes-O2"], "--output-dir", path("dtypes_out"), "--check"]
    for k, v in inputs.items():
        np.save(path(f"dt_{k}.npy"), v)
        cmd += ["--input", f"{k}={path(f'dt_{k}.npy')}"]
    run_ok(cmd, "dtypes")
    got = load_dir(path("dtypes_out"))
    with np.errstate(over="ignore"):
        expected = {
            "h2": inputs["h"] * inputs["h"],
            "nb": ~inputs["b"],
            "i2": inputs["i"] + np.int32(1),
            "bf2": -inputs["bf"],
            "s2": inputs["s"] - np.int8(1),
            "u2": inputs["u"] + np.uint8(200),
            "l2": inputs["l"] * np.int64(3),
        }
    for k, v in expected.items():
        g = got.get(k)
        check(g is not None and g.dtype == v.dtype and np.array_equal(g, v), f"dtypes: {k} is {v.dtype} {v.tolist()}")

    # --check, --bench, --profile.
    out = run_ok([kr, affine, "--dim", "N=6", "--check"], "--check")
    check(re.search(r"^\s+out\s+max abs err \S+\s+max rel err \S+\s+PASS$", out, re.M) is not None
          and re.search(r"^\s+total\s+max abs err", out, re.M) is not None, "--check prints a PASS line per output")
    out = run_ok([kr, affine, "--dim", "N=6", "--bench=3", "--device=reference"], "--bench=3")
    check(re.search(r"bench: 3 runs .*host wall time", out) is not None
          and re.search(r"p50 [\d.]+ ms\s+p90 [\d.]+ ms\s+p99 [\d.]+ ms.*runs/s", out) is not None,
          "--bench prints percentiles, runs/s and what it measured")
    for level in ("-O0", "-O2"):
        out = run_ok([kr, artifacts["affine" + level], "--dim", "N=6", "--profile", "--device=reference"],
                     f"--profile {level}")
        lines = [l for l in out.splitlines() if re.match(r"^\s+\d+\.\d+\s+\d+\.\d%", l)]
        times = [float(l.split()[0]) for l in lines]
        check(re.search(r"profile: \d+ kernels, host wall time", out) is not None and len(lines) >= 3
              and times[:-1] == sorted(times[:-1], reverse=True) and lines[-1].rstrip().endswith("total"),
              f"--profile {level}: per-kernel times, slowest first, with a total")
    # At -O2 the tanh chain is one fused kernel whose line names its source nodes.
    out = run_ok([kr, artifacts["affine-O2"], "--dim", "N=6", "--profile", "--device=reference"],
                 "--profile provenance")
    check(re.search(r"^\s+\S+\s+\S+%\s+\S+\s+elementwise\s+.*\bout\b", out, re.M) is not None,
          "--profile lists an elementwise kernel with its source nodes")

    # The devices with kernels in these artifacts (kilnc compiles for every target of the build).
    _, listing, _ = run([kr, "--list-devices"])
    gpu_devices = sorted(set(re.findall(r"^\s*((?:opencl|vulkan|cuda):\d+)", listing, re.M)))

    # A symbolic dimension of 0: empty inputs and outputs on every device, checked against the
    # interpreter and written as empty .npy files.
    for device in ["reference"] + gpu_devices:
        d = path(f"empty_{device.replace(':', '_')}")
        out = run_ok([kr, affine, "--dim", "N=0", f"--device={device}", "--check", "--output-dir", d,
                      "--bench=2", "--profile"], f"--dim N=0 on {device}")
        got = load_dir(d)
        check(got["out"].shape == (0, 3) and got["total"].shape == (0,) and out.count("PASS") == 2,
              f"--dim N=0 on {device}: empty outputs that match the interpreter")

    # --bench-json: the printed numbers as JSON, to a file or to stdout ("-", the text then goes
    # to stderr). Devices with timers (every one but the reference interpreter) add device times.
    for device in ["reference"] + gpu_devices:
        bench_json = path(f"bench_{device.replace(':', '_')}.json")
        out = run_ok([kr, affine, "--dim", "N=6", "--bench", "7", f"--bench-json={bench_json}", f"--device={device}"],
                     f"--bench-json on {device}")
        with open(bench_json) as f:
            report = json.load(f)
        host = report["host"]
        check(report["tool"] == "kiln-run" and report["artifact"] == affine and report["device"]["id"] == device
              and report["runs"] == 7 and report["warmup_runs"] == 3, f"--bench-json on {device}: what ran")
        check(report["symbols"] == {"N": 6} and [i["name"] for i in report["inputs"]] == ["x", "y"]
              and all(i["shape"] == [6, 3] and i["dtype"] == "f32" for i in report["inputs"]),
              f"--bench-json on {device}: inputs and symbols")
        check(0 < host["min_ms"] <= host["p50_ms"] <= host["p90_ms"] <= host["p99_ms"] <= host["max_ms"]
              and host["min_ms"] <= host["mean_ms"] <= host["max_ms"] and host["runs_per_second"] > 0
              and "upload" in host["clock"], f"--bench-json on {device}: host latency percentiles in order")
        m = re.search(r"p50 ([\d.]+) ms", out)
        check(m is not None and abs(float(m.group(1)) - host["p50_ms"]) < 1e-3,
              f"--bench-json on {device}: the same p50 as printed")
        timed = report["device_timed"]
        if device == "reference":
            check(timed is None and "device time" not in out, "--bench-json: the reference device has no timers")
        else:
            check(timed is not None and 0 <= timed["min_ms"] <= timed["p50_ms"] <= timed["p99_ms"] <= timed["max_ms"]
                  and "runs_per_second" not in timed and timed["min_ms"] <= host["min_ms"],
                  f"--bench-json on {device}: device-timed percentiles, within the host times")
            check(re.search(r"device time per run", out) is not None, f"--bench on {device} prints device times")
    rc, out, err = run([kr, affine, "--dim", "N=2", "--bench=2", "--bench-json", "-", "--device=reference"])
    report = json.loads(out) if rc == 0 else {}
    check(rc == 0 and report.get("runs") == 2 and "bench: 2 runs" in err and "output out" in err,
          "--bench-json=- writes only JSON to stdout, the report to stderr")

    # --profile-trace: a Chrome trace with one complete event per profiled kernel.
    for device in ["reference"] + gpu_devices:
        trace_path = path(f"trace_{device.replace(':', '_')}.json")
        out = run_ok([kr, artifacts["affine-O0"], "--dim", "N=64", "--profile", "--profile-trace", trace_path,
                      f"--device={device}"], f"--profile-trace on {device}")
        with open(trace_path) as f:
            trace = json.load(f)
        events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        printed = [l.split()[2] for l in out.splitlines() if re.match(r"^\s+\d+\.\d+\s+\d+\.\d%\s+\S+\s+\S", l)]
        names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
        check(len(events) >= 3 and sorted(e["name"] for e in events) == sorted(printed),
              f"--profile-trace on {device}: one event per kernel of the printed profile")
        check(all(e["pid"] == events[0]["pid"] and e["tid"] == events[0]["tid"] and e["dur"] >= 0
                  and isinstance(e["args"]["kernel_index"], int) and e["cat"] == e["args"]["kind"]
                  and e["args"]["source_nodes"] for e in events)
              and all(b["ts"] >= a["ts"] - 1e-3 for a, b in zip(events, events[1:])),
              f"--profile-trace on {device}: kernels in launch order on one track")
        check(f"kiln-run on {device}" in names and trace["otherData"]["device"] == device,
              f"--profile-trace on {device}: the process is named after the device")

    # --info: the artifact's contents without a device; --info-json the same as JSON.
    out = run_ok([kr, "--info", affine], "--info")
    _, version_out, _ = run([kr, "--version"])
    kiln_version = version_out.split()[1]
    format_version = re.search(r"artifact format version (\d+)", version_out)  # what kilnc writes
    check(format_version is not None
          and re.search(rf"^format version: {format_version.group(1)}$", out, re.M) is not None
          and re.search(rf"^producer: kilnc {re.escape(kiln_version)}$", out, re.M) is not None,
          "--info: format version and the compiler that wrote it")
    check(re.search(r"^inputs:\n  x: f32\[N, 3\]\n  y: f32\[N, 3\]\noutputs:\n  out: f32\[N, 3\]\n"
                    r"  total: f32\[N\]\nsymbols: N$", out, re.M) is not None, "--info lists inputs and outputs")
    check(re.search(r"^constants: 1 \(0 named weights\), 12 bytes$", out, re.M) is not None,
          "--info: the constants' bytes")
    rc, out, err = run([kr, "--info", affine, "--info-json=-"])
    info = json.loads(out) if rc == 0 else {}
    check(rc == 0 and info["inputs"] == [{"name": "x", "dtype": "f32", "shape": ["N", 3]},
                                         {"name": "y", "dtype": "f32", "shape": ["N", 3]}]
          and info["outputs"][1] == {"name": "total", "dtype": "f32", "shape": ["N"]}
          and info["symbols"] == ["N"] and info["producer"] == f"kilnc {kiln_version}"
          and info["constants"] == {"count": 1, "named_weights": 0, "bytes": 12}
          and "inputs:" in err, "--info-json=- writes the description as JSON")
    # At -O2 the tanh chain and the reduction are two kernels; at -O0 every op is one.
    for level, count in (("-O2", 2), ("-O0", None)):
        rc, out, _ = run([kr, "--info", artifacts["affine" + level], "--info-json=-"])
        info = json.loads(out)
        kinds = [k["kind"] for k in info["kernels"]]
        check([k["index"] for k in info["kernels"]] == list(range(len(kinds)))
              and (count is None or len(kinds) == count) and "reduction" in kinds
              and {d.split(":")[0] for d in gpu_devices} <= {t["name"] for t in info["targets"]}
              and all(t["kernel_binaries"] >= len(kinds) for t in info["targets"]),
              f"--info-json {level}: kernels and targets")

    # User errors: exit 1 and a clear message.
    x_i32 = path("x_i32.npy")
    np.save(x_i32, x.astype(np.int32))
    x_wide = path("x_wide.npy")
    np.save(x_wide, np.zeros((4, 5), dtype=np.float32))
    y_n2 = path("y_n2.npy")
    np.save(y_n2, np.zeros((2, 3), dtype=np.float32))
    expect_user_error([kr, affine, "--input", f"z={path('x.npy')}"], r"no input named 'z'.*'x', 'y'",
                      "wrong input name")
    expect_user_error([kr, affine, "--input", f"x={x_i32}", "--dim", "N=4"],
                      r"input 'x': expected f32\[N, 3\], given i32\[4, 3\]", "wrong dtype")
    x_f64 = path("x_f64.npy")
    np.save(x_f64, x.astype(np.float64))
    expect_user_error([kr, affine, "--input", f"x={x_f64}"], r"input 'x': .*dtype f64 instead of f32", "float64 .npy file")
    expect_user_error([kr, affine, "--input", f"x={x_wide}"],
                      r"input 'x': expected f32\[N, 3\], given f32\[4, 5\] \(dimension 1 is 5 instead of 3\)",
                      "wrong shape")
    expect_user_error([kr, affine, "--input", f"x={path('x.npy')}", "--input", f"y={y_n2}"],
                      r"symbol N is 2 here but 4 in input 'x'", "symbol disagreement between inputs")
    expect_user_error([kr, affine, "--input", f"x={path('x.npy')}", "--dim", "N=9"],
                      r"--dim N=9 disagrees with input 'x', which has N = 4", "--dim disagreeing with an input")
    expect_user_error([kr, affine], r"input 'x' \(f32\[N, 3\]\) is random and its dimension N has no size: give --dim N=SIZE",
                      "missing --dim")
    rc, out, err = run([kr, affine, "--dim", "M=3", "--dim", "N=2"])
    check(rc == 0 and re.search(r"^kiln-run: warning: --dim M=3 is unused: the artifact has no symbolic "
                                r"dimension 'M' \(its symbols: N\)$", err, re.M) is not None,
          "a --dim for a symbol the artifact lacks is a warning")
    expect_user_error([kr, affine, "--input", f"x={path('nope.npy')}"], r"input 'x': .*nope\.npy", "missing .npy file")
    expect_user_error([kr, path("missing.kiln")], r"missing\.kiln.*no such file", "missing artifact")
    # Paths that are not regular files, refused before anything is read (a directory used to
    # abort kiln-run, /dev/zero never ends, a FIFO blocks forever).
    fifo = path("input.fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    for special, kind in ((work, "a directory"), ("/dev/zero", "a device"), (fifo, "a FIFO")):
        expect_user_error([kr, affine, "--dim", "N=2", "--input", f"x={special}"],
                          r"input 'x': cannot read .*: it is " + kind + ".*, not a regular file",
                          f"--input from {kind}")
        expect_user_error([kr, special], r"cannot read artifact .*: it is " + kind + ".*, not a regular file",
                          f"artifact that is {kind}")
    expect_user_error([kr, os.path.join(args.graphs, "affine.graph")], r"not a Kiln artifact", "foreign file")
    with open(affine, "rb") as f:
        data = bytearray(f.read())
    with open(path("truncated.kiln"), "wb") as f:
        f.write(data[: len(data) // 2])
    expect_user_error([kr, path("truncated.kiln")], r"truncated\.kiln: corrupt Kiln artifact", "truncated artifact")
    corrupted = bytearray(data)
    for i in range(8, len(corrupted), 7):
        corrupted[i] ^= 0x5A
    with open(path("corrupted.kiln"), "wb") as f:
        f.write(corrupted)
    expect_user_error([kr, path("corrupted.kiln")], r"corrupt", "corrupted artifact")
    expect_user_error([kr, affine, "--device=cuda:9"], r"unknown device 'cuda:9'; available devices: .*reference",
                      "unknown device")
    # --check on real devices: in an encoder block at B=8, S=128 (outputs up to ~95) f32 rounding
    # leaves errors near 3e-4 on elements close to zero, which a tolerance relative to each element
    # alone rejects; kiln-run holds every element to its output's scale (RMS) and must pass.
    encoder = path("encoder_block.kiln")
    run_ok([args.kilnc, os.path.join(args.graphs, "..", "..", "examples", "encoder_block.graph"),
            "-o", encoder], "compile examples/encoder_block.graph")
    for device in gpu_devices:
        out = run_ok([kr, encoder, f"--device={device}", "--dim", "B=8", "--dim", "S=128", "--check"],
                     f"encoder_block B=8 S=128 --check on {device}")
        check(re.search(r"^\s*y\s.*PASS", out, re.M) is not None, f"encoder_block --check passes on {device}")
    # No --device and no present device has the artifact's target (e.g. cuda on a machine
    # without CUDA): an error naming the targets and the devices, never a silent fall back to the
    # reference interpreter, which runs it only when asked for.
    _, kilnc_version, _ = run([args.kilnc, "--version"])
    m = re.search(r"targets:\s*(.*)", kilnc_version)
    build_targets = [t.strip() for t in m.group(1).split(",")] if m else []
    absent = [t for t in build_targets if not any(d.startswith(t + ":") for d in gpu_devices)]
    if absent:
        lonely = path(f"only_{absent[0]}.kiln")
        run_ok([args.kilnc, os.path.join(args.graphs, "affine.graph"), f"--target={absent[0]}", "-o", lonely],
               f"kilnc --target={absent[0]}")
        expect_user_error([kr, lonely, "--dim", "N=2"],
                          rf"the artifact has kernels for {absent[0]} only, and no device here runs them "
                          r"\(devices: .*reference\); .*--device=reference", "an artifact for no present device")
        out = run_ok([kr, lonely, "--dim", "N=2", "--device=reference", "--check"],
                     f"--device=reference runs a {absent[0]}-only artifact")
        check("device: reference" in out and "PASS" in out, "--device=reference still runs it")
    else:
        print(f"SKIP an artifact for no present device: every target of kilnc ({', '.join(build_targets)}) "
              "has a device here")

    expect_user_error([kr, affine, "--frobnicate"], r"unknown option '--frobnicate'", "unknown option")
    expect_user_error([kr, affine, "--bench-json=x.json"], r"--bench-json requires --bench", "--bench-json alone")
    expect_user_error([kr, affine, "--profile-trace", "t.json"], r"--profile-trace requires --profile",
                      "--profile-trace alone")
    expect_user_error([kr, affine, "--info", "--bench=3"], r"--info excludes --bench", "--info with a run option")
    expect_user_error([kr, affine, "--dim", "N=2", "--bench=2", "--bench-json=-", "--profile", "--profile-trace=-"],
                      r"only one JSON report can go to stdout", "two JSON reports on stdout")
    expect_user_error([kr, affine, "--dim", "N=2", "--bench=2", f"--bench-json={path('no', 'such', 'dir.json')}"],
                      r"cannot open .*dir\.json", "--bench-json into a missing folder")
    expect_user_error([kr, affine, "--dim", "N"], r"--dim: expects SYMBOL=SIZE", "--dim without a size")
    expect_user_error([kr, affine, "--dim=N=-1"], r"--dim: expects SYMBOL=SIZE with SIZE an integer >= 0",
                      "negative --dim")
    expect_user_error([kr, affine, "--input", "x"], r"--input: expects NAME=FILE\.npy", "--input without a file")
    expect_user_error([kr, affine, "--seed=-3"], r"--seed: expects an integer >= 0", "negative --seed")
    expect_user_error([kr, affine, "--bench"], r"--bench", "--bench without a value")
    expect_user_error([kr, affine, "--bench=0"], r"--bench", "bad --bench value")
    expect_user_error([kr], r"no artifact given", "no artifact")
    expect_user_error([kr, affine, affine], r"more than one artifact", "two artifacts")

    check_signed_artifacts(args.kilnc, kr, os.path.join(args.graphs, "affine.graph"), path)

    print(f"{len(FAILURES)} failed")
    return 1 if FAILURES else 0


def check_signed_artifacts(kilnc, kr, graph, path):
    """kilnc --new-signing-key / --sign and kiln-run --trusted-key (docs/security.md)."""
    key, other = path("build.key"), path("other.key")
    for k in (key, other):
        for f in (k, k + ".pub"):
            if os.path.exists(f):
                os.remove(f)
        run_ok([kilnc, f"--new-signing-key={k}"], "kilnc --new-signing-key")
    check(os.stat(key).st_mode & 0o777 == 0o600, "the secret key is mode 600")
    _expect_user_error("kilnc", [kilnc, f"--new-signing-key={key}"], r"never overwritten", "an existing key",
                       one_line=True)
    signed, plain = path("signed.kiln"), path("unsigned.kiln")
    run_ok([kilnc, graph, f"--sign={key}", "-o", signed], "kilnc --sign")
    run_ok([kilnc, graph, "-o", plain], "kilnc without --sign")
    run_ok([kr, signed, "--dim=N=2", f"--trusted-key={key}.pub"], "a signed artifact, trusted key")
    out = run_ok([kr, signed, "--info"], "--info of a signed artifact")
    check("not verified" in out, "--info says an unchecked signature is not verified")
    out = run_ok([kr, signed, "--info", f"--trusted-key={key}.pub"], "--info with the trusted key")
    check("(signature verified: a trusted key)" in out, "--info says the signature was verified")
    # Any of several trusted keys will do.
    run_ok([kr, signed, "--dim=N=2", f"--trusted-key={other}.pub", f"--trusted-key={key}.pub"],
           "one of two trusted keys")
    expect_user_error([kr, plain, f"--trusted-key={key}.pub"], r"the artifact is not signed, and only artifacts signed by a trusted key",
                      "an unsigned artifact with a trusted key")
    expect_user_error([kr, signed, f"--trusted-key={other}.pub"], r"not a trusted key", "another signer")
    with open(signed, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0x10
    changed = path("changed.kiln")
    with open(changed, "wb") as f:
        f.write(data)
    expect_user_error([kr, changed, f"--trusted-key={key}.pub"], r"signature does not match its contents",
                      "a changed signed artifact")
    expect_user_error([kr, signed, f"--trusted-key={key}"], r"is a secret signing key", "a secret key as trusted")
    os.chmod(key, 0o644)
    _expect_user_error("kilnc", [kilnc, graph, f"--sign={key}", "-o", path("x.kiln")], r"chmod 600",
                       "a secret key others may read", one_line=True)
    os.chmod(key, 0o600)
    _expect_user_error("kilnc", [kilnc, graph, f"--sign={key}", "-o", "-"], r"cannot sign an artifact written to stdout",
                       "signing to stdout", one_line=True)
    _expect_user_error("kilnc", [kilnc, graph, f"--sign={key}", "--emit=ir"], r"--sign signs artifacts",
                       "--sign with --emit", one_line=True)


if __name__ == "__main__":
    sys.exit(main())
