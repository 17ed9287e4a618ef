#!/usr/bin/python3
"""Writes mlp.safetensors for mlp.graph: seeded random weights, scaled like a trained MLP's.

The safetensors format: 8-byte little-endian header length, a JSON header mapping each tensor
name to its dtype, shape and [begin, end) byte offsets in the data section, then the data.
"""
import json
import os
import struct
import sys

import numpy as np


SAFETENSORS_DTYPE = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}


def write_safetensors(path, tensors):
    """Writes {name: array} (float32 or float16 arrays); bench/make_bench_weights.py uses it too."""
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


def main():
    rng = np.random.default_rng(20261122)
    tensors = {
        "fc1.weight": (rng.standard_normal((784, 256)) / np.sqrt(784)).astype(np.float32),
        "fc1.bias": (rng.standard_normal(256) * 0.01).astype(np.float32),
        "fc2.weight": (rng.standard_normal((256, 10)) / np.sqrt(256)).astype(np.float32),
        "fc2.bias": (rng.standard_normal(10) * 0.01).astype(np.float32),
    }
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp.safetensors")
    write_safetensors(out, tensors)


if __name__ == "__main__":
    main()
