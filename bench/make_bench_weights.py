#!/usr/bin/python3
"""Writes the weights files that bench/graphs/*.graph read with `weights "..."`.

usage: make_bench_weights.py DIR      writes DIR/mlp4_f16.safetensors, DIR/encoder_layer_f16.safetensors

Seeded random values (NumPy only, so it also runs where PyTorch is missing): matrices scaled by
1/sqrt(fan_in) as an initialized network's are, so activations keep a unit scale through the
layers and f16 neither overflows nor flushes; biases small; layer_norm scales near 1. gpu_bench.py
imports `weight_tensors` to give PyTorch exactly the same values.

The safetensors format: 8-byte little-endian header length, a JSON header mapping each tensor name
to its dtype, shape and [begin, end) byte offsets in the data section, then the data.
"""
import json
import os
import struct
import sys

import numpy as np

SAFETENSORS_DTYPE = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}

MLP_WIDTH = 1024
MLP_LAYERS = 4
ENCODER_D = 768
ENCODER_FFN = 3072


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPE[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header_bytes = json.dumps(header, sort_keys=True).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)  # keep the data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for blob in blobs:
            f.write(blob)


def _dense(rng, fan_in, fan_out, dtype):
    weight = rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)
    bias = rng.standard_normal(fan_out) * 0.02
    return weight.astype(dtype), bias.astype(dtype)


def mlp4_weights(dtype=np.float16):
    rng = np.random.default_rng(20261201)
    tensors = {}
    for i in range(MLP_LAYERS):
        tensors[f"layer{i}.weight"], tensors[f"layer{i}.bias"] = _dense(rng, MLP_WIDTH, MLP_WIDTH, dtype)
    return tensors


def encoder_layer_weights(dtype=np.float16):
    rng = np.random.default_rng(20261202)
    d, ffn = ENCODER_D, ENCODER_FFN
    tensors = {}
    for name in ("q", "k", "v", "out"):
        tensors[f"attn.{name}.weight"], tensors[f"attn.{name}.bias"] = _dense(rng, d, d, dtype)
    tensors["ffn.in.weight"], tensors["ffn.in.bias"] = _dense(rng, d, ffn, dtype)
    tensors["ffn.out.weight"], tensors["ffn.out.bias"] = _dense(rng, ffn, d, dtype)
    for ln in ("ln1", "ln2"):
        tensors[f"{ln}.scale"] = (1.0 + 0.1 * rng.standard_normal(d)).astype(dtype)
        tensors[f"{ln}.bias"] = (0.1 * rng.standard_normal(d)).astype(dtype)
    return tensors


# weights file name (as the .graph names it) -> function returning its tensors
WEIGHT_FILES = {
    "mlp4_f16.safetensors": mlp4_weights,
    "encoder_layer_f16.safetensors": encoder_layer_weights,
}


def weight_tensors(file_name):
    return WEIGHT_FILES[file_name]()


def write_all(directory):
    os.makedirs(directory, exist_ok=True)
    for file_name, make in WEIGHT_FILES.items():
        write_safetensors(os.path.join(directory, file_name), make())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[2])
    write_all(sys.argv[1])


if __name__ == "__main__":
    main()
