#!/usr/bin/env python3
"""Installs Kiln into a fresh prefix and uses it as an application outside the tree would.

1. `cmake --install BUILD --prefix WORK/prefix`; the expected files must be there.
2. libkiln_runtime.so: its SONAME is libkiln_runtime.so.<KILN_RUNTIME_ABI_VERSION> and it
   exports the C API's kiln_* functions and nothing else (nm -D).
3. The installed kilnc compiles examples/mlp.graph; the consumer (consumer/consumer.c) is built
   three ways against the prefix: CMake find_package with Kiln::runtime, CMake with
   Kiln::runtime_static, and pkg-config with a plain `cc`; each runs the artifact on the default
   device and the reference interpreter, and all three must print the same outputs.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    prefix = os.path.join(work, "prefix")
    run(["cmake", "--install", args.build_dir, "--prefix", prefix])

    header = open(os.path.join(args.source_dir, "runtime/include/kiln/runtime.h")).read()
    abi = re.search(r"^#define KILN_RUNTIME_ABI_VERSION (\d+)$", header, re.M).group(1)
    libdirs = [d for d in ("lib", "lib64", "lib/x86_64-linux-gnu") if os.path.exists(os.path.join(prefix, d, "libkiln_runtime.a"))]
    if not libdirs:
        sys.exit("FAILED: no libkiln_runtime.a under the prefix")
    libdir = os.path.join(prefix, libdirs[0])
    expected = ["include/kiln/runtime.h", "include/kiln/runtime.hpp", "bin/kilnc", "bin/kiln-run", "bin/kiln-bench",
                os.path.join(libdirs[0], "libkiln_runtime.so"), os.path.join(libdirs[0], f"libkiln_runtime.so.{abi}"),
                os.path.join(libdirs[0], "cmake/Kiln/KilnConfig.cmake"),
                os.path.join(libdirs[0], "cmake/Kiln/KilnConfigVersion.cmake"),
                os.path.join(libdirs[0], "pkgconfig/kiln.pc")]
    missing = [f for f in expected if not os.path.exists(os.path.join(prefix, f))]
    if missing:
        sys.exit(f"FAILED: not installed: {', '.join(missing)}")

    so = os.path.join(libdir, "libkiln_runtime.so")
    dynamic = run(["readelf", "-d", so])
    soname = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dynamic)
    if not soname or soname.group(1) != f"libkiln_runtime.so.{abi}":
        sys.exit(f"FAILED: SONAME is {soname.group(1) if soname else 'missing'}, expected libkiln_runtime.so.{abi}")
    symbols = [line.split()[-1] for line in run(["nm", "-D", "--defined-only", so]).splitlines() if line.strip()]
    foreign = [s for s in symbols if not s.startswith("kiln_")]
    if foreign:
        sys.exit(f"FAILED: libkiln_runtime.so exports {len(foreign)} symbols outside the C API, e.g. {foreign[:8]}")
    declared = set(re.findall(r"\b(kiln_[a-z0-9_]+)\s*\(", header))
    missing_api = sorted(declared - set(symbols))
    if missing_api:
        sys.exit(f"FAILED: C API functions not exported: {missing_api}")
    print(f"libkiln_runtime.so: SONAME {soname.group(1)}, exports {len(symbols)} symbols, all kiln_*")

    artifact = os.path.join(work, "mlp.kiln")
    run([os.path.join(prefix, "bin/kilnc"), os.path.join(args.source_dir, "examples/mlp.graph"), "-o", artifact])
    consumer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "consumer")
    env = dict(os.environ, CMAKE_PREFIX_PATH=prefix)
    outputs = {}
    for kind, static in (("cmake-shared", "OFF"), ("cmake-static", "ON")):
        build = os.path.join(work, kind)
        run(["cmake", "-S", consumer, "-B", build, "-G", "Ninja", f"-DKILN_STATIC={static}"], env=env)
        run(["cmake", "--build", build], env=env)
        outputs[kind] = run([os.path.join(build, "consumer"), artifact, ""])
    pc_env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "kiln"], env=pc_env).split()
    exe = os.path.join(work, "consumer-pkgconfig")
    run(["cc", os.path.join(consumer, "consumer.c"), "-o", exe, *flags, "-lm", f"-Wl,-rpath,{libdir}"])
    outputs["pkg-config"] = run([exe, artifact, ""])
    for kind, out in outputs.items():
        print(f"{kind}: {out.strip()}")
    lines = {re.search(r"^outputs: .*$", o, re.M).group(0) for o in outputs.values()}
    if len(lines) != 1:
        sys.exit("FAILED: the consumers disagree")
    print("install test: passed")


if __name__ == "__main__":
    main()
