#!/usr/bin/env python3
"""Checks the example deployment files under deploy/: every YAML parses, holds the kinds it should,
and agrees with kiln-serve's conventions (probe paths, ports, a grace period above the exit timeout);
deploy/ray/kiln_app.py compiles. Needs PyYAML (Debian's python3-yaml). Exit 1 on any problem.

Usage: python3 tests/serve/check_manifests.py [REPO_ROOT]
"""
import os
import py_compile
import re
import sys

import yaml

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPECTED = {
    "deploy/kserve/serving-runtime.yaml": ["ClusterServingRuntime"],
    "deploy/kserve/inference-service.yaml": ["InferenceService", "InferenceService"],
    "deploy/kubernetes/kiln-serve.yaml": ["Deployment", "Service", "HorizontalPodAutoscaler", "ServiceMonitor"],
    "deploy/ray/serve_config.yaml": [None],
}
problems = []


def check(cond, what):
    if not cond:
        problems.append(what)


docs = {}
for rel, kinds in EXPECTED.items():
    with open(os.path.join(ROOT, rel)) as f:
        loaded = [d for d in yaml.safe_load_all(f) if d is not None]
    docs[rel] = loaded
    check([d.get("kind") for d in loaded] == kinds, "%s: kinds %s, expected %s" % (rel, [d.get("kind") for d in loaded], kinds))

runtime = docs["deploy/kserve/serving-runtime.yaml"][0]["spec"]
check({"v2", "grpc-v2"} <= set(runtime["protocolVersions"]), "serving runtime: protocolVersions lack v2/grpc-v2")
check(any(f["name"] == "kiln" for f in runtime["supportedModelFormats"]), "serving runtime: no 'kiln' model format")
args = runtime["containers"][0]["args"]
for flag in ("--model-repository=/mnt/models", "--http-port=8080", "--grpc-port=8081"):
    check(flag in args, "serving runtime: %s missing from args" % flag)

deployment = docs["deploy/kubernetes/kiln-serve.yaml"][0]["spec"]["template"]["spec"]
container = deployment["containers"][0]
check(container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready", "deployment: readiness probe path")
check(container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live", "deployment: liveness probe path")
timeout = next((int(m.group(1)) for a in container["args"] for m in [re.match(r"--exit-timeout-secs=(\d+)$", a)] if m), 30)
pause = 5 if container.get("lifecycle", {}).get("preStop") else 0
check(deployment["terminationGracePeriodSeconds"] > timeout + pause,
      "deployment: terminationGracePeriodSeconds %d is not above --exit-timeout-secs %d + preStop %d" % (
          deployment["terminationGracePeriodSeconds"], timeout, pause))

py_compile.compile(os.path.join(ROOT, "deploy/ray/kiln_app.py"), doraise=True, cfile=os.devnull)

for p in problems:
    print("check_manifests: " + p, file=sys.stderr)
print("check_manifests: %s (%d files)" % ("FAILED" if problems else "ok", len(EXPECTED) + 1))
sys.exit(1 if problems else 0)
