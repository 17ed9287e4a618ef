#!/usr/bin/python3
"""Writes the real-model ONNX files that bench/compile_time.py compiles, with seeded random weights.

  resnet18.onnx      torchvision ResNet-18 (basic blocks [2, 2, 2, 2]), input x: float[1, 3, 224, 224]
  resnet50.onnx      torchvision ResNet-50 (bottleneck blocks [3, 4, 6, 3], stride on the 3x3 conv)
  mobilenetv2.onnx   torchvision MobileNetV2 (inverted residuals, depthwise convs via `group`,
                     ReLU6 as Clip(x, 0, 6) with min/max as initializer inputs)
  bert_encoder.onnx  a BERT-base-like encoder without embeddings: 6 post-norm layers, d=768,
                     12 heads, FFN 3072, GELU written with Erf; input x: float[1, 128, 768]

All float32, batch 1 (--batch N for another), static shapes, opset 17, IR version 8, laid out as PyTorch's exporter lays
out an export without Conv+BatchNormalization fusion: convolutions without bias followed by
BatchNormalization, Linear layers as Gemm (transB=1) after Flatten, or as MatMul with an
[in, out] weight plus Add on 3-D activations; node and initializer names follow the modules.
Weights come from numpy.random.default_rng(0) (one generator per model, so a model's weights do
not depend on which other models are built): convolutions He-normal (fan_out, as torchvision
initializes them), linear layers normal / sqrt(fan_in), BERT's matrices normal * 0.02, batch-norm
statistics random but valid (variance in [0.5, 1.5)).

Usage: /usr/bin/python3 bench/make_compile_models.py OUT_DIR [--models resnet18,resnet50,mobilenetv2,bert_encoder]
       [--ort-python PY] [--no-ort-check] [--batch N]

Needs NumPy and the `onnx` package (Debian's python3-onnx). Each written model is checked with
onnx.checker (full_check=False). When onnxruntime is importable here, or in PY (default: the
repository's .venv/bin/python, which scripts/setup.sh fills), each model is also run once on a
seeded input and its output checked for shape and finiteness; without onnxruntime that check is
skipped silently.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BATCH = 1  # every model's batch size (--batch)

OPSET = 17
IR_VERSION = 8
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TWO_GIB = 2 ** 31


class Builder:
    """Collects nodes and initializers of one graph; names follow torch's module paths."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.bytes = 0
        self._consts = {}

    def init(self, name, array):
        tensor = numpy_helper.from_array(np.ascontiguousarray(array), name)
        self.inits.append(tensor)
        self.bytes += np.asarray(array).nbytes
        return name

    def const(self, name, value, dtype=np.float32):
        """A scalar or small constant, shared between the nodes that use the same value."""
        key = (name, np.asarray(value, dtype).tobytes(), np.asarray(value).shape)
        if key not in self._consts:
            self._consts[key] = self.init(name, np.asarray(value, dtype))
        return self._consts[key]

    def node(self, op, inputs, output, name, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [output], name=name, **attrs))
        return output

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    # ---- layers ----------------------------------------------------------------------------

    def conv(self, x, prefix, cin, cout, k, stride=1, pad=0, groups=1):
        fan_out = cout * k * k // groups  # torchvision: kaiming_normal_(mode="fan_out", relu)
        w = self.init(prefix + ".weight", self.normal((cout, cin // groups, k, k), math.sqrt(2.0 / fan_out)))
        return self.node("Conv", [x, w], prefix + "_out", "/" + prefix + "/Conv",
                         dilations=[1, 1], group=groups, kernel_shape=[k, k],
                         pads=[pad, pad, pad, pad], strides=[stride, stride])

    def bn(self, x, prefix, c):
        scale = self.init(prefix + ".weight", (1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32))
        bias = self.init(prefix + ".bias", (0.05 * self.rng.standard_normal(c)).astype(np.float32))
        mean = self.init(prefix + ".running_mean", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        var = self.init(prefix + ".running_var", (0.5 + self.rng.random(c)).astype(np.float32))
        return self.node("BatchNormalization", [x, scale, bias, mean, var], prefix + "_out",
                         "/" + prefix + "/BatchNormalization", epsilon=1e-5, momentum=0.9)

    def relu(self, x, name):
        return self.node("Relu", [x], name + "_out", "/" + name + "/Relu")

    def relu6(self, x, name):
        lo = self.const("relu6.min", 0.0)
        hi = self.const("relu6.max", 6.0)
        return self.node("Clip", [x, lo, hi], name + "_out", "/" + name + "/Clip")

    def add(self, a, b, name):
        return self.node("Add", [a, b], name + "_out", "/" + name + "/Add")

    def classifier(self, x, prefix, cin, classes):
        x = self.node("GlobalAveragePool", [x], "gap_out", "/avgpool/GlobalAveragePool")
        x = self.node("Flatten", [x], "flatten_out", "/Flatten", axis=1)
        bound = 1.0 / math.sqrt(cin)
        w = self.init(prefix + ".weight", self.rng.uniform(-bound, bound, (classes, cin)).astype(np.float32))
        b = self.init(prefix + ".bias", self.rng.uniform(-bound, bound, classes).astype(np.float32))
        return self.node("Gemm", [x, w, b], "logits", "/" + prefix + "/Gemm", alpha=1.0, beta=1.0, transB=1)

    def linear3d(self, x, prefix, cin, cout, std):
        """torch's Linear on a 3-D activation: MatMul with the transposed [in, out] weight, then Add."""
        w = self.init(prefix + ".weight_t", self.normal((cin, cout), std))
        b = self.init(prefix + ".bias", self.normal((cout,), 0.02))
        y = self.node("MatMul", [x, w], prefix + "_mm", "/" + prefix + "/MatMul")
        return self.node("Add", [y, b], prefix + "_out", "/" + prefix + "/Add")

    def layer_norm(self, x, prefix, d):
        g = self.init(prefix + ".weight", (1.0 + 0.05 * self.rng.standard_normal(d)).astype(np.float32))
        b = self.init(prefix + ".bias", (0.02 * self.rng.standard_normal(d)).astype(np.float32))
        return self.node("LayerNormalization", [x, g, b], prefix + "_out",
                         "/" + prefix + "/LayerNormalization", axis=-1, epsilon=1e-12)

    def model(self, name, inputs, outputs):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="kiln-bench-compile-models")
        model.ir_version = IR_VERSION
        return model


# ---- ResNet ---------------------------------------------------------------------------------

def make_resnet(block, layers, name):
    b = Builder(0)
    x = b.conv("x", "conv1", 3, 64, 7, stride=2, pad=3)
    x = b.relu(b.bn(x, "bn1", 64), "relu")
    x = b.node("MaxPool", [x], "maxpool_out", "/maxpool/MaxPool", ceil_mode=0, dilations=[1, 1],
               kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    expansion = 4 if block == "bottleneck" else 1
    inplanes = 64
    for li, (planes, blocks) in enumerate(zip((64, 128, 256, 512), layers), start=1):
        for bi in range(blocks):
            stride = 2 if (li > 1 and bi == 0) else 1
            p = f"layer{li}.{bi}"
            identity = x
            if block == "basic":
                y = b.relu(b.bn(b.conv(x, p + ".conv1", inplanes, planes, 3, stride, 1), p + ".bn1", planes),
                           p + ".relu")
                y = b.bn(b.conv(y, p + ".conv2", planes, planes, 3, 1, 1), p + ".bn2", planes)
            else:  # torchvision's Bottleneck (ResNet v1.5): the stride is on the 3x3 conv
                y = b.relu(b.bn(b.conv(x, p + ".conv1", inplanes, planes, 1), p + ".bn1", planes), p + ".relu")
                y = b.relu(b.bn(b.conv(y, p + ".conv2", planes, planes, 3, stride, 1), p + ".bn2", planes),
                           p + ".relu_1")
                y = b.bn(b.conv(y, p + ".conv3", planes, planes * expansion, 1), p + ".bn3", planes * expansion)
            if stride != 1 or inplanes != planes * expansion:
                identity = b.bn(b.conv(x, p + ".downsample.0", inplanes, planes * expansion, 1, stride),
                                p + ".downsample.1", planes * expansion)
            x = b.relu(b.add(y, identity, p), p + ".relu_2")
            inplanes = planes * expansion
    b.classifier(x, "fc", 512 * expansion, 1000)
    return b.model(name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, 3, 224, 224])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, 1000])]), b.bytes


