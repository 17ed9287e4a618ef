#!/usr/bin/python3
"""Compile-time benchmark: how long kilnc takes on real models, cold and with a warm cache.

For every model x target it runs kilnc twice with a fresh, empty cache folder passed as
KILN_CACHE_DIR: once cold (the folder empty) and once warm (the same folder again), and records
  - wall time of the kilnc process (time.perf_counter around spawn .. wait4),
  - its user and system CPU time and its peak RSS (os.wait4's rusage of that one child; ru_maxrss
    is in KiB on Linux; it includes the pre-exec memory, i.e. this script's RSS, about 16 MB: the
    script never loads a model into memory for that reason),
  - the artifact's size, and whether the cold and warm artifacts are byte-identical (a mismatch is
    reported and makes the exit status 1),
  - the model's weight size: the sum of its ONNX initializers' bytes (read with a small protobuf
    walker, so no `onnx` package is needed), or for a .graph file the tensor bytes of the
    safetensors files its `weights "..."` lines name (0 without any).
Targets are those `kilnc --version` lists, each alone (--target=T), plus a row "all" without
--target, which compiles every target of the build in one process.

Models: resnet18, resnet50, mobilenetv2 and bert_encoder from bench/make_compile_models.py, in
--models DIR (generated there with --generator-python, Debian's /usr/bin/python3 with python3-onnx,
when missing), plus the repository's examples (examples/mlp.graph, examples/encoder_block.graph,
examples/onnx/*.onnx) unless --no-extra-graphs.

kilnc runs with CUDA_CACHE_DISABLE=1: NVRTC (CUDA 12.9 on) has a compile cache of its own on
machines with a CUDA driver, which would turn every cold compile after a model's first into
cache hits.

Before the rows, one untimed cold and warm compile of the first model per target (--no-warmup
skips it): right after a machine starts, the first compiles read kilnc and the CUDA toolkit's
libraries from disk and run up to 3x slower.

--jobs-check compiles one model (--jobs-model, default bert_encoder) for every target, cold, once
with -j1 and once with -j<ncpu>, each with its own empty cache, and checks that the two artifacts
are byte-identical.

Usage: /usr/bin/python3 bench/compile_time.py [--kilnc PATH] [--models DIR] [--targets cuda,vulkan,opencl,all]
           [--repeats N] [--only NAMES] [--no-extra-graphs] [--no-warmup] [--kilnc-arg=ARG ...] [--jobs-check]
           [--out results.json]

Stdlib only (NumPy and onnx only in the generator it may start). Run one at a time: the timings
are of the whole machine. This is a program, not a test: nothing is asserted about the numbers.
"""
import argparse
import glob
import hashlib
import json
import os
import platform
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = os.path.join(ROOT, "bench", "make_compile_models.py")
GENERATED = ("resnet18", "resnet50", "mobilenetv2", "bert_encoder")
EXTRA = [os.path.join(ROOT, "examples", "mlp.graph"), os.path.join(ROOT, "examples", "encoder_block.graph")]
EXTRA_GLOB = os.path.join(ROOT, "examples", "onnx", "*.onnx")


# ---- weight sizes ---------------------------------------------------------------------------

# TensorProto.DataType -> bytes per element (STRING = 8 is left out: no fixed size).
_ONNX_ELEM = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 14: 8, 15: 16,
              16: 2, 17: 1, 18: 1, 19: 1, 20: 1}


class _Reader:
    """Reads protobuf fields straight from the file, seeking over payloads, so that this process
    never holds a model in memory: a child's ru_maxrss on Linux starts from the RSS of the process
    that spawned it (the pre-exec memory is counted), so a big parent would inflate every peak."""

    def __init__(self, f):
        self.f = f

    def varint(self):
        result = shift = 0
        while True:
            c = self.f.read(1)
            if not c:
                raise ValueError("truncated protobuf")
            result |= (c[0] & 0x7F) << shift
            if c[0] < 0x80:
                return result
            shift += 7

    def fields(self, end):
        """Yields (field, wire, value); a length-delimited value is (begin, end) and the caller
        may read inside it: the reader seeks to its end before the next field."""
        while self.f.tell() < end:
            key = self.varint()
            field, wire = key >> 3, key & 7
            if wire == 0:
                yield field, wire, self.varint()
            elif wire in (1, 5):
                self.f.seek(8 if wire == 1 else 4, os.SEEK_CUR)
            elif wire == 2:
                n = self.varint()
                begin = self.f.tell()
                yield field, wire, (begin, begin + n)
                self.f.seek(begin + n)
            else:
                raise ValueError("unsupported protobuf wire type %d" % wire)


