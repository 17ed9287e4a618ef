#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz tests (tests/fuzz/CMakeLists.txt):

  tests/fuzz/corpus/fuzz_npy/                 .npy files: every dtype Kiln reads, format versions
                                              1-3, an empty and a scalar array, and files the
                                              reader refuses (Fortran order, big-endian, f64)
  tests/fuzz/corpus/fuzz_safetensors/         .safetensors files: several dtypes, metadata, an
                                              unsupported dtype, empty and scalar tensors
  tests/onnx/seeds/                           small .onnx models of a few ops each; the *_ext
                                              ones keep their initializers in external data
                                              (<model>.bin next to the model)
  tests/fuzz/corpus/fuzz_onnx_external_data/  the external-data models packed as that target
                                              reads them: [u32 model size][model][data file],
                                              the data file named weights.bin

Usage: python3 tests/fuzz/make_corpus.py   (needs NumPy and onnx; deterministic output)
"""
import json
import os
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
ONNX_SEEDS = os.path.join(ROOT, "tests", "onnx", "seeds")
# The data file name fuzz_onnx_external_data.cpp writes the data part to.
PACKED_DATA_NAME = "weights.bin"
OPSET = 17


def out_dir(*parts):
    path = os.path.join(*parts)
    os.makedirs(path, exist_ok=True)
    return path


def write_npy():
    d = out_dir(CORPUS, "fuzz_npy")
    rng = np.random.default_rng(0)
    arrays = {
        "f32_2x3": rng.standard_normal((2, 3)).astype(np.float32),
        "f16_4": rng.standard_normal(4).astype(np.float16),
        "i64_3": np.array([0, -1, 7], dtype=np.int64),
        "i32_scalar": np.array(5, dtype=np.int32),
        "i8_2x2": np.array([[1, -2], [3, -4]], dtype=np.int8),
        "u8_5": np.arange(5, dtype=np.uint8),
        "bool_3": np.array([True, False, True]),
        "bf16_bits_u2": np.array([0x3F80, 0xC000], dtype=np.uint16),
        "bf16_void_v2": np.array([0x3F80, 0x4000], dtype=np.uint16).view("V2"),
        "empty_0x3": np.zeros((0, 3), dtype=np.float32),
        "refused_f64": np.array([1.5], dtype=np.float64),
        "refused_big_endian": np.array([1, 2], dtype=">i4"),
    }
    for name, array in arrays.items():
        with open(os.path.join(d, name + ".npy"), "wb") as f:
            np.lib.format.write_array(f, array, allow_pickle=False)
    for version in [(2, 0), (3, 0)]:
        with open(os.path.join(d, "f32_version%d.npy" % version[0]), "wb") as f:
            np.lib.format.write_array(f, np.ones((2, 2), np.float32), version=version)
    with open(os.path.join(d, "refused_fortran.npy"), "wb") as f:
        np.lib.format.write_array(f, np.asfortranarray(np.ones((2, 3), np.float32)))


def safetensors_bytes(tensors, metadata=None):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def write_safetensors():
    d = out_dir(CORPUS, "fuzz_safetensors")
    f32 = np.arange(6, dtype=np.float32).tobytes()
    files = {
        "one_f32": {"w": ("F32", [2, 3], f32)},
        "mixed": {
            "a.weight": ("F16", [2], np.array([1, -2], np.float16).tobytes()),
            "b.bias": ("BF16", [2], np.array([0x3F80, 0x4000], np.uint16).tobytes()),
            "c.ids": ("I64", [3], np.array([1, 2, 3], np.int64).tobytes()),
            "d.mask": ("BOOL", [2], b"\x01\x00"),
            "e.idx": ("I32", [1], np.array([9], np.int32).tobytes()),
            "f.q": ("I8", [2], b"\xff\x01"),
            "g.u": ("U8", [1], b"\x07"),
        },
        "unsupported_f64": {"x": ("F64", [1], np.array([1.0]).tobytes()), "y": ("F32", [1], f32[:4])},
        "empty_and_scalar": {"e": ("F32", [0, 4], b""), "s": ("F32", [], f32[:4])},
    }
    for name, tensors in files.items():
        with open(os.path.join(d, name + ".safetensors"), "wb") as f:
            f.write(safetensors_bytes(tensors))
    with open(os.path.join(d, "metadata.safetensors"), "wb") as f:
        f.write(safetensors_bytes({"w": ("F32", [6], f32)}, {"format": "pt", "note": "seed"}))


def model(nodes, name, inputs, outputs, inits):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="kiln-fuzz-seeds")
    m.ir_version = 8
    return m


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def onnx_models():
    """name -> ModelProto; the initializers are inline here (made external by write_onnx)."""
    rng = np.random.default_rng(1)
    w = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
    models = {}
    models["add_relu"] = model(
        [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
        "add_relu", [f32("x", ["N", 4])], [f32("y", ["N", 4])], [w("b", 4)])
    models["matmul_softmax"] = model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Softmax", ["m"], ["y"], axis=-1)],
        "matmul_softmax", [f32("x", [2, 8])], [f32("y", [2, 4])], [w("w", 8, 4)])
    models["conv_pool"] = model(
        [helper.make_node("Conv", ["x", "k", "kb"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        "conv_pool", [f32("x", [1, 2, 4, 4])], [f32("y", [1, 3, 2, 2])], [w("k", 3, 2, 3, 3), w("kb", 3)])
    models["gather_reshape"] = model(
        [helper.make_node("Gather", ["table", "ids"], ["g"], axis=0),
         helper.make_node("Reshape", ["g", "shape"], ["y"])],
        "gather_reshape", [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])], [f32("y", [1, 12])],
        [w("table", 5, 4), numpy_helper.from_array(np.array([1, 12], np.int64), "shape")])
    models["layernorm_gemm"] = model(
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1),
         helper.make_node("Gemm", ["n", "w", "c"], ["y"], transB=1)],
        "layernorm_gemm", [f32("x", [2, 6])], [f32("y", [2, 3])], [w("g", 6), w("b", 6), w("w", 3, 6), w("c", 3)])
    return models


def externalize(m, data_name):
    """Moves every initializer's bytes into one data file; returns the file's bytes."""
    data = b""
    for init in m.graph.initializer:
        raw = numpy_helper.to_array(init).tobytes()
        data += b"\0" * (-len(data) % 16)
        offset = len(data)
        data += raw
        init.ClearField("float_data")
        init.ClearField("int64_data")
        init.ClearField("raw_data")
        init.data_location = TensorProto.EXTERNAL
        del init.external_data[:]
        for key, value in (("location", data_name), ("offset", str(offset)), ("length", str(len(raw)))):
            entry = init.external_data.add()
            entry.key, entry.value = key, value
    return data


def write_onnx():
    seeds = out_dir(ONNX_SEEDS)
    packed = out_dir(CORPUS, "fuzz_onnx_external_data")
    for name, m in onnx_models().items():
        with open(os.path.join(seeds, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())
        ext = onnx.ModelProto()
        ext.CopyFrom(m)
        data = externalize(ext, name + "_ext.bin")
        with open(os.path.join(seeds, name + "_ext.onnx"), "wb") as f:
            f.write(ext.SerializeToString())
        with open(os.path.join(seeds, name + "_ext.bin"), "wb") as f:
            f.write(data)
        for init in ext.graph.initializer:
            for entry in init.external_data:
                if entry.key == "location":
                    entry.value = PACKED_DATA_NAME
        model_bytes = ext.SerializeToString()
        with open(os.path.join(packed, name + ".bin"), "wb") as f:
            f.write(struct.pack("<I", len(model_bytes)) + model_bytes + data)


if __name__ == "__main__":
    write_npy()
    write_safetensors()
    write_onnx()
