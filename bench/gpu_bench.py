#!/usr/bin/env python3
"""The run-time benchmark suite (issue 4): Kiln beside PyTorch on one device, in one run.

usage:
  gpu_bench.py --kilnc PATH --kiln-bench PATH [--device cuda:0] --out DIR [--small] [options]

For every case in CASES it: compiles bench/graphs/NAME.graph with kilnc (wall time, median of
3), runs kiln-bench (inputs and outputs in device buffers, median per-run time, per-kernel
profile), checks Kiln's output against a float64 NumPy reference on the same inputs, times the
same math in PyTorch eager and torch.compile on the same inputs, and relates everything to two
limits measured in the same run: device-to-device copy bandwidth and torch.matmul's f16 TFLOP/s.
It writes DIR/results.json (everything, every command's output included) and DIR/results.md
(the tables, also printed on stdout): two files, as the device tool brings back at most eight.
bench/README.md describes the method; each case's byte and FLOP formula is in CASES below and
in results.json.

Without PyTorch (or without a CUDA device for it) the PyTorch columns are skipped with the
reason, and the limits fall back to the host's memcpy bandwidth and float32 matmul rate through
NumPy, which are the right limits only for CPU devices such as PoCL or lavapipe (the tables say
which limit was used). --small runs tiny shapes for a smoke test.
"""
import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import make_bench_weights  # noqa: E402  (after the path insert)

try:
    import torch
    import torch.nn.functional as F
    TORCH_IMPORT_ERROR = None
except ImportError as error:  # the development machines have no PyTorch
    torch = None
    TORCH_IMPORT_ERROR = f"PyTorch is not importable here ({error})"

GIB = 1 << 30
F16, F32 = 2, 4  # bytes per element


# ---- Cases ------------------------------------------------------------------------------------
#
# kind: "bandwidth" cases are judged by achieved GB/s against the copy bandwidth, "compute" by
# TFLOP/s against torch.matmul, "latency" by time against torch.compile. bytes(d) is the least
# device-memory traffic (every input read once, every output written once); flops(d) counts
# multiply-adds as 2 and ignores O(elements) epilogues where a matrix product dominates.

