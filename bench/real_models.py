#!/usr/bin/env python3
"""Real models on CUDA: Kiln beside PyTorch eager and torch.compile, in one run (issue 13).

usage (on the GPU machine, whose python3 has torch and torchvision):
  real_models.py --bin-dir gpu-bundle/bin --out DIR [--models resnet50_b1,bert_b8] [--dtypes f32,f16]
                 [--exporter legacy|dynamo] [--compile-mode reduce-overhead] [--no-torch-compile]

Per model and dtype it:
  1. builds the model from its constructor with seeded random weights (torch.manual_seed(0));
     batch norms are calibrated first (one train-mode forward over a random batch with momentum 1,
     so their running statistics are those of real activations: random-weight networks otherwise
     grow or vanish layer by layer and f16 overflows or underflows);
  2. exports it to ONNX with this machine's PyTorch (f16: the model and input in half precision),
     with the legacy exporter (opset 17, dynamo=False) or the dynamo one (opset 18);
  3. compiles it with `kilnc --target=cuda` (wall time, cold: a fresh KILN_CACHE_DIR);
  4. times it with kiln-bench (inputs and outputs in device buffers, median per-run time after
     warm-up), with a per-kernel profile that names what ran each kernel (cuDNN, cuBLASLt or a
     generated kernel);
  5. times torch eager and torch.compile (mode reduce-overhead by default) on the same input, each
     call followed by torch.cuda.synchronize(), as kiln-bench waits for each run;
  6. compares Kiln's output with the float32 PyTorch model's on the same input (relative L2 error),
     and, for scale, PyTorch's own at the benchmarked dtype with it: the f16 model's, and, in f32,
     torch.compile's (another f32 implementation of the same model: the noise floor of f32).
TF32 is off for every PyTorch baseline (torch.backends.*.allow_tf32 = False), as Kiln's f32 is.

It writes DIR/results.json (rewritten after every model, so a run cut short keeps what it
measured) and DIR/results.md (the table, also printed). A program, not a test.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import gpu_bench  # noqa: E402  (after the path insert)


# ---- Models -----------------------------------------------------------------------------------

class BertLayer(nn.Module):
    """One BERT-base encoder layer (post-norm, exact GELU), from torch.nn modules."""

    def __init__(self, d=768, heads=12, ff=3072):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        dh = d // self.heads

        def split(y):
            return y.view(b, t, self.heads, dh).transpose(1, 2)

        scores = split(self.q(x)) @ split(self.k(x)).transpose(-1, -2) / math.sqrt(dh)
        ctx = (scores.softmax(-1) @ split(self.v(x))).transpose(1, 2).reshape(b, t, d)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


class BertEncoder(nn.Module):
    def __init__(self, layers=12):
        super().__init__()
        self.layers = nn.ModuleList(BertLayer() for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class TorchEncoder(nn.Module):
    """nn.TransformerEncoder (nn.MultiheadAttention with a packed in-projection, exported through
    scaled_dot_product_attention), 6 layers d=768. No mask: with one, PyTorch 2.11's legacy export
    of the f16 model computes the attention in f32 and feeds f32 values to LayerNormalization with
    f16 scales, which the ONNX type rules reject (Kiln's importer says so)."""

    def __init__(self, layers=6):
        super().__init__()
        # The inference fast path (one fused aten op) has no ONNX export; the exported form is
        # multi_head_attention_forward's, through scaled_dot_product_attention.
        torch.backends.mha.set_fastpath_enabled(False)
        layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


def torchvision_model(name):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None)
    return build


# name: (constructor, input shape)
MODELS = {
    "resnet18_b1": (torchvision_model("resnet18"), (1, 3, 224, 224)),
    "resnet50_b1": (torchvision_model("resnet50"), (1, 3, 224, 224)),
    "resnet50_b32": (torchvision_model("resnet50"), (32, 3, 224, 224)),
    "mobilenet_v2_b1": (torchvision_model("mobilenet_v2"), (1, 3, 224, 224)),
    "efficientnet_b0_b1": (torchvision_model("efficientnet_b0"), (1, 3, 224, 224)),
    "bert_b1": (BertEncoder, (1, 128, 768)),
    "bert_b8": (BertEncoder, (8, 128, 768)),
    "torch_encoder_b8": (TorchEncoder, (8, 128, 768)),
}
DEFAULT_MODELS = "resnet50_b1,resnet50_b32,resnet18_b1,bert_b1,bert_b8"


