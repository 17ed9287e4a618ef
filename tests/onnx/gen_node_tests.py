#!/usr/bin/env python3
"""Generates the ONNX backend node test data (model.onnx + TensorProto .pb files) into
OUT_DIR/node: python3 gen_node_tests.py OUT_DIR.

Works with Debian's python3-onnx (1.12) and with the newest onnx from PyPI (.venv):
- onnx 1.12's case generators still use np.float / np.int / np.bool / np.object, which NumPy
  1.24 removed; they are aliased to the builtins before onnx is imported.
- Newer releases' `generate-data` writes only the model tests (the node data lives in their
  source tree, not in the wheel), so the node cases are handed to it instead.
"""
import sys
import types
import warnings

import numpy as np

warnings.simplefilter("ignore")
for alias, builtin in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if alias not in np.__dict__:
        setattr(np, alias, builtin)

from onnx.backend.test import cmd_tools  # noqa: E402

if len(sys.argv) != 2:
    sys.exit("usage: gen_node_tests.py OUT_DIR")
if not hasattr(cmd_tools, "node_test"):
    from onnx.backend.test.case import node  # noqa: E402

    cmd_tools.model_test = types.SimpleNamespace(collect_testcases=node.collect_testcases)
sys.argv = ["cmd_tools", "generate-data", "-o", sys.argv[1]]
cmd_tools.main()
