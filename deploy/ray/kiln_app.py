"""A Ray Serve application that serves one Kiln artifact through Kiln's Python package.

Each replica loads the artifact with kiln.load and opens one kiln.Session on its device; requests
that arrive together are merged along the first (batch) dimension by @serve.batch, run as one
Session.run, and split back. Replicas scale with the number of requests in flight
(autoscaling_config). The HTTP API is the KServe v2 JSON form, without the binary extension:

  POST /   {"inputs": [{"name": "x", "shape": [1, 8, 16], "datatype": "FP32", "data": [...]}]}
  ->       {"model_name": ..., "outputs": [{"name": "y", "shape": [1, 8, 16], "datatype": "FP32", "data": [...]}]}

Run (see README.md):  serve run kiln_app:build artifact=/models/encoder/1/model.kiln device=cuda:0

This is the route for an application that is already on Ray; kiln-serve (docs/serving.md) is the
server to use otherwise: it batches in C++, speaks gRPC too and exports metrics.
"""
from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Dict, List, Optional

import numpy as np

import kiln

# KServe v2 datatype names <-> NumPy, for the types Kiln has (bf16 travels as FP32 in JSON).
V2_TO_NUMPY = {"BOOL": np.bool_, "UINT8": np.uint8, "INT8": np.int8, "INT32": np.int32,
               "INT64": np.int64, "FP16": np.float16, "FP32": np.float32}
NUMPY_TO_V2 = {np.dtype(v): k for k, v in V2_TO_NUMPY.items()}