def make_resnet18():
    return make_resnet("basic", (2, 2, 2, 2), "resnet18")


def make_resnet50():
    return make_resnet("bottleneck", (3, 4, 6, 3), "resnet50")


# ---- MobileNetV2 ----------------------------------------------------------------------------

def make_mobilenetv2():
    b = Builder(0)

    def conv_bn(x, prefix, cin, cout, k, stride, groups=1, act=True):
        y = b.bn(b.conv(x, prefix + ".0", cin, cout, k, stride, (k - 1) // 2, groups), prefix + ".1", cout)
        return b.relu6(y, prefix + ".2") if act else y

    x = conv_bn("x", "features.0", 3, 32, 3, 2)
    cin, idx = 32, 1
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            p = f"features.{idx}.conv"
            y, j = x, 0
            if t != 1:
                y = conv_bn(y, f"{p}.{j}", cin, hidden, 1, 1)
                j += 1
            y = conv_bn(y, f"{p}.{j}", hidden, hidden, 3, stride, groups=hidden)
            y = b.bn(b.conv(y, f"{p}.{j + 1}", hidden, c, 1), f"{p}.{j + 2}", c)
            x = b.add(x, y, f"features.{idx}") if stride == 1 and cin == c else y
            cin, idx = c, idx + 1
    x = conv_bn(x, f"features.{idx}", cin, 1280, 1, 1)
    b.classifier(x, "classifier.1", 1280, 1000)  # classifier.0 is Dropout: nothing in eval
    return b.model("mobilenetv2", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, 3, 224, 224])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, 1000])]), b.bytes