def build_model(name):
    torch.manual_seed(0)
    constructor, shape = MODELS[name]
    model = constructor().cuda()
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if norms:  # calibrate the running statistics on real activations (see the module docstring)
        for m in norms:
            m.momentum = 1.0
        model.train()
        with torch.no_grad():
            model(torch.randn((max(shape[0], 8),) + shape[1:], device="cuda"))
    return model.eval(), shape


# ---- Measuring --------------------------------------------------------------------------------

# gpu_bench's timer: warm-up of at least 10 calls and 1 s, then 30 repetitions of K calls filling
# 50 ms, each call followed by torch.cuda.synchronize() ("sync_ms"), as kiln-bench waits per run.
TIMER = gpu_bench.TorchTimer(warmup=10, warmup_s=1.0, reps=30, rep_s=0.05)


def time_torch(fn):
    """Median ms per call of fn() followed by torch.cuda.synchronize()."""
    return TIMER.time(fn)["sync_ms"]


def relative_l2(out, ref):
    out, ref = np.asarray(out, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
    if out.shape != ref.shape:
        return float("nan")
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def run(argv, env):
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return time.perf_counter() - t0, proc


def export(model, example, path, exporter):
    kwargs = dict(input_names=["x"], output_names=["y"])
    if exporter == "dynamo":
        torch.onnx.export(model, (example,), path, dynamo=True, **kwargs)
    else:
        torch.onnx.export(model, (example,), path, dynamo=False, opset_version=17, **kwargs)


def measure(args, name, dtype, work, env):
    record = {"model": name, "dtype": dtype, "exporter": args.exporter}
    model, shape = build_model(name)
    torch.manual_seed(1)
    x32 = torch.randn(shape, device="cuda")
    with torch.no_grad():
        ref32 = model(x32).float().cpu().numpy()
    tdtype = torch.float16 if dtype == "f16" else torch.float32
    model = model.to(tdtype)
    x = x32.to(tdtype)
    with torch.no_grad():
        torch_out = model(x).float().cpu().numpy()
    record["torch_error_vs_f32"] = relative_l2(torch_out, ref32)

    onnx_path = os.path.join(work, f"{name}_{dtype}.onnx")
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            export(model, x, onnx_path, args.exporter)
    except Exception as error:  # noqa: BLE001  (record any exporter failure and go on)
        record["error"] = f"export failed: {type(error).__name__}: {str(error)[:1500]}"
        return record
    record["export_s"] = time.perf_counter() - t0

    artifact = os.path.join(work, f"{name}_{dtype}.kiln")
    compile_env = dict(env, KILN_CACHE_DIR=tempfile.mkdtemp(dir=work))
    wall, proc = run([args.kilnc, onnx_path, "--target=cuda", "-o", artifact] + args.kilnc_arg, compile_env)
    if proc.returncode != 0:
        record["error"] = f"kilnc exit {proc.returncode}: {proc.stdout[-2000:]}"
        return record
    record["kilnc_cold_s"] = wall

    x_path = os.path.join(work, "x.npy")
    np.save(x_path, x.cpu().numpy())
    dump = tempfile.mkdtemp(dir=work)
    json_path = os.path.join(work, "kiln.json")
    argv = [args.kiln_bench, artifact, "--device=cuda:0", f"--input=x={x_path}", f"--dump-dir={dump}",
            f"--json={json_path}", "--profile=5"] + args.kiln_bench_arg
    _, proc = run(argv, env)
    if proc.returncode != 0:
        record["error"] = f"kiln-bench exit {proc.returncode}: {proc.stdout[-2000:]}"
        return record
    with open(json_path) as f:
        bench = json.load(f)
    record["kiln_ms"] = bench["median_ms"]
    record["kiln_first_result_ms"] = bench.get("first_result_ms")
    profile = bench.get("profile", {})
    kernels = profile.get("kernels", [])
    by_impl = {}
    for k in kernels:
        impl = "cuDNN" if "(cuDNN" in k["kind"] else "cuBLASLt" if "(cuBLASLt" in k["kind"] else \
            "generated (library declined)" if "(generated:" in k["kind"] else "generated"
        by_impl[impl] = by_impl.get(impl, 0.0) + (k["median_ms"] or 0.0)
    record["kiln_profile_ms_by_implementation"] = by_impl
    record["kiln_profile_top"] = sorted(kernels, key=lambda k: -(k["median_ms"] or 0))[:12]
    record["kiln_declined"] = sorted({k["kind"] for k in kernels if "(generated:" in k["kind"]})[:10]
    out = np.load(os.path.join(dump, "y.npy"))
    record["kiln_error_vs_f32"] = relative_l2(out, ref32)
    record["kiln_error_vs_torch_same_dtype"] = relative_l2(out, torch_out)

    with torch.no_grad():
        record["eager_ms"] = time_torch(lambda: model(x))
        if not args.no_torch_compile:
            try:
                compiled = torch.compile(model, mode=args.compile_mode)
                t0 = time.perf_counter()
                compiled(x)
                torch.cuda.synchronize()
                record["compile_first_call_s"] = time.perf_counter() - t0
                record["compile_ms"] = time_torch(lambda: compiled(x))
                record["compile_error_vs_f32"] = relative_l2(compiled(x).float().cpu().numpy(), ref32)
            except Exception as error:  # noqa: BLE001
                record["compile_error"] = f"{type(error).__name__}: {str(error)[:1500]}"
    del model
    torch.cuda.empty_cache()
    return record


def fmt(v, digits=3):
    return "—" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def markdown(records):
    lines = ["| model | dtype | Kiln ms | eager ms | compile ms | Kiln / compile | Kiln / eager | Kiln rel. L2 vs torch f32 | torch's own at this dtype (eager f16 / compile f32) | kilnc cold s | time in cuDNN / cuBLASLt / generated ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['dtype']} | error: {r['error'][:200]} |||||||||")
            continue
        k, e, c = r.get("kiln_ms"), r.get("eager_ms"), r.get("compile_ms")
        impl = r.get("kiln_profile_ms_by_implementation", {})
        gen = impl.get("generated", 0.0) + impl.get("generated (library declined)", 0.0)
        lines.append(
            f"| {r['model']} | {r['dtype']} | {fmt(k)} | {fmt(e)} | {fmt(c)} | "
            f"{fmt(k / c if k and c else None, 2)} | {fmt(k / e if k and e else None, 2)} | "
            f"{r.get('kiln_error_vs_f32', float('nan')):.2e} | "
            f"{(r.get('torch_error_vs_f32') if r['dtype'] == 'f16' else r.get('compile_error_vs_f32', float('nan'))) or float('nan'):.2e} | "
            f"{fmt(r.get('kilnc_cold_s'), 2)} | {impl.get('cuDNN', 0.0):.3f} / {impl.get('cuBLASLt', 0.0):.3f} / {gen:.3f} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin-dir", required=True, help="folder holding kilnc and kiln-bench")
    p.add_argument("--out", required=True)
    p.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated, of: {', '.join(MODELS)}")
    p.add_argument("--dtypes", default="f32,f16")
    p.add_argument("--exporter", choices=["legacy", "dynamo"], default="legacy")
    p.add_argument("--compile-mode", default="reduce-overhead")
    p.add_argument("--no-torch-compile", action="store_true")
    p.add_argument("--kilnc-arg", action="append", default=[], help="extra kilnc argument (repeatable)")
    p.add_argument("--kiln-bench-arg", action="append", default=[], help="extra kiln-bench argument (repeatable)")
    args = p.parse_args()
    args.kilnc = os.path.join(args.bin_dir, "kilnc")
    args.kiln_bench = os.path.join(args.bin_dir, "kiln-bench")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    env = dict(os.environ)
    cuda_libs = [d for d in ("/usr/local/cuda/lib64",) if os.path.isdir(d)]
    env["LD_LIBRARY_PATH"] = ":".join(cuda_libs + [env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kiln-real-models-")
    records = []
    for name in args.models.split(","):
        for dtype in args.dtypes.split(","):
            print(f"== {name} {dtype}", flush=True)
            try:
                record = measure(args, name, dtype, work, env)
            except Exception as error:  # noqa: BLE001  (one model's failure does not end the run)
                record = {"model": name, "dtype": dtype, "error": f"{type(error).__name__}: {str(error)[:1500]}"}
            print(json.dumps({k: v for k, v in record.items() if k != "kiln_profile_top"}), flush=True)
            records.append(record)
            with open(os.path.join(args.out, "results.json"), "w") as f:
                json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "cudnn": torch.backends.cudnn.version(), "records": records}, f, indent=1)
    table = markdown(records)
    print(table)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(table + "\n")


if __name__ == "__main__":
    sys.exit(main())