class KilnRunner:
    """One artifact on one session, with merging of requests along dimension 0. No Ray here, so
    that it can be used (and tested) on its own."""

    def __init__(self, artifact: str, device: Optional[str] = None,
                 trusted_keys: Optional[List[str]] = None, max_batch_size: int = 64):
        self.artifact = kiln.load(artifact, trusted_keys=trusted_keys or None)
        self.session = kiln.Session(self.artifact, device=device or None)
        # A session runs one call at a time; Ray may call from several threads.
        self.lock = threading.Lock()
        self.inputs = {t.name: t for t in self.artifact.inputs}
        self.outputs = [t.name for t in self.artifact.outputs]
        # Batching needs every input and output to share a symbolic first dimension.
        firsts = {t.shape[0] if t.shape else None for t in list(self.artifact.inputs) + list(self.artifact.outputs)}
        self.batchable = len(firsts) == 1 and isinstance(next(iter(firsts)), str)
        self.max_batch_size = max_batch_size if self.batchable else 1

    def run(self, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        with self.lock:
            return self.session.run(inputs)

    def run_many(self, requests: List[Dict[str, np.ndarray]]) -> List[Any]:
        """Runs a list of requests, merged where their inputs agree except in dimension 0; returns
        per request its outputs or the exception it raised."""
        results: List[Any] = [None] * len(requests)
        groups: Dict[Any, List[int]] = {}
        for i, req in enumerate(requests):
            if not self.batchable or set(req) != set(self.inputs):
                key = ("alone", i)
            else:
                key = tuple(sorted((n, a.dtype.str, a.shape[1:]) for n, a in req.items()))
            groups.setdefault(key, []).append(i)
        for members in groups.values():
            rows = [requests[i][next(iter(self.inputs))].shape[0] if self.batchable and requests[i] else 0
                    for i in members]
            if len(members) == 1 or sum(rows) > self.max_batch_size:
                for i in members:
                    try:
                        results[i] = self.run(requests[i])
                    except Exception as e:  # noqa: BLE001 - handed back to that request
                        results[i] = e
                continue
            try:
                merged = {n: np.concatenate([requests[i][n] for i in members]) for n in self.inputs}
                out = self.run(merged)
            except Exception as e:  # noqa: BLE001
                for i in members:
                    results[i] = e
                continue
            start = 0
            for i, r in zip(members, rows):
                results[i] = {n: v[start:start + r] for n, v in out.items()}
                start += r
        return results


def decode_v2(body: Dict[str, Any]) -> Dict[str, np.ndarray]:
    """The KServe v2 JSON request's inputs as arrays (data flat or nested, row-major)."""
    arrays = {}
    for t in body.get("inputs", []):
        dtype = V2_TO_NUMPY.get(t.get("datatype"))
        if dtype is None:
            raise ValueError("input %r: datatype %r is not one of %s" % (t.get("name"), t.get("datatype"),
                                                                       ", ".join(V2_TO_NUMPY)))
        arrays[t["name"]] = np.asarray(t["data"], dtype=dtype).reshape(t["shape"])
    return arrays


def encode_v2(model_name: str, outputs: Dict[str, np.ndarray]) -> Dict[str, Any]:
    def one(name, value):
        value = np.asarray(value)
        datatype = NUMPY_TO_V2.get(value.dtype, "FP32")
        if datatype == "FP32" and value.dtype != np.float32:
            value = value.astype(np.float32)  # bf16 and anything unusual
        return {"name": name, "shape": list(value.shape), "datatype": datatype,
                "data": value.reshape(-1).tolist()}
    return {"model_name": model_name, "outputs": [one(n, v) for n, v in outputs.items()]}


try:
    from ray import serve
    from starlette.requests import Request
    from starlette.responses import JSONResponse
except ImportError:  # KilnRunner stays usable without Ray
    serve = None

if serve is not None:
    @serve.deployment(
        # Replicas follow the load: about `target_ongoing_requests` requests in flight per replica.
        autoscaling_config={
            "min_replicas": 1,
            "max_replicas": 4,
            "target_ongoing_requests": 32,
            "upscale_delay_s": 10,
            "downscale_delay_s": 120,
        },
        # Requests a replica accepts at once; more than the batch so that batches can fill.
        max_ongoing_requests=128,
        # One GPU per replica; set num_gpus to 0 for CPU devices (vulkan/opencl on lavapipe/PoCL).
        ray_actor_options={"num_gpus": 1, "num_cpus": 2},
        graceful_shutdown_timeout_s=30,
    )
    class KilnDeployment:
        def __init__(self, artifact: str, device: Optional[str] = None, name: str = "model",
                     trusted_keys: Optional[List[str]] = None, max_batch_size: int = 64,
                     batch_wait_timeout_s: float = 0.001):
            self.name = name
            self.runner = KilnRunner(artifact, device, trusted_keys, max_batch_size)
            # The batch limits of @serve.batch below, from the application's arguments.
            self.infer.set_max_batch_size(self.runner.max_batch_size)
            self.infer.set_batch_wait_timeout_s(batch_wait_timeout_s)

        @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.001)
        async def infer(self, requests: List[Dict[str, np.ndarray]]) -> List[Any]:
            # Session.run blocks: off the event loop, so that requests keep arriving meanwhile.
            return await asyncio.to_thread(self.runner.run_many, requests)

        async def __call__(self, request: Request):
            try:
                inputs = decode_v2(await request.json())
            except (ValueError, KeyError, TypeError) as e:
                return JSONResponse({"error": str(e)}, status_code=400)
            result = await self.infer(inputs)
            if isinstance(result, Exception):
                code = 400 if isinstance(result, (ValueError, TypeError)) else 500
                return JSONResponse({"error": str(result)}, status_code=code)
            return JSONResponse(encode_v2(self.name, result))

    def build(args: Dict[str, str]):
        """The application: `serve run kiln_app:build artifact=PATH [device=ID] [name=N]
        [trusted_key=FILE.pub] [max_batch_size=64] [batch_wait_timeout_s=0.001]`."""
        artifact = args.get("artifact") or os.environ.get("KILN_ARTIFACT")
        if not artifact:
            raise ValueError("give the artifact: serve run kiln_app:build artifact=/path/model.kiln")
        keys = [args["trusted_key"]] if args.get("trusted_key") else None
        return KilnDeployment.bind(artifact, args.get("device"), args.get("name", "model"), keys,
                                   int(args.get("max_batch_size", 64)),
                                   float(args.get("batch_wait_timeout_s", 0.001)))
