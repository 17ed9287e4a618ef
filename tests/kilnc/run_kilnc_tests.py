#!/usr/bin/env python3
"""kilnc's compile cache, -j, artifact output and CUDA toolchain loading, from the command line
(tests/kilnc/CMakeLists.txt).

usage: run_kilnc_tests.py KILNC GRAPH

Every kilnc run gets its own environment: KILN_CACHE_DIR / XDG_CACHE_HOME / HOME point into a
temporary folder, so the user's cache is never read or written.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

from checks import FAILURES, check


def main():
    kilnc, graph = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="kiln-kilnc-tests-") as tmp:
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("KILN_CACHE", "XDG_CACHE"))}
        base_env["HOME"] = os.path.join(tmp, "home")

        def kilnc_run(out, *args, env=None):
            proc = subprocess.run([kilnc, graph, "-o", os.path.join(tmp, out), "-ftime-report", *args],
                                  env={**base_env, **(env or {})}, capture_output=True, text=True)
            return proc.returncode, proc.stderr

        def artifact(name):
            with open(os.path.join(tmp, name), "rb") as f:
                return f.read()

        def counts(stderr):
            m = re.search(r"compile cache: (\d+) hits, (\d+) misses of (\d+) units", stderr)
            return tuple(int(g) for g in m.groups()) if m else None

        cache = {"KILN_CACHE_DIR": os.path.join(tmp, "cache")}
        rc, err = kilnc_run("cold.kiln", env=cache)
        cold = counts(err)
        check(rc == 0 and cold is not None and cold[0] == 0 and cold[1] > 0, "cold compile: every unit misses", err)
        entries = glob.glob(os.path.join(tmp, "cache", "v1", "*", "*"))
        check(len(entries) == cold[1] if cold else False, f"cold compile stores its {cold and cold[1]} units")
        rc, err = kilnc_run("warm.kiln", env=cache)
        warm = counts(err)
        check(rc == 0 and cold is not None and warm == (cold[2], 0, cold[2]), "warm compile: every unit hits", err)
        check(artifact("cold.kiln") == artifact("warm.kiln"), "cold and warm artifacts are byte-identical")

        rc, err = kilnc_run("nocache.kiln", "--no-cache", env=cache)
        check(rc == 0 and "compile cache: off" in err, "--no-cache: the cache is off", err)
        check(artifact("nocache.kiln") == artifact("cold.kiln"), "--no-cache gives the same artifact")
        check(len(glob.glob(os.path.join(tmp, "cache", "v1", "*", "*"))) == len(entries), "--no-cache stores nothing")

        # Damaged entries are misses, and the artifact is still the same.
        for entry in entries:
            with open(entry, "r+b") as f:
                f.seek(-9, os.SEEK_END)
                byte = f.read(1)
                f.seek(-9, os.SEEK_END)
                f.write(bytes([byte[0] ^ 0xFF]))
        rc, err = kilnc_run("damaged.kiln", env=cache)
        check(rc == 0 and counts(err) is not None and counts(err)[0] == 0, "damaged entries are misses", err)
        check(artifact("damaged.kiln") == artifact("cold.kiln"), "damaged entries: the same artifact")

        # -j changes nothing in the output.
        for jobs in ("-j1", "-j3", "--jobs=2"):
            rc, err = kilnc_run(f"jobs{jobs}.kiln", jobs, "--no-cache")
            check(rc == 0 and artifact(f"jobs{jobs}.kiln") == artifact("cold.kiln"), f"{jobs}: the same artifact", err)

        # Where the cache lives without KILN_CACHE_DIR: $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
        xdg = os.path.join(tmp, "xdg")
        rc, err = kilnc_run("xdg.kiln", env={"XDG_CACHE_HOME": xdg})
        check(rc == 0 and os.path.isdir(os.path.join(xdg, "kiln", "v1")), "XDG_CACHE_HOME/kiln is the default", err)
        rc, err = kilnc_run("home.kiln")
        check(rc == 0 and os.path.isdir(os.path.join(tmp, "home", ".cache", "kiln", "v1")),
              "~/.cache/kiln without XDG_CACHE_HOME", err)

        # User mistakes: each with its diagnostic.
        for args, pattern in ((["-j0"], r"-j needs a number of threads from 1 to 1024, not '0'"),
                              (["-j", "many"], r"-j needs a number of threads from 1 to 1024, not 'many'"),
                              (["--jobs="], r"-j needs a number of threads from 1 to 1024, not ''"),
                              (["-j"], r"-j needs a number of threads")):
            rc, err = kilnc_run("bad.kiln", *args)
            check(rc == 1 and err.startswith("kilnc: error: ") and re.search(pattern, err) is not None,
                  f"error: kilnc {' '.join(args)}", err)
        a_file = os.path.join(tmp, "a-file")
        open(a_file, "w").close()
        for env, pattern, what in (({"KILN_CACHE_MAX_SIZE": "lots"}, r"KILN_CACHE_MAX_SIZE", "bad KILN_CACHE_MAX_SIZE"),
                                   ({"KILN_CACHE_DIR": a_file}, re.escape(a_file), "KILN_CACHE_DIR is a file")):
            rc, err = kilnc_run("warned.kiln", env=env)
            ok = (rc == 0 and "kilnc: warning: compiling without the compile cache: " in err and
                  re.search(pattern, err) is not None and "compile cache: off" in err)
            check(ok, f"warning, compiled without the cache: {what}", err)

        check_artifact_output(kilnc, graph, kilnc_run, artifact, tmp, base_env)
        check_cuda_toolchain(kilnc, graph, kilnc_run, artifact, tmp, base_env)
    print(f"{len(FAILURES)} failed")
    return 1 if FAILURES else 0


def temporaries(tmp):
    return [f for f in os.listdir(tmp) if ".kiln.tmp-" in f]


def check_artifact_output(kilnc, graph, kilnc_run, artifact, tmp, base_env):
    """The artifact goes through a temporary file renamed into place; -o - streams it."""
    check(not temporaries(tmp), "successful compiles leave no temporary files", " ".join(temporaries(tmp)))
    proc = subprocess.run([kilnc, graph, "-o", "-", "--no-cache"], capture_output=True, env=base_env)
    check(proc.returncode == 0 and proc.stdout == artifact("cold.kiln"), "-o - writes the same artifact to stdout",
          proc.stderr.decode(errors="replace"))
    # A folder that does not exist: a clear error, nothing written.
    rc, err = kilnc_run(os.path.join("missing-dir", "x.kiln"), "--no-cache")
    check(rc == 1 and "cannot write" in err and "missing-dir/x.kiln" in err, "error: -o into a missing folder", err)


def check_cuda_toolchain(kilnc, graph, kilnc_run, artifact, tmp, base_env):
    """NVRTC and nvJitLink are loaded at run time: kilnc starts without them, and says so."""
    version = subprocess.run([kilnc, "--version"], capture_output=True, text=True, env=base_env).stdout
    targets = re.search(r"^targets: (.*)$", version, re.M)
    if not targets or "cuda" not in targets.group(1).split(", "):
        print("(this build has no cuda target: the toolchain checks do not apply)")
        return
    readelf = subprocess.run(["readelf", "-d", kilnc], capture_output=True, text=True)
    check(readelf.returncode == 0 and "libnvrtc" not in readelf.stdout and "libnvJitLink" not in readelf.stdout,
          "kilnc does not link NVRTC or nvJitLink (they are loaded with dlopen)")
    missing = {"KILN_NVRTC_LIBRARY": os.path.join(tmp, "no-such-libnvrtc.so")}
    version = subprocess.run([kilnc, "--version"], capture_output=True, text=True,
                             env={**base_env, **missing}).stdout
    targets = re.search(r"^targets: (.*)$", version, re.M)
    check(targets is not None and "cuda" not in targets.group(1) and
          re.search(r"^unavailable: cuda \(.*KILN_NVRTC_LIBRARY", version, re.M) is not None,
          "without NVRTC, --version lists no cuda target and says why", version)
    rc, err = kilnc_run("nocuda.kiln", "--no-cache", env=missing)
    check(rc == 0 and artifact("nocuda.kiln")[4:8] == b"KILN", "without NVRTC, the default targets still compile", err)
    rc, err = kilnc_run("nocuda-explicit.kiln", "--target=cuda", "--no-cache", env=missing)
    check(rc == 1 and "target 'cuda' is not available" in err and "KILN_NVRTC_LIBRARY" in err,
          "error: --target=cuda without NVRTC names the variable", err)

    # A compile that fails after the constants were written (nvJitLink does not load) leaves
    # the previous artifact as it was and no temporary file.
    with open(os.path.join(tmp, "keep.kiln"), "wb") as f:
        f.write(b"previous artifact")
    not_a_library = {"KILN_NVJITLINK_LIBRARY": graph}
    rc, err = kilnc_run("keep.kiln", "--target=cuda", "--no-cache", env=not_a_library)
    check(rc == 1 and "cannot load" in err and graph in err, "error: an nvJitLink that does not load", err)
    check(artifact("keep.kiln") == b"previous artifact" and not temporaries(tmp),
          "a failed compile keeps the previous artifact and leaves no temporary file", " ".join(temporaries(tmp)))


if __name__ == "__main__":
    sys.exit(main())
