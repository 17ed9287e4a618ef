#!/usr/bin/env python3
"""Loopback load benchmark of kiln-serve: batch-1 serving against dynamic batching.

Builds a model repository (or takes one with --repository), starts kiln-serve on it once per
configuration, drives it with N concurrent clients for a fixed time and reports throughput,
latency percentiles and errors:

  batching off  max_batch_size: 64, no dynamic_batching: every request runs alone
  batching on   max_batch_size: 64, dynamic_batching { max_queue_delay_microseconds: --delay-us }

Per configuration it first measures the single-request latency (one client, --single-seconds),
then the load (--clients clients for --seconds after --warmup seconds). The issue's target:

  dynamic batching gives >= 3x the throughput of batch-1 serving at 64 concurrent clients, with
  p99 latency under 2x the single-request latency plus the queue delay

is evaluated as  thr(on) / thr(off) >= 3  and  p99(on) < 2 * p50_single(off) + delay,  where
p50_single(off) is the median latency of one client alone against the batching-off server.
The verdict is printed (and written to --json); it sets the exit status only with
--require-target. Any failed request, a server that does not start, or a server that does not
exit 0 on SIGTERM is exit status 1.

Models (--model):
  transformer   examples/onnx/transformer_encoder.onnx (x: f32[batch, 8, 16]); tiny, so it
                measures the server's per-request overhead rather than device work
  bert          a BERT-base-style encoder without embeddings (d=768, 12 heads, FFN 3072,
                --bert-layers layers, --bert-seq tokens; seeded weights), written by
                bench/make_compile_models.py's generator with a symbolic batch dimension:
                enough work per request that batching pays off on a GPU
  FILE.onnx     any ONNX model whose inputs and outputs share a symbolic first dimension
  FILE.kiln     an artifact compiled already (kilnc is not run)

The load generator (--client) is kiln-serve-load (bench/serve_load_client.cpp, built next to
kiln-serve; gRPC only) when it is there, else the Python one. kiln-serve-load keeps N requests in
flight with the gRPC C++ async API over several threads, each with its own connection, in the
manner of Triton's perf_analyzer; the Python generator saturates at about 25k requests/s on 16
cores, below the server. The Python generator runs --processes processes with threads in each (so
Python's GIL does not bound it); each thread is one client with its own connection. Both are
closed loops: each client sends its next request when the previous one's response arrives.
Latency is the client's: request sent to response received (Python: decoded).

Usage (GPU machine; kiln-serve and kilnc from the build):
  .venv/bin/python bench/serve_load.py --device cuda:0 --model bert --json results.json
Smoke test on a CPU machine (lavapipe or PoCL):
  .venv/bin/python bench/serve_load.py --seconds 5 --clients 8

Needs NumPy and tritonclient[http,grpc] (scripts/setup.sh installs both in .venv), and the
onnx package to write the bert model. Registered in no test: benchmarks are not tests (bench/README.md).
"""
import argparse
import json
import math
import multiprocessing as mp
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_NAME = "encoder"
MAX_BATCH = 64

NUMPY_TYPES = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64, "INT32": np.int32,
               "INT8": np.int8, "UINT8": np.uint8, "BOOL": np.bool_}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- the model and the repositories ------------------------------------------------------------

