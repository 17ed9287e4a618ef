"""kiln-serve end to end, with a real client: tritonclient over HTTP (JSON and the binary tensor
extension) and gRPC, on loopback.

One model repository is built per session (each example compiled once by kilnc): the examples with
and without a config.pbtxt, plus models that must fail to load. One kiln-serve in explicit mode
(ports 0) serves most tests; the control-mode, startup-failure and shutdown tests start their own.
Outputs are checked against kiln-run on the same inputs and the same device.

Tolerance: kiln-run and kiln-serve run the same artifact on the same device, so the numbers agree
up to float rounding (rtol 1e-4, atol 1e-5). Merged (dynamically batched) requests, and requests
checked against a row slice of one kiln-run batch, use the same tolerance: the batch is dimension
0 and the rows of these models are independent, each reduced over the same elements in the same
order whatever the number of rows.
"""
import ctypes
import concurrent.futures
import http.client
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

import grpc
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = SOURCE_DIR / "examples"
RTOL, ATOL = 1e-4, 1e-5
MAX_REQUEST_BYTES = 1 << 20  # the explicit server's --max-request-bytes
START_TIMEOUT = 60.0
CLIENT_TIMEOUT = 60.0

# ------------------------------------------------------------------------------------------------
# Artifacts, the repository, kiln-run
# ------------------------------------------------------------------------------------------------

# artifact name -> source (compiled once per session)
SOURCES = {
    "enc": EXAMPLES / "onnx" / "transformer_encoder.onnx",  # x: f32[batch, 8, 16] -> y
    "lm": EXAMPLES / "onnx" / "tiny_lm.onnx",  # input_ids, attention_mask: i64[batch, seq] -> logits
    "mlp": EXAMPLES / "mlp.graph",  # x: f32[N, 784] -> probs: f32[N, 10]
    "f8": SOURCE_DIR / "tests" / "serve" / "float8.graph",  # x: f8e4m3fn[4]: no protocol datatype
}
LM_VOCAB = 40  # tiny_lm's vocabulary (examples/onnx/make_models.py: LM_V); positions up to 32


def make_inputs(kind, batch, seed, seq=6):
    rng = np.random.default_rng(seed)
    if kind == "enc":
        return {"x": rng.standard_normal((batch, 8, 16)).astype(np.float32)}
    if kind == "mlp":
        return {"x": rng.standard_normal((batch, 784)).astype(np.float32)}
    if kind == "lm":
        ids = rng.integers(0, LM_VOCAB, size=(batch, seq)).astype(np.int64)
        mask = np.ones((batch, seq), dtype=np.int64)
        for row in range(1, batch):
            mask[row, seq - min(row, seq - 1):] = 0  # padding at the end, as tiny_lm's own tests
        return {"input_ids": ids, "attention_mask": mask}
    raise ValueError(kind)


OUTPUT_NAME = {"enc": "y", "mlp": "probs", "lm": "logits"}
MODEL_KIND = {}  # every model name of the tests' repositories -> its artifact name


def config_device(device):
    return f'parameters {{ key: "device" value: {{ string_value: "{device}" }} }}\n'


class Repo:
    """The session's repository: folders, the artifact of each model, and its device."""

    def __init__(self, root, artifacts, device):
        self.root = root
        self.artifacts = artifacts  # artifact name -> compiled .kiln
        self.device = device  # kiln-run's default device, on which the served models run
        self.kind = {}  # model name -> artifact name

    def add(self, root, name, kind, versions=(1,), config=None):
        for v in versions:
            d = root / name / str(v)
            d.mkdir(parents=True)
            if _same_fs(self.artifacts[kind], d):
                os.link(self.artifacts[kind], d / "model.kiln")
            else:
                shutil.copy(self.artifacts[kind], d / "model.kiln")
        if config is not None:
            (root / name / "config.pbtxt").write_text(config)
        MODEL_KIND[name] = kind
        if root == self.root:
            self.kind[name] = kind


def _same_fs(a, b):
    return os.stat(a).st_dev == os.stat(b).st_dev


@pytest.fixture(scope="session")
def tools(pytestconfig):
    return {t: pytestconfig.getoption(t.replace("-", "_")) for t in ("kilnc", "kiln-run", "kiln-serve")}


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("serve")


