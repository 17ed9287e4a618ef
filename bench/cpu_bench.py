#!/usr/bin/env python3
"""Kiln's cpu target beside onnxruntime's CPU execution provider, in the same run, with the same
thread count: latency per model and batch size, kilnc's compile time for the cpu target, and the
largest difference between the two outputs.

Models (float32):
  mlp, transformer  the example ONNX models (examples/onnx/mlp.onnx, transformer_encoder.onnx;
                    symbolic batch, bound with kiln-bench --dim)
  resnet18, mobilenetv2, bert_encoder
                    bench/make_compile_models.py's models (torchvision layouts, a 6-layer BERT-base
                    encoder at sequence 128), written once per batch size into --work

For each (model, batch):
  - kilnc MODEL.onnx --target=cpu (wall time, warm compile cache off: --no-cache);
  - Kiln: kiln-bench X.kiln --device=cpu:0 --device-option cpu.threads=T (inputs and outputs in the
    session's buffers; at least 10 runs and 200 ms of warm-up, then 30 repetitions of K runs
    filling about 20 ms; the median per-run time);
  - onnxruntime: InferenceSession with intra_op_num_threads=T, inter_op_num_threads=1,
    ORT_SEQUENTIAL, all graph optimizations, timed the same way (warm-up, 30 repetitions, median);
  - both run the same seeded standard-normal input; the table gives max |kiln - ort| over the
    output and that relative to max |ort|.
This is a program, not a test: nothing is asserted about the numbers. The issue's target
(docs/performance.md): Kiln within 1.5x of onnxruntime's latency.

Usage: .venv/bin/python bench/cpu_bench.py [--build build] [--threads N] [--batches 1,8]
                                           [--models LIST] [--work DIR] [--json FILE]
Run it with the test virtualenv's Python (scripts/setup.sh installs onnxruntime there).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = {"mlp": ("mlp.onnx", "x", [16]), "transformer": ("transformer_encoder.onnx", "x", [8, 16])}
REAL = ("resnet18", "mobilenetv2", "bert_encoder")


def model_file(name, batch, work):
    """(ONNX path, input name, input shape, kiln-bench --dim list) of one model at one batch."""
    if name in EXAMPLES:
        file, input_name, rest = EXAMPLES[name]
        onnx_path = os.path.join(ROOT, "examples", "onnx", file)
        dim = "N" if name == "mlp" else "batch"
        return onnx_path, input_name, [batch] + rest, ["--dim", "%s=%d" % (dim, batch)]
    out = os.path.join(work, "b%d" % batch)
    path = os.path.join(out, name + ".onnx")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(HERE, "make_compile_models.py"), out, "--models", name,
                        "--batch", str(batch), "--no-ort-check"], check=True, stdout=subprocess.DEVNULL)
    shape = [batch, 128, 768] if name == "bert_encoder" else [batch, 3, 224, 224]
    return path, "x", shape, []


def time_callable(run):
    """Median per-call seconds: warm-up of at least 10 calls and 0.2 s, then 30 repetitions of K calls
    filling about 20 ms (kiln-bench's method)."""
    start, n = time.perf_counter(), 0
    while n < 10 or time.perf_counter() - start < 0.2:
        run()
        n += 1
    per = (time.perf_counter() - start) / n
    k = max(1, int(0.02 / per))
    reps = []
    for _ in range(30):
        t = time.perf_counter()
        for _ in range(k):
            run()
        reps.append((time.perf_counter() - t) / k)
    return statistics.median(reps)


def ort_latency(onnx_path, input_name, x, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    feeds = {input_name: x}
    out = session.run(None, feeds)[0]
    return time_callable(lambda: session.run(None, feeds)), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--models", default=",".join(list(EXAMPLES) + list(REAL)))
    ap.add_argument("--work", default="/tmp/kiln-cpu-bench")
    ap.add_argument("--json", help="also write the rows as JSON to FILE")
    args = ap.parse_args()
    kilnc = os.path.join(args.build, "bin", "kilnc")
    bench = os.path.join(args.build, "bin", "kiln-bench")
    os.makedirs(args.work, exist_ok=True)
    rows = []
    print("| model | batch | kilnc --target=cpu | Kiln ms | onnxruntime ms | Kiln / ort | max abs diff (rel) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for batch in [int(b) for b in args.batches.split(",")]:
        for name in [m.strip() for m in args.models.split(",") if m.strip()]:
            onnx_path, input_name, shape, dims = model_file(name, batch, args.work)
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            tag = "%s_b%d" % (name, batch)
            x_path = os.path.join(args.work, tag + ".x.npy")
            np.save(x_path, x)
            artifact = os.path.join(args.work, tag + ".kiln")
            t = time.perf_counter()
            subprocess.run([kilnc, onnx_path, "--target=cpu", "--no-cache", "-o", artifact], check=True)
            compile_s = time.perf_counter() - t
            dump = os.path.join(args.work, tag + ".out")
            r = subprocess.run([bench, artifact, "--device=cpu:0", "--device-option", "cpu.threads=%d" % args.threads,
                                "--input", "%s=%s" % (input_name, x_path), "--dump-dir", dump, "--json", "-"] + dims,
                               check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            kiln_ms = json.loads(r.stdout)["median_ms"]
            ort_s, ort_out = ort_latency(onnx_path, input_name, x, args.threads)
            outputs = [f for f in sorted(os.listdir(dump)) if f.endswith(".npy") and not f.startswith(input_name + ".")]
            kiln_out = np.load(os.path.join(dump, outputs[0]))
            diff = float(np.max(np.abs(kiln_out.astype(np.float64) - ort_out)))
            rel = diff / max(float(np.max(np.abs(ort_out))), 1e-30)
            row = dict(model=name, batch=batch, threads=args.threads, kilnc_s=compile_s, kiln_ms=kiln_ms,
                       ort_ms=ort_s * 1e3, ratio=kiln_ms / (ort_s * 1e3), max_abs_diff=diff, max_rel_diff=rel)
            rows.append(row)
            print("| %s | %d | %.2f s | %.3f | %.3f | %.2fx | %.1e (%.1e) |" % (
                name, batch, compile_s, kiln_ms, row["ort_ms"], row["ratio"], diff, rel), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