def write_bert_onnx(path, layers, seq):
    """bench/make_compile_models.py's BERT encoder with `layers` layers and a symbolic batch."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import onnx
    import make_compile_models as mcm
    # batch -1: the generator's Reshape targets become [-1, T, H, hd] and [-1, T, D].
    mcm.BERT.update(layers=layers, seq=seq)
    mcm.BATCH = -1
    model, weight_bytes = mcm.make_bert_encoder()
    for value in list(model.graph.input) + list(model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"  # replaces the -1 dim_value
    onnx.checker.check_model(model, full_check=False)
    onnx.save_model(model, path)
    log("wrote %s: BERT-style encoder, %d layers, seq %d, d 768, %.1f MB weights" % (
        path, layers, seq, weight_bytes / 1e6))


def kilnc_target(device):
    """The kilnc target for a Kiln device id (None: kilnc's default, every target of the build)."""
    if not device:
        return None
    kind = device.split(":")[0]
    if kind in ("cuda", "vulkan", "opencl", "cpu"):
        return kind
    if kind == "reference":
        return None  # the reference interpreter runs any artifact
    sys.exit("serve_load: unknown device '%s' (cuda:N, vulkan:N, opencl:N, cpu:N or reference)" % device)


def build_artifact(args, work):
    """Returns the path of the .kiln artifact to serve, compiling it when needed."""
    if args.model.endswith(".kiln"):
        return os.path.abspath(args.model)
    if args.model == "transformer":
        onnx_path = os.path.join(ROOT, "examples", "onnx", "transformer_encoder.onnx")
    elif args.model == "bert":
        onnx_path = os.path.join(work, "bert_encoder.onnx")
        write_bert_onnx(onnx_path, args.bert_layers, args.bert_seq)
    elif args.model.endswith(".onnx"):
        onnx_path = os.path.abspath(args.model)
    else:
        sys.exit("serve_load: --model is transformer, bert, FILE.onnx or FILE.kiln, not '%s'" % args.model)
    out = os.path.join(work, "model.kiln")
    cmd = [args.kilnc, onnx_path, "-o", out]
    target = kilnc_target(args.device)
    if target is not None:
        cmd.append("--target=" + target)
    cmd += args.kilnc_arg
    log("$ " + " ".join(cmd))
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    log("kilnc: %.1f s" % (time.perf_counter() - t))
    return out


def config_text(batching, args):
    lines = ['name: "%s"' % MODEL_NAME, "max_batch_size: %d" % MAX_BATCH]
    if batching:
        lines += ["dynamic_batching {", "  max_queue_delay_microseconds: %d" % args.delay_us]
        if args.preferred_batch:
            lines.append("  preferred_batch_size: [ %s ]" % ", ".join(str(b) for b in args.preferred_batch))
        lines.append("}")
    lines += ["instance_group [ { count: %d } ]" % args.instances]
    if args.device:
        lines += ['parameters { key: "device" value: { string_value: "%s" } }' % args.device]
    return "\n".join(lines) + "\n"


def build_repository(artifact, batching, args, work):
    repo = os.path.join(work, "repo_batching_" + ("on" if batching else "off"))
    shutil.rmtree(repo, ignore_errors=True)
    os.makedirs(os.path.join(repo, MODEL_NAME, "1"))
    shutil.copyfile(artifact, os.path.join(repo, MODEL_NAME, "1", "model.kiln"))
    with open(os.path.join(repo, MODEL_NAME, "config.pbtxt"), "w") as f:
        f.write(config_text(batching, args))
    return repo


# ---- the server --------------------------------------------------------------------------------

class Server:
    """kiln-serve on free ports; its JSON log lines go to a file and are parsed for the ports."""

    def __init__(self, args, repo, log_path):
        self.ports = {}
        self.devices = []  # from the "model loaded" line
        self.log_path = log_path
        self.log_file = open(log_path, "w")
        self.ready_lines = threading.Event()
        cmd = [args.kiln_serve, "--model-repository=" + repo, "--http-port=0", "--grpc-port=0",
               "--metrics-port=0", "--http-address=127.0.0.1", "--grpc-address=127.0.0.1",
               "--metrics-address=127.0.0.1", "--log-format=json"] + args.serve_arg
        log("$ " + " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.log_file.write(line)
            self.log_file.flush()
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("msg") == "model loaded":
                self.devices = entry.get("devices") or []
            if isinstance(entry, dict) and entry.get("msg") == "listening":
                self.ports[entry.get("protocol")] = int(entry.get("port"))
                if all(p in self.ports for p in ("http", "grpc", "metrics")):
                    self.ready_lines.set()

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.ready_lines.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.fail("did not log its three 'listening' lines")
        # Ready: every model loaded (GET /v2/health/ready answers 200).
        url = "http://127.0.0.1:%d/v2/health/ready" % self.ports["http"]
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.fail("did not become ready")
            time.sleep(0.1)

    def metrics(self):
        url = "http://127.0.0.1:%d/metrics" % self.ports["metrics"]
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()

    def fail(self, why):
        self.proc.kill()
        self.proc.wait()
        self.reader.join(5)
        tail = open(self.log_path).read()[-3000:]
        sys.exit("serve_load: kiln-serve %s (exit %s); log %s ends:\n%s" % (
            why, self.proc.returncode, self.log_path, tail))

    def stop(self, timeout=60):
        """SIGTERM; returns the exit status (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        self.reader.join(5)
        self.log_file.close()
        return rc


def metric_sum(text, name):
    """The sum over every label set of one sample name in Prometheus text."""
    total = 0.0
    pattern = re.compile(r"^%s(\{[^}]*\})?\s+(\S+)" % re.escape(name))
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            total += float(m.group(2))
    return total


# ---- the load generator: kiln-serve-load (C++) ------------------------------------------------

def run_load_cpp(args, server, specs, clients, seconds, warmup):
    """kiln-serve-load with `clients` requests in flight for warmup + seconds; returns the measured
    window's numbers in run_load's form. It prints 'kiln-serve-load: measuring' on stderr when the
    window starts: the server's metrics are read then."""
    url = "127.0.0.1:%d" % server.ports["grpc"]
    out_json = os.path.join(args.work, "kiln-serve-load-%d.json" % os.getpid())
    if os.path.exists(out_json):
        os.remove(out_json)
    cmd = [args.kiln_serve_load, "--url", url, "--model", MODEL_NAME, "--concurrency", str(clients),
           "--warmup-seconds", str(warmup), "--seconds", str(seconds), "--json", out_json]
    for name, datatype, shape in specs:
        dims = [args.batch] + list(shape[1:])  # rows per request: the first dimension
        cmd += ["--input", "%s:%s:%s" % (name, datatype, ",".join(str(d) for d in dims))]
    if args.client_threads:
        cmd += ["--threads", str(args.client_threads)]
    log("$ " + " ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics_before = None
    stderr_lines = []
    for line in proc.stderr:
        stderr_lines.append(line.rstrip("\n"))
        if line.startswith("kiln-serve-load: measuring"):
            try:
                metrics_before = server.metrics()
            except OSError:
                pass
    stdout = proc.stdout.read()
    rc = proc.wait()
    if stdout.strip():
        log(stdout.strip())
    try:
        with open(out_json) as f:
            got = json.load(f)
    except (OSError, ValueError):
        got = None
    if got is None:  # it did not run: bad arguments, model not ready, ...
        got = {"requests": 0, "requests_per_second": 0.0, "threads": 0, "errors": 1,
               "first_error": "kiln-serve-load exited %d: %s" % (rc, " | ".join(stderr_lines[-3:]))}
    elif rc != 0 and not got["errors"]:  # nothing completed in the window
        got.update(errors=1, first_error="kiln-serve-load exited %d: %s" % (rc, " | ".join(stderr_lines[-3:])))
    out = {"requests": int(got["requests"]), "inferences_per_second": got["requests_per_second"] * args.batch}
    for k in ("p50_ms", "p90_ms", "p99_ms", "mean_ms"):
        out[k] = float("nan") if got.get(k) is None else float(got[k])
    out.update(clients=clients, client="cpp", threads=int(got["threads"]), errors=int(got["errors"]),
               error_samples=[got["first_error"]] if got.get("first_error") else [])
    try:
        metrics_after = server.metrics()
    except OSError as e:
        metrics_after = None
        out["errors"] += 1
        out["error_samples"].append("GET /metrics: %s" % e)
    if metrics_before is not None and metrics_after is not None:
        out["server"] = server_numbers(metrics_before, metrics_after)
    return out


# ---- the load generator: Python (tritonclient) -------------------------------------------------

def make_client(protocol, url):
    if protocol == "grpc":
        import tritonclient.grpc as client
        return client, client.InferenceServerClient(url=url)
    import tritonclient.http as client
    return client, client.InferenceServerClient(url=url, concurrency=1, connection_timeout=60,
                                                network_timeout=300)


def make_inputs(client_mod, protocol, specs, batch, seed):
    rng = np.random.default_rng(seed)
    inputs = []
    for name, datatype, shape in specs:
        shape = [batch] + list(shape[1:])
        dtype = NUMPY_TYPES[datatype]
        if dtype in (np.float32, np.float16):
            data = rng.uniform(-1, 1, shape).astype(dtype)
        elif dtype == np.bool_:
            data = rng.integers(0, 2, shape).astype(dtype)
        else:
            data = rng.integers(0, 4, shape).astype(dtype)
        inp = client_mod.InferInput(name, shape, datatype)
        if protocol == "http":
            inp.set_data_from_numpy(data, binary_data=True)
        else:
            inp.set_data_from_numpy(data)
        inputs.append(inp)
    return inputs


def client_thread(protocol, url, specs, outputs, batch, seed, t_start, t_end, lat, errors):
    """One closed-loop client: requests back to back until t_end; keeps the latencies of the
    requests that finished within [t_start, t_end] (throughput is their count over the window)."""
    try:
        client_mod, client = make_client(protocol, url)
        inputs = make_inputs(client_mod, protocol, specs, batch, seed)
        if protocol == "http":
            wanted = [client_mod.InferRequestedOutput(o, binary_data=True) for o in outputs]
        else:
            wanted = [client_mod.InferRequestedOutput(o) for o in outputs]
    except Exception as e:  # noqa: BLE001 - reported, counted
        errors.append("client setup: %s" % e)
        return
    while True:
        t0 = time.monotonic()
        if t0 >= t_end:
            break
        try:
            result = client.infer(MODEL_NAME, inputs, outputs=wanted)
            result.as_numpy(outputs[0])
        except Exception as e:  # noqa: BLE001
            errors.append(str(e).splitlines()[0][:300] if str(e) else type(e).__name__)
            continue
        t1 = time.monotonic()
        if t_start <= t1 <= t_end:
            lat.append(t1 - t0)
    try:
        client.close()
    except Exception:  # noqa: BLE001
        pass


def load_process(protocol, url, specs, outputs, batch, threads, seed, t_start, t_end, results):
    """A load-generator process: `threads` clients; sends back (latencies, errors)."""
    lat, errors = [], []
    ts = [threading.Thread(target=client_thread,
                           args=(protocol, url, specs, outputs, batch, seed + i, t_start, t_end, lat, errors))
          for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    results.put((np.asarray(lat, np.float64), errors))


def run_load(args, server, specs, outputs, clients, seconds, warmup):
    """`clients` clients for warmup + seconds; returns the measured window's numbers."""
    if args.client == "cpp":
        return run_load_cpp(args, server, specs, clients, seconds, warmup)
    url = "127.0.0.1:%d" % server.ports[args.protocol]
    procs = max(1, min(clients, args.processes))
    per_proc = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    ctx = mp.get_context("spawn")  # the parent holds gRPC channels and threads: no fork
    results = ctx.Queue()
    # Processes start (and import tritonclient) before the clock starts.
    start_margin = 3.0 + 0.05 * procs
    t_start = time.monotonic() + start_margin + warmup
    t_end = t_start + seconds
    ps = [ctx.Process(target=load_process,
                      args=(args.protocol, url, specs, outputs, args.batch, n, 1000 * i,
                            t_start - warmup, t_end, results))
          for i, n in enumerate(per_proc)]
    # time.monotonic() is CLOCK_MONOTONIC, shared by the processes of one machine. The clients
    # begin at t_start - warmup; only [t_start, t_end] is measured.
    for p in ps:
        p.start()
    metrics_before = None
    while time.monotonic() < t_start:
        time.sleep(0.01)
    try:
        metrics_before = server.metrics()
    except OSError:
        pass
    lat, errors = [], []
    deadline = t_end + 120
    for _ in ps:
        try:
            got_lat, got_err = results.get(timeout=max(1, deadline - time.monotonic()))
        except queue.Empty:
            errors.append("a load process sent no result")
            break
        lat.append(got_lat)
        errors += got_err
    for p in ps:
        p.join(10)
        if p.is_alive():
            p.kill()
    metrics_after = None
    try:
        metrics_after = server.metrics()
    except OSError as e:
        errors.append("GET /metrics: %s" % e)
    lat = np.concatenate(lat) if lat else np.zeros(0)
    out = summarize(lat, seconds, args.batch)
    out.update(clients=clients, client="python", processes=procs, errors=len(errors),
               error_samples=sorted(set(errors))[:5])
    if metrics_before is not None and metrics_after is not None:
        out["server"] = server_numbers(metrics_before, metrics_after)
    return out


def summarize(lat, seconds, batch):
    def pct(p):
        # nearest rank, as kiln-run's --bench
        if lat.size == 0:
            return float("nan")
        s = np.sort(lat)
        return float(s[max(0, math.ceil(p / 100 * s.size) - 1)] * 1e3)
    return {"requests": int(lat.size), "inferences_per_second": lat.size * batch / seconds,
            "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99),
            "mean_ms": float(lat.mean() * 1e3) if lat.size else float("nan")}


def server_numbers(before, after):
    """What the server's metrics say about the window: mean rows per executed batch, queue time."""
    def delta(name):
        return metric_sum(after, name) - metric_sum(before, name)
    execs = delta("kiln_inference_exec_total")
    rows = delta("kiln_inference_batch_size_sum")
    queued = delta("kiln_inference_queue_duration_seconds_count")
    return {"batches": execs, "mean_batch_rows": rows / execs if execs else float("nan"),
            "mean_queue_ms": delta("kiln_inference_queue_duration_seconds_sum") / queued * 1e3 if queued else float("nan"),
            "mean_compute_ms": delta("kiln_inference_compute_duration_seconds_sum") / execs * 1e3 if execs else float("nan")}


def model_specs(args, server):
    """(inputs as (name, datatype, shape), output names) from the model's metadata."""
    import tritonclient.http as httpclient
    client = httpclient.InferenceServerClient(url="127.0.0.1:%d" % server.ports["http"])
    meta = client.get_model_metadata(MODEL_NAME)
    client.close()
    specs = [(i["name"], i["datatype"], [int(d) for d in i["shape"]]) for i in meta["inputs"]]
    for name, datatype, shape in specs:
        if datatype not in NUMPY_TYPES:
            sys.exit("serve_load: input %s has datatype %s, which this benchmark does not generate" % (name, datatype))
        if not shape or shape[0] != -1 or any(d < 0 for d in shape[1:]):
            sys.exit("serve_load: input %s has shape %s: the benchmark needs a batch dimension first and "
                     "fixed sizes after it" % (name, shape))
    return specs, [o["name"] for o in meta["outputs"]]


def probe_output(args, server, specs, outputs):
    """One fixed request (seed 12345); its outputs, to compare the two configurations."""
    client_mod, client = make_client(args.protocol, "127.0.0.1:%d" % server.ports[args.protocol])
    inputs = make_inputs(client_mod, args.protocol, specs, args.batch, 12345)
    result = client.infer(MODEL_NAME, inputs)
    got = {o: result.as_numpy(o) for o in outputs}
    client.close()
    return got


# ---- main --------------------------------------------------------------------------------------

def run_config(args, name, batching, artifact, work, reference):
    repo = args.repository[0 if not batching else 1] if args.repository else build_repository(
        artifact, batching, args, work)
    server = Server(args, repo, os.path.join(work, "kiln-serve-batching-%s.log" % name))
    server.wait_ready(args.start_timeout)
    specs, outputs = model_specs(args, server)
    probe = probe_output(args, server, specs, outputs)
    result = {"config": "batching " + name, "repository": repo, "devices": server.devices}
    log("batching %s: model loaded on %s" % (name, ", ".join(map(str, server.devices)) or "(not logged)"))
    check = {}
    for o, y in probe.items():
        check[o] = {"shape": list(y.shape), "finite": bool(np.isfinite(y).all()) if y.dtype.kind == "f" else True}
        if reference is not None and o in reference:
            ref = reference[o].astype(np.float64)
            check[o]["rel_err_vs_off"] = float(np.linalg.norm(y.astype(np.float64) - ref) /
                                               max(np.linalg.norm(ref), 1e-30))
    result["output_check"] = check
    log("batching %s: single client, %g s" % (name, args.single_seconds))
    result["single"] = run_load(args, server, specs, outputs, 1, args.single_seconds, min(args.warmup, 1.0))
    log("batching %s: %d clients, %g s after %g s warm-up" % (name, args.clients, args.seconds, args.warmup))
    result["load"] = run_load(args, server, specs, outputs, args.clients, args.seconds, args.warmup)
    rc = server.stop(args.exit_timeout)
    result["server_exit_status"] = rc
    return result, probe


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--kiln-serve", default=os.path.join(ROOT, "build", "bin", "kiln-serve"))
    ap.add_argument("--kilnc", default=os.path.join(ROOT, "build", "bin", "kilnc"))
    ap.add_argument("--kiln-serve-load",
                    help="the C++ load generator (default: kiln-serve-load next to kiln-serve)")
    ap.add_argument("--client", choices=["cpp", "python"],
                    help="load generator: cpp (kiln-serve-load; default when it exists and the protocol "
                         "is grpc) or python (tritonclient)")
    ap.add_argument("--client-threads", type=int, default=0,
                    help="kiln-serve-load's --threads (default: its own, min(clients, cores/2))")
    ap.add_argument("--device", default="",
                    help="Kiln device id (cuda:0, vulkan:0, opencl:0, reference): the config's "
                         "parameters.device and kilnc's --target. Default: the server's default device, "
                         "an artifact for every target of kilnc's build")
    ap.add_argument("--model", default="transformer", help="transformer (default), bert, FILE.onnx or FILE.kiln")
    ap.add_argument("--bert-layers", type=int, default=2)
    ap.add_argument("--bert-seq", type=int, default=128)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20, help="measured time per configuration")
    ap.add_argument("--warmup", type=float, default=3, help="load before the measured time")
    ap.add_argument("--single-seconds", type=float, default=5, help="measured time of the single client")
    ap.add_argument("--delay-us", type=int, default=1000, help="max_queue_delay_microseconds with batching on")
    ap.add_argument("--preferred-batch", type=int, action="append", default=[],
                    help="preferred_batch_size (repeatable; default none)")
    ap.add_argument("--instances", type=int, default=1, help="instance_group count")
    ap.add_argument("--batch", type=int, default=1, help="rows per request (default 1)")
    ap.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    ap.add_argument("--processes", type=int, default=max(1, min(16, (os.cpu_count() or 2) // 2)),
                    help="Python load-generator processes (default: half the cores, at most 16)")
    ap.add_argument("--configs", default="off,on", help="which configurations to run: off, on or off,on")
    ap.add_argument("--repository", nargs=2, metavar=("OFF_REPO", "ON_REPO"),
                    help="serve these repositories (model '%s' in each) instead of building them" % MODEL_NAME)
    ap.add_argument("--work-dir", help="where the repositories and server logs go (default: a temporary folder, kept)")
    ap.add_argument("--kilnc-arg", action="append", default=[], help="extra kilnc argument (repeatable)")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra kiln-serve argument (repeatable)")
    ap.add_argument("--start-timeout", type=float, default=300, help="seconds for the server to become ready")
    ap.add_argument("--exit-timeout", type=float, default=60, help="seconds for the server to exit after SIGTERM")
    ap.add_argument("--json", help="write the results as JSON to this file ('-': stdout)")
    ap.add_argument("--require-target", action="store_true", help="exit 1 when the issue's target is missed")
    args = ap.parse_args()

    if args.batch < 1 or args.batch > MAX_BATCH:
        sys.exit("serve_load: --batch is 1..%d" % MAX_BATCH)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    if not configs or any(c not in ("off", "on") for c in configs):
        sys.exit("serve_load: --configs is off, on or off,on")
    if not os.access(args.kiln_serve, os.X_OK):
        sys.exit("serve_load: no kiln-serve at %s (--kiln-serve)" % args.kiln_serve)
    if not args.kiln_serve_load:
        args.kiln_serve_load = os.path.join(os.path.dirname(os.path.abspath(args.kiln_serve)), "kiln-serve-load")
    have_cpp = os.access(args.kiln_serve_load, os.X_OK)
    if args.client == "cpp":
        if not have_cpp:
            sys.exit("serve_load: no kiln-serve-load at %s (--kiln-serve-load)" % args.kiln_serve_load)
        if args.protocol != "grpc":
            sys.exit("serve_load: kiln-serve-load speaks gRPC only; use --client python for --protocol http")
    elif args.client is None:
        if have_cpp and args.protocol == "grpc":
            args.client = "cpp"
        else:
            args.client = "python"
            log("serve_load: note: using the Python load generator (%s); it saturates below the server on "
                "many-core machines" % ("kiln-serve-load speaks gRPC only" if have_cpp else
                                       "no kiln-serve-load at %s" % args.kiln_serve_load))
    work = args.work_dir or tempfile.mkdtemp(prefix="kiln-serve-load-")
    os.makedirs(work, exist_ok=True)
    args.work = work
    log("work folder: %s" % work)
    artifact = None if args.repository else build_artifact(args, work)

    report = {"tool": "bench/serve_load.py", "model": args.model, "device": args.device or "(server default)",
              "protocol": args.protocol, "client": args.client, "clients": args.clients, "seconds": args.seconds,
              "warmup_seconds": args.warmup, "delay_us": args.delay_us, "rows_per_request": args.batch,
              "instances": args.instances, "max_batch_size": MAX_BATCH, "results": []}
    if args.model == "bert":
        report["bert"] = {"layers": args.bert_layers, "seq": args.bert_seq, "d": 768, "heads": 12, "ffn": 3072}
    failed = []
    reference = None
    for name in configs:
        result, probe = run_config(args, name, name == "on", artifact, work, reference)
        if reference is None:
            reference = probe
        report["results"].append(result)
        for part in ("single", "load"):
            if result[part]["errors"]:
                failed.append("batching %s, %s: %d failed requests, e.g. %s" % (
                    name, part, result[part]["errors"], result[part]["error_samples"]))
        if result["server_exit_status"] != 0:
            failed.append("batching %s: kiln-serve exited with %s after SIGTERM (0 expected)" % (
                name, result["server_exit_status"]))
        for o, c in result["output_check"].items():
            if not c["finite"]:
                failed.append("batching %s: output %s has non-finite values" % (name, o))
            if c.get("rel_err_vs_off", 0) > 1e-3:
                failed.append("batching %s: output %s differs from batching off by %.2g (relative)" % (
                    name, o, c["rel_err_vs_off"]))

    by = {r["config"]: r for r in report["results"]}
    if "batching off" in by and "batching on" in by:
        off, on = by["batching off"], by["batching on"]
        speedup = on["load"]["inferences_per_second"] / max(off["load"]["inferences_per_second"], 1e-12)
        bound = 2 * off["single"]["p50_ms"] + args.delay_us / 1e3
        report["target"] = {
            "throughput_ratio": speedup, "throughput_ratio_required": 3.0,
            "p99_on_ms": on["load"]["p99_ms"], "p99_bound_ms": bound,
            "single_p50_off_ms": off["single"]["p50_ms"],
            "met": bool(speedup >= 3.0 and on["load"]["p99_ms"] < bound)}

    print_table(report, sys.stderr if args.json == "-" else sys.stdout)
    if args.json:
        text = json.dumps(json_safe(report), indent=2, allow_nan=False)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    for f in failed:
        log("serve_load: FAILED: " + f)
    if failed:
        sys.exit(1)
    if args.require_target and not report.get("target", {}).get("met", False):
        sys.exit(1)


def json_safe(value):
    """NaN (no samples) as null: strict JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def print_table(report, out):
    served = sorted({d for r in report["results"] for d in r.get("devices", [])})
    print("\nkiln-serve load: model %s, device %s (instances on %s), %s, %d clients (%s load generator), %g s, "
          "%d row(s) per request" % (
              report["model"], report["device"], ", ".join(served) or "?", report["protocol"], report["clients"],
              "kiln-serve-load" if report["client"] == "cpp" else "Python", report["seconds"],
              report["rows_per_request"]), file=out)
    head = ("config", "clients", "inf/s", "p50 ms", "p90 ms", "p99 ms", "errors", "batch rows", "queue ms")
    rows = []
    for r in report["results"]:
        for part in ("single", "load"):
            x = r[part]
            s = x.get("server", {})
            rows.append((r["config"], str(x["clients"]), "%.1f" % x["inferences_per_second"],
                         "%.3f" % x["p50_ms"], "%.3f" % x["p90_ms"], "%.3f" % x["p99_ms"], str(x["errors"]),
                         "%.2f" % s.get("mean_batch_rows", float("nan")),
                         "%.3f" % s.get("mean_queue_ms", float("nan"))))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    print("  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(head, widths))), file=out)
    for row in rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))), file=out)
    t = report.get("target")
    if t:
        print("\ntarget: throughput on/off %.2fx (>= 3 required); p99 on %.3f ms (< 2 x %.3f + %.3f = %.3f ms "
              "required): %s" % (t["throughput_ratio"], t["p99_on_ms"], t["single_p50_off_ms"],
                                 report["delay_us"] / 1e3, t["p99_bound_ms"], "MET" if t["met"] else "NOT MET"),
              file=out)


if __name__ == "__main__":
    main()
