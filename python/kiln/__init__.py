"""Kiln: compile tensor graphs (.graph text or ONNX) into .kiln artifacts and run them.

    import kiln, numpy as np
    art = kiln.compile("model.onnx", targets=["opencl"])   # a path, ONNX bytes or .graph text
    art.save("m.kiln"); art = kiln.load("m.kiln")
    sess = kiln.Session(art, device="opencl:0")            # kiln.devices() lists the ids
    out = sess.run({"x": np.ones((4, 8), np.float32)})     # dict name -> np.ndarray

Errors: kiln.CompileError (a ValueError) carries every compiler diagnostic, one per line;
kiln.KilnError (a RuntimeError) carries the runtime's message, prefixed with its status name.
"""
from __future__ import annotations

import os
from typing import Optional, Sequence, Union

from ._kiln import (Artifact, CompileError, KernelTime, KilnError, Session, TensorInfo,
                    build_targets, device_info, devices)
from . import _kiln

__version__: str = _kiln.runtime_version()

__all__ = ["Artifact", "CompileError", "KernelTime", "KilnError", "Session", "TensorInfo",
           "build_targets", "compile", "device_info", "devices", "load", "__version__"]

Source = Union[str, bytes, bytearray, memoryview, "os.PathLike[str]"]


def _is_graph_text(text: str) -> bool:
    # A path never holds a newline or a '{'; .graph text always has its graph's body braces.
    return "{" in text or "\n" in text


def compile(source: Source, targets: Optional[Sequence[str]] = None, *, opt_level: int = 2,
            gpu_archs: Sequence[str] = (), cpu: str = "", jobs: int = 0, cache: bool = True,
            base_dir: Optional[str] = None) -> Artifact:
    """Compiles a model into an Artifact.

    source: a path to a .onnx or .graph file (str or os.PathLike), the bytes of an ONNX model,
    or .graph source text. targets: a list of "cuda", "vulkan", "opencl", "cpu" (default: every target
    this build has, kiln.build_targets()). opt_level: 0, 1 or 2 (kilnc's -O). gpu_archs: cuda
    cubin architectures (default sm_80, sm_90). cpu: what the cpu target builds for, as kilnc's
    --cpu (an LLVM CPU name, "native", or "aarch64" to cross-compile; default: x86-64-v3 on x86-64
    machines). jobs: compile threads (0: every core). cache:
    use the persistent compile cache. base_dir: where a .graph text's `weights` file and an ONNX
    model's external data are found (default: the current directory).
    """
    target_list = None if targets is None else [str(t) for t in targets]
    if isinstance(targets, str):
        raise TypeError("targets must be a list of target names, e.g. ['opencl']")
    args = (target_list, int(opt_level), [str(a) for a in gpu_archs], str(cpu), int(jobs), bool(cache))
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _kiln._compile_onnx_bytes(bytes(source), base_dir or os.getcwd(), *args)
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise TypeError(f"source must be a path, ONNX bytes or .graph text, not {type(source).__name__}")
    if _is_graph_text(source):
        return _kiln._compile_graph_text(source, base_dir or os.getcwd(), *args)
    if not os.path.isfile(source):
        raise FileNotFoundError(f"no such model file: '{source}'")
    return _kiln._compile_file(source, *args)


def load(source: Union[str, bytes, "os.PathLike[str]"],
         trusted_keys: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None) -> Artifact:
    """Loads an artifact from a .kiln file path or from its bytes.

    trusted_keys: public keys (paths of kilnc --new-signing-key .pub files, or their text);
    when given, only an artifact signed by one of them loads (else KilnError UNTRUSTED).
    """
    keys = []
    for key in trusted_keys or []:
        key = os.fspath(key)
        if os.path.isfile(key):
            with open(key, encoding="ascii", errors="replace") as f:
                key = f.read()
        keys.append(key)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _kiln._load_bytes(bytes(source), keys)
    return _kiln._load_file(os.fspath(source), keys)
