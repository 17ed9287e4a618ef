#!/usr/bin/env python3
"""Real exports: torchvision classification models and BERT-style encoders, exported to ONNX by
PyTorch, compiled with kilnc, run with kiln-run and compared with PyTorch's own outputs.

Every model is built from its constructor with seeded random weights (no downloads) and exported
  - with the legacy exporter (torch.onnx.export(..., dynamo=False), opset 17);
  - with the dynamo exporter (PyTorch's default since 2.9, opset 18+), where this PyTorch has it;
  - with --convert-opsets 18,21: the legacy export lifted to each listed opset by ONNX's version
    converter (on CI, Debian's PyTorch 1.13 has no dynamo exporter: this is how CI checks the
    newer opsets' forms).
The encoders (BERT written as HF transformers writes it, nn.TransformerEncoder, and transformers'
own BertModel where that package is installed) are exported with dynamic batch and sequence axes
and run at two sizes from one compile. An export that onnxruntime (when installed) cannot run at
every size either is skipped, saying why.

--size small (CI): the same architecture families at reduced width/depth and 32-64 pixel images,
which the reference interpreter and lavapipe run in seconds on 2 cores. --size full: torchvision's
standard constructors (ResNet-50, MobileNetV2, EfficientNet-B0, ViT-B/16, ConvNeXt-T,
RegNetY-400MF, Swin-T) at 224x224 and a 6-layer d=768 encoder (the GPU machine).

Usage: torch_exports.py --kilnc K --kiln-run R --work DIR [--size small|full] [--models a,b]
                        [--devices auto|reference,vulkan:0] [--targets vulkan] [--convert-opsets 18,21]
                        [--exporters legacy,dynamo]
--devices auto (the ctest's choice): the reference interpreter for --size small, and the first
cuda and vulkan device present (see auto_devices). Without PyTorch the script exits 77 (a skip),
except under CI=true. Prints one PASS/FAIL line per (model, export, device, input size) with the
max abs error and exits 1 on any failure. A model that kilnc rejects is a failure (its diagnostic is printed).
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

try:
    import torch
except ImportError:
    if os.environ.get("CI", "") == "true":
        sys.exit("FAIL: PyTorch is missing; CI requires it (scripts/setup.sh installs python3-torch)")
    print("SKIP: no PyTorch in this Python (scripts/setup.sh installs Debian's python3-torch)")
    sys.exit(77)

RTOL, ATOL = 1e-3, 1e-4  # ATOL is relative to max |output|


# ---- models -----------------------------------------------------------------------------------

class SelfAttention(torch.nn.Module):
    """HF BERT's self-attention: heads split with view(batch, seq, heads, head size)."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))

    def forward(self, h, mask_bias):
        b, s, d = h.shape
        split = lambda t: t.view(b, s, self.heads, self.dh).transpose(1, 2)
        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        scores = q @ k.transpose(-1, -2) / (self.dh ** 0.5) + mask_bias
        ctx = torch.softmax(scores, dim=-1) @ v
        return self.o(ctx.transpose(1, 2).reshape(b, s, d))


