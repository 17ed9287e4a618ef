"""The Python package against the reference interpreter and every device present.

Run by ctest (python-package) with PYTHONPATH=<build>/python; KILN_SOURCE_DIR is the repository.
"""
import os
import pathlib

import numpy as np
import pytest

import kiln

SOURCE = pathlib.Path(os.environ.get("KILN_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
MLP_GRAPH = SOURCE / "examples" / "mlp.graph"
MLP_ONNX = SOURCE / "examples" / "onnx" / "mlp.onnx"

# y = tanh(x * 2 + b) with a symbolic batch: small enough to check against NumPy exactly.
SMALL_GRAPH = """
graph small(x: f32[N, 4], b: f32[4]) -> (y: f32[N, 4], s: f32[N]) {
  y = tanh(add(mul(x, const f32[] 2.0), b))
  s = reduce_sum(y, axes=[1])
}
"""


def small_reference(x, b):
    y = np.tanh(x * 2 + b)
    return y, y.sum(axis=1)


def test_version_and_devices():
    assert kiln.__version__.count(".") == 2
    devices = kiln.devices()
    assert "reference" in devices
    assert set(kiln.build_targets()) <= {"cuda", "vulkan", "opencl", "cpu"}
    info = {d["id"]: d for d in kiln.device_info()}
    assert info["reference"]["driver"] == "reference"


def test_compile_graph_text_and_signature():
    art = kiln.compile(SMALL_GRAPH, targets=[])
    assert [(t.name, t.dtype, t.shape) for t in art.inputs] == [("x", "f32", ("N", 4)), ("b", "f32", (4,))]
    assert [(t.name, t.shape) for t in art.outputs] == [("y", ("N", 4)), ("s", ("N",))]
    assert art.targets == []


@pytest.mark.parametrize("device", kiln.devices())
def test_run_every_device_against_numpy(device):
    art = kiln.compile(SMALL_GRAPH)
    if device.split(":")[0] not in art.targets + ["reference"]:
        pytest.skip(f"this build has no code for {device}")
    sess = kiln.Session(art, device=device)
    assert sess.device == device
    rng = np.random.default_rng(0)
    for batch in (1, 5):  # one compile, two sizes of the symbolic batch
        x = rng.standard_normal((batch, 4), dtype=np.float32)
        b = rng.standard_normal(4, dtype=np.float32)
        out = sess.run({"x": x, "b": b})
        y, s = small_reference(x, b)
        np.testing.assert_allclose(out["y"], y, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["s"], s, rtol=1e-5, atol=1e-5)
        assert out["y"].dtype == np.float32 and out["s"].shape == (batch,)


def test_cpu_option():
    if "cpu" not in kiln.build_targets():
        pytest.skip("this build has no cpu target")
    # An older x86-64 level builds code this machine runs; a name no back end knows is a
    # CompileError naming it.
    art = kiln.compile(SMALL_GRAPH, targets=["cpu"], cpu="x86-64-v2")
    assert art.targets == ["cpu"]
    if "cpu:0" in kiln.devices():
        x = np.ones((3, 4), dtype=np.float32)
        b = np.zeros(4, dtype=np.float32)
        out = kiln.Session(art, device="cpu:0").run({"x": x, "b": b})
        np.testing.assert_allclose(out["y"], small_reference(x, b)[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.CompileError, match="pentium-9000"):
        kiln.compile(SMALL_GRAPH, targets=["cpu"], cpu="pentium-9000")


def test_sources_path_pathlike_onnx_bytes_agree():
    x = np.linspace(-1, 1, 3 * 784, dtype=np.float32).reshape(3, 784)
    results = []
    for source in (str(MLP_GRAPH), MLP_GRAPH):
        art = kiln.compile(source, targets=[])
        results.append(kiln.Session(art, device="reference").run({"x": x})["probs"])
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0].sum(axis=1), np.ones(3), rtol=1e-5)
    onnx_art = kiln.compile(MLP_ONNX.read_bytes(), targets=[])
    assert onnx_art.inputs and onnx_art.outputs
    path_art = kiln.compile(MLP_ONNX, targets=[])
    feed = {t.name: np.full([d if isinstance(d, int) else 2 for d in t.shape], 0.5, np.float32)
            for t in onnx_art.inputs}
    a = kiln.Session(onnx_art).run(feed)
    b = kiln.Session(path_art).run(feed)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6)


def test_save_load_roundtrip(tmp_path):
    art = kiln.compile(SMALL_GRAPH)
    path = tmp_path / "small.kiln"
    art.save(str(path))
    assert path.read_bytes() == art.to_bytes()
    x = np.ones((2, 4), np.float32)
    b = np.zeros(4, np.float32)
    expected = kiln.Session(art, device="reference").run({"x": x, "b": b})
    for loaded in (kiln.load(str(path)), kiln.load(path), kiln.load(art.to_bytes())):
        assert loaded.targets == art.targets
        got = kiln.Session(loaded, device="reference").run({"x": x, "b": b})
        np.testing.assert_array_equal(got["y"], expected["y"])


