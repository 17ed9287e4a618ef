#!/usr/bin/python3
"""kiln-bench end to end: its JSON report (every key bench/*.py reads, with consistent values),
--dump-dir (the inputs it used and the first run's outputs, the same as kiln-run computes for the
same seed; bf16 written as f32), .npy inputs (bf16 from f32 and from raw uint16 bits), profiles
on every device, and its command line (both option spellings, one-line usage errors, exit 1).
"""
import argparse
import json
import os
import re
import sys

import numpy as np

from tool_checks import FAILURES, check, load_dir, run, run_ok
from tool_checks import expect_user_error as _expect_user_error


def expect_error(cmd, pattern, what):
    _expect_user_error("kiln-bench", cmd, pattern, what, one_line=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--kiln-bench", required=True)
    ap.add_argument("--graphs", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    kb, kr, work = args.kiln_bench, args.kiln_run, args.work
    os.makedirs(work, exist_ok=True)

    def path(*p):
        return os.path.join(work, *p)

    out = run_ok([kb, "--help"], "--help")
    check(out.startswith("usage: kiln-bench ARTIFACT.kiln [options]\n")
          and all(f in out for f in ("--reps=R", "--runs-per-rep=K", "--json=FILE", "--dump-dir=DIR", "--profile=P",
                                      "--input NAME=FILE.npy", "--dim SYMBOL=SIZE", "--env NAME=VALUE")),
          "--help shows usage and every option")

    artifacts = {}
    for name in ("affine", "dtypes"):
        art = path(name + ".kiln")
        run_ok([args.kilnc, os.path.join(args.graphs, name + ".graph"), "-o", art], f"kilnc {name}.graph")
        artifacts[name] = art
    _, listing, _ = run([kr, "--list-devices"])
    gpu_devices = sorted(set(re.findall(r"^\s*((?:opencl|vulkan|cuda):\d+)", listing, re.M)))

    # The JSON report on every device, with a profile; options in both spellings.
    fast = ["--warmup=1", "--warmup-ms", "0", "--reps", "4", "--runs-per-rep=3"]
    for device in ["reference"] + gpu_devices:
        report_path = path(f"bench_{device.replace(':', '_')}.json")
        dump = path(f"dump_{device.replace(':', '_')}")
        out = run_ok([kb, artifacts["affine"], f"--device={device}", "--dim", "N=5", "--seed=2", "--profile", "2",
                      f"--json={report_path}", "--dump-dir", dump, "--env", "KILN_TEST_UNUSED=1"] + fast,
                     f"kiln-bench on {device}")
        with open(report_path) as f:
            r = json.load(f)
        check(r["artifact"] == artifacts["affine"] and r["device"] == device and r["device_description"]
              and r["env"] == {"KILN_TEST_UNUSED": "1"} and r["symbols"] == {"N": 5}
              and r["run_call"] == "kiln_session_run_async+kiln_event_wait", f"{device}: what ran")
        check([(t["name"], t["dtype"], t["shape"], t["bytes"]) for t in r["inputs"]]
              == [("x", "f32", [5, 3], 60), ("y", "f32", [5, 3], 60)]
              and all(t["source"] == "random (seed 2)" for t in r["inputs"])
              and [(t["name"], t["shape"], t["bytes"]) for t in r["outputs"]] == [("out", [5, 3], 60), ("total", [5], 20)],
              f"{device}: inputs and outputs")
        check(r["reps"] == 4 and r["runs_per_rep"] == 3 and len(r["per_rep_ms"]) == 4 and r["warmup_runs"] >= 1
              and 0 < r["min_ms"] <= r["median_ms"] <= r["p90_ms"] <= max(r["per_rep_ms"])
              and r["min_ms"] == min(r["per_rep_ms"]) and r["median_ms"] in r["per_rep_ms"],
              f"{device}: per-run times (nearest-rank median and p90 of the repetitions)")
        loads = [r[p + k] for p in ("", "reload_") for k in ("artifact_load_ms", "session_create_ms", "bind_ms",
                                                              "first_run_ms", "first_result_ms")]
        check(all(v >= 0 for v in loads) and r["first_result_ms"] >= r["first_run_ms"], f"{device}: load times")
        p = r["profile"]
        check(p["available"] and p["runs"] == 2 and len(p["kernels"]) == 2 and p["sum_median_ms"] > 0
              and all(isinstance(k["kernel_index"], int) and k["median_ms"] >= 0 for k in p["kernels"])
              and ("host wall time" in p["clock"] if device == "reference" else "device timer" in p["clock"]),
              f"{device}: profile")
        check(re.search(r"^per run: median [\d.]+ ms  min [\d.]+ ms  p90 [\d.]+ ms$", out, re.M) is not None,
              f"{device}: the summary")
        # The dump: the random inputs kiln-run makes for the same seed, and the first run's
        # outputs, which kiln-run computes from them.
        dumped = load_dir(dump)
        ran = path(f"run_{device.replace(':', '_')}")
        run_ok([kr, artifacts["affine"], f"--device={device}", "--dim", "N=5", "--seed=2", "--output-dir", ran],
               f"kiln-run with kiln-bench's seed on {device}")
        outputs = load_dir(ran)
        check(set(dumped) == {"x", "y", "out", "total"} and dumped["x"].shape == (5, 3)
              and np.all(np.abs(dumped["x"]) <= 1) and not np.array_equal(dumped["x"], dumped["y"])
              and np.array_equal(dumped["out"], outputs["out"]) and np.array_equal(dumped["total"], outputs["total"]),
              f"{device}: --dump-dir holds kiln-run's inputs and outputs for the same seed")

    # --json=-: stdout is the JSON alone, the summary goes to stderr.
    rc, out, err = run([kb, artifacts["affine"], "--device=reference", "--dim=N=2", "--json=-"] + fast)
    check(rc == 0 and json.loads(out)["symbols"] == {"N": 2} and "per run: median" in err,
          "--json=- writes only JSON to stdout")

    # bf16 through .npy: dumped as f32, read from f32 or from raw bits ('<u2').
    dtypes_inputs = {
        "h": np.array([0.5, -1.25, 3.0, 100.0], dtype=np.float16), "b": np.array([True, False, False, True]),
        "i": np.array([1, -2, 3, 0], dtype=np.int32), "s": np.array([-128, 0, 127], dtype=np.int8),
        "u": np.array([0, 55, 56], dtype=np.uint8), "l": np.array([-(2**40), 7], dtype=np.int64),
    }
    bf_values = np.array([1.5, -0.25], dtype=np.float32)
    for form, bf in (("f32", bf_values), ("u2", (bf_values.view(np.uint32) >> 16).astype(np.uint16))):
        cmd = [kb, artifacts["dtypes"], "--device=reference", "--dump-dir", path(f"dump_bf_{form}")] + fast
        for k, v in list(dtypes_inputs.items()) + [("bf", bf)]:
            np.save(path(f"bf_{form}_{k}.npy"), v)
            cmd += ["--input", f"{k}={path(f'bf_{form}_{k}.npy')}"]
        run_ok(cmd, f"bf16 input from a {form} file")
        got = load_dir(path(f"dump_bf_{form}"))
        check(got["bf"].dtype == np.float32 and np.array_equal(got["bf"], bf_values)
              and got["bf2"].dtype == np.float32 and np.array_equal(got["bf2"], -bf_values),
              f"bf16 from a {form} file: dumped as f32, negated")

    # Usage and runtime errors: one line, exit 1.
    a = artifacts["affine"]
    expect_error([kb, a, "--frobnicate"], r"unknown option '--frobnicate'", "unknown option")
    expect_error([kb, a, "--reps=0"], r"--reps", "--reps=0")
    expect_error([kb, a, "--warmup-ms=-1"], r"--warmup-ms: expects a number >= 0", "negative --warmup-ms")
    expect_error([kb, a, "--dim", "N"], r"--dim: expects SYMBOL=SIZE", "--dim without a size")
    expect_error([kb, a, "--env", "X"], r"--env: expects NAME=VALUE", "--env without a value")
    expect_error([kb], r"artifact is required", "no artifact")
    expect_error([kb, a, a], r"more than one artifact", "two artifacts")
    expect_error([kb, a, "--device=reference", "--input", f"z={path('bf_f32_h.npy')}"],
                 r"no input named 'z'", "unknown input")
    expect_error([kb, a, "--device=reference"] + fast, r"give --dim N=SIZE", "missing --dim")
    expect_error([kb, path("missing.kiln")], r"missing\.kiln", "missing artifact")

    print(f"{len(FAILURES)} failed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