class EncoderLayer(torch.nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.attn = SelfAttention(d, heads)
        self.norm1, self.norm2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.ffn = torch.nn.Sequential(torch.nn.Linear(d, ffn), torch.nn.GELU(), torch.nn.Linear(ffn, d))

    def forward(self, h, mask_bias):
        h = self.norm1(h + self.attn(h, mask_bias))
        return self.norm2(h + self.ffn(h))


class BertStyleEncoder(torch.nn.Module):
    """A BERT-style encoder written as HF transformers writes BERT: embeddings of tokens,
    positions (arange over the sequence length) and token types (zeros), an additive mask from
    attention_mask, post-norm layers."""

    def __init__(self, vocab, d, heads, layers, ffn, max_len=512):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(max_len, d)
        self.typ = torch.nn.Embedding(2, d)
        self.norm = torch.nn.LayerNorm(d)
        self.layers = torch.nn.ModuleList(EncoderLayer(d, heads, ffn) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        h = self.norm(self.tok(input_ids) + self.pos(positions) + self.typ(torch.zeros_like(input_ids)))
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * -10000.0
        for layer in self.layers:
            h = layer(h, mask_bias)
        return h


class TorchEncoder(torch.nn.Module):
    """PyTorch's own nn.TransformerEncoder (batch_first, key padding mask): its attention merges
    the heads into the batch (sizes batch*heads over a dynamic batch)."""

    def __init__(self, vocab, d, heads, layers, ffn):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, input_ids, attention_mask):
        return self.encoder(self.tok(input_ids), src_key_padding_mask=attention_mask == 0)


class HfBert(torch.nn.Module):
    """transformers' own BertModel (where the package is installed), last hidden state."""

    def __init__(self, vocab, d, heads, layers, ffn):
        super().__init__()
        import transformers
        cfg = transformers.BertConfig(vocab_size=vocab, hidden_size=d, num_attention_heads=heads,
                                      num_hidden_layers=layers, intermediate_size=ffn, attn_implementation="eager")
        self.bert = transformers.BertModel(cfg)

    def forward(self, input_ids, attention_mask):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def reinitialize(model):
    """Seeded weights that keep activations near unit scale through deep random networks
    (torchvision's own init lets MobileNet/EfficientNet outputs fall to 1e-9..1e-13 and zeroes
    ViT's head), so that a comparison of outputs means something."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * (2.0 / fan_in) ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
            elif isinstance(m, (torch.nn.BatchNorm2d, torch.nn.LayerNorm)):
                if m.weight is not None:
                    m.weight.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=g))
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                    m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
    return model


def vision_models(size):
    import torchvision.models as tvm
    if size == "full":
        return {
            "resnet50": (lambda: tvm.resnet50(), 224),
            "mobilenet_v2": (lambda: tvm.mobilenet_v2(), 224),
            "efficientnet_b0": (lambda: tvm.efficientnet_b0(), 224),
            "vit_b_16": (lambda: tvm.vit_b_16(), 224),
            "convnext_tiny": (lambda: tvm.convnext_tiny(), 224),
            "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(), 224),
            "swin_t": (lambda: tvm.swin_t(), 224),
        }
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    return {
        "resnet18": (lambda: tvm.resnet18(num_classes=10), 64),
        "mobilenet_v2": (lambda: tvm.mobilenet_v2(width_mult=0.5, num_classes=10), 64),
        "efficientnet_b0": (lambda: tvm.efficientnet_b0(num_classes=10), 64),
        "vit": (lambda: tvm.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                              hidden_dim=32, mlp_dim=64, num_classes=10), 32),
        "convnext": (lambda: ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 1), CNBlockConfig(64, None, 1)],
                                      num_classes=10), 64),
        "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(num_classes=10), 64),
        "swin": (lambda: tvm.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                                             window_size=[4, 4], num_classes=10), 32),
    }


def encoder_config(size):
    if size == "full":
        # The first size is the export's example: a batch of 1 would let torch.export specialize it.
        return dict(vocab=30522, d=768, heads=12, layers=6, ffn=3072), [(8, 64), (1, 128)]
    return dict(vocab=100, d=32, heads=2, layers=2, ffn=64), [(2, 7), (1, 19)]


# ---- export -----------------------------------------------------------------------------------

def has_dynamo_exporter():
    major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    return (major, minor) >= (2, 5)


def export(model, args, names, dynamic, path, exporter):
    """dynamic: {input name: {axis: dim name}} (empty for static shapes)."""
    kwargs = dict(input_names=names, output_names=["out"])
    if exporter == "legacy":
        if has_dynamo_exporter():
            kwargs["dynamo"] = False
        torch.onnx.export(model, args, path, opset_version=17, dynamic_axes=dynamic or None, **kwargs)
        return
    shapes = None
    if dynamic:
        dims = {}
        shapes = {n: {a: dims.setdefault(d, torch.export.Dim(d, min=1, max=4096)) for a, d in axes.items()}
                  for n, axes in dynamic.items()}
    torch.onnx.export(model, args, path, dynamo=True, dynamic_shapes=shapes, external_data=False, **kwargs)


def convert(path, opset, out_path):
    import onnx
    from onnx import version_converter
    onnx.save(version_converter.convert_version(onnx.load(path), opset), out_path)


# ---- compile, run, compare ----------------------------------------------------------------------

def ort_failure(path, names, runs):
    """The error onnxruntime (when installed) gives running the exported file at a size other than
    the example's, or None: a file that fails there is the exporter's problem, not Kiln's."""
    try:
        import onnxruntime
    except ImportError:
        return None
    try:
        # A file this onnxruntime cannot load or run at the example's size (an opset newer than it
        # knows) proves nothing about the export: Kiln is checked on it as usual.
        sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        sess.run(None, {n: t.numpy() for n, t in zip(names, runs[0])})
    except Exception:  # onnxruntime raises its own exception types
        return None
    try:
        for inputs in runs[1:]:
            sess.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
    except Exception as e:
        return str(e).splitlines()[0][:300]
    return None


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def auto_devices(kiln_run, size):
    """The reference interpreter (small models only: it computes in double) and the first device
    of the cuda and vulkan drivers. PoCL is left out: it compiles every kernel with LLVM on load,
    minutes for these models on 2 cores. A driver in KILN_REQUIRE_DRIVERS without a device fails."""
    _, out = run([kiln_run, "--list-devices"])
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*((cuda|vulkan):\d+)\b", line)
        if m and m.group(2) not in found:
            found[m.group(2)] = m.group(1)
    required = [d.strip() for d in os.environ.get("KILN_REQUIRE_DRIVERS", "").split(",") if d.strip()]
    for driver in ("cuda", "vulkan"):
        if driver in required and driver not in found:
            sys.exit(f"FAIL: KILN_REQUIRE_DRIVERS names {driver}, which has no device")
    devices = (["reference"] if size == "small" else []) + list(found.values())
    return devices, list(found)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--size", choices=("small", "full"), default="small")
    ap.add_argument("--models", default="", help="comma list (default: all of --size)")
    ap.add_argument("--devices", default="reference")
    ap.add_argument("--targets", default="", help="kilnc --target list (default: kilnc's default)")
    ap.add_argument("--exporters", default="legacy,dynamo")
    ap.add_argument("--convert-opsets", default="")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.manual_seed(0)
    wanted = [m for m in args.models.split(",") if m]
    exporters = [e for e in args.exporters.split(",") if e]
    if "dynamo" in exporters and not has_dynamo_exporter():
        print(f"note: PyTorch {torch.__version__} has no dynamo exporter; legacy exports only")
        exporters.remove("dynamo")
    devices = [d for d in args.devices.split(",") if d]
    if devices == ["auto"]:
        devices, drivers = auto_devices(args.kiln_run, args.size)
        args.targets = args.targets or ",".join(drivers)
    print(f"PyTorch {torch.__version__}; exporters {', '.join(exporters)}; devices {', '.join(devices)}")

    cases = []  # (name, module, example args, input names, dynamic axes, [input tuples to run])
    rng = np.random.default_rng(0)
    for name, (make, res) in vision_models(args.size).items():
        if wanted and name not in wanted:
            continue
        torch.manual_seed(0)
        x = torch.from_numpy(rng.standard_normal((1, 3, res, res)).astype(np.float32))
        cases.append((name, reinitialize(make()).eval(), (x,), ["x"], {}, [(x,)]))
    encoders = [("encoder", BertStyleEncoder), ("torch_encoder", TorchEncoder)]
    try:
        import transformers  # noqa: F401
        encoders.append(("hf_bert", HfBert))
    except ImportError:
        pass
    for name, make in encoders:
        if wanted and name not in wanted:
            continue
        cfg, sizes = encoder_config(args.size)
        torch.manual_seed(0)
        model = make(**cfg).eval()
        runs = []
        for b, s in sizes:
            ids = torch.from_numpy(rng.integers(0, cfg["vocab"], size=(b, s)).astype(np.int64))
            mask = torch.ones((b, s), dtype=torch.int64)
            mask[:, s - 2:] = 0  # padded tail
            runs.append((ids, mask))
        dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
        cases.append((name, model, runs[0], ["input_ids", "attention_mask"], dynamic, runs))

    failures = 0
    for name, model, example, names, dynamic, runs in cases:
        with torch.no_grad():
            wants = [model(*r).numpy() for r in runs]
        variants = []
        for exporter in exporters:
            path = os.path.join(args.work, f"{name}_{exporter}.onnx")
            try:
                export(model, example, names, dynamic, path, exporter)
            except Exception as e:  # an exporter failure is PyTorch's, not Kiln's: reported, not counted
                print(f"SKIP {name} {exporter}: the exporter failed: {type(e).__name__}: {str(e)[:300]}")
                continue
            variants.append((exporter, path))
            if exporter == "legacy":
                for opset in [int(o) for o in args.convert_opsets.split(",") if o]:
                    lifted = os.path.join(args.work, f"{name}_legacy_opset{opset}.onnx")
                    try:
                        convert(path, opset, lifted)
                    except Exception as e:
                        print(f"SKIP {name} legacy->opset {opset}: the version converter failed: {str(e)[:300]}")
                        continue
                    variants.append((f"legacy->opset{opset}", lifted))
        for label, path in variants:
            specialized = ort_failure(path, names, runs)
            if specialized:
                # PyTorch 2.x's legacy exporter bakes some traced sizes into nn.MultiheadAttention's
                # reshapes: such a file is only valid at the example's sizes, for any runtime.
                print(f"SKIP {name} [{label}]: the export does not run at every input size on onnxruntime either: "
                      f"{specialized}")
                continue
            art = path[:-5] + ".kiln"
            cmd = [args.kilnc, path, "-o", art] + (["--target=" + args.targets] if args.targets else [])
            t0 = time.time()
            rc, out = run(cmd)
            compile_s = time.time() - t0
            if rc != 0:
                print(f"FAIL {name} [{label}]: kilnc failed (exit {rc}):\n{out.strip()[:2000]}")
                failures += 1
                continue
            for device in devices:
                for i, (inputs, want) in enumerate(zip(runs, wants)):
                    out_dir = f"{art}.{device.replace(':', '_')}.{i}"
                    os.makedirs(out_dir, exist_ok=True)
                    cmd = [args.kiln_run, art, "--device=" + device, "--output-dir", out_dir]
                    for n, t in zip(names, inputs):
                        p = os.path.join(out_dir, n + ".npy")
                        np.save(p, t.numpy())
                        cmd += ["--input", f"{n}={p}"]
                    rc, out = run(cmd)
                    sizes = " x ".join(str(list(t.shape)) for t in inputs)
                    if rc != 0:
                        print(f"FAIL {name} [{label}] on {device} ({sizes}): kiln-run failed (exit {rc}):\n{out.strip()[:2000]}")
                        failures += 1
                        continue
                    got = np.load(os.path.join(out_dir, sorted(f for f in os.listdir(out_dir) if f.startswith("out"))[0]))
                    # Absolute tolerance relative to the output's scale (logits of random networks
                    # range from 1e-2 to 1e2).
                    scale = max(float(np.max(np.abs(want))), 1e-30)
                    ok = got.shape == want.shape and np.allclose(got, want, rtol=RTOL, atol=ATOL * scale)
                    err = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
                    print(f"{'PASS' if ok else 'FAIL'} {name} [{label}] on {device} ({sizes}): max abs error {err:.3g}"
                          f" (|out| max {float(np.max(np.abs(want))):.3g}; kilnc {compile_s:.1f} s)")
                    failures += not ok
    if failures:
        sys.exit(f"{failures} check(s) failed")
    print("all checks passed")


if __name__ == "__main__":
    main()