def test_out_arrays_written_in_place_and_dlpack_inputs():
    art = kiln.compile(SMALL_GRAPH, targets=[])
    sess = kiln.Session(art, device="reference")
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    b = np.ones(4, np.float32)
    y = np.empty((2, 4), np.float32)
    out = sess.run({"x": x[:, :], "b": b}, out={"y": y})
    assert out["y"] is y
    np.testing.assert_allclose(y, small_reference(x, b)[0], rtol=1e-6)
    # A non-contiguous view is copied to a contiguous one on the way in.
    xt = np.ascontiguousarray(x.T).T
    np.testing.assert_allclose(sess.run({"x": xt, "b": b})["y"], y, rtol=1e-6)
    torch = pytest.importorskip("torch")
    got = sess.run({"x": torch.from_numpy(x), "b": torch.from_numpy(b)})
    np.testing.assert_allclose(got["y"], y, rtol=1e-6)


def test_threads_give_identical_results():
    art = kiln.compile(str(MLP_GRAPH), targets=[])
    x = np.linspace(-1, 1, 64 * 784, dtype=np.float32).reshape(64, 784)
    one = kiln.Session(art, device="reference").run({"x": x})["probs"]
    for threads in (2, 0):
        many = kiln.Session(art, device="reference", threads=threads).run({"x": x})["probs"]
        np.testing.assert_array_equal(many, one)
    with pytest.raises(ValueError):
        kiln.Session(art, device="reference", threads=-1)


def test_profile_objects():
    art = kiln.compile(str(MLP_GRAPH), targets=[])
    sess = kiln.Session(art, device="reference")
    sess.run({"x": np.ones((1, 784), np.float32)}, profile=True)
    times = sess.profile
    assert times and all(t.seconds >= 0 and t.name for t in times)
    assert isinstance(sess.profile_clock, str) and sess.profile_clock


def test_errors_are_python_exceptions(tmp_path):
    with pytest.raises(kiln.CompileError, match=r"<string>:\d+:\d+: error"):
        kiln.compile("graph g(x: f32[4]) -> (y: f32[4]) {\n  y = nosuchop(x)\n}\n")
    with pytest.raises(kiln.CompileError, match="unknown target 'tpu'"):
        kiln.compile(SMALL_GRAPH, targets=["tpu"])
    with pytest.raises(kiln.CompileError):
        kiln.compile(b"definitely not an onnx model")
    with pytest.raises(FileNotFoundError):
        kiln.compile(str(tmp_path / "missing.onnx"))
    with pytest.raises(TypeError):
        kiln.compile(SMALL_GRAPH, targets="opencl")
    with pytest.raises(ValueError):
        kiln.compile(SMALL_GRAPH, opt_level=7)
    with pytest.raises(kiln.KilnError, match="CORRUPT|INVALID_ARGUMENT"):
        kiln.load(b"KILN" + bytes(64))
    with pytest.raises(kiln.KilnError, match="NOT_FOUND"):
        kiln.load(str(tmp_path / "missing.kiln"))
    art = kiln.compile(SMALL_GRAPH, targets=[])
    with pytest.raises(kiln.KilnError, match="NOT_FOUND"):
        kiln.Session(art, device="nosuch:7")
    sess = kiln.Session(art, device="reference")
    with pytest.raises(KeyError, match="no input named 'z'"):
        sess.run({"z": np.ones((1, 4), np.float32)})
    with pytest.raises(TypeError, match="dtype f32"):
        sess.run({"x": np.ones((1, 4), np.int32), "b": np.ones(4, np.float32)})
    with pytest.raises(kiln.KilnError, match="INVALID_ARGUMENT.*input 'x'"):
        sess.run({"x": np.ones((1, 5), np.float32), "b": np.ones(4, np.float32)})
    with pytest.raises(kiln.KilnError, match="INVALID_ARGUMENT"):
        sess.run({"x": np.ones((1, 4), np.float32)})  # b missing
    with pytest.raises(TypeError, match="must be an array"):
        sess.run({"x": "text", "b": np.ones(4, np.float32)})
    # The session still works after every error above.
    out = sess.run({"x": np.ones((1, 4), np.float32), "b": np.ones(4, np.float32)})
    np.testing.assert_allclose(out["y"], np.tanh(np.full((1, 4), 3.0, np.float32)), rtol=1e-6)


def test_cuda_tensors_zero_copy():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or "cuda:0" not in kiln.devices():
        pytest.skip("no CUDA device")
    art = kiln.compile(SMALL_GRAPH, targets=["cuda"])
    sess = kiln.Session(art, device="cuda:0")
    x = torch.randn(3, 4, device="cuda")
    # On PyTorch's stream: ordered with its work, no synchronization needed.
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        xs = torch.randn(5, 4, device="cuda") * 3
        bs = torch.randn(4, device="cuda")
        ys = torch.empty(5, 4, device="cuda")
        on_stream = kiln.Session(art, device="cuda:0", cuda_stream=stream.cuda_stream)
        on_stream.run({"x": xs, "b": bs}, out={"y": ys})
        torch.testing.assert_close(ys, torch.tanh(xs * 2 + bs), rtol=1e-5, atol=1e-6)
    b = torch.randn(4, device="cuda")
    y = torch.empty(3, 4, device="cuda")
    torch.cuda.synchronize()  # Kiln's stream does not wait for PyTorch's
    out = sess.run({"x": x, "b": b}, out={"y": y})
    assert out["y"] is y and y.data_ptr() == out["y"].data_ptr()
    torch.testing.assert_close(y, torch.tanh(x * 2 + b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["s"], torch.tanh(x * 2 + b).sum(1).cpu().numpy(), rtol=1e-5, atol=1e-5)
