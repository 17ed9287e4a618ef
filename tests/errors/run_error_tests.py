#!/usr/bin/python3
"""One test per user mistake: runs `kilnc --emit=ir -o /dev/null FILE` on every tests/errors/*.graph
and on inputs generated here (weights files, binary garbage, NUL bytes, 100 000-deep nesting, a
10 MB line), and checks that kilnc

  * exits with status 1 (never 0, never >= 2 or a signal, i.e. no crash or internal error),
  * prints every `# EXPECT: LINE:COL: error: MESSAGE` of the file as `FILE:LINE:COL: error: MESSAGE`
    on stderr (MESSAGE may be a prefix of the printed message), and
  * prints no other `FILE:...` diagnostic lines (no cascades of follow-on errors).

usage: run_error_tests.py KILNC [--only NAME]
"""
import glob
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 60
MAX_NESTING = 256  # frontend/parser_internal.h: kMaxNesting


def write_safetensors(path, header, data=b"", raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def make_external_data_fifo(tmp):
    """An ONNX model whose initializer's external data file is a FIFO (None without onnx)."""
    try:
        import numpy as np
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        return None
    w = numpy_helper.from_array(np.ones((4,), np.float32), "w")
    w.ClearField("float_data")
    w.ClearField("raw_data")
    w.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", "weights.fifo"), ("offset", "0"), ("length", "16")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(tmp, "external_fifo.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    os.mkfifo(os.path.join(tmp, "weights.fifo"))
    return path


def make_strict_onnx_cases(tmp):
    """ONNX models that are wrong in ways protobuf accepts: a value defined twice, an attribute of
    the wrong type, an IR version from the future, a declared output shape the graph does not
    compute. Each must be one error naming the problem (empty without the onnx package)."""
    try:
        import onnx
        from onnx import helper
    except ImportError:
        return []
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])

    def save(name, nodes, outputs, ir_version=7):
        model = helper.make_model(helper.make_graph(nodes, name, [x], outputs),
                                  opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = ir_version
        path = os.path.join(tmp, name + ".onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        return path

    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    relu = helper.make_node("Relu", ["x"], ["y"], name="first")
    twice = helper.make_node("Neg", ["x"], ["y"], name="second")
    softmax = helper.make_node("Softmax", ["x"], ["y"], name="soft")
    softmax.attribute.append(helper.make_attribute("axis", 1.5))  # FLOAT where INT is expected
    wrong = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])
    deep = helper.make_tensor_value_info("d", onnx.TensorProto.FLOAT, [1] * 65)
    deep_model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["d"], ["r"])], "deep", [deep],
                                                     [helper.make_tensor_value_info("r", onnx.TensorProto.FLOAT, None)]),
                                   opset_imports=[helper.make_opsetid("", 13)])
    deep_model.ir_version = 7
    deep_path = os.path.join(tmp, "deep.onnx")
    with open(deep_path, "wb") as f:
        f.write(deep_model.SerializeToString())
    return [
        ("onnx_value_defined_twice", save("twice", [relu, twice], [y]), "output 'y' is already defined"),
        ("onnx_attribute_of_wrong_type", save("attr", [softmax], [y]), "attribute 'axis' is FLOAT, expected INT"),
        ("onnx_ir_version_from_the_future", save("future", [relu], [y], ir_version=99),
         "ir_version 99 is newer than Kiln reads"),
        ("onnx_declared_output_shape_contradicts", save("declared", [relu], [wrong]),
         "graph output 'y' is declared with size 4 in dimension 1, but the graph computes f32[2, 3]"),
        ("onnx_rank_beyond_the_limit", deep_path, "input 'd' has rank 65 (Kiln's tensors have at most 64 dimensions)"),
    ]