# ---- BERT encoder ---------------------------------------------------------------------------

BERT = dict(layers=6, d=768, heads=12, ffn=3072, seq=128)


def make_bert_encoder():
    b = Builder(0)
    L, D, H, F, T = (BERT[k] for k in ("layers", "d", "heads", "ffn", "seq"))
    B = BATCH
    hd = D // H
    split = b.const("shape_split_heads", [B, T, H, hd], np.int64)
    merge = b.const("shape_merge_heads", [B, T, D], np.int64)
    scale = b.const("attention_scale", math.sqrt(hd))
    sqrt2 = b.const("gelu_sqrt2", math.sqrt(2.0))
    one = b.const("gelu_one", 1.0)
    half = b.const("gelu_half", 0.5)
    x = "x"
    for i in range(L):
        p = f"encoder.layer.{i}"
        a = p + ".attention.self"
        heads = {}
        for which, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])):
            y = b.linear3d(x, f"{a}.{which}", D, D, 0.02)
            y = b.node("Reshape", [y, split], f"{a}.{which}_heads", f"/{a}/{which}/Reshape")
            heads[which] = b.node("Transpose", [y], f"{a}.{which}_t", f"/{a}/{which}/Transpose", perm=perm)
        s = b.node("MatMul", [heads["query"], heads["key"]], a + ".scores", f"/{a}/MatMul")
        s = b.node("Div", [s, scale], a + ".scaled", f"/{a}/Div")
        s = b.node("Softmax", [s], a + ".probs", f"/{a}/Softmax", axis=-1)
        c = b.node("MatMul", [s, heads["value"]], a + ".context", f"/{a}/MatMul_1")
        c = b.node("Transpose", [c], a + ".context_t", f"/{a}/Transpose_3", perm=[0, 2, 1, 3])
        c = b.node("Reshape", [c, merge], a + ".context_m", f"/{a}/Reshape_3")
        o = b.linear3d(c, p + ".attention.output.dense", D, D, 0.02)
        o = b.add(o, x, p + ".attention.output")
        x = b.layer_norm(o, p + ".attention.output.LayerNorm", D)
        h = b.linear3d(x, p + ".intermediate.dense", D, F, 0.02)
        g = p + ".intermediate.intermediate_act_fn"  # x * 0.5 * (1 + erf(x / sqrt(2))), as torch exports it
        e = b.node("Div", [h, sqrt2], g + ".div", f"/{g}/Div")
        e = b.node("Erf", [e], g + ".erf", f"/{g}/Erf")
        e = b.node("Add", [e, one], g + ".add", f"/{g}/Add")
        e = b.node("Mul", [h, e], g + ".mul", f"/{g}/Mul")
        e = b.node("Mul", [e, half], g + ".out", f"/{g}/Mul_1")
        o = b.linear3d(e, p + ".output.dense", F, D, 0.02)
        o = b.add(o, x, p + ".output")
        x = b.layer_norm(o, p + ".output.LayerNorm", D)
    b.nodes[-1].output[0] = "y"  # the last LayerNormalization writes the graph output
    return b.model("bert_encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, T, D])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, T, D])]), b.bytes


MODELS = {
    "resnet18": make_resnet18,
    "resnet50": make_resnet50,
    "mobilenetv2": make_mobilenetv2,
    "bert_encoder": make_bert_encoder,
}
def input_shape(name):
    return [BATCH, 128, 768] if name == "bert_encoder" else [BATCH, 3, 224, 224]


def output_shape(name):
    return [BATCH, 128, 768] if name == "bert_encoder" else [BATCH, 1000]


def save(model, path, weight_bytes):
    """Checks and writes one model; above 2 GiB the weights go to PATH.data (external data)."""
    if weight_bytes + (1 << 20) < TWO_GIB:
        onnx.checker.check_model(model, full_check=False)
        onnx.save_model(model, path)
    else:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(path) + ".data", size_threshold=1024)
        onnx.checker.check_model(path, full_check=False)


