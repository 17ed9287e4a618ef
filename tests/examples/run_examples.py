#!/usr/bin/python3
"""Compiles and runs every examples/*.graph with kilnc and kiln-run (reference device).

For each example: compile at -O0 and -O2, run both on the same inputs with --check, and require
identical-within-tolerance outputs. For mlp.graph the outputs are also recomputed here with
NumPy from the safetensors weights, as an oracle independent of Kiln's interpreter.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

SYMBOLS = {"N": 3, "B": 2, "S": 5}


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32"
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[base + b : base + e], dtype=np.float32).reshape(info["shape"])
    return out


def mlp_reference(x, weights):
    x = x.astype(np.float64)
    h = x @ weights["fc1.weight"] + weights["fc1.bias"]
    a = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    logits = a @ weights["fc2.weight"] + weights["fc2.bias"]
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--examples", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)

    graphs = sorted(f for f in os.listdir(args.examples) if f.endswith(".graph"))
    assert graphs, "no examples found"
    passed = failed = 0
    for g in graphs:
        name = g[: -len(".graph")]
        src = os.path.join(args.examples, g)
        try:
            outputs = {}
            for level in ("-O0", "-O2"):
                art = os.path.join(args.work, f"{name}{level}.kiln")
                run([args.kilnc, src, level, "-o", art])
                out_dir = os.path.join(args.work, f"{name}{level}")
                os.makedirs(out_dir, exist_ok=True)
                cmd = [args.kiln_run, art, "--seed=7", "--check", "--output-dir", out_dir]
                for sym, size in SYMBOLS.items():
                    cmd += ["--dim", f"{sym}={size}"]
                if name == "mlp":
                    x = np.random.default_rng(3).standard_normal((SYMBOLS["N"], 784)).astype(np.float32)
                    np.save(os.path.join(args.work, "mlp_x.npy"), x)
                    cmd += ["--input", f"x={os.path.join(args.work, 'mlp_x.npy')}"]
                    # --dim for a symbol that the given input already binds must agree with it.
                run(cmd)
                outputs[level] = {f: np.load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))}
            assert outputs["-O0"].keys() == outputs["-O2"].keys() and outputs["-O0"], "output files differ"
            for f, a in outputs["-O0"].items():
                b = outputs["-O2"][f]
                assert a.shape == b.shape and a.dtype == b.dtype, f"{f}: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
                np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-4, atol=1e-5,
                                           err_msg=f"{name}: -O0 and -O2 outputs differ for {f}")
            if name == "mlp":
                weights = read_safetensors(os.path.join(args.examples, "mlp.safetensors"))
                x = np.load(os.path.join(args.work, "mlp_x.npy"))
                expected = mlp_reference(x, weights)
                got = outputs["-O2"]["probs.npy"]
                np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6, err_msg="mlp vs NumPy")
                assert np.allclose(got.sum(axis=-1), 1.0, atol=1e-5)
            print(f"PASS {name}")
            passed += 1
        except Exception as e:  # report every example, then fail
            print(f"FAIL {name}: {e}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
