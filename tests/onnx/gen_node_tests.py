#!/usr/bin/env python3
"""Generates the ONNX backend node test data (model.onnx + TensorProto .pb files) with
Debian's python3-onnx: python3 gen_node_tests.py OUT_DIR.

onnx 1.12's case generators still use np.float / np.int / np.bool / np.object, which NumPy 1.24
removed; they are aliased to the builtins before onnx is imported.
"""
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
for alias, builtin in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    setattr(np, alias, builtin)

from onnx.backend.test import cmd_tools  # noqa: E402

if len(sys.argv) != 2:
    sys.exit("usage: gen_node_tests.py OUT_DIR")
sys.argv = ["cmd_tools", "generate-data", "-o", sys.argv[1]]
cmd_tools.main()