# Run in an interpreter that has onnxruntime (it need not have onnx): one run per model.
ORT_CHECK = r"""
import json, sys, time, numpy as np, onnxruntime as ort
failed = False
for path, shape, out_shape in json.loads(sys.argv[1]):
    t = time.perf_counter()
    try:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        ok = list(y.shape) == out_shape and bool(np.isfinite(y).all())
        msg = "output %s, finite %s, |y| max %.3g" % (list(y.shape), bool(np.isfinite(y).all()), float(np.abs(y).max()))
    except Exception as e:
        ok, msg = False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300])
    failed |= not ok
    print("  onnxruntime %s %s: %s (%.1f s) %s" % (ort.__version__, path, "ok" if ok else "FAILED",
          time.perf_counter() - t, msg), flush=True)
sys.exit(1 if failed else 0)
"""


def ort_check(entries, ort_python):
    """Runs ORT_CHECK here if onnxruntime imports, else in ort_python if that has it; else skips."""
    try:
        import onnxruntime  # noqa: F401
        python = sys.executable
    except ImportError:
        if not ort_python or not os.access(ort_python, os.X_OK) or subprocess.run(
                [ort_python, "-c", "import onnxruntime, numpy"], capture_output=True).returncode != 0:
            return True
        python = ort_python
    return subprocess.run([python, "-c", ORT_CHECK, json.dumps(entries)]).returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma list of " + ", ".join(MODELS) + " (default: all)")
    ap.add_argument("--ort-python", default=os.path.join(ROOT, ".venv", "bin", "python"),
                    help="a Python with onnxruntime for the run check, when this one has none")
    ap.add_argument("--no-ort-check", action="store_true", help="skip the onnxruntime run check")
    ap.add_argument("--batch", type=int, default=1, help="the models' (static) batch size (default 1)")
    args = ap.parse_args()
    global BATCH
    BATCH = args.batch
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit("unknown model(s): %s (known: %s)" % (", ".join(unknown), ", ".join(MODELS)))
    os.makedirs(args.out_dir, exist_ok=True)
    written = []
    for name in names:
        t = time.perf_counter()
        model, weight_bytes = MODELS[name]()
        path = os.path.join(args.out_dir, name + ".onnx")
        save(model, path, weight_bytes)
        print("%s  %.1f MB weights, %d nodes, %d initializers (%.1f s)" % (
            path, weight_bytes / 1e6, len(model.graph.node), len(model.graph.initializer),
            time.perf_counter() - t), flush=True)
        written.append([os.path.abspath(path), input_shape(name), output_shape(name)])
        del model
    if not args.no_ort_check and not ort_check(written, args.ort_python):
        sys.exit("onnxruntime could not run a model (see above)")


if __name__ == "__main__":
    main()