def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax_ref(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm_ref(x, scale, bias, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def ew_chain_ref(i, w):
    a = i["x"] + i["bias"]
    d = np.tanh(a * 0.5) - 0.25
    return np.sqrt(np.maximum(np.exp(d * d), 0.1))


def mlp4_ref(i, w):
    h = i["x"]
    for layer in range(make_bench_weights.MLP_LAYERS):
        h = h @ w[f"layer{layer}.weight"] + w[f"layer{layer}.bias"]
        if layer + 1 < make_bench_weights.MLP_LAYERS:
            h = gelu_tanh(h)
    return h


def encoder_ref(i, w, heads=12):
    x = i["x"]
    b, s, d = x.shape

    def split_heads(t):
        return t.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)

    q, k, v = (split_heads(x @ w[f"attn.{n}.weight"] + w[f"attn.{n}.bias"]) for n in "qkv")
    probs = softmax_ref(q @ k.transpose(0, 1, 3, 2) * (1.0 / math.sqrt(d // heads)))
    ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
    h = layer_norm_ref(x + ctx @ w["attn.out.weight"] + w["attn.out.bias"], w["ln1.scale"], w["ln1.bias"])
    f = gelu_tanh(h @ w["ffn.in.weight"] + w["ffn.in.bias"]) @ w["ffn.out.weight"] + w["ffn.out.bias"]
    return layer_norm_ref(h + f, w["ln2.scale"], w["ln2.bias"])


# PyTorch versions of the cases. Each takes the weights (held like nn.Module parameters, in
# nn.Linear's [out, in] layout) and returns a function of the graph's inputs, in signature order.

def torch_ew_chain(w):
    def fn(x, bias):
        d = torch.tanh((x + bias) * 0.5) - 0.25
        return torch.sqrt(torch.clamp_min(torch.exp(d * d), 0.1))
    return fn


def torch_softmax(w):
    return lambda x: torch.softmax(x, dim=-1)


def torch_layer_norm(w):
    return lambda x, scale, bias: F.layer_norm(x, (x.shape[-1],), scale, bias, eps=1e-5)


def torch_matmul_bias_gelu(w):
    # addmm: the bias rides in cuBLAS's beta term, the best eager form of a dense layer.
    return lambda a, weight, b: F.gelu(torch.addmm(b, a, weight), approximate="tanh")


def torch_mlp4(w):
    layers = [(w[f"layer{n}.weight"].t().contiguous(), w[f"layer{n}.bias"])
              for n in range(make_bench_weights.MLP_LAYERS)]

    def fn(x):
        h = x
        for n, (weight, bias) in enumerate(layers):
            h = F.linear(h, weight, bias)
            if n + 1 < len(layers):
                h = F.gelu(h, approximate="tanh")
        return h
    return fn


def torch_encoder(w, heads=12):
    # The same math as the graph, op for op (not scaled_dot_product_attention, which would be a
    # different algorithm).
    lin = {n: (w[f"{n}.weight"].t().contiguous(), w[f"{n}.bias"])
           for n in ("attn.q", "attn.k", "attn.v", "attn.out", "ffn.in", "ffn.out")}
    ln1 = (w["ln1.scale"], w["ln1.bias"])
    ln2 = (w["ln2.scale"], w["ln2.bias"])

    def fn(x):
        b, s, d = x.shape

        def split_heads(t):
            return t.view(b, s, heads, d // heads).transpose(1, 2)
        q, k, v = (split_heads(F.linear(x, *lin[f"attn.{n}"])) for n in "qkv")
        probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d // heads)), dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, d)
        h = F.layer_norm(x + F.linear(ctx, *lin["attn.out"]), (d,), *ln1, eps=1e-5)
        f = F.linear(F.gelu(F.linear(h, *lin["ffn.in"]), approximate="tanh"), *lin["ffn.out"])
        return F.layer_norm(h + f, (d,), *ln2, eps=1e-5)
    return fn


def encoder_flops(d):
    b, s, m = d["B"], d["S"], make_bench_weights.ENCODER_D
    tokens = b * s
    projections = 2 * tokens * m * m * 4              # q, k, v, out
    ffn = 2 * tokens * m * make_bench_weights.ENCODER_FFN * 2
    attention = 2 * b * s * s * m * 2                 # q k^T and probs v, over all heads
    return projections + ffn + attention


def weight_bytes(file_name):
    return sum(t.nbytes for t in make_bench_weights.weight_tensors(file_name).values())


CASES = [
    dict(name="ew_chain", graph="ew_chain.graph", kind="bandwidth", dtype="f32",
         dims={"N": 1 << 18}, small_dims={"N": 256},
         bytes=lambda d: F32 * (2 * d["N"] * 1024 + 1024), bytes_formula="4 * (2*N*1024 + 1024)",
         flops=lambda d: 8 * d["N"] * 1024, flops_formula="8 * N*1024 (one per op)",
         reference=ew_chain_ref, torch_fn=torch_ew_chain, tolerance=1e-5),
    dict(name="softmax_f32", graph="softmax_f32.graph", kind="bandwidth", dtype="f32",
         dims={"N": 8192}, small_dims={"N": 16},
         bytes=lambda d: F32 * 2 * d["N"] * 8192, bytes_formula="4 * 2 * N*8192",
         flops=lambda d: 5 * d["N"] * 8192, flops_formula="5 * N*8192 (max, sub, exp, sum, div)",
         reference=lambda i, w: softmax_ref(i["x"]), torch_fn=torch_softmax, tolerance=1e-5),
    dict(name="softmax_f16", graph="softmax_f16.graph", kind="bandwidth", dtype="f16",
         dims={"N": 8192}, small_dims={"N": 16},
         bytes=lambda d: F16 * 2 * d["N"] * 8192, bytes_formula="2 * 2 * N*8192",
         flops=lambda d: 5 * d["N"] * 8192, flops_formula="5 * N*8192",
         reference=lambda i, w: softmax_ref(i["x"]), torch_fn=torch_softmax, tolerance=2e-3),
    dict(name="layer_norm_f32", graph="layer_norm_f32.graph", kind="bandwidth", dtype="f32",
         dims={"N": 16384}, small_dims={"N": 32},
         bytes=lambda d: F32 * (2 * d["N"] * 4096 + 2 * 4096), bytes_formula="4 * (2*N*4096 + 2*4096)",
         flops=lambda d: 8 * d["N"] * 4096, flops_formula="8 * N*4096",
         reference=lambda i, w: layer_norm_ref(i["x"], i["scale"], i["bias"]), torch_fn=torch_layer_norm,
         tolerance=1e-5),
    dict(name="layer_norm_f16", graph="layer_norm_f16.graph", kind="bandwidth", dtype="f16",
         dims={"N": 16384}, small_dims={"N": 32},
         bytes=lambda d: F16 * (2 * d["N"] * 4096 + 2 * 4096), bytes_formula="2 * (2*N*4096 + 2*4096)",
         flops=lambda d: 8 * d["N"] * 4096, flops_formula="8 * N*4096",
         reference=lambda i, w: layer_norm_ref(i["x"], i["scale"], i["bias"]), torch_fn=torch_layer_norm,
         tolerance=2e-3),
    dict(name="matmul_bias_gelu_f16", graph="matmul_bias_gelu_f16.graph", kind="compute", dtype="f16",
         dims={"M": 4096}, small_dims={"M": 8},
         bytes=lambda d: F16 * (d["M"] * 4096 * 2 + 4096 * 4096 + 4096),
         bytes_formula="2 * (M*4096 (a) + 4096*4096 (w) + 4096 (b) + M*4096 (y))",
         flops=lambda d: 2 * d["M"] * 4096 * 4096, flops_formula="2 * M*4096*4096",
         reference=lambda i, w: gelu_tanh(i["a"] @ i["w"] + i["b"]), torch_fn=torch_matmul_bias_gelu,
         tolerance=2e-3),
    dict(name="mlp4_f16", graph="mlp4_f16.graph", kind="latency", dtype="f16",
         variants=[{"B": 1}, {"B": 32}], small_variants=[{"B": 1}, {"B": 4}],
         weights="mlp4_f16.safetensors",
         bytes=lambda d: F16 * (4 * (1024 * 1024 + 1024) + 2 * d["B"] * 1024),
         bytes_formula="2 * (4*(1024*1024 + 1024) (weights) + 2*B*1024 (x, y))",
         flops=lambda d: 2 * d["B"] * 1024 * 1024 * 4, flops_formula="2 * B*1024*1024 * 4",
         reference=mlp4_ref, torch_fn=torch_mlp4, tolerance=1e-2),
    dict(name="encoder_layer_f16", graph="encoder_layer_f16.graph", kind="latency", dtype="f16",
         variants=[{"B": 1, "S": 128}, {"B": 32, "S": 128}],
         small_variants=[{"B": 1, "S": 16}, {"B": 2, "S": 16}],
         weights="encoder_layer_f16.safetensors",
         bytes=lambda d: weight_bytes("encoder_layer_f16.safetensors") + F16 * 2 * d["B"] * d["S"] * 768,
         bytes_formula="weights (7.1 M f16) + 2 * 2*B*S*768 (x, y)",
         flops=encoder_flops,
         flops_formula="2*B*S*768*768*4 (q,k,v,out) + 2*B*S*768*3072*2 (ffn) + 2*B*S*S*768*2 (attention)",
         reference=encoder_ref, torch_fn=torch_encoder, tolerance=1e-2),
]


# ---- Small helpers ----------------------------------------------------------------------------

def log(message):
    print(f"[gpu_bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def dims_label(dims):
    return ", ".join(f"{k}={v}" for k, v in dims.items())


# Every command's output, kept for results.json: the device tool brings back at most 8 files, so
# the suite writes two (results.json, results.md) rather than a folder of logs.
COMMAND_LOG = []


def run_command(argv, env=None):
    """Runs argv; returns (wall seconds, completed process). The output goes to COMMAND_LOG."""
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    wall = time.perf_counter() - start
    COMMAND_LOG.append({"argv": argv, "exit": proc.returncode, "wall_s": round(wall, 4),
                        "output": proc.stdout[-6000:]})
    return wall, proc


def relative_error(out, ref, chunk=1 << 24):
    """‖out − ref‖ / ‖ref‖ in float64, the max abs error, and the count of non-finite outputs
    (which make the error infinite). In chunks, so a 2^28-element check stays a few GB."""
    out, ref = np.asarray(out).ravel(), np.asarray(ref).ravel()
    if out.shape != ref.shape:
        return {"rel_l2": float("inf"), "max_abs": float("inf"), "nonfinite": 0,
                "note": f"{out.size} elements against a reference of {ref.size}"}
    sq_diff = sq_ref = max_abs = 0.0
    nonfinite = 0
    for start in range(0, out.size, chunk):
        o = out[start:start + chunk].astype(np.float64)
        r = ref[start:start + chunk].astype(np.float64)
        finite = np.isfinite(o)
        nonfinite += int(o.size - np.count_nonzero(finite))
        d = np.abs(o - r)
        sq_diff += float(np.dot(d[finite], d[finite]))
        sq_ref += float(np.dot(r, r))
        if d.size:
            max_abs = max(max_abs, float(d.max()))  # NaN when any output is NaN
    rel = math.sqrt(sq_diff / sq_ref) if sq_ref > 0 else float("inf")
    return {"rel_l2": rel if nonfinite == 0 else float("inf"), "max_abs": max_abs, "nonfinite": nonfinite}


def check_result(err, tolerance):
    err = dict(err)
    err["tolerance"] = tolerance
    err["pass"] = err["nonfinite"] == 0 and err["rel_l2"] <= tolerance
    return err


def json_safe(value):
    """Strict JSON: non-finite floats become the strings "inf", "-inf", "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path, results):
    with open(path, "w") as f:
        json.dump(json_safe(results), f, indent=1, default=str)


def fmt(value, digits=3):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}f}"


def fmt_rate(value):
    """Rates to three significant digits: 2950, 41.2, 0.0123."""
    return "—" if value is None else f"{value:.3g}"


def fmt_ratio(value):
    return "—" if value is None else f"{value:.2f}x"


def div(a, b):
    return a / b if a is not None and b not in (None, 0) else None


# ---- Timing PyTorch ---------------------------------------------------------------------------

class TorchTimer:
    """Times a callable two ways after warm-up (at least `warmup` calls and `warmup_s`):
    sync: host wall time of call + torch.cuda.synchronize per run, exactly how kiln-bench times
    a Kiln run (one host wait per run); events: CUDA events around K back-to-back calls, the
    device time per call when launches can queue ahead. Median over `reps` repetitions of K
    calls, K chosen to fill `rep_s`."""

    def __init__(self, warmup, warmup_s, reps, rep_s):
        self.warmup, self.warmup_s, self.reps, self.rep_s = warmup, warmup_s, reps, rep_s

    def _calls_per_rep(self, fn):
        torch.cuda.synchronize()
        start, n = time.perf_counter(), 0
        while n < self.warmup or time.perf_counter() - start < self.warmup_s:
            fn()
            n += 1
        torch.cuda.synchronize()
        per_call = (time.perf_counter() - start) / n
        return max(1, min(100000, math.ceil(self.rep_s / max(per_call, 1e-7))))

    def time(self, fn):
        k = self._calls_per_rep(fn)
        sync_ms = []
        for _ in range(self.reps):
            start = time.perf_counter()
            for _ in range(k):
                fn()
                torch.cuda.synchronize()
            sync_ms.append((time.perf_counter() - start) * 1e3 / k)
        event_ms = []
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(self.reps):
            begin.record()
            for _ in range(k):
                fn()
            end.record()
            end.synchronize()
            event_ms.append(begin.elapsed_time(end) / k)
        return {"sync_ms": statistics.median(sync_ms), "event_ms": statistics.median(event_ms),
                "calls_per_rep": k, "reps": self.reps}


# ---- Limits -----------------------------------------------------------------------------------

def measure_limits(args, torch_device, timer):
    limits = {}
    if torch_device is not None:
        nbytes = (256 << 20) if args.small else GIB
        src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=torch_device)
        dst = torch.empty_like(src)
        t = timer.time(lambda: dst.copy_(src))
        limits["copy"] = {"source": "torch device-to-device copy (events)", "bytes": 2 * nbytes,
                          "ms": t["event_ms"], "sync_ms": t["sync_ms"],
                          "gb_per_s": 2 * nbytes / (t["event_ms"] * 1e-3) / 1e9,
                          "note": f"dst.copy_(src) of {nbytes >> 20} MiB, counting bytes read + written"}
        del src, dst
        n = 1024 if args.small else 4096
        a = torch.randn(n, n, dtype=torch.float16, device=torch_device)
        b = torch.randn(n, n, dtype=torch.float16, device=torch_device)
        t = timer.time(lambda: torch.matmul(a, b))
        flops = 2 * n ** 3
        limits["matmul"] = {"source": f"torch.matmul f16 {n}x{n}x{n} (events)", "flops": flops,
                            "ms": t["event_ms"], "sync_ms": t["sync_ms"],
                            "tflop_per_s": flops / (t["event_ms"] * 1e-3) / 1e12,
                            "tflop_per_s_sync": flops / (t["sync_ms"] * 1e-3) / 1e12}
        del a, b
        torch.cuda.empty_cache()
    else:
        # Host limits: the right ceiling for CPU devices (PoCL, lavapipe), a placeholder otherwise.
        nbytes = (64 << 20) if args.small else GIB
        src = np.random.default_rng(1).integers(0, 255, nbytes, dtype=np.uint8)
        dst = np.empty_like(src)
        times = []
        for _ in range(7):
            start = time.perf_counter()
            np.copyto(dst, src)
            times.append(time.perf_counter() - start)
        ms = statistics.median(times) * 1e3
        limits["copy"] = {"source": "host memcpy through NumPy (no PyTorch device)", "bytes": 2 * nbytes,
                          "ms": ms, "gb_per_s": 2 * nbytes / (ms * 1e-3) / 1e9}
        n = 512 if args.small else 2048
        a = np.random.default_rng(2).standard_normal((n, n), dtype=np.float32)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            a @ a
            times.append(time.perf_counter() - start)
        ms = statistics.median(times) * 1e3
        limits["matmul"] = {"source": f"host NumPy f32 matmul {n}^3 (no PyTorch device)", "flops": 2 * n ** 3,
                            "ms": ms, "tflop_per_s": 2 * n ** 3 / (ms * 1e-3) / 1e12}
    return limits


# ---- One case ---------------------------------------------------------------------------------

def compile_graph(args, case, work):
    """kilnc wall time, median of --compile-repeats runs; returns (artifact path, record)."""
    graph = os.path.join(work, "graphs", case["graph"])
    artifact = os.path.join(work, "artifacts", case["name"] + ".kiln")
    argv = [args.kilnc, graph, "-o", artifact, f"--target={args.target}"] + args.kilnc_arg
    walls, error = [], None
    for _ in range(args.compile_repeats):
        wall, proc = run_command(argv, env=args.kiln_process_env)
        if proc.returncode != 0:
            error = f"kilnc exit {proc.returncode}: {proc.stdout.strip()[-2000:]}"
            break
        walls.append(wall)
    record = {"argv": argv, "runs": len(walls), "error": error,
              "median_s": statistics.median(walls) if walls else None,
              "artifact_bytes": os.path.getsize(artifact) if not error else None}
    if not error:  # one more run for the per-stage breakdown (not timed here)
        _, proc = run_command(argv + ["-ftime-report"], env=args.kiln_process_env)
        record["time_report"] = proc.stdout[-4000:]
    return artifact, record


def run_kiln(args, artifact, dims, work, tag, dump_dir=None, profile=False, extra_env=()):
    json_path = os.path.join(work, f"kiln_{tag}.json")
    argv = [args.kiln_bench, artifact, f"--device={args.device}", f"--json={json_path}"]
    for symbol, size in dims.items():
        argv += ["--dim", f"{symbol}={size}"]
    for env in list(args.kiln_env) + list(extra_env):
        argv += ["--env", env]
    if args.small:
        argv += ["--warmup=2", "--warmup-ms=0", "--reps=5", "--rep-ms=1"]
    else:
        argv += [f"--reps={args.reps}"]
    if dump_dir:
        argv += [f"--dump-dir={dump_dir}"]
    if profile and args.profile_runs > 0:
        argv += [f"--profile={args.profile_runs}"]
    if os.path.exists(json_path):
        os.remove(json_path)
    wall, proc = run_command(argv, env=args.kiln_process_env)
    if proc.returncode != 0 or not os.path.exists(json_path):
        return {"error": f"kiln-bench exit {proc.returncode}: {proc.stdout.strip()[-2000:]}", "argv": argv}
    with open(json_path) as f:
        result = json.load(f)
    result["argv"] = argv
    result["process_wall_s"] = wall
    return result


def load_dump(dump_dir, names):
    return {n: np.load(os.path.join(dump_dir, n + ".npy")) for n in names}


def run_torch(case, host_inputs, host_weights, torch_device, timer, modes, reference):
    """Eager and each torch.compile mode on the same inputs; each timed and checked."""
    results = {}
    torch.set_grad_enabled(False)  # inference: no autograd bookkeeping in any mode
    # host_inputs is in signature order (kiln-bench's dump), the order the functions take.
    args = [torch.from_numpy(np.ascontiguousarray(v)).to(torch_device) for v in host_inputs.values()]
    weights = {k: torch.from_numpy(np.ascontiguousarray(v)).to(torch_device) for k, v in host_weights.items()}
    eager = case["torch_fn"](weights)
    configs = [("eager", None)] + [(f"compile:{m}", m) for m in modes]
    for label, mode in configs:
        record = {}
        try:
            compiled = eager
            if mode is not None:
                torch._dynamo.reset()
                if mode == "reduce-overhead":
                    # Like Kiln's bound device buffers: the inputs stay at one address, so the
                    # CUDA graph replays without first copying them into its own buffers.
                    for a in args:
                        torch._dynamo.mark_static_address(a)
                compiled = torch.compile(eager, mode=mode, dynamic=False, fullgraph=True)
                start = time.perf_counter()
                compiled(*args)
                torch.cuda.synchronize()
                record["first_call_s"] = time.perf_counter() - start  # tracing + Inductor compile
            if mode == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()
            out = compiled(*args).detach().float().cpu().numpy()  # copied before a replay reuses it
            if reference is not None:
                record["check"] = check_result(relative_error(out, reference), case["tolerance"])
            del out
            record.update(timer.time(lambda: compiled(*args)))
        except Exception as error:  # a failing baseline is reported, not fatal
            record["error"] = f"{type(error).__name__}: {str(error)[:1500]}"
        results[label] = record
        log(f"  torch {label}: " + (record.get("error") or
            f"sync {fmt(record['sync_ms'], 4)} ms, events {fmt(record['event_ms'], 4)} ms"))
    del args, weights, eager
    torch._dynamo.reset()  # drops the compiled functions and what they hold
    torch.cuda.empty_cache()
    return results


def run_case_variant(args, case, dims, artifact, work, torch_device, timer, limits):
    tag = f"{case['name']}_{'_'.join(f'{k}{v}' for k, v in dims.items())}"
    log(f"{tag}: kiln-bench on {args.device}")
    dump_dir = os.path.join(work, "dump", tag)
    row = {"case": case["name"], "kind": case["kind"], "dtype": case["dtype"], "dims": dims,
           "bytes": case["bytes"](dims), "bytes_formula": case["bytes_formula"],
           "flops": case["flops"](dims), "flops_formula": case["flops_formula"]}
    checking = not args.no_check
    row["kiln"] = run_kiln(args, artifact, dims, work, tag, dump_dir=dump_dir if checking else None,
                           profile=True)
    kiln_ok = "error" not in row["kiln"]
    weights_file = case.get("weights")
    host_weights = make_bench_weights.weight_tensors(weights_file) if weights_file else {}

    host_inputs, reference = None, None
    if checking and kiln_ok:
        # kiln-bench wrote the inputs it used and the outputs of its first run (into poisoned
        # buffers); PyTorch gets the same inputs below.
        host_inputs = load_dump(dump_dir, [t["name"] for t in row["kiln"]["inputs"]])
        (kiln_out,) = load_dump(dump_dir, [t["name"] for t in row["kiln"]["outputs"]]).values()
        start = time.perf_counter()
        reference = case["reference"]({k: v.astype(np.float64) for k, v in host_inputs.items()},
                                      {k: v.astype(np.float64) for k, v in host_weights.items()})
        row["kiln"]["check"] = check_result(relative_error(kiln_out, reference), case["tolerance"])
        row["reference_s"] = time.perf_counter() - start
        log(f"  kiln check: rel_l2 {row['kiln']['check']['rel_l2']:.3g} "
            f"({'PASS' if row['kiln']['check']['pass'] else 'FAIL'}, tolerance {case['tolerance']:g})")
        del kiln_out

    if case["kind"] == "latency" and args.kiln_no_graphs_env:
        log(f"{tag}: kiln-bench with {args.kiln_no_graphs_env}")
        row["kiln_no_graphs"] = run_kiln(args, artifact, dims, work, tag + "_nographs",
                                         extra_env=[args.kiln_no_graphs_env])

    if torch_device is not None and kiln_ok:
        if host_inputs is None:
            host_inputs = random_inputs_like(row["kiln"])
        modes = args.latency_compile_modes if case["kind"] == "latency" else args.compile_modes
        row["torch"] = run_torch(case, host_inputs, host_weights, torch_device, timer, modes, reference)
    elif torch_device is not None:
        row["torch"] = {"skipped": "Kiln failed, so there is no signature to build inputs from"}
    else:
        row["torch"] = {"skipped": TORCH_SKIP_REASON}
    shutil.rmtree(dump_dir, ignore_errors=True)
    derive_metrics(row, limits)
    return row


def random_inputs_like(kiln_result):
    """Inputs for PyTorch when no dump exists (--no-check): the signature kiln-bench reported."""
    rng = np.random.default_rng(0)
    dtypes = {"f32": np.float32, "f16": np.float16}
    inputs = {}
    for t in kiln_result.get("inputs", []):
        inputs[t["name"]] = rng.uniform(-1, 1, t["shape"]).astype(dtypes[t["dtype"]])
    return inputs


def derive_metrics(row, limits):
    """Achieved rates and ratios. 'wall' times are host-measured runs with one wait each (Kiln
    and PyTorch alike); 'kernel' is the sum of Kiln's profiled kernel times (device timers)."""
    k = row["kiln"]
    m = {}
    wall = k.get("median_ms")
    kernel = (k.get("profile") or {}).get("sum_median_ms") if (k.get("profile") or {}).get("available") else None
    m["kiln_wall_ms"], m["kiln_kernel_ms"] = wall, kernel
    m["kiln_gb_per_s"] = div(row["bytes"], wall * 1e-3) / 1e9 if wall else None
    m["kiln_gb_per_s_kernel"] = div(row["bytes"], kernel * 1e-3) / 1e9 if kernel else None
    m["kiln_tflop_per_s"] = div(row["flops"], wall * 1e-3) / 1e12 if wall else None
    m["kiln_tflop_per_s_kernel"] = div(row["flops"], kernel * 1e-3) / 1e12 if kernel else None
    copy = limits.get("copy", {}).get("gb_per_s")
    mm = limits.get("matmul", {})
    m["ratio_to_copy_bw"] = div(m["kiln_gb_per_s"], copy)
    m["ratio_to_copy_bw_kernel"] = div(m["kiln_gb_per_s_kernel"], copy)
    # torch.matmul's own rate by the same clock: sync time against Kiln's wall, events against
    # Kiln's kernel sum.
    m["ratio_to_torch_matmul"] = div(m["kiln_tflop_per_s"], mm.get("tflop_per_s_sync", mm.get("tflop_per_s")))
    m["ratio_to_torch_matmul_kernel"] = div(m["kiln_tflop_per_s_kernel"], mm.get("tflop_per_s"))
    no_graphs = row.get("kiln_no_graphs") or {}
    m["kiln_no_graphs_wall_ms"] = no_graphs.get("median_ms")
    for label, rec in (row.get("torch") or {}).items():
        if isinstance(rec, dict) and rec.get("sync_ms"):
            # > 1 means Kiln is faster; same clock on both sides (host wall, one wait per run).
            m[f"speedup_vs_{label}"] = div(rec["sync_ms"], wall)
    row["metrics"] = m


# ---- Reports ----------------------------------------------------------------------------------

def torch_cell(row, label, key="sync_ms"):
    rec = (row.get("torch") or {}).get(label)
    if not isinstance(rec, dict):
        return "—"
    if "error" in rec:
        return "error"
    return fmt(rec.get(key), 4)


def check_cell(check):
    if not check:
        return "—"
    return f"{check['rel_l2']:.1e} {'ok' if check['pass'] else 'FAIL'}"


def render_markdown(results):
    lim = results["limits"]
    lines = [f"# Kiln benchmark results ({results['mode']})", "",
             f"- device: {results['device']} — {results.get('device_description', '?')}",
             f"- PyTorch: {results['torch']}",
             f"- copy limit: **{fmt(lim['copy']['gb_per_s'], 1)} GB/s** ({lim['copy']['source']})",
             f"- matmul limit: **{lim['matmul']['tflop_per_s']:.4g} TFLOP/s** ({lim['matmul']['source']})",
             f"- Kiln timing: {results['kiln_timing']}",
             f"- PyTorch timing: {results['torch_timing']}",
             f"- started {results['started']}, total wall {fmt(results.get('total_wall_s'), 1)} s", ""]
    rows = results["cases"]

    def head(cols):
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(cols))) + "|")

    bw = [r for r in rows if r["kind"] == "bandwidth"]
    if bw:
        lines += ["## Memory-bound cases (target: ≥ 90% of copy bandwidth for ew_chain, ≥ 80% for the rest)", ""]
        head(["case", "shape", "MB moved", "Kiln ms (wall)", "Kiln ms (kernels)", "GB/s (wall / kernels)",
              "of copy BW (wall / kernels)", "eager ms", "compile ms", "Kiln vs eager", "Kiln vs compile",
              "check (Kiln / torch)"])
        for r in bw:
            m = r["metrics"]
            compile_label = next((lbl for lbl in (r.get("torch") or {}) if lbl.startswith("compile")), None)
            lines.append("| " + " | ".join([
                r["case"], dims_label(r["dims"]), fmt(r["bytes"] / 1e6, 1),
                fmt(m["kiln_wall_ms"], 4), fmt(m["kiln_kernel_ms"], 4),
                f"{fmt_rate(m['kiln_gb_per_s'])} / {fmt_rate(m['kiln_gb_per_s_kernel'])}",
                f"{fmt_pct(m['ratio_to_copy_bw'])} / {fmt_pct(m['ratio_to_copy_bw_kernel'])}",
                torch_cell(r, "eager"), torch_cell(r, compile_label) if compile_label else "—",
                fmt_ratio(m.get("speedup_vs_eager")),
                fmt_ratio(m.get(f"speedup_vs_{compile_label}")) if compile_label else "—",
                f"{check_cell(r['kiln'].get('check'))} / {check_cell(torch_check(r, 'eager'))}"]) + " |")
        lines.append("")

    cp = [r for r in rows if r["kind"] == "compute"]
    if cp:
        lines += ["## Matrix product (target: ≥ 90% of torch.matmul's TFLOP/s)", ""]
        head(["case", "shape", "GFLOP", "Kiln ms (wall / kernels)", "TFLOP/s (wall / kernels)",
              "of torch.matmul (same clock)", "eager ms", "compile ms", "Kiln vs eager", "Kiln vs compile",
              "check (Kiln / torch)"])
        for r in cp:
            m = r["metrics"]
            compile_label = next((lbl for lbl in (r.get("torch") or {}) if lbl.startswith("compile")), None)
            lines.append("| " + " | ".join([
                r["case"], dims_label(r["dims"]) + ", K=N=4096", fmt(r["flops"] / 1e9, 1),
                f"{fmt(m['kiln_wall_ms'], 4)} / {fmt(m['kiln_kernel_ms'], 4)}",
                f"{fmt_rate(m['kiln_tflop_per_s'])} / {fmt_rate(m['kiln_tflop_per_s_kernel'])}",
                f"{fmt_pct(m['ratio_to_torch_matmul'])} / {fmt_pct(m['ratio_to_torch_matmul_kernel'])}",
                torch_cell(r, "eager"), torch_cell(r, compile_label) if compile_label else "—",
                fmt_ratio(m.get("speedup_vs_eager")),
                fmt_ratio(m.get(f"speedup_vs_{compile_label}")) if compile_label else "—",
                f"{check_cell(r['kiln'].get('check'))} / {check_cell(torch_check(r, 'eager'))}"]) + " |")
        lines.append("")

    lat = [r for r in rows if r["kind"] == "latency"]
    if lat:
        lines += ["## Latency cases (target: Kiln with CUDA graphs ≤ torch.compile)", "",
                  "Per-run latency in ms: host wall time of one run and its wait, median. "
                  "torch events = device time per call when calls queue back to back.", ""]
        labels = sorted({lbl for r in lat for lbl in (r.get("torch") or {}) if lbl != "skipped"},
                        key=lambda s: (s != "eager", s))
        head(["case", "shape", "Kiln TFLOP/s", "Kiln", "Kiln kernels", "Kiln, no graphs"] +
             [f"{lbl} (sync / events)" for lbl in labels] + [f"Kiln vs {lbl}" for lbl in labels] +
             ["check (Kiln / torch)"])
        for r in lat:
            m = r["metrics"]
            lines.append("| " + " | ".join(
                [r["case"], dims_label(r["dims"]), fmt_rate(m["kiln_tflop_per_s"]), fmt(m["kiln_wall_ms"], 4),
                 fmt(m["kiln_kernel_ms"], 4), fmt(m["kiln_no_graphs_wall_ms"], 4)] +
                [f"{torch_cell(r, lbl)} / {torch_cell(r, lbl, 'event_ms')}" for lbl in labels] +
                [fmt_ratio(m.get(f"speedup_vs_{lbl}")) for lbl in labels] +
                [f"{check_cell(r['kiln'].get('check'))} / {check_cell(torch_check(r, 'eager'))}"]) + " |")
        lines.append("")

    lines += ["## Compile times", "",
              "kilnc: wall time of the whole process (median of repeats). torch.compile: first call "
              "(tracing + Inductor code generation), one run, cold cache at the start of the suite.", ""]
    head(["graph", "kilnc s", "artifact KB", "torch.compile first call s"])
    for name, rec in results["compile"].items():
        firsts = []
        for r in rows:
            if r["case"] != name:
                continue
            for lbl, t in (r.get("torch") or {}).items():
                if isinstance(t, dict) and t.get("first_call_s") is not None:
                    firsts.append(f"{lbl.split(':', 1)[1]} ({dims_label(r['dims'])}): {t['first_call_s']:.1f}")
        lines.append("| " + " | ".join([
            name, fmt(rec.get("median_s"), 3) if not rec.get("error") else "error",
            fmt(rec["artifact_bytes"] / 1024, 0) if rec.get("artifact_bytes") else "—",
            "; ".join(firsts) or "—"]) + " |")
    lines.append("")
    errors = [f"- {r['case']} ({dims_label(r['dims'])}): {where}: {rec['error']}"
              for r in rows for where, rec in [("kiln", r["kiln"]), ("kiln no graphs", r.get("kiln_no_graphs") or {})]
              + [(f"torch {lbl}", t) for lbl, t in (r.get("torch") or {}).items() if isinstance(t, dict)]
              if rec.get("error")]
    errors += [f"- kilnc {name}: {rec['error']}" for name, rec in results["compile"].items() if rec.get("error")]
    if errors:
        lines += ["## Errors", ""] + [e.replace("\n", " ")[:600] for e in errors] + [""]
    return "\n".join(lines)


def fmt_pct(value):
    return "—" if value is None else f"{100 * value:.0f}%"


def torch_check(row, label):
    rec = (row.get("torch") or {}).get(label)
    return rec.get("check") if isinstance(rec, dict) else None


def print_summary(results):
    print(f"\n{'case':<22} {'dims':<14} {'kiln ms':>10} {'kernels':>10} {'GB/s':>8} {'TFLOP/s':>8} "
          f"{'eager ms':>10} {'compile ms':>11} {'check':>10}")
    for r in results["cases"]:
        m = r["metrics"]
        comp = next((t for lbl, t in (r.get("torch") or {}).items() if lbl.startswith("compile")), {})
        check = r["kiln"].get("check")
        print(f"{r['case']:<22} {dims_label(r['dims']):<14} {fmt(m['kiln_wall_ms'], 4):>10} "
              f"{fmt(m['kiln_kernel_ms'], 4):>10} {fmt_rate(m['kiln_gb_per_s']):>8} {fmt_rate(m['kiln_tflop_per_s']):>8} "
              f"{torch_cell(r, 'eager'):>10} {fmt(comp.get('sync_ms'), 4) if isinstance(comp, dict) else '—':>11} "
              f"{('—' if not check else ('ok' if check['pass'] else 'FAIL')):>10}")


# ---- Main -------------------------------------------------------------------------------------

TORCH_SKIP_REASON = TORCH_IMPORT_ERROR


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin-dir", help="folder holding kilnc and kiln-bench (instead of the two paths)")
    p.add_argument("--kilnc", help="path to kilnc")
    p.add_argument("--kiln-bench", help="path to kiln-bench (tools/kiln-bench/main.cpp)")
    p.add_argument("--device", default="cuda:0", help="Kiln device id (default cuda:0)")
    p.add_argument("--out", required=True, help="directory for results.json and results.md")
    p.add_argument("--no-markdown-file", action="store_true",
                   help="write only results.json (the tables are printed to stdout anyway)")
    p.add_argument("--work-dir", help="scratch for graphs, weights, artifacts, dumps (default: a temp dir)")
    p.add_argument("--target", help="kilnc --target (default: the device's driver, e.g. cuda)")
    p.add_argument("--kilnc-arg", action="append", default=[], help="extra kilnc argument (repeatable)")
    p.add_argument("--kiln-env", action="append", default=[],
                   help="NAME=VALUE for every kiln-bench run (repeatable)")
    p.add_argument("--kiln-no-graphs-env", default="KILN_CUDA_GRAPHS=0",
                   help="NAME=VALUE that turns Kiln's CUDA graphs off, for the extra latency runs "
                        "('' to skip them; default %(default)s)")
    p.add_argument("--small", action="store_true", help="tiny shapes and few repetitions (smoke test)")
    p.add_argument("--cases", help="comma list of case names (default: all)")
    p.add_argument("--compile-repeats", type=int, default=3)
    p.add_argument("--reps", type=int, default=30, help="timed repetitions (Kiln and PyTorch)")
    p.add_argument("--profile-runs", type=int, default=10, help="profiled Kiln runs per case")
    p.add_argument("--no-check", action="store_true", help="skip the correctness checks")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch baselines")
    p.add_argument("--compile-modes", default="default",
                   help="torch.compile modes for throughput cases, comma list ('' for none)")
    p.add_argument("--latency-compile-modes", default="default,reduce-overhead",
                   help="torch.compile modes for the latency cases, comma list ('' for none)")
    args = p.parse_args(argv)
    for tool, attr in (("kilnc", "kilnc"), ("kiln-bench", "kiln_bench")):
        if getattr(args, attr) is None:
            if args.bin_dir is None:
                p.error(f"give --{tool} PATH or --bin-dir DIR")
            setattr(args, attr, os.path.join(args.bin_dir, tool))
        if not os.access(getattr(args, attr), os.X_OK):
            p.error(f"{getattr(args, attr)} is not an executable")
    # NVRTC (which kilnc links for the cuda target) and cuBLASLt (which the runtime dlopens) live
    # under /usr/local/cuda on the GPU machine, which need not be in the loader's cache.
    args.kiln_process_env = dict(os.environ)
    if args.device.startswith("cuda"):
        extra = [d for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib")
                 if os.path.isdir(d) and d not in args.kiln_process_env.get("LD_LIBRARY_PATH", "")]
        if extra:
            args.kiln_process_env["LD_LIBRARY_PATH"] = ":".join(
                [p for p in [args.kiln_process_env.get("LD_LIBRARY_PATH")] if p] + extra)
    args.compile_modes = [m for m in args.compile_modes.split(",") if m]
    args.latency_compile_modes = [m for m in args.latency_compile_modes.split(",") if m]
    if args.target is None:
        args.target = args.device.split(":")[0]
        if args.target == "reference":
            args.target = "opencl"  # the reference interpreter runs any artifact
    return args


def torch_device_for(args):
    global TORCH_SKIP_REASON
    if args.no_torch:
        TORCH_SKIP_REASON = "skipped (--no-torch)"
        return None
    if torch is None:
        return None
    if not torch.cuda.is_available():
        TORCH_SKIP_REASON = "PyTorch has no CUDA device here"
        return None
    index = int(args.device.split(":")[1]) if args.device.startswith("cuda:") else 0
    return torch.device("cuda", index)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    work = args.work_dir or tempfile.mkdtemp(prefix="kiln_gpu_bench_")
    try:
        return run_suite(args, work)
    finally:
        if not args.work_dir:  # the dumps of the large cases are GBs
            shutil.rmtree(work, ignore_errors=True)


def run_suite(args, work):
    started = time.time()
    for sub in ("graphs", "artifacts", "dump"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    for name in os.listdir(os.path.join(BENCH_DIR, "graphs")):
        if name.endswith(".graph"):
            shutil.copy(os.path.join(BENCH_DIR, "graphs", name), os.path.join(work, "graphs", name))
    make_bench_weights.write_all(os.path.join(work, "graphs"))

    torch_device = torch_device_for(args)
    if torch_device is not None:
        torch.backends.cuda.matmul.allow_tf32 = False  # f32 cases are f32 math on both sides
        torch.backends.cudnn.allow_tf32 = False
    timer = TorchTimer(warmup=2 if args.small else 10, warmup_s=0 if args.small else 0.2,
                       reps=5 if args.small else args.reps, rep_s=0.001 if args.small else 0.02)
    cases = CASES
    if args.cases:
        wanted = set(args.cases.split(","))
        unknown = wanted - {c["name"] for c in CASES}
        if unknown:
            sys.exit(f"gpu_bench: unknown case(s) {sorted(unknown)}; known: {[c['name'] for c in CASES]}")
        cases = [c for c in CASES if c["name"] in wanted]

    results = {
        "mode": "small smoke run" if args.small else "full run",
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "host": platform.node(), "device": args.device, "target": args.target,
        "argv": sys.argv, "git_commit": git_commit(),
        "kiln_ld_library_path": args.kiln_process_env.get("LD_LIBRARY_PATH"),
        "torch": (f"{torch.__version__}, compile modes: throughput {args.compile_modes}, "
                  f"latency {args.latency_compile_modes}") if torch_device is not None else TORCH_SKIP_REASON,
        "kiln_timing": "kiln-bench: inputs/outputs in device buffers; per run = run_async + event wait; "
                       "median of reps of K back-to-back runs after warm-up; 'kernels' = sum of profiled "
                       "kernel times (median of runs)",
        "torch_timing": "same inputs; 'sync' = host wall time of call + torch.cuda.synchronize per run "
                        "(the Kiln clock), 'events' = CUDA events around K back-to-back calls; medians",
        "compile": {}, "cases": [], "commands": COMMAND_LOG,
    }
    if torch_device is not None:
        results["torch_device_name"] = torch.cuda.get_device_name(torch_device)
    log(f"measuring limits ({'PyTorch on ' + str(torch_device) if torch_device is not None else 'host NumPy'})")
    results["limits"] = measure_limits(args, torch_device, timer)
    log(f"  copy {results['limits']['copy']['gb_per_s']:.1f} GB/s, "
        f"matmul {results['limits']['matmul']['tflop_per_s']:.2f} TFLOP/s")

    results_path = os.path.join(args.out, "results.json")
    for case in cases:
        log(f"{case['name']}: kilnc --target={args.target}")
        artifact, record = compile_graph(args, case, work)
        results["compile"][case["name"]] = record
        if record["error"]:
            log(f"  kilnc failed: {record['error'][:300]}")
            continue
        log(f"  {record['median_s']:.3f} s, {record['artifact_bytes'] / 1024:.0f} KB")
        variants = case.get("small_variants" if args.small else "variants") or \
            [case["small_dims"] if args.small else case["dims"]]
        for dims in variants:
            row = run_case_variant(args, case, dims, artifact, work, torch_device, timer, results["limits"])
            if "device_description" in row["kiln"]:
                results["device_description"] = row["kiln"]["device_description"]
            results["cases"].append(row)
            write_json(results_path, results)  # after every case, so a cut-off run keeps its rows
    results["total_wall_s"] = time.time() - started
    write_json(results_path, results)
    markdown = render_markdown(results)
    if not args.no_markdown_file:
        with open(os.path.join(args.out, "results.md"), "w") as f:
            f.write(markdown)
    print(markdown)
    print_summary(results)
    failed = [r for r in results["cases"] if "error" in r["kiln"] or not r["kiln"].get("check", {"pass": True})["pass"]]
    log(f"done in {results['total_wall_s']:.0f} s; {len(failed)} case(s) with a Kiln error or failed check; "
        f"results in {args.out}")
    return 1 if failed else 0


def git_commit():
    try:
        return subprocess.run(["git", "-C", BENCH_DIR, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


if __name__ == "__main__":
    sys.exit(main())
