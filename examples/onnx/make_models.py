#!/usr/bin/env python3
"""Builds the example ONNX models with onnx.helper (Debian's python3-onnx) and seeded weights:

  mlp.onnx                  Gemm + Relu + Gemm + Softmax, dynamic batch "N"
  cnn.onnx                  Conv + BatchNormalization + Relu, a residual block, MaxPool,
                            GlobalAveragePool, Flatten, Gemm
  transformer_encoder.onnx  a pre-norm encoder layer: LayerNormalization, 2-head attention
                            (MatMul/Softmax/Transpose, Reshape via Shape->Gather->Concat with a
                            dynamic batch), GELU written with Erf, residuals
  tiny_lm.onnx              a one-block causal language model over dynamic batch AND sequence
                            ("batch", "seq") written as PyTorch exports such models: token
                            embeddings, position ids sliced from a buffer to the sequence
                            length, token types from ConstantOfShape(Shape(ids)), a causal mask
                            from Range(0, seq) and a padding mask from attention_mask expanded
                            to Where(Equal(shape, -1), 1, shape), heads split and merged by
                            Reshape to shapes built from Shape, a tied LM head

Usage: python3 make_models.py [OUT_DIR]   (default: this directory)

Each model also has a NumPy reference implementation here (reference(name, inputs)), which the
test tests/onnx/check_examples.py compares Kiln's outputs with. Every weight stays under 4096
elements so `kilnc --emit=ir` prints them as literals that recompile.
"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def _model(nodes, name, inputs, outputs, inits):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kiln-examples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def weights(seed, shapes):
    rng = np.random.default_rng(seed)
    return {name: (rng.standard_normal(shape) * scale).astype(np.float32)
            for name, (shape, scale) in shapes.items()}


# ---- MLP ------------------------------------------------------------------------------------

MLP_W = weights(1, {"fc1.weight": ((32, 16), 0.25), "fc1.bias": ((32,), 0.1),
                    "fc2.weight": ((10, 32), 0.2), "fc2.bias": ((10,), 0.1)})


def make_mlp():
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1, name="fc1"),
        helper.make_node("Relu", ["h"], ["h_relu"], name="relu"),
        helper.make_node("Gemm", ["h_relu", "fc2.weight", "fc2.bias"], ["logits"], transB=1, name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1, name="softmax"),
    ]
    return _model(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                  [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
                  [_init(k, v) for k, v in MLP_W.items()])


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def mlp_reference(x):
    w = MLP_W
    h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
    return softmax(h @ w["fc2.weight"].T + w["fc2.bias"])


# ---- CNN ------------------------------------------------------------------------------------

CNN_W = weights(2, {"conv1.w": ((8, 3, 3, 3), 0.3), "conv1.b": ((8,), 0.1),
                    "conv2.w": ((8, 8, 3, 3), 0.15), "conv2.b": ((8,), 0.1),
                    "conv3.w": ((16, 8, 3, 3), 0.15), "conv3.b": ((16,), 0.1),
                    "fc.w": ((10, 16), 0.3), "fc.b": ((10,), 0.1)})
_rng = np.random.default_rng(3)
for _p in ("bn1", "bn2"):
    CNN_W[_p + ".scale"] = (1.0 + 0.2 * _rng.standard_normal(8)).astype(np.float32)
    CNN_W[_p + ".bias"] = (0.1 * _rng.standard_normal(8)).astype(np.float32)
    CNN_W[_p + ".mean"] = (0.1 * _rng.standard_normal(8)).astype(np.float32)
    CNN_W[_p + ".var"] = (1.0 + 0.3 * _rng.random(8)).astype(np.float32)
BN_EPS = 1e-5


def make_cnn():
    def bn(x, p, y):
        return helper.make_node("BatchNormalization", [x, p + ".scale", p + ".bias", p + ".mean", p + ".var"],
                                [y], epsilon=BN_EPS, name=p)
    nodes = [
        helper.make_node("Conv", ["x", "conv1.w", "conv1.b"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        bn("c1", "bn1", "b1"),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "conv2.w", "conv2.b"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        bn("c2", "bn2", "b2"),
        helper.make_node("Add", ["b2", "r1"], ["res"], name="residual"),
        helper.make_node("Relu", ["res"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("Conv", ["p1", "conv3.w", "conv3.b"], ["c3"], kernel_shape=[3, 3],
                         auto_pad="SAME_UPPER", strides=[2, 2], name="conv3"),
        helper.make_node("Relu", ["c3"], ["r3"], name="relu3"),
        helper.make_node("GlobalAveragePool", ["r3"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1, name="fc"),
    ]
    return _model(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 10])],
                  [_init(k, v) for k, v in CNN_W.items()])


def conv2d(x, w, b, stride=1, pads=(0, 0, 0, 0)):
    """NCHW convolution; pads = (top, left, bottom, right)."""
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    oh = (h - kh) // stride + 1
    ow = (wd - kw) // stride + 1
    out = np.zeros((n, m, oh, ow), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j])
    return out + b.reshape(1, -1, 1, 1)


def cnn_reference(x):
    w = CNN_W

    def bn(v, p):
        shape = (1, -1, 1, 1)
        return ((v - w[p + ".mean"].reshape(shape)) / np.sqrt(w[p + ".var"].reshape(shape) + BN_EPS)
                * w[p + ".scale"].reshape(shape) + w[p + ".bias"].reshape(shape))
    r1 = np.maximum(bn(conv2d(x, w["conv1.w"], w["conv1.b"], pads=(1, 1, 1, 1)), "bn1"), 0)
    r2 = np.maximum(bn(conv2d(r1, w["conv2.w"], w["conv2.b"], pads=(1, 1, 1, 1)), "bn2") + r1, 0)
    n, c, h, wd = r2.shape
    p1 = r2.reshape(n, c, h // 2, 2, wd // 2, 2).max(axis=(3, 5))
    # SAME_UPPER, stride 2, kernel 3 on 8x8: out 4, total pad 1 -> (0 before, 1 after).
    r3 = np.maximum(conv2d(p1, w["conv3.w"], w["conv3.b"], stride=2, pads=(0, 0, 1, 1)), 0)
    gap = r3.mean(axis=(2, 3))
    return gap @ w["fc.w"].T + w["fc.b"]


# ---- transformer encoder layer -----------------------------------------------------------------

D, H, S, F = 16, 2, 8, 32
DH = D // H
TF_W = weights(4, {"wq": ((D, D), 0.25), "bq": ((D,), 0.05), "wk": ((D, D), 0.25), "bk": ((D,), 0.05),
                   "wv": ((D, D), 0.25), "bv": ((D,), 0.05), "wo": ((D, D), 0.25), "bo": ((D,), 0.05),
                   "w1": ((D, F), 0.25), "b1": ((F,), 0.05), "w2": ((F, D), 0.2), "b2": ((D,), 0.05)})
_rng = np.random.default_rng(5)
for _p in ("ln1", "ln2"):
    TF_W[_p + ".gamma"] = (1.0 + 0.1 * _rng.standard_normal(D)).astype(np.float32)
    TF_W[_p + ".beta"] = (0.1 * _rng.standard_normal(D)).astype(np.float32)
LN_EPS = 1e-5


def make_transformer():
    n = helper.make_node
    consts = [
        numpy_helper.from_array(np.array([0], dtype=np.int64), "idx0"),
        numpy_helper.from_array(np.array([S, H, DH], dtype=np.int64), "heads_shape"),
        numpy_helper.from_array(np.array([S, D], dtype=np.int64), "model_shape"),
        numpy_helper.from_array(np.array(math.sqrt(DH), dtype=np.float32), "scale"),
        numpy_helper.from_array(np.array(math.sqrt(2.0), dtype=np.float32), "sqrt2"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
        numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half"),
    ]
    nodes = [
        n("LayerNormalization", ["x", "ln1.gamma", "ln1.beta"], ["ln1"], axis=-1, epsilon=LN_EPS, name="ln1"),
        # The batch size, taken from the input's shape as PyTorch exports do.
        n("Shape", ["x"], ["x_shape"], name="shape"),
        n("Gather", ["x_shape", "idx0"], ["batch"], axis=0, name="batch"),
        n("Concat", ["batch", "heads_shape"], ["split_shape"], axis=0, name="split_shape"),
        n("Concat", ["batch", "model_shape"], ["merge_shape"], axis=0, name="merge_shape"),
    ]
    for p in ("q", "k", "v"):
        nodes += [
            n("MatMul", ["ln1", "w" + p], [p + "_mm"], name=p + "_proj"),
            n("Add", [p + "_mm", "b" + p], [p + "_lin"], name=p + "_bias"),
            n("Reshape", [p + "_lin", "split_shape"], [p + "_heads"], name=p + "_split"),
        ]
    nodes += [
        n("Transpose", ["q_heads"], ["q_t"], perm=[0, 2, 1, 3], name="q_t"),
        n("Transpose", ["k_heads"], ["k_t"], perm=[0, 2, 3, 1], name="k_t"),
        n("Transpose", ["v_heads"], ["v_t"], perm=[0, 2, 1, 3], name="v_t"),
        n("MatMul", ["q_t", "k_t"], ["scores"], name="scores"),
        n("Div", ["scores", "scale"], ["scaled"], name="scaled"),
        n("Softmax", ["scaled"], ["attn"], axis=-1, name="attn"),
        n("MatMul", ["attn", "v_t"], ["ctx"], name="ctx"),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3], name="ctx_t"),
        n("Reshape", ["ctx_t", "merge_shape"], ["ctx_m"], name="merge"),
        n("MatMul", ["ctx_m", "wo"], ["o_mm"], name="o_proj"),
        n("Add", ["o_mm", "bo"], ["o_lin"], name="o_bias"),
        n("Add", ["x", "o_lin"], ["res1"], name="residual1"),
        n("LayerNormalization", ["res1", "ln2.gamma", "ln2.beta"], ["ln2"], axis=-1, epsilon=LN_EPS, name="ln2"),
        n("MatMul", ["ln2", "w1"], ["f1_mm"], name="ffn1"),
        n("Add", ["f1_mm", "b1"], ["f1"], name="ffn1_bias"),
        # GELU: 0.5 * x * (1 + erf(x / sqrt(2)))
        n("Div", ["f1", "sqrt2"], ["g_div"], name="gelu_div"),
        n("Erf", ["g_div"], ["g_erf"], name="gelu_erf"),
        n("Add", ["g_erf", "one"], ["g_add"], name="gelu_add"),
        n("Mul", ["f1", "g_add"], ["g_mul"], name="gelu_mul"),
        n("Mul", ["g_mul", "half"], ["gelu"], name="gelu_half"),
        n("MatMul", ["gelu", "w2"], ["f2_mm"], name="ffn2"),
        n("Add", ["f2_mm", "b2"], ["f2"], name="ffn2_bias"),
        n("Add", ["res1", "f2"], ["y"], name="residual2"),
    ]
    return _model(nodes, "transformer_encoder",
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", S, D])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", S, D])],
                  [_init(k, v) for k, v in TF_W.items()] + consts)


def layer_norm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LN_EPS) * gamma + beta


def transformer_reference(x):
    from math import erf
    w = TF_W
    b = x.shape[0]
    h = layer_norm(x, w["ln1.gamma"], w["ln1.beta"])
    q, k, v = ((h @ w["w" + p] + w["b" + p]).reshape(b, S, H, DH).transpose(0, 2, 1, 3) for p in "qkv")
    attn = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(DH))
    ctx = (attn @ v).transpose(0, 2, 1, 3).reshape(b, S, D)
    res1 = x + ctx @ w["wo"] + w["bo"]
    f1 = layer_norm(res1, w["ln2.gamma"], w["ln2.beta"]) @ w["w1"] + w["b1"]
    gelu = 0.5 * f1 * (1 + np.vectorize(erf)(f1 / math.sqrt(2)))
    return res1 + gelu @ w["w2"] + w["b2"]


# ---- tiny causal language model (dynamic batch and sequence) ---------------------------------

LM_V, LM_D, LM_H, LM_MAXLEN, LM_TYPES = 40, 16, 2, 32, 2
LM_DH = LM_D // LM_H
LM_W = weights(6, {"tok_emb": ((LM_V, LM_D), 0.5), "pos_emb": ((LM_MAXLEN, LM_D), 0.3),
                   "type_emb": ((LM_TYPES, LM_D), 0.3),
                   "wq": ((LM_D, LM_D), 0.3), "wk": ((LM_D, LM_D), 0.3), "wv": ((LM_D, LM_D), 0.3),
                   "wo": ((LM_D, LM_D), 0.3), "ln.gamma": ((LM_D,), 0.1), "ln.beta": ((LM_D,), 0.1)})
LM_W["ln.gamma"] += 1.0


def make_tiny_lm():
    n = helper.make_node
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)
    f32 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.float32), name)
    consts = [
        i64("position_ids", np.arange(LM_MAXLEN)[None, :]),  # PyTorch's registered buffer
        i64("i0", [0]), i64("i1", [1]), i64("s0", 0), i64("s1", 1), i64("one", [1]), i64("minus_one", [-1]),
        i64("heads", [LM_H, LM_DH]), i64("model_dim", [LM_D]), i64("ones4", [1, 1, 1, 1]),
        f32("scale", math.sqrt(LM_DH)), f32("f_one", 1.0), f32("neg_big", -1e4), f32("zero", 0.0),
    ]
    nodes = [
        n("Shape", ["input_ids"], ["ids_shape"]),
        n("Gather", ["ids_shape", "i0"], ["batch"], axis=0),
        n("Gather", ["ids_shape", "i1"], ["seq"], axis=0),
        n("Gather", ["ids_shape", "s1"], ["seq_scalar"], axis=0),
        # Embeddings: tokens, positions (the buffer cut to the sequence), token types (zeros).
        n("Gather", ["tok_emb", "input_ids"], ["tok"], axis=0),
        n("Slice", ["position_ids", "i0", "seq", "i1"], ["pos_ids"]),
        n("Gather", ["pos_emb", "pos_ids"], ["pos"], axis=0),
        n("ConstantOfShape", ["ids_shape"], ["type_ids"],
          value=numpy_helper.from_array(np.array([0], dtype=np.int64))),
        n("Gather", ["type_emb", "type_ids"], ["typ"], axis=0),
        n("Add", ["tok", "pos"], ["emb0"]),
        n("Add", ["emb0", "typ"], ["emb"]),
        n("LayerNormalization", ["emb", "ln.gamma", "ln.beta"], ["h"], axis=-1, epsilon=1e-5),
        # Causal mask from Range(0, seq): key position <= query position.
        n("Range", ["s0", "seq_scalar", "s1"], ["steps"]),
        n("Unsqueeze", ["steps", "i0"], ["key_pos"]),
        n("Unsqueeze", ["steps", "i1"], ["query_pos"]),
        n("LessOrEqual", ["key_pos", "query_pos"], ["causal"]),
        n("Where", ["causal", "zero", "neg_big"], ["causal_bias"]),
        # Padding mask [batch, 1, 1, seq] expanded to [batch, 1, seq, seq] as PyTorch's legacy
        # exporter writes expand(): Where(Equal(shape, -1), 1, shape).
        n("Unsqueeze", ["attention_mask", "i1"], ["m1"]),
        n("Unsqueeze", ["m1", "i1"], ["m2"]),
        n("Concat", ["batch", "one", "seq", "seq"], ["mask_shape"], axis=0),
        n("Equal", ["mask_shape", "minus_one"], ["is_free"]),
        n("Where", ["is_free", "ones4", "mask_shape"], ["expand_shape"]),
        n("Expand", ["m2", "expand_shape"], ["m4"]),
        n("Cast", ["m4"], ["mf"], to=TensorProto.FLOAT),
        n("Sub", ["f_one", "mf"], ["inv"]),
        n("Mul", ["inv", "neg_big"], ["pad_bias"]),
        n("Add", ["pad_bias", "causal_bias"], ["bias"]),
        n("Concat", ["batch", "seq", "heads"], ["split_shape"], axis=0),
        n("Concat", ["batch", "seq", "model_dim"], ["merge_shape"], axis=0),
    ]
    for p in "qkv":
        nodes += [n("MatMul", ["h", "w" + p], [p + "_lin"]),
                  n("Reshape", [p + "_lin", "split_shape"], [p + "_heads"])]
    nodes += [
        n("Transpose", ["q_heads"], ["q_t"], perm=[0, 2, 1, 3]),
        n("Transpose", ["k_heads"], ["k_t"], perm=[0, 2, 3, 1]),
        n("Transpose", ["v_heads"], ["v_t"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q_t", "k_t"], ["scores"]),
        n("Div", ["scores", "scale"], ["scaled"]),
        n("Add", ["scaled", "bias"], ["masked"]),
        n("Softmax", ["masked"], ["attn"], axis=-1),
        n("MatMul", ["attn", "v_t"], ["ctx"]),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx_t", "merge_shape"], ["ctx_m"]),
        n("MatMul", ["ctx_m", "wo"], ["o"]),
        n("Add", ["emb", "o"], ["res"]),
        # Tied LM head: logits = res @ tok_emb^T.
        n("Transpose", ["tok_emb"], ["tok_emb_t"], perm=[1, 0]),
        n("MatMul", ["res", "tok_emb_t"], ["logits"]),
    ]
    return _model(nodes, "tiny_lm",
                  [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
                   helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", LM_V])],
                  [_init(k, v) for k, v in LM_W.items()] + consts)


def tiny_lm_reference(input_ids, attention_mask):
    w = {k: v.astype(np.float64) for k, v in LM_W.items()}
    b, s = input_ids.shape
    emb = w["tok_emb"][input_ids] + w["pos_emb"][np.arange(s)][None] + w["type_emb"][0]
    h = (emb - emb.mean(-1, keepdims=True)) / np.sqrt(emb.var(-1, keepdims=True) + 1e-5) * w["ln.gamma"] + w["ln.beta"]
    q, k, v = ((h @ w["w" + p]).reshape(b, s, LM_H, LM_DH).transpose(0, 2, 1, 3) for p in "qkv")
    causal = np.where(np.arange(s)[None, :] <= np.arange(s)[:, None], 0.0, -1e4)
    pad = (1.0 - attention_mask[:, None, None, :].astype(np.float64)) * -1e4
    attn = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(LM_DH) + pad + causal)
    ctx = (attn @ v).transpose(0, 2, 1, 3).reshape(b, s, LM_D)
    return (emb + ctx @ w["wo"]) @ w["tok_emb"].T


def tiny_lm_inputs(rng):
    """Three (batch, sequence) sizes through one compiled model, with padding at the ends."""
    cases = []
    for b, s in ((2, 5), (1, 17), (3, 32)):
        ids = rng.integers(0, LM_V, size=(b, s)).astype(np.int64)
        mask = np.ones((b, s), dtype=np.int64)
        for row in range(1, b):
            mask[row, s - row:] = 0
        cases.append({"input_ids": ids, "attention_mask": mask})
    return cases


def _normal_inputs(**shapes):
    return lambda rng: [{k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()}]


# name -> (builder, NumPy reference, inputs(rng) -> a list of input dicts, each one run)
MODELS = {
    "mlp": (make_mlp, mlp_reference, _normal_inputs(x=(5, 16))),
    "cnn": (make_cnn, cnn_reference, _normal_inputs(x=(2, 3, 16, 16))),
    "transformer_encoder": (make_transformer, transformer_reference, _normal_inputs(x=(3, S, D))),
    "tiny_lm": (make_tiny_lm, tiny_lm_reference, tiny_lm_inputs),
}


def reference(name, inputs):
    """The NumPy reference output of model `name` (float64 math) for the given input arrays."""
    args = [np.asarray(a, dtype=np.float64) if np.issubdtype(a.dtype, np.floating) else a for a in inputs.values()]
    return MODELS[name][1](*args)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out_dir, exist_ok=True)
    for name, (make, _, _) in MODELS.items():
        path = os.path.join(out_dir, name + ".onnx")
        onnx.save(make(), path)
        print("wrote", path)


if __name__ == "__main__":
    main()
