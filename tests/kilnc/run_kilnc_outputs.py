#!/usr/bin/env python3
"""kilnc's output forms and option spellings, as a new user meets them (tests/kilnc/CMakeLists.txt).

usage: run_kilnc_outputs.py KILNC KILN_RUN SOURCE_DIR

- --emit=ir -o FILE writes text that compiles back to the same model: weights and large
  constants go to FILE's .safetensors (a .graph with params, an ONNX model with large
  initializers); on stdout such text is a summary, and kilnc says so.
- --emit=kernels prints to stdout; -S writes into the current directory, not the input's.
- --target, --emit, --gpu-arch and --print-ir-after take their value after '=' or as the next
  argument; an unsupported --gpu-arch and an unknown pass are one-line errors naming the valid
  values (exit 1).
"""
import os
import shutil
import subprocess
import sys
import tempfile

from checks import FAILURES, check


def main():
    kilnc, kiln_run, source = sys.argv[1], sys.argv[2], sys.argv[3]
    mlp = os.path.join(source, "examples", "mlp.graph")
    with tempfile.TemporaryDirectory(prefix="kiln-kilnc-outputs-") as tmp:
        env = dict(os.environ, KILN_CACHE_DIR=os.path.join(tmp, "cache"))

        def run(args, cwd=tmp):
            return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)

        def outputs(artifact, name):
            out = os.path.join(tmp, name)
            p = run([kiln_run, artifact, "--device=reference", "--dim", "N=3", "--dim", "batch=2", "--seed=5",
                     "--output-dir", out])
            if p.returncode != 0:
                return p.stderr
            return {f: open(os.path.join(out, f), "rb").read() for f in sorted(os.listdir(out))}

        # --emit=ir round trips, through a weights file.
        models = [("mlp", mlp)]
        onnx_model = make_onnx_with_large_weights(tmp)
        if onnx_model:
            models.append(("onnx", onnx_model))
        else:
            print("note: the onnx Python package is missing; the ONNX round trip is not checked")
        for name, model in models:
            text = os.path.join(tmp, f"{name}.opt.graph")
            p = run([kilnc, model, "--emit=ir", "-o", text])
            weights = os.path.join(tmp, f"{name}.opt.safetensors")
            check(p.returncode == 0 and os.path.exists(weights), f"{name}: --emit=ir -o FILE writes FILE and its weights",
                  p.stderr)
            if p.returncode != 0:
                continue
            body = open(text).read()
            check(f'weights "{name}.opt.safetensors"' in body and "[...]" not in body,
                  f"{name}: the text names its weights file and elides nothing")
            p1 = run([kilnc, model, "-o", os.path.join(tmp, f"{name}.direct.kiln"), "--target=opencl"])
            p2 = run([kilnc, text, "-o", os.path.join(tmp, f"{name}.roundtrip.kiln"), "--target=opencl"])
            check(p1.returncode == 0 and p2.returncode == 0, f"{name}: the model and its --emit=ir text compile",
                  p1.stderr + p2.stderr)
            a = outputs(os.path.join(tmp, f"{name}.direct.kiln"), f"{name}.out1")
            b = outputs(os.path.join(tmp, f"{name}.roundtrip.kiln"), f"{name}.out2")
            check(isinstance(a, dict) and a == b and len(a) > 0,
                  f"{name}: the round-tripped text computes the same outputs, bit for bit", f"{a if not isinstance(a, dict) else ''}")
        if onnx_model:
            p = run([kilnc, onnx_model, "--emit=ir", "-o", "-"])
            check(p.returncode == 0 and "[...]" in p.stdout and "summary that does not compile" in p.stderr,
                  "--emit=ir on stdout: elided constants are announced as a summary", p.stderr)

        # --emit=kernels prints; -S writes into the current directory.
        work = os.path.join(tmp, "cwd")
        os.makedirs(work)
        before = set(os.listdir(os.path.dirname(mlp)))
        p = run([kilnc, mlp, "--emit=kernels", "--target=opencl"], cwd=work)
        check(p.returncode == 0 and "__kernel" in p.stdout and not os.listdir(work),
              "--emit=kernels prints the sources to stdout and writes no file", p.stderr)
        p = run([kilnc, mlp, "-S", "--target", "opencl"], cwd=work)
        written = sorted(os.listdir(work))
        check(p.returncode == 0 and written and all(f.startswith("mlp.") and f.endswith(".cl") for f in written),
              "-S writes <input name>.<kernel>.cl into the current directory", f"{p.stderr} {written}")
        check(set(os.listdir(os.path.dirname(mlp))) == before, "-S and --emit=kernels write nothing next to the input")

        # Option spellings and mistakes.
        for args in (["--target", "opencl"], ["--target=opencl"]):
            p = run([kilnc, mlp, "-o", os.path.join(tmp, "spelled.kiln"), *args])
            check(p.returncode == 0, f"{' '.join(args)} is accepted", p.stderr)
        p = run([kilnc, mlp, "--emit", "plan", "-o", "-"])
        check(p.returncode == 0 and "launch" in p.stdout, "--emit plan (separate value) is accepted", p.stderr)
        for arch in ("sm_70", "sm_7x", "compute_90"):
            p = run([kilnc, mlp, "--target=cuda", "--gpu-arch", arch, "-o", os.path.join(tmp, "arch.kiln")])
            lines = p.stderr.strip().splitlines()
            check(p.returncode == 1 and len(lines) == 1 and "sm_80" in lines[0] and arch in lines[0],
                  f"--gpu-arch {arch}: one line naming the supported architectures, exit 1", p.stderr[:600])
        p = run([kilnc, mlp, "-o", os.devnull, "--print-ir-after", "fuse-elementwise"])
        check(p.returncode == 1 and "unknown pass 'fuse-elementwise'" in p.stderr and "fuse," in p.stderr,
              "an unknown pass name is an error listing the passes", p.stderr)
        p = run([kilnc, mlp, "-o", os.devnull, "--print-ir-after=fuse"])
        check(p.returncode == 0 and "fuse" in p.stderr, "--print-ir-after=fuse (the README's example) prints the IR",
              p.stderr[:300])
        p = run([kilnc, mlp, "--target"])
        check(p.returncode == 1 and "--target needs" in p.stderr, "--target without a value is a usage error", p.stderr)
    if FAILURES:
        print(f"{len(FAILURES)} FAILED: {FAILURES}")
        sys.exit(1)
    print("all kilnc output checks passed")


def make_onnx_with_large_weights(tmp):
    """A small ONNX model whose initializers are too large to print as literals."""
    try:
        import numpy as np
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        return None
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((64, 96)).astype(np.float32) * 0.1, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((96, 80)).astype(np.float32) * 0.1, "w2")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])],
        "large_weights", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 80])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(tmp, "large_weights.onnx")
    onnx.save(model, path)
    return path


if __name__ == "__main__":
    main()