@pytest.fixture(scope="session")
def artifacts(tools, work):
    out = work / "artifacts"
    out.mkdir()
    procs = {}
    for name, src in SOURCES.items():  # the compiles at once
        procs[name] = subprocess.Popen([tools["kilnc"], str(src), "-o", str(out / f"{name}.kiln")],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for name, p in procs.items():
        log, _ = p.communicate(timeout=600)
        assert p.returncode == 0, f"kilnc {SOURCES[name]} failed:\n{log}"
    return {name: out / f"{name}.kiln" for name in SOURCES}


def kiln_run(exe, artifact, inputs, device, outdir):
    """kiln-run on .npy inputs (device None: its default); returns (outputs by name, device)."""
    (outdir / "out").mkdir(parents=True)
    cmd = [exe, str(artifact), f"--output-dir={outdir / 'out'}"] + ([f"--device={device}"] if device else [])
    for name, value in inputs.items():
        np.save(outdir / f"{name}.npy", value)
        cmd += ["--input", f"{name}={outdir / f'{name}.npy'}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{' '.join(cmd)}:\n{r.stdout}{r.stderr}"
    m = re.search(r"^device: (\S+)", r.stdout, re.M)
    assert m, r.stdout
    return {p.stem: np.load(p) for p in (outdir / "out").glob("*.npy")}, m.group(1)


class Reference:
    """The inputs the tests send and kiln-run's outputs for them, computed once (kiln-run starts
    a device each time: ~1 s). Tests send row slices of these batches: the rows of every example
    model are independent, and each row is computed in the same order whatever the batch size."""

    def __init__(self, tools, artifacts, work):
        self.enc = make_inputs("enc", 4, seed=1)  # x: [4, 8, 16]
        self.lm5 = make_inputs("lm", 4, seed=2, seq=5)  # input_ids, attention_mask: [4, 5]
        self.lm7 = make_inputs("lm", 1, seed=3, seq=7)
        self.mlp = make_inputs("mlp", 16, seed=4)  # x: [16, 784]
        jobs = {"enc": ("enc", self.enc, None), "lm5": ("lm", self.lm5, None), "lm7": ("lm", self.lm7, None),
                "mlp": ("mlp", self.mlp, None), "mlp_reference": ("mlp", self.mlp, "reference")}
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = {k: pool.submit(kiln_run, tools["kiln-run"], artifacts[a], x, dev, work / f"kiln-run-{k}")
                       for k, (a, x, dev) in jobs.items()}
            results = {k: f.result() for k, f in futures.items()}
        self.out = {k: r[0] for k, r in results.items()}
        devices = {r[1] for k, r in results.items() if k != "mlp_reference"}
        assert len(devices) == 1, f"kiln-run chose different default devices: {devices}"
        self.device = devices.pop()  # kiln-run's default device: kiln-serve's default as well

    def enc_rows(self, a, b):
        return {"x": self.enc["x"][a:b]}, self.out["enc"]["y"][a:b]

    def mlp_rows(self, a, b, device=None):
        key = "mlp_reference" if device == "reference" else "mlp"
        return {"x": self.mlp["x"][a:b]}, self.out[key]["probs"][a:b]

    def lm5_rows(self, a, b):
        return {k: v[a:b] for k, v in self.lm5.items()}, self.out["lm5"]["logits"][a:b]


@pytest.fixture(scope="session")
def ref(tools, artifacts, work):
    return Reference(tools, artifacts, work)


@pytest.fixture(scope="session")
def repo(work, artifacts, ref):
    """The explicit server's repository."""
    root = work / "repo"
    root.mkdir()
    r = Repo(root, artifacts, ref.device)
    dev = config_device(ref.device)
    # Without config: one instance on the default device, no batching.
    r.add(root, "enc", "enc")
    r.add(root, "mlp", "mlp")
    r.add(root, "lm", "lm", versions=(1, 3))  # default version policy: the newest (3) only
    # Dynamic batching. enc_batched: a batch runs when 4 rows are queued (or after 3 s), so four
    # concurrent one-row requests merge deterministically into one batch (at once: it is full).
    r.add(root, "enc_batched", "enc", config=(
        'name: "enc_batched"\nmax_batch_size: 4\n'
        "dynamic_batching { max_queue_delay_microseconds: 3000000 preferred_batch_size: [ 4 ] }\n"
        "instance_group [ { count: 1 kind: KIND_AUTO } ]\n" + dev))
    # lm_batched: requests merge only where the sequence length agrees.
    r.add(root, "lm_batched", "lm", config=(
        "max_batch_size: 4\ndynamic_batching { max_queue_delay_microseconds: 300000 }\n" + dev))
    # max_batch_size without dynamic batching, the inputs and outputs stated (batch dimension
    # excluded, as Triton's), two instances on the reference interpreter.
    r.add(root, "mlp_batched", "mlp", config=(
        'name: "mlp_batched"\nmax_batch_size: 16\n'
        'input [ { name: "x" data_type: TYPE_FP32 dims: [ 784 ] } ]\n'
        'output [ { name: "probs" data_type: TYPE_FP32 dims: [ 10 ] } ]\n'
        "instance_group [ { count: 2 kind: KIND_AUTO } ]\n" + config_device("reference")))
    # The queue limit: requests wait up to 3 s for a batch of 8 rows; at most 2 wait.
    r.add(root, "queued", "mlp", config=(
        "max_batch_size: 8\n"
        "dynamic_batching { max_queue_delay_microseconds: 3000000\n"
        "  default_queue_policy { max_queue_size: 2 } }\n" + dev))
    # Loaded and unloaded by the repository tests only; both versions (version_policy all).
    r.add(root, "dyn", "mlp", versions=(1, 2), config="version_policy: { all: {} }\n")
    # Reloaded and unloaded with a request waiting in its queue (up to 1.5 s for 8 rows).
    r.add(root, "reload", "mlp", config=(
        "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 1500000 }\n" + dev))
    # Models that fail to load (loaded only on request).
    (root / "broken" / "1").mkdir(parents=True)
    (root / "broken" / "1" / "model.kiln").write_bytes(b"this is not a kiln artifact\n" * 40)
    r.add(root, "badconfig", "enc", config="max_batch_size: 4\ndynamic_batching { max_queue_delay_microseconds: \n")
    r.add(root, "mismatch", "enc", config=(
        'max_batch_size: 4\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 8, 15 ] } ]\n'))
    r.add(root, "float8", "f8")
    return r


STARTUP_MODELS = ["enc", "mlp", "lm", "enc_batched", "lm_batched", "mlp_batched", "queued"]

# ------------------------------------------------------------------------------------------------
# The server process
# ------------------------------------------------------------------------------------------------


def _die_with_parent():
    """In the child: SIGKILL when pytest dies (a ctest timeout), so that no server outlives it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Server:
    """A kiln-serve process on loopback with ports 0; the ports come from its "listening" logs."""

    def __init__(self, exe, repo_root, args, log_path, protocols=("http", "grpc", "metrics")):
        self.log_path = log_path
        self.lines = []  # stderr, line by line
        self.ports = {}
        self._cond = threading.Condition()
        defaults = ["--http-port=0", "--grpc-port=0", "--metrics-port=0", "--http-address=127.0.0.1",
                    "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1", "--log-format=json"]
        given = {a.split("=")[0] for a in args}
        cmd = [exe, f"--model-repository={repo_root}"] + [d for d in defaults if d.split("=")[0] not in given] + list(args)
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace",
                                     preexec_fn=_die_with_parent)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.protocols = protocols

    def _read(self):
        with open(self.log_path, "w") as log:
            for line in self.proc.stderr:
                log.write(line)
                log.flush()
                with self._cond:
                    self.lines.append(line)
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        entry = None
                    if isinstance(entry, dict) and entry.get("msg") == "listening":
                        self.ports[entry.get("protocol")] = int(entry.get("port"))
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def log(self, tail=60):
        with self._cond:
            return "".join(self.lines[-tail:])

    def json_logs(self):
        out = []
        with self._cond:
            lines = list(self.lines)
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def wait_listening(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        with self._cond:
            while not all(p in self.ports for p in self.protocols):
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise AssertionError(f"kiln-serve exited ({self.proc.returncode}) before listening:\n"
                                         f"{' '.join(self.cmd)}\n{''.join(self.lines[-60:])}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"kiln-serve did not log 'listening' for {self.protocols} in "
                                         f"{timeout} s (got {self.ports}):\n{''.join(self.lines[-60:])}")
                self._cond.wait(min(left, 0.5))

    def wait_ready(self, timeout=START_TIMEOUT):
        self.wait_listening(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                status, _, _ = http_request(self.http_port, "GET", "/v2/health/ready")
                if status == 200:
                    return
            except OSError:
                pass
            assert self.proc.poll() is None, f"kiln-serve exited ({self.proc.returncode}):\n{self.log()}"
            time.sleep(0.1)
        raise AssertionError(f"kiln-serve not ready in {timeout} s:\n{self.log()}")

    @property
    def http_port(self):
        return self.ports["http"]

    @property
    def grpc_port(self):
        return self.ports["grpc"]

    @property
    def metrics_port(self):
        return self.ports["metrics"]

    def http(self, **kw):
        return httpclient.InferenceServerClient(f"127.0.0.1:{self.http_port}", connection_timeout=CLIENT_TIMEOUT,
                                                network_timeout=CLIENT_TIMEOUT, **kw)

    def grpc(self):
        return grpcclient.InferenceServerClient(f"127.0.0.1:{self.grpc_port}")

    def metrics(self):
        status, headers, body = http_request(self.metrics_port, "GET", "/metrics")
        assert status == 200, body
        return parse_metrics(body.decode())

    def stop(self, timeout=60):
        """SIGTERM and wait; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"kiln-serve did not exit {timeout} s after SIGTERM:\n{self.log()}")
        self._reader.join(timeout=10)
        return self.proc.returncode


@pytest.fixture(scope="session")
def server(tools, repo, work):
    """kiln-serve in explicit mode on the session's repository, the STARTUP_MODELS loaded."""
    args = ["--model-control-mode=explicit", f"--max-request-bytes={MAX_REQUEST_BYTES}", "--http-thread-count=16"]
    args += [f"--load-model={m}" for m in STARTUP_MODELS]
    s = Server(tools["kiln-serve"], repo.root, args, work / "server-explicit.log")
    try:
        s.wait_ready()
        yield s
    finally:
        rc = s.stop()
        assert rc == 0, f"kiln-serve exited {rc} after SIGTERM:\n{s.log()}"


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------


def http_request(port, method, path, body=None, headers=None, timeout=CLIENT_TIMEOUT):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def error_message(body):
    """The message of an {"error": "..."} body (asserting that form)."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise AssertionError(f"error body is not JSON: {body[:300]!r}")
    assert isinstance(doc, dict) and isinstance(doc.get("error"), str) and doc["error"], \
        f"error body is not {{\"error\": message}}: {body[:300]!r}"
    return doc["error"]


def http_infer(client, model, inputs, binary_in=True, binary_out=True, outputs=None, version="", request_id=""):
    ins = []
    for name, value in inputs.items():
        i = httpclient.InferInput(name, list(value.shape), np_to_triton(value.dtype))
        i.set_data_from_numpy(value, binary_data=binary_in)
        ins.append(i)
    outs = [httpclient.InferRequestedOutput(o, binary_data=binary_out) for o in (outputs or [])] or None
    return client.infer(model, ins, outputs=outs, model_version=version, request_id=request_id)


def grpc_infer(client, model, inputs, outputs=None, version="", request_id=""):
    ins = []
    for name, value in inputs.items():
        i = grpcclient.InferInput(name, list(value.shape), np_to_triton(value.dtype))
        i.set_data_from_numpy(value)
        ins.append(i)
    outs = [grpcclient.InferRequestedOutput(o) for o in (outputs or [])] or None
    return client.infer(model, ins, outputs=outs, model_version=version, request_id=request_id,
                        client_timeout=CLIENT_TIMEOUT)


def np_to_triton(dtype):
    return {np.dtype(np.float32): "FP32", np.dtype(np.float64): "FP64", np.dtype(np.int64): "INT64",
            np.dtype(np.int32): "INT32", np.dtype(np.float16): "FP16", np.dtype(np.uint8): "UINT8",
            np.dtype(np.int8): "INT8", np.dtype(np.bool_): "BOOL", np.dtype(np.uint64): "UINT64"}[np.dtype(dtype)]


def infer(server, protocol, model, inputs, **kw):
    """One request by protocol: grpc; http-binary (binary tensors in; no outputs named, so all of
    them, binary); http-json (JSON in, the outputs named and asked for as JSON); http-mixed (JSON
    in, the outputs named and asked for binary)."""
    if protocol == "grpc":
        with server.grpc() as c:
            return grpc_infer(c, model, inputs, **kw)
    binary_in, binary_out = {"http-json": (False, False), "http-binary": (True, True),
                             "http-mixed": (False, True)}[protocol]
    if protocol != "http-binary" and kw.get("outputs") is None and model in MODEL_KIND:
        kw["outputs"] = [OUTPUT_NAME[MODEL_KIND[model]]]  # else tritonclient asks for binary outputs
    with server.http() as c:
        return http_infer(c, model, inputs, binary_in=binary_in, binary_out=binary_out, **kw)


def check_close(got, want, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape}, kiln-run {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, kiln-run {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)


def expect_error(fn, status, *needles, what=""):
    """fn() must raise InferenceServerException with `status` ("400", "StatusCode.NOT_FOUND", or a
    tuple of them) and a message containing every needle (str: case-insensitive substring;
    re.Pattern: search). Returns the message."""
    with pytest.raises(InferenceServerException) as info:
        fn()
    e = info.value
    statuses = status if isinstance(status, tuple) else (status,)
    msg = e.message() or ""
    assert e.status() in statuses, f"{what}: status {e.status()!r} ({msg!r}), expected {statuses}"
    for n in needles:
        if isinstance(n, re.Pattern):
            assert n.search(msg), f"{what}: message {msg!r} does not match {n.pattern!r}"
        else:
            assert n.lower() in msg.lower(), f"{what}: message {msg!r} does not name {n!r}"
    return msg


WORD_X = re.compile(r"\bx\b")  # the enc / mlp input's name as a word


@pytest.fixture(scope="session")
def probe(ref):
    """A good request for 'enc' and its expected output: sent after every refused request."""
    return ref.enc_rows(0, 1)


def assert_served(server, probe, protocol):
    inputs, want = probe
    r = infer(server, protocol, "enc", inputs)
    check_close(r.as_numpy("y"), want, f"the good request after a refused one ({protocol})")


# Prometheus text format: name{labels} value
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Metrics:
    def __init__(self, text):
        self.text = text
        self.samples = []  # (name, labels dict, value)
        self.types = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 4 and parts[1] == "TYPE":
                    self.types[parts[2]] = parts[3].strip()
                continue
            m = _SAMPLE.match(line)
            assert m, f"not a Prometheus sample line: {line!r}"
            labels = dict(_LABEL.findall(m.group(2) or ""))
            self.samples.append((m.group(1), labels, float(m.group(3))))

    def select(self, name, **labels):
        return [(l, v) for n, l, v in self.samples if n == name and all(l.get(k) == str(x) for k, x in labels.items())]

    def value(self, name, **labels):
        """The sum over the samples of `name` whose labels include `labels` (0 if none)."""
        return sum(v for _, v in self.select(name, **labels))


def parse_metrics(text):
    return Metrics(text)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------------
# Server, metadata, ports
# ------------------------------------------------------------------------------------------------


def test_ports_zero(server):
    """Every frontend bound a port of its own, logged as {"msg":"listening","protocol":..,"port":N}."""
    ports = [server.http_port, server.grpc_port, server.metrics_port]
    assert all(0 < p < 65536 for p in ports) and len(set(ports)) == 3, server.ports
    listening = [e for e in server.json_logs() if e.get("msg") == "listening"]
    assert {e["protocol"] for e in listening} == {"http", "grpc", "metrics"}, listening
    assert all("address" in e for e in listening), listening


def test_health_and_metadata_http(server):
    with server.http() as c:
        assert c.is_server_live()
        assert c.is_server_ready()
        meta = c.get_server_metadata()
        assert meta["name"] == "kiln" and meta.get("version"), meta
        assert c.is_model_ready("enc")
        assert c.is_model_ready("lm", "3")
        assert not c.is_model_ready("lm", "1")  # version policy: the newest only
        assert not c.is_model_ready("dyn")  # not loaded at start (explicit mode)
        m = c.get_model_metadata("enc")
        assert m["name"] == "enc" and m["versions"] == ["1"], m
        assert [(i["name"], i["datatype"], i["shape"]) for i in m["inputs"]] == [("x", "FP32", [-1, 8, 16])], m
        assert [(o["name"], o["datatype"], o["shape"]) for o in m["outputs"]] == [("y", "FP32", [-1, 8, 16])], m
        m = c.get_model_metadata("lm")
        assert m["versions"] == ["3"], m
        assert sorted((i["name"], i["datatype"], i["shape"]) for i in m["inputs"]) == [
            ("attention_mask", "INT64", [-1, -1]), ("input_ids", "INT64", [-1, -1])], m
        cfg = c.get_model_config("enc_batched")
        assert int(cfg["max_batch_size"]) == 4, cfg
        assert "dynamic_batching" in cfg, cfg
        assert [i["name"] for i in cfg["input"]] == ["x"], cfg  # completed from the artifact
        cfg = c.get_model_config("enc")
        assert int(cfg.get("max_batch_size", 0)) == 0, cfg  # no config: no batching
        cfg = c.get_model_config("mlp_batched")
        assert int(cfg["max_batch_size"]) == 16, cfg
        assert sum(int(g.get("count", 1)) for g in cfg["instance_group"]) == 2, cfg


def test_health_and_metadata_grpc(server):
    with server.grpc() as c:
        assert c.is_server_live()
        assert c.is_server_ready()
        assert c.get_server_metadata().name == "kiln"
        assert c.is_model_ready("mlp")
        assert not c.is_model_ready("lm", "1")
        m = c.get_model_metadata("mlp")
        assert m.name == "mlp" and list(m.versions) == ["1"], m
        assert [(i.name, i.datatype, list(i.shape)) for i in m.inputs] == [("x", "FP32", [-1, 784])], m
        assert [(o.name, o.datatype, list(o.shape)) for o in m.outputs] == [("probs", "FP32", [-1, 10])], m
        cfg = c.get_model_config("lm_batched").config
        assert cfg.max_batch_size == 4 and cfg.HasField("dynamic_batching"), cfg
        assert sorted(i.name for i in cfg.input) == ["attention_mask", "input_ids"], cfg


# ------------------------------------------------------------------------------------------------
# Inference: outputs against kiln-run
# ------------------------------------------------------------------------------------------------

PROTOCOLS = ["http-json", "http-binary", "http-mixed", "grpc"]
# model -> its request and kiln-run's answer: batched models get max_batch_size rows (a full batch
# runs at once)
INFER_CASES = {"enc": lambda ref: ref.enc_rows(0, 2), "enc_batched": lambda ref: ref.enc_rows(0, 4),
               "mlp": lambda ref: ref.mlp_rows(0, 3), "mlp_batched": lambda ref: ref.mlp_rows(0, 16, "reference"),
               "lm": lambda ref: ref.lm5_rows(1, 3), "lm_batched": lambda ref: ref.lm5_rows(0, 4)}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", list(INFER_CASES))
def test_infer_matches_kiln_run(server, repo, ref, model, protocol):
    inputs, want = INFER_CASES[model](ref)
    r = infer(server, protocol, model, inputs, request_id=f"req-{model}")
    out = OUTPUT_NAME[repo.kind[model]]
    check_close(r.as_numpy(out), want, f"{model} over {protocol}")
    resp = r.get_response()
    if protocol == "grpc":
        assert resp.model_name == model and resp.id == f"req-{model}", resp
    else:
        assert resp["model_name"] == model and resp.get("id") == f"req-{model}", resp
        (o,) = resp["outputs"]
        assert o["name"] == out and o["datatype"] == "FP32" and o["shape"] == list(want.shape), o
        if protocol == "http-json":
            assert "data" in o and "binary_data_size" not in o.get("parameters", {}), o
        else:
            assert o["parameters"]["binary_data_size"] == want.nbytes and "data" not in o, o


def test_infer_versions(server, ref):
    """An explicit version: lm's version 3 answers, version 1 (excluded by the version policy)
    and version 9 (no such folder) do not."""
    inputs, want = ref.lm5_rows(3, 4)
    with server.http() as c:
        r = http_infer(c, "lm", inputs, version="3")
        check_close(r.as_numpy("logits"), want, "lm version 3 (http)")
        assert r.get_response()["model_version"] == "3"
        expect_error(lambda: http_infer(c, "lm", inputs, version="9"), "404", "lm", what="lm version 9 (http)")
        expect_error(lambda: http_infer(c, "lm", inputs, version="1"), ("404", "503"), "lm",
                     what="lm version 1, not loaded (http)")
    with server.grpc() as c:
        r = grpc_infer(c, "lm", inputs, version="3")
        check_close(r.as_numpy("logits"), want, "lm version 3 (grpc)")
        assert r.get_response().model_version == "3"
        expect_error(lambda: grpc_infer(c, "lm", inputs, version="9"), "StatusCode.NOT_FOUND", "lm",
                     what="lm version 9 (grpc)")


def test_infer_requested_output_subset(server, ref):
    """Asking for the output by name (JSON out over HTTP, gRPC) gives the same tensor."""
    inputs, want = ref.mlp_rows(3, 5)
    for protocol in ("http-json", "grpc"):
        r = infer(server, protocol, "mlp", inputs, outputs=["probs"])
        check_close(r.as_numpy("probs"), want, f"mlp, outputs=[probs], {protocol}")


def test_grpc_typed_contents(server, ref):
    """ModelInfer with typed contents (InferTensorContents.fp32_contents), not raw_input_contents."""
    inputs, want = ref.enc_rows(3, 4)
    req = service_pb2.ModelInferRequest(model_name="enc")
    t = req.inputs.add(name="x", datatype="FP32", shape=[1, 8, 16])
    t.contents.fp32_contents.extend(inputs["x"].ravel().tolist())
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
        resp = service_pb2_grpc.GRPCInferenceServiceStub(ch).ModelInfer(req, timeout=CLIENT_TIMEOUT)
    assert [o.name for o in resp.outputs] == ["y"] and list(resp.outputs[0].shape) == [1, 8, 16], resp
    if resp.raw_output_contents:
        got = np.frombuffer(resp.raw_output_contents[0], dtype=np.float32)
    else:
        got = np.array(resp.outputs[0].contents.fp32_contents, dtype=np.float32)
    check_close(got.reshape(1, 8, 16), want, "enc with typed fp32_contents (grpc)")


# ------------------------------------------------------------------------------------------------
# Dynamic batching
# ------------------------------------------------------------------------------------------------


def _concurrently(calls):
    """Runs the calls at once (one thread each, started together); returns results or exceptions."""
    barrier = threading.Barrier(len(calls))

    def run(call):
        barrier.wait()
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - reported by the caller
            return e

    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def test_dynamic_batching_merges(server, repo, ref):
    """Four one-row requests (two HTTP, two gRPC) to enc_batched run as one batch of 4 (max 4,
    preferred 4, 3 s delay), each answered with its own row: the same as kiln-run on the rows
    stacked, and as the unbatched model 'enc' answering them one by one."""
    rows, want = ref.enc["x"], ref.out["enc"]["y"]
    before = server.metrics()
    protocols = ["http-binary", "grpc", "http-json", "grpc"]
    calls = [lambda i=i, p=p: infer(server, p, "enc_batched", {"x": rows[i:i + 1]}) for i, p in enumerate(protocols)]
    results = _concurrently(calls)
    for i, (p, r) in enumerate(zip(protocols, results)):
        assert not isinstance(r, Exception), f"request {i} ({p}) failed: {r}"
        check_close(r.as_numpy("y"), want[i:i + 1], f"enc_batched, merged request {i} ({p})")
        alone = infer(server, p, "enc", {"x": rows[i:i + 1]}).as_numpy("y")
        check_close(r.as_numpy("y"), alone, f"enc_batched merged vs enc alone, request {i} ({p})")
    after = server.metrics()
    d = lambda name, **l: after.value(name, model="enc_batched", **l) - before.value(name, model="enc_batched", **l)
    assert d("kiln_inference_request_success_total") == 4, after.select("kiln_inference_request_success_total")
    execs = d("kiln_inference_exec_total")
    assert d("kiln_inference_batch_size_sum") == 4, after.select("kiln_inference_batch_size_sum", model="enc_batched")
    assert execs == 1 and d("kiln_inference_batch_size_count") == 1, \
        f"4 one-row requests ran in {execs} batches, expected 1 batch of 4:\n" + \
        "\n".join(str(s) for s in after.select("kiln_inference_batch_size_bucket", model="enc_batched"))
    # The batch's device label is the instance's device.
    assert after.select("kiln_inference_exec_total", model="enc_batched", device=repo.device), \
        after.select("kiln_inference_exec_total", model="enc_batched")


def test_dynamic_batching_pads_to_a_bucket(server, ref):
    """Three one-row requests to enc_batched wait out the delay (preferred 4 never comes), then run
    as one batch of 3 rows padded to the 4-row bucket (model.cpp: batch_rows_bucket): each still
    gets exactly its own row."""
    rows, want = ref.enc["x"], ref.out["enc"]["y"]
    before = server.metrics()
    protocols = ["grpc", "http-binary", "grpc"]
    results = _concurrently([lambda i=i, p=p: infer(server, p, "enc_batched", {"x": rows[i:i + 1]})
                             for i, p in enumerate(protocols)])
    for i, (p, r) in enumerate(zip(protocols, results)):
        assert not isinstance(r, Exception), f"request {i} ({p}) failed: {r}"
        assert r.as_numpy("y").shape == (1, 8, 16), r.as_numpy("y").shape
        check_close(r.as_numpy("y"), want[i:i + 1], f"enc_batched, padded batch, request {i} ({p})")
    after = server.metrics()
    d = lambda name: after.value(name, model="enc_batched") - before.value(name, model="enc_batched")
    assert d("kiln_inference_exec_total") == 1 and d("kiln_inference_batch_size_sum") == 3, \
        f"{d('kiln_inference_exec_total')} batches of {d('kiln_inference_batch_size_sum')} rows, expected 1 of 3"


def test_dynamic_batching_needs_agreeing_shapes(server, ref):
    """lm_batched: requests merge only where the sequence length agrees; every request gets its
    own answer either way."""
    reqs = [("grpc", *ref.lm5_rows(0, 1)), ("http-binary", *ref.lm5_rows(1, 3)),
            ("grpc", ref.lm7, ref.out["lm7"]["logits"])]
    before = server.metrics()
    results = _concurrently([lambda p=p, x=x: infer(server, p, "lm_batched", x) for p, x, _ in reqs])
    for i, ((p, x, want), r) in enumerate(zip(reqs, results)):
        assert not isinstance(r, Exception), f"request {i} ({p}) failed: {r}"
        check_close(r.as_numpy("logits"), want, f"lm_batched request {i} ({p})")
    after = server.metrics()
    execs = after.value("kiln_inference_exec_total", model="lm_batched") - \
        before.value("kiln_inference_exec_total", model="lm_batched")
    rows = after.value("kiln_inference_batch_size_sum", model="lm_batched") - \
        before.value("kiln_inference_batch_size_sum", model="lm_batched")
    assert 2 <= execs <= 3 and rows == 4, f"{execs} batches of {rows} rows in all"


def test_concurrent_mixed_requests(server, repo, ref):
    """24 requests at once from 8 threads, over every protocol and several models (mlp_batched has
    two instances): each answered with its own outputs."""
    cases = [("enc", ref.enc_rows(i, i + 1)) for i in range(4)] + \
            [("mlp", ref.mlp_rows(i, i + 2)) for i in range(0, 8, 2)] + \
            [("mlp_batched", ref.mlp_rows(i, i + 4, "reference")) for i in range(0, 16, 4)] + \
            [("lm", ref.lm5_rows(i, i + 1)) for i in range(4)] + \
            [("enc_batched", ref.enc_rows(i, i + 2)) for i in (0, 2)] + \
            [("mlp_batched", ref.mlp_rows(0, 16, "reference")), ("mlp", ref.mlp_rows(8, 16))] + \
            [("lm", ref.lm5_rows(0, 4)), ("enc", ref.enc_rows(0, 4))] + \
            [("lm_batched", ref.lm5_rows(0, 4)), ("enc_batched", ref.enc_rows(0, 4))]
    jobs = [(model, PROTOCOLS[i % len(PROTOCOLS)], inputs, want) for i, (model, (inputs, want)) in enumerate(cases)]

    def run(job):
        model, protocol, inputs, _ = job
        return infer(server, protocol, model, inputs)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(run, jobs))
    for (model, protocol, _, want), r in zip(jobs, results):
        check_close(r.as_numpy(OUTPUT_NAME[repo.kind[model]]), want, f"{model} over {protocol}, concurrent")


def _wait_pending(server, model, n, timeout=1.0):
    """Waits until the metrics show n requests queued for model; False if they never do."""
    try:
        wait_for(lambda: server.metrics().value("kiln_inference_pending_requests", model=model) >= n, timeout, "")
        return True
    except AssertionError:
        return False


def test_reload_and_unload_with_a_queued_request(server, ref):
    """A request waiting in the queue when its model is reloaded, or unloaded, is answered (by
    the old version: repository.h, model.h's drain)."""
    with server.http() as c, concurrent.futures.ThreadPoolExecutor(1) as pool:
        c.load_model("reload")
        try:
            a_in, a_want = ref.mlp_rows(0, 1)
            a = pool.submit(infer, server, "grpc", "reload", a_in)
            queued = _wait_pending(server, "reload", 1)
            c.load_model("reload")  # the reload
            check_close(a.result(timeout=30).as_numpy("probs"), a_want, "the request queued during the reload")
            assert queued, "kiln_inference_pending_requests{model=\"reload\"} never showed the queued request"
            full, want = ref.mlp_rows(8, 16)
            check_close(http_infer(c, "reload", full).as_numpy("probs"), want, "after the reload")
            b_in, b_want = ref.mlp_rows(1, 2)
            b = pool.submit(infer, server, "http-binary", "reload", b_in)
            _wait_pending(server, "reload", 1)
            c.unload_model("reload")
            check_close(b.result(timeout=30).as_numpy("probs"), b_want, "the request queued during the unload")
            expect_error(lambda: http_infer(c, "reload", b_in), ("404", "503"), "reload", what="after the unload")
        finally:
            try:
                c.unload_model("reload")
            except InferenceServerException:
                pass


def test_batch_over_max_batch_size(server, probe):
    x = make_inputs("enc", 5, seed=1)
    with server.http() as c:
        expect_error(lambda: http_infer(c, "enc_batched", x), "400", re.compile(r"batch|\b4\b", re.I),
                     what="5 rows to enc_batched (max_batch_size 4), http")
    assert_served(server, probe, "http-binary")
    with server.grpc() as c:
        expect_error(lambda: grpc_infer(c, "enc_batched", x), "StatusCode.INVALID_ARGUMENT",
                     re.compile(r"batch|\b4\b", re.I), what="5 rows to enc_batched, grpc")
    assert_served(server, probe, "grpc")


# ------------------------------------------------------------------------------------------------
# Bad requests: each refused with the right code and a message naming the problem; the next
# request is served.
# ------------------------------------------------------------------------------------------------

LM_GOOD = make_inputs("lm", 1, seed=3, seq=4)


def _bad_cases():
    """(what, model, inputs, outputs, needles): requests the model must refuse as invalid."""
    x = make_inputs("enc", 1, seed=2)["x"]
    ids, mask = LM_GOOD["input_ids"], LM_GOOD["attention_mask"]
    return [
        ("wrong dtype (INT32 for INT64)", "lm", {"input_ids": ids, "attention_mask": mask.astype(np.int32)}, None,
         ["attention_mask", re.compile("INT32|INT64")]),
        ("wrong dtype (UINT64, no Kiln type)", "enc", {"x": x.astype(np.uint64)}, None, [WORD_X, "UINT64"]),
        ("wrong dtype (FP64 for FP32)", "enc", {"x": x.astype(np.float64)}, None, [WORD_X, re.compile("FP64|FP32")]),
        ("wrong dtype (FP16 for FP32)", "enc", {"x": x.astype(np.float16)}, None, [WORD_X, re.compile("FP16|FP32")]),
        ("wrong shape (last dim)", "enc", {"x": x[:, :, :15].copy()}, None, [WORD_X, "15"]),
        ("wrong rank", "enc", {"x": x.reshape(8, 16)}, None, [WORD_X]),
        ("wrong rank (lm)", "lm", {"input_ids": ids.ravel(), "attention_mask": mask}, None, ["input_ids"]),
        ("missing input", "lm", {"input_ids": ids}, None, ["attention_mask"]),
        ("extra input", "lm", {"input_ids": ids, "attention_mask": mask, "token_type_ids": ids}, None,
         ["token_type_ids"]),
        ("unknown output", "enc", {"x": x}, ["no_such_output"], ["no_such_output"]),
        # input_ids and attention_mask share the symbols batch and seq
        ("disagreeing symbolic dims", "lm", {"input_ids": ids, "attention_mask": np.ones((1, 5), np.int64)}, None,
         [re.compile("attention_mask|input_ids")]),
        ("disagreeing batch (batched model)", "lm_batched",
         {"input_ids": np.concatenate([ids, ids]), "attention_mask": mask}, None, [re.compile("attention_mask|input_ids|batch")]),
        ("empty batch (batched model)", "enc_batched", {"x": x[:0]}, None, [re.compile("batch", re.I)]),
    ]


BAD_CASES = _bad_cases()


@pytest.mark.parametrize("case", BAD_CASES, ids=[c[0] for c in BAD_CASES])
@pytest.mark.parametrize("protocol", ["http-binary", "http-json", "grpc"])
def test_bad_request(server, probe, case, protocol):
    what, model, inputs, outputs, needles = case
    status = "StatusCode.INVALID_ARGUMENT" if protocol == "grpc" else "400"
    expect_error(lambda: infer(server, protocol, model, inputs, outputs=outputs), status, *needles,
                 what=f"{what} ({protocol})")
    assert_served(server, probe, protocol)


@pytest.mark.parametrize("protocol", ["http-binary", "grpc"])
def test_unknown_model(server, probe, protocol):
    x = make_inputs("enc", 1, seed=2)
    status = "StatusCode.NOT_FOUND" if protocol == "grpc" else "404"
    expect_error(lambda: infer(server, protocol, "no_such_model", x), status, "no_such_model",
                 what=f"unknown model ({protocol})")
    expect_error(lambda: infer(server, protocol, "enc", x, version="7"), status, "enc",
                 what=f"unknown version ({protocol})")
    assert_served(server, probe, protocol)
    if protocol != "grpc":
        st, _, body = http_request(server.http_port, "GET", "/v2/models/no_such_model")
        assert st == 404 and "no_such_model" in error_message(body), (st, body)
        st, _, body = http_request(server.http_port, "GET", "/v2/models/no_such_model/ready")
        assert st in (400, 404), (st, body)  # the client's is_model_ready: any non-200


def _post_infer(server, model, body, headers=None):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return http_request(server.http_port, "POST", f"/v2/models/{model}/infer", body=body, headers=h)


def _json_request(x, **extra):
    t = {"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}
    t.update(extra)
    return {"inputs": [t]}


HTTP_BAD_BODIES = [
    # (what, body, headers, needles)
    ("malformed JSON", b'{"inputs": [{"name": "x", "shape": [1, 8, 16], "datatype": "FP32", "data": [1.0, ',
     None, [re.compile("json|parse|syntax", re.I)]),
    ("not JSON at all", b"\x00\x01binary garbage\xff", None, [re.compile("json|parse|syntax", re.I)]),
    ("inputs not a list", b'{"inputs": "x"}', None, [re.compile("inputs", re.I)]),
    ("no inputs", b'{"outputs": []}', None, [re.compile("inputs", re.I)]),
    ("input without a name", json.dumps({"inputs": [{"shape": [1, 8, 16], "datatype": "FP32", "data": [0.0] * 128}]}).encode(),
     None, [re.compile("name", re.I)]),
    ("data count does not match the shape",
     json.dumps(_json_request(np.zeros((1, 8, 16), np.float32))).encode().replace(b'"shape": [1, 8, 16]', b'"shape": [2, 8, 16]'),
     None, [WORD_X]),
    ("data of the wrong type", json.dumps({"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32",
                                                       "data": ["a", "b"]}]}).encode(), None, [WORD_X]),
    ("negative dimension", json.dumps({"inputs": [{"name": "x", "shape": [-1, 8, 16], "datatype": "FP32",
                                                   "data": [0.0] * 128}]}).encode(), None, [WORD_X]),
    ("unknown datatype name", json.dumps({"inputs": [{"name": "x", "shape": [1, 8, 16], "datatype": "FLOAT",
                                                      "data": [0.0] * 128}]}).encode(), None, ["FLOAT"]),
    ("an input given twice", json.dumps({"inputs": _json_request(np.zeros((1, 8, 16), np.float32))["inputs"] * 2}).encode(),
     None, [WORD_X]),
    ("a shape whose size overflows", json.dumps({"inputs": [{"name": "x", "shape": [2 ** 40, 2 ** 40, 16],
                                                             "datatype": "FP32", "data": [0.0] * 128}]}).encode(),
     None, [WORD_X]),
]


@pytest.mark.parametrize("case", HTTP_BAD_BODIES, ids=[c[0] for c in HTTP_BAD_BODIES])
def test_http_bad_body(server, probe, case):
    what, body, headers, needles = case
    st, _, resp = _post_infer(server, "enc", body, headers)
    assert st == 400, f"{what}: status {st}, body {resp[:300]!r}"
    msg = error_message(resp)
    for n in needles:
        assert n.search(msg) if isinstance(n, re.Pattern) else n in msg, f"{what}: message {msg!r} lacks {n}"
    assert_served(server, probe, "http-json")


def _binary_body(x, declared_size=None, header_extra=None):
    raw = x.tobytes()
    t = {"name": "x", "shape": list(x.shape), "datatype": "FP32",
         "parameters": {"binary_data_size": len(raw) if declared_size is None else declared_size}}
    doc = {"inputs": [t]}
    doc.update(header_extra or {})
    header = json.dumps(doc).encode()
    return header, raw


def test_http_bad_binary(server, probe):
    """The binary tensor extension with inconsistent sizes."""
    x = make_inputs("enc", 1, seed=4)["x"]
    ct = {"Content-Type": "application/octet-stream"}
    header, raw = _binary_body(x)
    # Sanity: the well-formed request, hand-made, is served.
    st, hdrs, body = _post_infer(server, "enc", header + raw, {**ct, "Inference-Header-Content-Length": str(len(header))})
    assert st == 200, body[:300]
    cases = []
    # binary_data_size larger than the bytes that follow
    h2, _ = _binary_body(x, declared_size=len(raw) + 64)
    cases.append(("binary_data_size past the end", h2 + raw, len(h2)))
    # binary_data_size smaller than the shape needs (the rest left over)
    h3, _ = _binary_body(x, declared_size=len(raw) - 4)
    cases.append(("binary_data_size smaller than the shape", h3 + raw, len(h3)))
    # the header length past the end of the body
    cases.append(("Inference-Header-Content-Length past the end", header + raw, len(header) + len(raw) + 10))
    # the header length cutting the JSON header short
    cases.append(("Inference-Header-Content-Length inside the header", header + raw, len(header) // 2))
    for what, body, hlen in cases:
        st, _, resp = _post_infer(server, "enc", body, {**ct, "Inference-Header-Content-Length": str(hlen)})
        assert st == 400, f"{what}: status {st}, body {resp[:300]!r}"
        error_message(resp)
        assert_served(server, probe, "http-binary")
    st, _, resp = _post_infer(server, "enc", header + raw, {**ct, "Inference-Header-Content-Length": "twelve"})
    assert st == 400, f"non-numeric Inference-Header-Content-Length: status {st}, body {resp[:300]!r}"
    assert re.search("Inference-Header-Content-Length|header", error_message(resp), re.I), resp
    assert_served(server, probe, "http-binary")


def test_grpc_malformed_protobuf(server, probe):
    """Bytes that are no ModelInferRequest: INVALID_ARGUMENT, and the server goes on."""
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
        call = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer")  # bytes in, bytes out
        # field 1 (model_name), length-delimited, announcing 100 bytes where 3 follow
        for what, raw in (("truncated field", b"\x0a\x64abc"), ("invalid wire type", b"\x0f\xff\xff\xff\xff\xff")):
            with pytest.raises(grpc.RpcError) as info:
                call(raw, timeout=CLIENT_TIMEOUT)
            code = info.value.code()
            assert code == grpc.StatusCode.INVALID_ARGUMENT, \
                f"malformed protobuf ({what}): {code} {info.value.details()!r}, expected INVALID_ARGUMENT"
    assert_served(server, probe, "grpc")


def test_grpc_bad_raw_contents(server, probe):
    """raw_input_contents that do not match the inputs: the wrong byte count, or one more
    buffer than inputs."""
    x = make_inputs("enc", 1, seed=6)["x"]
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        req = service_pb2.ModelInferRequest(model_name="enc")
        req.inputs.add(name="x", datatype="FP32", shape=[1, 8, 16])
        req.raw_input_contents.append(x.tobytes()[:100])
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelInfer(req, timeout=CLIENT_TIMEOUT)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value
        assert WORD_X.search(info.value.details() or ""), info.value.details()
        req.raw_input_contents[0] = x.tobytes()
        req.raw_input_contents.append(x.tobytes())
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelInfer(req, timeout=CLIENT_TIMEOUT)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value
        # typed contents: too few values, none, the field of another type, beside raw contents;
        # an input given twice
        cases = []
        for what, fill in (("too few values", lambda t, r: t.contents.fp32_contents.extend([0.5] * 100)),
                           ("no values", lambda t, r: None),
                           ("int64_contents for FP32", lambda t, r: t.contents.int64_contents.extend([1] * 128)),
                           ("typed and raw contents", lambda t, r: (t.contents.fp32_contents.extend([0.5] * 128),
                                                                    r.raw_input_contents.append(x.tobytes()))),
                           ("an input given twice", lambda t, r: (
                               r.raw_input_contents.append(x.tobytes()),
                               r.inputs.add(name="x", datatype="FP32", shape=[1, 8, 16]),
                               r.raw_input_contents.append(x.tobytes())))):
            req = service_pb2.ModelInferRequest(model_name="enc")
            fill(req.inputs.add(name="x", datatype="FP32", shape=[1, 8, 16]), req)
            cases.append((what, req))
        for what, req in cases:
            with pytest.raises(grpc.RpcError) as info:
                stub.ModelInfer(req, timeout=CLIENT_TIMEOUT)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, f"{what}: {info.value}"
            assert WORD_X.search(info.value.details() or ""), f"{what}: {info.value.details()!r}"
    assert_served(server, probe, "grpc")


def test_oversized_requests(server, probe):
    """Bodies over --max-request-bytes (1 MiB): HTTP 413, gRPC RESOURCE_EXHAUSTED."""
    big = {"x": np.zeros((400, 784), np.float32)}  # 1.25 MB of tensor bytes
    with server.http() as c:
        expect_error(lambda: http_infer(c, "mlp", big), "413", what="1.25 MB binary body (http)")
    assert_served(server, probe, "http-binary")
    # The same by hand: the answer is an {"error": ...} body.
    header, raw = _binary_body(big["x"])
    st, _, resp = _post_infer(server, "mlp", header + raw, {"Inference-Header-Content-Length": str(len(header))})
    assert st == 413, (st, resp[:300])
    error_message(resp)
    assert_served(server, probe, "http-json")
    # A JSON body over the limit (~1.4 MB of text).
    st, _, resp = _post_infer(server, "mlp", json.dumps(_json_request(np.full((90, 784), 0.123456789, np.float32))).encode())
    assert st == 413, (st, resp[:300])
    error_message(resp)
    assert_served(server, probe, "http-json")
    with server.grpc() as c:
        expect_error(lambda: grpc_infer(c, "mlp", big), "StatusCode.RESOURCE_EXHAUSTED", what="1.25 MB message (grpc)")
    assert_served(server, probe, "grpc")
    # Just under the limit is served (mlp_batched takes 16 rows; mlp any number: 300 rows, 0.94 MB).
    ok = {"x": np.zeros((300, 784), np.float32)}
    with server.http() as c:
        assert http_infer(c, "mlp", ok).as_numpy("probs").shape == (300, 10)
    with server.grpc() as c:
        assert grpc_infer(c, "mlp", ok).as_numpy("probs").shape == (300, 10)


# ------------------------------------------------------------------------------------------------
# Queue limit
# ------------------------------------------------------------------------------------------------


def test_queue_limit(server, ref):
    """'queued' (max_queue_size 2, 3 s delay for a batch of 8): two one-row requests wait in the
    queue; a third is refused at once with 503 / UNAVAILABLE; the two waiting ones are then
    answered (as one batch) and a full batch is served."""
    rows, want = ref.mlp["x"][:2], ref.out["mlp"]["probs"][:2]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        t0 = time.monotonic()
        waiting = [pool.submit(infer, server, p, "queued", {"x": rows[i:i + 1]})
                   for i, p in enumerate(["http-binary", "grpc"])]
        try:  # the gauge shows them queued (checked below: first the refusals, while they wait)
            wait_for(lambda: server.metrics().value("kiln_inference_pending_requests", model="queued") >= 2, 1.0, "")
            gauge_seen = True
        except AssertionError:
            gauge_seen = False
        assert not any(f.done() for f in waiting), [f.result() for f in waiting if f.done()]
        one = make_inputs("mlp", 1, seed=42)
        with server.http() as c:
            expect_error(lambda: http_infer(c, "queued", one), "503", re.compile("queue", re.I),
                         what="third request to a full queue (http)")
        with server.grpc() as c:
            expect_error(lambda: grpc_infer(c, "queued", one), "StatusCode.UNAVAILABLE", re.compile("queue", re.I),
                         what="third request to a full queue (grpc)")
        assert time.monotonic() - t0 < 2.8, "the refusals took too long: the queue did not refuse at once"
        for i, f in enumerate(waiting):
            check_close(f.result(timeout=30).as_numpy("probs"), want[i:i + 1], f"queued request {i}")
    assert gauge_seen, "kiln_inference_pending_requests{model=\"queued\"} never showed the 2 queued requests"
    full, want = ref.mlp_rows(8, 16)
    check_close(infer(server, "grpc", "queued", full).as_numpy("probs"), want, "a full batch after the refusals")


# ------------------------------------------------------------------------------------------------
# Repository API (explicit mode)
# ------------------------------------------------------------------------------------------------


def _index(c, protocol):
    if protocol == "grpc":
        rows = c.get_model_repository_index(as_json=True).get("models", [])
    else:
        rows = c.get_model_repository_index()
    return rows


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_repository_load_unload(server, ref, probe, protocol):
    """dyn: absent until loaded (both versions: version_policy all), served, then unloaded."""
    c = server.grpc() if protocol == "grpc" else server.http()
    err_unavailable = ("StatusCode.NOT_FOUND", "StatusCode.UNAVAILABLE") if protocol == "grpc" else ("404", "503")
    x, want = ref.mlp_rows(5, 7)
    do_infer = (lambda **kw: grpc_infer(c, "dyn", x, **kw)) if protocol == "grpc" else \
        (lambda **kw: http_infer(c, "dyn", x, **kw))
    try:
        names = {r["name"] for r in _index(c, protocol)}
        assert {"enc", "dyn", "broken", *STARTUP_MODELS} <= names, names
        assert not c.is_model_ready("dyn")
        expect_error(do_infer, err_unavailable, "dyn", what="dyn before its load")
        c.load_model("dyn")
        assert c.is_model_ready("dyn") and c.is_model_ready("dyn", "1") and c.is_model_ready("dyn", "2")
        check_close(do_infer().as_numpy("probs"), want, f"dyn ({protocol})")
        check_close(do_infer(version="1").as_numpy("probs"), want, f"dyn version 1 ({protocol})")
        rows = [r for r in _index(c, protocol) if r["name"] == "dyn"]
        assert sorted((r.get("version"), r.get("state")) for r in rows) == [("1", "READY"), ("2", "READY")], rows
        c.load_model("dyn")  # a reload of a loaded model
        check_close(do_infer().as_numpy("probs"), want, f"dyn after a reload ({protocol})")
        c.unload_model("dyn")
        wait_for(lambda: not c.is_model_ready("dyn"), 30, "dyn to unload")
        expect_error(do_infer, err_unavailable, "dyn", what="dyn after its unload")
        rows = [r for r in _index(c, protocol) if r["name"] == "dyn"]
        assert all(r.get("state") != "READY" for r in rows), rows
        # An unknown model does not load.
        bad = ("StatusCode.INVALID_ARGUMENT", "StatusCode.NOT_FOUND") if protocol == "grpc" else ("400", "404")
        expect_error(lambda: c.load_model("no_such_model"), bad, "no_such_model", what="load of an unknown model")
    finally:
        c.close()
    assert_served(server, probe, "grpc" if protocol == "grpc" else "http-binary")


LOAD_FAILURES = {  # model -> what its load error must say besides its name
    "broken": re.compile(r"artifact|model\.kiln|magic|format|corrupt|truncated|invalid|not a kiln", re.I),
    "badconfig": re.compile(r"config", re.I),
    "mismatch": re.compile(r"\bx\b.*(dims|shape|15|16)|(dims|shape|15|16).*\bx\b", re.I | re.S),
    "float8": re.compile(r"'x' is f8e4m3fn, which the inference protocol has no datatype for"),
}


@pytest.mark.parametrize("model", list(LOAD_FAILURES))
def test_repository_load_failure(server, probe, model):
    """A model that fails to load (garbage for an artifact, a config.pbtxt that does not parse, a
    config that contradicts the artifact): HTTP 400 / gRPC INVALID_ARGUMENT naming it and why,
    UNAVAILABLE with a reason in the index, not ready; the other models go on serving."""
    why = LOAD_FAILURES[model]
    with server.http() as c:
        msg = expect_error(lambda: c.load_model(model), "400", model, what=f"load of {model} (http)")
        assert why.search(msg.replace(model, "")), f"the load error does not say why ({why.pattern}): {msg!r}"
        assert not c.is_model_ready(model)
        rows = [r for r in c.get_model_repository_index() if r["name"] == model]
        assert rows and all(r.get("state") == "UNAVAILABLE" and r.get("reason") for r in rows), rows
        expect_error(lambda: http_infer(c, model, make_inputs("enc", 1, seed=0)), ("404", "503"), model,
                     what=f"infer on {model}, which failed to load (http)")
    assert_served(server, probe, "http-binary")
    with server.grpc() as c:
        expect_error(lambda: c.load_model(model), "StatusCode.INVALID_ARGUMENT", model, what=f"load of {model} (grpc)")
        expect_error(lambda: grpc_infer(c, model, make_inputs("enc", 1, seed=0)),
                     ("StatusCode.NOT_FOUND", "StatusCode.UNAVAILABLE"), model,
                     what=f"infer on {model}, which failed to load (grpc)")
        try:
            c.unload_model(model)  # leave it not asked for, as before
        except InferenceServerException:
            pass
    assert_served(server, probe, "grpc")


# ------------------------------------------------------------------------------------------------
# Metrics
# ------------------------------------------------------------------------------------------------


def _check_histogram(m, name, **labels):
    buckets = m.select(name + "_bucket", **labels)
    assert buckets, f"no {name}_bucket{labels}"
    assert m.types.get(name) == "histogram", f"# TYPE {name}: {m.types.get(name)}"
    series = {}
    for l, v in buckets:
        key = tuple(sorted((k, x) for k, x in l.items() if k != "le"))
        series.setdefault(key, []).append((float(l["le"]) if l["le"] != "+Inf" else float("inf"), v))
    for key, bs in series.items():
        bs.sort()
        assert bs[-1][0] == float("inf"), f"{name}{dict(key)}: no +Inf bucket"
        counts = [v for _, v in bs]
        assert counts == sorted(counts), f"{name}{dict(key)}: buckets not cumulative: {bs}"
        count = m.value(name + "_count", **dict(key))
        assert counts[-1] == count, f"{name}{dict(key)}: +Inf bucket {counts[-1]} != _count {count}"
        assert m.select(name + "_sum", **dict(key)), f"{name}_sum{dict(key)} missing"
    return series


def test_metrics(server, repo, probe):
    status, headers, body = http_request(server.metrics_port, "GET", "/metrics")
    assert status == 200
    ctype = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
    assert ctype.startswith("text/plain"), ctype
    before = parse_metrics(body.decode())
    inputs, _ = probe
    for p in ("http-binary", "grpc", "http-json"):
        infer(server, p, "enc", inputs)
    with server.http() as c:  # a failure of the model (wrong shape)
        with pytest.raises(InferenceServerException):
            http_infer(c, "enc", {"x": inputs["x"][:, :, :4].copy()})
    m = server.metrics()
    d = lambda name, **l: m.value(name, **l) - before.value(name, **l)
    assert d("kiln_inference_request_success_total", model="enc", version="1") == 3
    assert d("kiln_inference_request_failure_total", model="enc", version="1") >= 1
    reasons = [l.get("reason") for l, _ in m.select("kiln_inference_request_failure_total", model="enc")]
    assert reasons and all(reasons), f"failures by reason: {m.select('kiln_inference_request_failure_total', model='enc')}"
    assert m.types.get("kiln_inference_request_success_total") == "counter"
    assert m.types.get("kiln_inference_pending_requests") == "gauge"
    assert d("kiln_inference_request_duration_seconds_count", model="enc", version="1") >= 3
    for name in ("kiln_inference_request_duration_seconds", "kiln_inference_queue_duration_seconds"):
        _check_histogram(m, name, model="enc", version="1")
    for name in ("kiln_inference_compute_duration_seconds", "kiln_inference_batch_size"):
        _check_histogram(m, name, model="enc", version="1", device=repo.device)
    # Per device: mlp_batched runs on the reference interpreter.
    assert m.select("kiln_inference_exec_total", model="mlp_batched", device="reference"), \
        m.select("kiln_inference_exec_total", model="mlp_batched")
    assert m.select("kiln_inference_exec_total", model="enc", device=repo.device)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_metrics_protocol_errors(server, probe, protocol):
    """Requests refused before they reach a model count in kiln_protocol_errors_total{protocol}
    (metrics.h): malformed JSON or protobuf, and an inference request for an unknown model (or
    else, as server.h allows, a failure of that model name)."""
    inputs, _ = probe
    name = "kiln_protocol_errors_total"
    before = server.metrics()
    if protocol == "http":
        _post_infer(server, "enc", b"{nope")
    else:
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
            with pytest.raises(grpc.RpcError):
                ch.unary_unary("/inference.GRPCInferenceService/ModelInfer")(b"\x0a\x64abc", timeout=CLIENT_TIMEOUT)
    mid = server.metrics()
    malformed = mid.value(name, protocol=protocol) - before.value(name, protocol=protocol)
    with pytest.raises(InferenceServerException):
        infer(server, "grpc" if protocol == "grpc" else "http-binary", "no_such_model", inputs)
    after = server.metrics()
    unknown = after.value(name, protocol=protocol) - mid.value(name, protocol=protocol) + \
        after.value("kiln_inference_request_failure_total", model="no_such_model") - \
        mid.value("kiln_inference_request_failure_total", model="no_such_model")
    assert all(l.get("protocol") in ("http", "grpc") for l, _ in after.select(name)), after.select(name)
    assert malformed >= 1 and unknown >= 1, \
        f"{protocol}: malformed request counted {malformed}, unknown model counted {unknown}: " \
        f"{after.select(name)} {after.select('kiln_inference_request_failure_total', model='no_such_model')}"


# ------------------------------------------------------------------------------------------------
# Other servers: none mode, drain on SIGTERM, startup failures
# ------------------------------------------------------------------------------------------------


def test_none_mode_queue_flag_and_sigterm_drain(tools, repo, work, ref):
    """none mode: every model loads at start and load/unload are refused. --max-queue-size=1 is
    the queue limit of a model that sets none. SIGTERM: ready turns false, new requests are
    refused, the queued request is answered, exit 0."""
    root = work / "repo-none"
    root.mkdir()
    repo.add(root, "enc", "enc")
    repo.add(root, "slow", "mlp", config=(
        "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 3000000 }\n" + config_device(repo.device)))
    s = Server(tools["kiln-serve"], root, ["--model-control-mode=none", "--max-queue-size=1"], work / "server-none.log")
    try:
        s.wait_ready()
        with s.http() as c:
            assert c.is_model_ready("enc") and c.is_model_ready("slow")
            msg = expect_error(lambda: c.load_model("enc"), tuple(str(x) for x in range(400, 600)),
                               what="load in none mode (http)")
            assert re.search("mode|explicit|none|not allowed|unsupported", msg, re.I), msg
            expect_error(lambda: c.unload_model("enc"), tuple(str(x) for x in range(400, 600)),
                         what="unload in none mode (http)")
            assert c.is_model_ready("enc")
        with s.grpc() as c:
            msg = expect_error(lambda: c.load_model("enc"),
                               tuple(f"StatusCode.{code.name}" for code in grpc.StatusCode if code != grpc.StatusCode.OK),
                               what="load in none mode (grpc)")
            assert re.search("mode|explicit|none|not allowed|unsupported", msg, re.I), msg
        row, want = ref.mlp_rows(7, 8)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(infer, s, "http-binary", "slow", row)
            wait_for(lambda: s.metrics().value("kiln_inference_pending_requests", model="slow") >= 1, 1.5,
                     "a request pending in 'slow'")
            with s.grpc() as c:
                expect_error(lambda: grpc_infer(c, "slow", row), "StatusCode.UNAVAILABLE", re.compile("queue", re.I),
                             what="a second request with --max-queue-size=1 (grpc)")
            s.proc.send_signal(signal.SIGTERM)

            def not_ready():
                try:
                    st, _, _ = http_request(s.http_port, "GET", "/v2/health/ready", timeout=5)
                    return st != 200
                except OSError:
                    return True  # the frontend stopped already: not ready either

            wait_for(not_ready, 1.5, "ready to turn false after SIGTERM")
            try:
                st, _, body = _post_infer(s, "enc", json.dumps(_json_request(make_inputs("enc", 1, seed=0)["x"])).encode())
                assert st == 503, f"a request after SIGTERM: {st} {body[:200]!r}, expected 503"
            except OSError:
                pass  # refused by a closed listener: also a refusal
            assert not waiting.done() or waiting.exception() is None
            check_close(waiting.result(timeout=30).as_numpy("probs"), want, "the request queued at SIGTERM")
        rc = s.proc.wait(timeout=40)
        assert rc == 0, f"exit status {rc} after SIGTERM:\n{s.log()}"
    finally:
        s.stop()


def test_startup_model_failure(tools, repo, work, probe):
    """A model that fails to load at start: exit 1 (--exit-on-error default true) with an error
    naming it; with --exit-on-error=false the server runs without it (not ready, as some model
    asked for is not), the others serve, the index says why; --allow-metrics=false: no metrics."""
    root = work / "repo-broken"
    root.mkdir()
    repo.add(root, "enc", "enc")
    (root / "broken" / "1").mkdir(parents=True)
    (root / "broken" / "1" / "model.kiln").write_bytes(os.urandom(4096))
    s = Server(tools["kiln-serve"], root, ["--model-control-mode=none"], work / "server-broken-exit.log")
    try:
        rc = s.proc.wait(timeout=60)
    finally:
        s.stop()
    assert rc == 1, f"exit status {rc}, expected 1:\n{s.log()}"
    errors = [e for e in s.json_logs() if e.get("level") == "error"]
    assert any("broken" in json.dumps(e) for e in errors), f"no error log naming 'broken':\n{s.log()}"

    # The same in explicit mode, the broken model named at start.
    s = Server(tools["kiln-serve"], root, ["--model-control-mode=explicit", "--load-model=enc", "--load-model=broken"],
               work / "server-broken-explicit.log")
    try:
        rc = s.proc.wait(timeout=60)
    finally:
        s.stop()
    assert rc == 1, f"explicit mode, --load-model=broken: exit status {rc}, expected 1:\n{s.log()}"

    # A port that is taken: an error naming it, exit status 1 (not a hang).
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        s = Server(tools["kiln-serve"], root, ["--model-control-mode=explicit", f"--http-port={port}"],
                   work / "server-port-taken.log")
        try:
            rc = s.proc.wait(timeout=60)
        finally:
            s.stop()
    assert rc == 1 and str(port) in s.log(), f"HTTP port {port} taken: exit status {rc}, expected 1:\n{s.log()}"

    s = Server(tools["kiln-serve"], root, ["--model-control-mode=none", "--exit-on-error=false",
                                           "--allow-metrics=false"],
               work / "server-broken-run.log", protocols=("http", "grpc"))
    try:
        s.wait_listening()
        with s.http() as c:
            wait_for(lambda: c.is_model_ready("enc"), 30, "enc to be ready")
            assert not c.is_model_ready("broken")
            assert not c.is_server_ready()
            rows = [r for r in c.get_model_repository_index() if r["name"] == "broken"]
            assert rows and rows[0].get("state") == "UNAVAILABLE" and rows[0].get("reason"), rows
        assert_served(s, probe, "http-binary")
        assert_served(s, probe, "grpc")
        assert "metrics" not in s.ports, s.ports
    finally:
        rc = s.stop()
    assert rc == 0, f"exit status {rc} after SIGTERM:\n{s.log()}"


def test_trusted_key(tools, repo, work, ref):
    """--trusted-key: an artifact signed by the key loads; an unsigned one, or one signed by
    another key, does not (400, saying so). --allow-grpc=false: no gRPC frontend."""
    keys = work / "keys"
    keys.mkdir()
    for k in ("trusted", "other"):
        r = subprocess.run([tools["kilnc"], f"--new-signing-key={keys / k}"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
    root = work / "repo-signed"
    root.mkdir()
    for name, key in (("signed", "trusted"), ("wrongkey", "other")):
        (root / name / "1").mkdir(parents=True)
        r = subprocess.run([tools["kilnc"], str(SOURCES["mlp"]), f"--sign={keys / key}", "-o",
                            str(root / name / "1" / "model.kiln")], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
    repo.add(root, "unsigned", "mlp")
    s = Server(tools["kiln-serve"], root, ["--model-control-mode=explicit", f"--trusted-key={keys / 'trusted.pub'}",
                                           "--allow-grpc=false"],
               work / "server-trusted.log", protocols=("http", "metrics"))
    try:
        s.wait_ready()
        assert "grpc" not in s.ports, s.ports
        x, want = ref.mlp_rows(0, 2)
        with s.http() as c:
            c.load_model("signed")
            check_close(http_infer(c, "signed", x).as_numpy("probs"), want, "the signed model")
            for model in ("unsigned", "wrongkey"):
                msg = expect_error(lambda: c.load_model(model), "400", model, what=f"load of {model}")
                assert re.search("sign|trusted|key", msg, re.I), msg
                assert not c.is_model_ready(model)
            check_close(http_infer(c, "signed", x).as_numpy("probs"), want, "the signed model, after the refusals")
    finally:
        rc = s.stop()
    assert rc == 0, f"exit status {rc} after SIGTERM:\n{s.log()}"


def test_text_log_format(tools, repo, work):
    """--log-format=text: plain lines (no JSON), the port still logged; the server serves and
    exits 0 on SIGTERM."""
    root = work / "repo-text-log"
    root.mkdir()
    repo.add(root, "enc", "enc")
    s = Server(tools["kiln-serve"], root, ["--log-format=text", "--allow-grpc=false", "--allow-metrics=false"],
               work / "server-text-log.log")
    try:
        deadline = time.monotonic() + START_TIMEOUT
        port = None
        while port is None and time.monotonic() < deadline and s.proc.poll() is None:
            match = re.search(r"info: listening protocol=http address=127\.0\.0\.1 port=(\d+)", s.log())
            port = int(match.group(1)) if match else None
            time.sleep(0.05)
        assert port, f"no text 'listening' line:\n{s.log()}"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/v2/health/ready")
        assert conn.getresponse().status == 200
        conn.close()
        s.proc.send_signal(signal.SIGTERM)
        rc = s.proc.wait(timeout=60)
    finally:
        s.stop()
    assert rc == 0, f"exit status {rc}:\n{s.log()}"
    assert s.lines and not s.json_logs(), f"JSON lines with --log-format=text:\n{s.log()}"
    assert any("shut down" in line for line in s.lines), s.log()
