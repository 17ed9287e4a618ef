#!/usr/bin/python3
"""Writes the weights files that bench/graphs/*.graph read with `weights "..."`.

usage: make_bench_weights.py DIR      writes DIR/mlp4_f16.safetensors, DIR/encoder_layer_f16.safetensors

Seeded random values (NumPy only, so it also runs where PyTorch is missing): matrices scaled by
1/sqrt(fan_in) as an initialized network's are, so activations keep a unit scale through the
layers and f16 neither overflows nor flushes; biases small; layer_norm scales near 1. gpu_bench.py
imports `weight_tensors` to give PyTorch exactly the same values.
The files are written by examples/make_mlp_weights.py's safetensors writer.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from make_mlp_weights import write_safetensors  # noqa: E402  (after the path insert)

MLP_WIDTH = 1024
MLP_LAYERS = 4
ENCODER_D = 768
ENCODER_FFN = 3072


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