def onnx_weight_bytes(path):
    """Sum of prod(dims) * element size over the graph's initializers (ModelProto.graph = 7,
    GraphProto.initializer = 5, TensorProto.dims = 1, data_type = 2)."""
    with open(path, "rb") as f:
        r = _Reader(f)
        total = 0
        for field, wire, value in r.fields(os.path.getsize(path)):
            if field != 7 or wire != 2:
                continue
            for gfield, gwire, gvalue in r.fields(value[1]):
                if gfield != 5 or gwire != 2:
                    continue
                dims, dtype = [], 1
                for tfield, twire, tvalue in r.fields(gvalue[1]):
                    if tfield == 1 and twire == 0:
                        dims.append(tvalue)
                    elif tfield == 1 and twire == 2:  # packed dims
                        while f.tell() < tvalue[1]:
                            dims.append(r.varint())
                    elif tfield == 2 and twire == 0:
                        dtype = tvalue
                count = 1
                for d in dims:
                    count *= d
                total += count * _ONNX_ELEM.get(dtype, 0)
    return total


def safetensors_bytes(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return sum(t["data_offsets"][1] - t["data_offsets"][0] for k, t in header.items() if k != "__metadata__")


def graph_weight_bytes(path):
    total = 0
    with open(path) as f:
        for line in f:
            m = re.match(r'\s*weights\s+"([^"]+)"', line)
            if m:
                ref = os.path.join(os.path.dirname(path), m.group(1))
                if os.path.exists(ref):
                    total += safetensors_bytes(ref)
            elif re.match(r"\s*graph\b", line):
                break
    return total


def weight_bytes(path):
    return onnx_weight_bytes(path) if path.endswith(".onnx") else graph_weight_bytes(path)


# ---- running kilnc --------------------------------------------------------------------------

def run_measured(cmd, env, log_dir):
    """Runs cmd with stdout/stderr in files; returns wall s, user s, sys s, peak RSS bytes, rc, output tail."""
    out_path = os.path.join(log_dir, "kilnc.log")
    with open(out_path, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting again
    # The child's ru_maxrss includes the memory it had before exec, i.e. this process's: a peak
    # at or below our own high-water mark is a floor, not kilnc's.
    spawner = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with open(out_path, "rb") as f:
        tail = f.read()[-4000:].decode("utf-8", "replace")
    return {"wall_s": wall, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
            "peak_rss_bytes": usage.ru_maxrss * 1024, "spawner_peak_rss_bytes": spawner,
            "rc": proc.returncode, "output_tail": tail}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def compile_once(kilnc, model, target, extra_args, cache_dir, artifact, work):
    cmd = [kilnc, model, "-o", artifact] + (["--target=" + target] if target != "all" else []) + extra_args
    env = dict(os.environ, KILN_CACHE_DIR=cache_dir)
    # NVRTC (CUDA 12.9 on) keeps a cache of its own where a CUDA driver is installed: left on,
    # every "cold" compile after the first of a model would measure its hits, not the compiler.
    env["CUDA_CACHE_DISABLE"] = "1"
    if os.path.isdir("/usr/local/cuda/lib64"):  # NVRTC for the cuda target, as gpu_bench.py does
        env["LD_LIBRARY_PATH"] = "/usr/local/cuda/lib64" + (
            ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    r = run_measured(cmd, env, work)
    r["cmd"] = cmd
    if r["rc"] == 0 and os.path.exists(artifact):
        r["artifact_bytes"] = os.path.getsize(artifact)
        r["artifact_sha256"] = sha256(artifact)
    return r


def kilnc_targets(kilnc):
    out = subprocess.run([kilnc, "--version"], capture_output=True, text=True)
    m = re.search(r"targets:\s*(.*)", out.stdout + out.stderr)
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else "", (
        [t.strip() for t in m.group(1).split(",") if t.strip()] if m else [])


def short(result):
    lines = [ln for ln in result.get("output_tail", "").strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "exit status %s" % result.get("rc")


# ---- the benchmark --------------------------------------------------------------------------

def ensure_models(models_dir, names, generator_python):
    missing = [n for n in names if not os.path.exists(os.path.join(models_dir, n + ".onnx"))]
    if missing:
        print("generating %s into %s" % (", ".join(missing), models_dir), file=sys.stderr, flush=True)
        subprocess.run([generator_python, GENERATOR, models_dir, "--models", ",".join(missing)],
                       check=True, stdout=sys.stderr)


def bench_one(args, model, target, work):
    runs = []
    for rep in range(args.repeats):
        cache = tempfile.mkdtemp(prefix="cache-", dir=work)
        pair = {}
        for phase in ("cold", "warm"):
            artifact = os.path.join(work, phase + ".kiln")
            pair[phase] = compile_once(args.kilnc, model, target, args.kilnc_arg, cache, artifact, work)
            if os.path.exists(artifact):
                os.remove(artifact)
            if pair[phase]["rc"] != 0:
                break
        pair["cache_bytes"] = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache) for f in fs)
        shutil.rmtree(cache, ignore_errors=True)
        runs.append(pair)
        if any(p["rc"] != 0 for p in (pair.get("cold"), pair.get("warm")) if p):
            break
    return runs


def summarize(name, path, wbytes, target, runs):
    ok = all(r.get("cold", {}).get("rc") == 0 and r.get("warm", {}).get("rc") == 0 for r in runs)
    row = {"model": name, "path": path, "weights_bytes": wbytes, "target": target, "ok": ok, "runs": runs}
    if not ok:
        failed = next(r[p] for r in runs for p in ("cold", "warm") if p in r and r[p]["rc"] != 0)
        row["error"] = short(failed)
        return row
    hashes = {r[p]["artifact_sha256"] for r in runs for p in ("cold", "warm")}
    row.update({
        "cold_s": statistics.median(r["cold"]["wall_s"] for r in runs),
        "warm_s": statistics.median(r["warm"]["wall_s"] for r in runs),
        "cold_cpu_s": statistics.median(r["cold"]["user_s"] + r["cold"]["sys_s"] for r in runs),
        "warm_cpu_s": statistics.median(r["warm"]["user_s"] + r["warm"]["sys_s"] for r in runs),
        "peak_rss_cold_bytes": max(r["cold"]["peak_rss_bytes"] for r in runs),
        "peak_rss_warm_bytes": max(r["warm"]["peak_rss_bytes"] for r in runs),
        "cache_bytes": max(r["cache_bytes"] for r in runs),
        "artifact_bytes": runs[0]["cold"]["artifact_bytes"],
        "identical": len(hashes) == 1,
    })
    return row


def jobs_check(args, model, work):
    ncpu = os.cpu_count() or 1
    result = {"model": model, "ncpu": ncpu, "runs": {}}
    for jobs in (1, ncpu):
        cache = tempfile.mkdtemp(prefix="cache-j%d-" % jobs, dir=work)
        artifact = os.path.join(work, "j%d.kiln" % jobs)
        r = compile_once(args.kilnc, model, "all", args.kilnc_arg + ["-j%d" % jobs], cache, artifact, work)
        shutil.rmtree(cache, ignore_errors=True)
        if os.path.exists(artifact):
            os.remove(artifact)
        result["runs"]["-j%d" % jobs] = r
        print("  jobs check -j%d: %s" % (jobs, "%.2f s wall, %.2f s CPU" % (r["wall_s"], r["user_s"] + r["sys_s"])
                                           if r["rc"] == 0 else "FAILED: " + short(r)), file=sys.stderr, flush=True)
    runs = list(result["runs"].values())
    result["ok"] = all(r["rc"] == 0 for r in runs)
    result["identical"] = result["ok"] and len({r["artifact_sha256"] for r in runs}) == 1
    return result


def fmt_mb(n):
    return "%.1f" % (n / 1e6) if n >= 1e5 else "%.3f" % (n / 1e6)


def markdown(rows):
    out = ["| model | weights MB | target | cold s | warm s | peak MB cold | peak/weights | artifact MB | identical |",
           "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if not r["ok"]:
            out.append("| %s | %s | %s | FAILED: %s | | | | | |" % (
                r["model"], fmt_mb(r["weights_bytes"]), r["target"], r["error"].replace("|", "\\|")))
            continue
        ratio = "%.1f" % (r["peak_rss_cold_bytes"] / r["weights_bytes"]) if r["weights_bytes"] >= 1e6 else "-"
        out.append("| %s | %s | %s | %.2f | %.2f | %.0f | %s | %s | %s |" % (
            r["model"], fmt_mb(r["weights_bytes"]), r["target"], r["cold_s"], r["warm_s"],
            r["peak_rss_cold_bytes"] / 1e6, ratio, fmt_mb(r["artifact_bytes"]),
            "yes" if r["identical"] else "**NO**"))
    return "\n".join(out)


def host_info():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": cpu, "ncpu": os.cpu_count(), "platform": platform.platform(),
            "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d %H:%M:%S %z")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kilnc", default=os.path.join(ROOT, "build", "bin", "kilnc"))
    ap.add_argument("--models", default=os.path.join(ROOT, "out", "compile-models"), metavar="DIR",
                    help="folder of make_compile_models.py's files; generated when missing")
    ap.add_argument("--only", default="", metavar="NAMES",
                    help="comma list of model names as the table prints them (resnet18, mlp, onnx/cnn, ...); default all")
    ap.add_argument("--targets", default="",
                    help="comma list of targets; 'all' is one kilnc without --target (default: every "
                         "target of `kilnc --version`, then all)")
    ap.add_argument("--repeats", type=int, default=1, help="cold+warm pairs per model and target (median)")
    ap.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                    help="one untimed cold+warm compile of the first model per target before the rows")
    ap.add_argument("--extra-graphs", action=argparse.BooleanOptionalAction, default=True,
                    help="also the repository's examples/mlp.graph, examples/encoder_block.graph, "
                         "examples/onnx/*.onnx (default: yes)")
    ap.add_argument("--kilnc-arg", action="append", default=[], metavar="ARG",
                    help="extra kilnc argument, e.g. --kilnc-arg=-j4 (repeatable)")
    ap.add_argument("--jobs-check", action="store_true",
                    help="also compile --jobs-model with -j1 and -j<ncpu> and compare the artifacts")
    ap.add_argument("--jobs-model", default="bert_encoder", help="model name for --jobs-check")
    ap.add_argument("--generator-python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                    else sys.executable, help="Python with numpy and onnx for make_compile_models.py")
    ap.add_argument("--work-dir", default=None, help="where the temporary caches and artifacts go")
    ap.add_argument("--out", default="", help="write every number to this JSON file (rewritten after each row)")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    args.kilnc = os.path.abspath(args.kilnc)
    if not os.access(args.kilnc, os.X_OK):
        sys.exit("no kilnc at %s (build it, or pass --kilnc PATH)" % args.kilnc)
    version, build_targets = kilnc_targets(args.kilnc)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()] or build_targets + ["all"]

    only = {n.strip() for n in args.only.split(",") if n.strip()}
    ensure_models(args.models, [n for n in GENERATED if not only or n in only], args.generator_python)
    models = [(n, os.path.join(args.models, n + ".onnx")) for n in GENERATED]
    if args.extra_graphs:
        for path in EXTRA + sorted(glob.glob(EXTRA_GLOB)):
            models.append((os.path.splitext(os.path.relpath(path, os.path.join(ROOT, "examples")))[0], path))
    models = [(n, p) for n, p in models if not only or n in only]
    if not models:
        sys.exit("no models selected")

    results = {"kilnc": args.kilnc, "kilnc_version": version, "kilnc_args": args.kilnc_arg,
               "targets": targets, "repeats": args.repeats, "host": host_info(), "rows": []}

    def save():
        if args.out:
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(results, f, indent=1)
            os.replace(tmp, args.out)

    def kilnc_stamp():
        st = os.stat(args.kilnc)
        return (st.st_mtime_ns, st.st_size)

    stamp = kilnc_stamp()
    failed = False
    if args.work_dir:
        os.makedirs(args.work_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kiln-compile-time-", dir=args.work_dir) as work:
        if args.warmup and models:
            # One untimed cold compile of the first model for every target first: the first
            # compiles after a machine starts read kilnc and the CUDA toolkit's libraries from
            # disk and run up to 3x slower; the rows measure the compiler, not the disk.
            print("warm-up compile of %s (not timed) ..." % models[0][0], file=sys.stderr, flush=True)
            for target in targets:
                bench_one(argparse.Namespace(**{**vars(args), "repeats": 1}), models[0][1], target, work)
        for name, path in models:
            wbytes = weight_bytes(path)
            for target in targets:
                print("%s (%s MB) --target=%s ..." % (name, fmt_mb(wbytes), target), end=" ",
                      file=sys.stderr, flush=True)
                row = summarize(name, path, wbytes, target, bench_one(args, path, target, work))
                if kilnc_stamp() != stamp:
                    results["kilnc_changed_during_run"] = True
                    stamp = kilnc_stamp()
                    print("(kilnc was rewritten during this row)", end=" ", file=sys.stderr)
                results["rows"].append(row)
                save()
                if not row["ok"]:
                    failed = True
                    print("FAILED: " + row["error"], file=sys.stderr, flush=True)
                    continue
                print("cold %.2f s, warm %.2f s, peak %.0f MB%s" % (
                    row["cold_s"], row["warm_s"], row["peak_rss_cold_bytes"] / 1e6,
                    "" if row["identical"] else ", ARTIFACTS DIFFER"), file=sys.stderr, flush=True)
                if not row["identical"]:
                    failed = True
        if args.jobs_check:
            jm = next((p for n, p in models if n == args.jobs_model),
                      os.path.join(args.models, args.jobs_model + ".onnx"))
            if not os.path.exists(jm):
                ensure_models(args.models, [args.jobs_model], args.generator_python)
            print("jobs check on %s:" % jm, file=sys.stderr, flush=True)
            results["jobs_check"] = jobs_check(args, jm, work)
            save()

    print()
    print("kilnc: %s (%s); host: %d CPUs, %s; repeats: %d%s" % (
        version, args.kilnc, results["host"]["ncpu"], results["host"]["cpu"] or "?", args.repeats,
        "; kilnc args: " + " ".join(args.kilnc_arg) if args.kilnc_arg else ""))
    print()
    print(markdown(results["rows"]))
    print()
    if results.get("kilnc_changed_during_run"):
        print("WARNING: %s was rewritten during the run: the rows mix two builds" % args.kilnc)
    floored = [r for r in results["rows"] if r["ok"] and r["peak_rss_cold_bytes"] <= 1.05 * max(
        x["cold"]["spawner_peak_rss_bytes"] for x in r["runs"])]
    if floored:
        print("note: the peak RSS of %s is at this script's own (%.0f MB), which it includes; kilnc's is lower"
              % (", ".join("%s/%s" % (r["model"], r["target"]) for r in floored),
                 floored[0]["runs"][0]["cold"]["spawner_peak_rss_bytes"] / 1e6))
    mismatched = [r for r in results["rows"] if r["ok"] and not r["identical"]]
    for r in mismatched:
        print("MISMATCH: %s --target=%s: the cold and warm artifacts are not byte-identical" % (r["model"], r["target"]))
    if args.jobs_check:
        jc = results["jobs_check"]
        runs = jc["runs"]
        if not jc["ok"]:
            failed = True
            print("jobs check FAILED: " + "; ".join("%s: %s" % (k, short(v)) for k, v in runs.items() if v["rc"] != 0))
        else:
            j1, jn = runs["-j1"], runs["-j%d" % jc["ncpu"]]
            print("jobs check (%s, every target, cold): -j1 %.2f s, -j%d %.2f s (x%.2f); artifacts %s" % (
                os.path.basename(jc["model"]), j1["wall_s"], jc["ncpu"], jn["wall_s"], j1["wall_s"] / jn["wall_s"],
                "identical" if jc["identical"] else "DIFFER"))
            if not jc["identical"]:
                print("MISMATCH: -j1 and -j%d artifacts of %s are not byte-identical" % (jc["ncpu"], jc["model"]))
                failed = True
    if mismatched:
        failed = True
    if args.out:
        print("results: " + args.out)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