def make_weights(tmp):
    """The weights files the weights_*.graph cases refer to."""
    w = {"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}}
    write_safetensors(os.path.join(tmp, "good.safetensors"), w, bytes(64))
    with open(os.path.join(tmp, "not_safetensors.safetensors"), "w") as f:
        f.write("these are not the tensors you are looking for\n")
    with open(os.path.join(tmp, "good.safetensors"), "rb") as f:
        good = f.read()
    with open(os.path.join(tmp, "truncated.safetensors"), "wb") as f:
        f.write(good[:40])
    write_safetensors(os.path.join(tmp, "bad_json.safetensors"), None, bytes(64),
                      raw_header=b'{"w": {"dtype": "F32", "shape": [4, 4], ')
    bad = {"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [64, 128]}}
    write_safetensors(os.path.join(tmp, "bad_offsets.safetensors"), bad, bytes(64))


SIG = b"graph g(x: f32[N, 4]) -> (y: f32[N, 4]) {\n"


def generated_cases():
    """(name, bytes, expectations, max_diagnostics). Expectations are 'LINE:COL: error: MSG'
    strings, or '*: error: MSG' where only the message is checked."""
    cases = []
    rng = random.Random(20240601)
    garbage = b"\x01" + bytes(rng.randrange(256) for _ in range(200000))
    # Garbage is reported (once per run of bad bytes, up to the error limit), never crashes.
    cases.append(("binary_garbage", garbage, ["1:1: error: "], 21))
    cases.append(("garbage_in_body", SIG + b"  y = neg(x)\n  " + garbage[:5000].replace(b"\n", b" ") + b"\n}\n",
                  ["3:3: error: "], 2))
    cases.append(("nul_bytes", SIG + b"  y = neg(x)\x00\x00\x00\n}\n", ["2:13: error: invalid character '\\x00'"], 1))
    depth = 100000
    deep = SIG + b"  y = " + b"neg(" * depth + b"x" + b")" * depth + b"\n}\n"
    col = len("  y = ") + 4 * MAX_NESTING + 1
    cases.append(("deep_nesting", deep, ["2:%d: error: nesting too deep" % col], 1))
    deep_list = SIG + b"  y = reshape(x, shape=" + b"[" * depth + b"]" * depth + b")\n}\n"
    # The reshape call is one level of nesting, so the 256th bracket is the first too many.
    col = len("  y = reshape(x, shape=") + MAX_NESTING
    cases.append(("deep_attribute_list", deep_list, ["2:%d: error: nesting too deep" % col], 1))
    deep_literal = SIG + b"  y = neg(x)\n  c = const f32[1] " + b"[" * depth + b"\n}\n"
    cases.append(("deep_literal", deep_literal, ["3:21: error: literal is nested deeper than the rank of f32[1]"], 1))
    # A 10 MB line: a literal with one element too many; the column is exact.
    count = 2 * 1024 * 1024
    long_line = (SIG + b"  y = neg(x)\n  c = const f32[%d] [" % (count - 1) + b"1.5," * (count - 1) + b"1.5]\n}\n")
    cases.append(("long_line", long_line,
                  ["3:%d: error: literal has %d elements in dimension 0 but f32[%d] needs %d" %
                   (len("  c = const f32[%d] " % (count - 1)) + 1, count, count - 1, count - 1)], 1))
    cases.append(("empty_file", b"", ["1:1: error: unexpected end of file"], 1))
    cases.append(("only_utf8_bom_and_text", "\ufeffgraph".encode(), ["1:1: error: invalid character"], 2))
    return cases


def parse_expectations(path):
    expects = []
    with open(path, "rb") as f:
        for raw in f.read().split(b"\n"):
            line = raw.decode("utf-8", "replace")
            if line.startswith("# EXPECT:"):
                expects.append(line[len("# EXPECT:"):].strip())
    return expects


def check(kilnc, path, expects, max_diagnostics):
    """Returns a list of failure messages (empty when the case passes)."""
    try:
        proc = subprocess.run([kilnc, "--emit=ir", "-o", "/dev/null", path], capture_output=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return ["timed out after %d s" % TIMEOUT_S]
    stderr = proc.stderr.decode("utf-8", "replace")
    failures = []
    if proc.returncode != 1:
        what = "signal %d" % -proc.returncode if proc.returncode < 0 else "status %d" % proc.returncode
        failures.append("expected exit status 1, got " + what)
    diag_lines = [l for l in stderr.splitlines() if l.startswith(path + ":")]
    if not expects:
        failures.append("the file has no '# EXPECT:' line")
    for e in expects:
        if not any(l.startswith(path + ":" + e) for l in diag_lines):
            failures.append("missing diagnostic: %s:%s" % (os.path.basename(path), e))
    limit = max_diagnostics if max_diagnostics is not None else len(expects)
    if len(diag_lines) > limit:
        failures.append("%d diagnostics, expected at most %d (cascading errors?)" % (len(diag_lines), limit))
    if failures:
        failures.append("stderr was:\n" + stderr[:4000])
    return failures


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    kilnc = os.path.abspath(sys.argv[1])
    only = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--only" else None
    tmp = tempfile.mkdtemp(prefix="kiln-errors-")
    try:
        make_weights(tmp)
        cases = []
        for src in sorted(glob.glob(os.path.join(HERE, "*.graph"))):
            dst = os.path.join(tmp, os.path.basename(src))
            shutil.copy(src, dst)
            cases.append((os.path.basename(src)[:-len(".graph")], dst, parse_expectations(src), None))
        for name, data, expects, max_diags in generated_cases():
            dst = os.path.join(tmp, name + ".graph")
            with open(dst, "wb") as f:
                f.write(data)
            cases.append((name, dst, expects, max_diags))
        failed = 0
        for name, path, expects, max_diags in cases:
            if only and name != only:
                continue
            failures = check(kilnc, path, expects, max_diags)
            if failures:
                failed += 1
                print("FAIL %s\n  %s" % (name, "\n  ".join(failures)))
            else:
                print("ok   %s" % name)
        total = len(cases) if not only else 1
        if not only:
            # An .onnx path that is a folder: refused before anything is read, never a crash.
            folder = os.path.join(tmp, "folder.onnx")
            os.mkdir(folder)
            proc = subprocess.run([kilnc, "--emit=ir", "-o", "/dev/null", folder], capture_output=True,
                                  timeout=TIMEOUT_S)
            stderr = proc.stderr.decode("utf-8", "replace")
            total += 1
            if proc.returncode == 1 and (folder + ":") in stderr and "not a regular file" in stderr:
                print("ok   onnx_path_is_a_folder")
            else:
                failed += 1
                print("FAIL onnx_path_is_a_folder (status %d)\n  stderr was:\n%s" % (proc.returncode, stderr[:2000]))
        if not only:
            # Inputs that are not regular files are refused before anything is read: a directory
            # (it used to abort), a FIFO (it would block forever), a device (/dev/zero never ends),
            # as the graph, as its weights file, and as an ONNX model's external data.
            os.mkdir(os.path.join(tmp, "dir.graph"))
            os.mkfifo(os.path.join(tmp, "fifo.graph"))
            os.mkdir(os.path.join(tmp, "weights_dir"))
            with open(os.path.join(tmp, "weights_are_a_dir.graph"), "w") as f:
                f.write('weights "weights_dir"\ngraph g(x: f32[4]) -> (y: f32[4]) {\n'
                        '  w = param f32[4] "w"\n  y = add(x, w)\n}\n')
            special = [("graph_is_a_directory", "dir.graph", "a directory"),
                       ("graph_is_a_fifo", "fifo.graph", "a FIFO"),
                       ("graph_is_a_device", "/dev/zero", "a device"),
                       ("weights_are_a_directory", "weights_are_a_dir.graph", "a directory")]
            external = make_external_data_fifo(tmp)
            if external:
                special.append(("onnx_external_data_is_a_fifo", external, "a FIFO"))
            for name, path, expected in make_strict_onnx_cases(tmp):
                total += 1
                proc = subprocess.run([kilnc, "--emit=ir", "-o", "/dev/null", path], capture_output=True,
                                      timeout=TIMEOUT_S)
                stderr = proc.stderr.decode("utf-8", "replace")
                if proc.returncode == 1 and expected in stderr and len(stderr.strip().splitlines()) == 1:
                    print("ok   %s" % name)
                else:
                    failed += 1
                    print("FAIL %s (status %d, expected %r)\n  stderr was:\n%s" % (name, proc.returncode, expected,
                                                                                 stderr[:2000]))
            for name, path, kind in special:
                total += 1
                try:
                    proc = subprocess.run([kilnc, "--emit=ir", "-o", "/dev/null", path], capture_output=True,
                                          timeout=TIMEOUT_S, cwd=tmp)
                    stderr = proc.stderr.decode("utf-8", "replace")
                    ok = proc.returncode == 1 and ("it is " + kind) in stderr and "not a regular file" in stderr
                except subprocess.TimeoutExpired:
                    ok, stderr = False, "(timed out: the file was read)"
                if ok:
                    print("ok   %s" % name)
                else:
                    failed += 1
                    print("FAIL %s\n  stderr was:\n%s" % (name, stderr[:2000]))
        print("%d/%d error tests passed" % (total - failed, total))
        return 1 if failed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
