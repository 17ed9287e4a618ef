#!/usr/bin/env python3
"""kilnc's compile cache and -j, from the command line (tests/kilnc/CMakeLists.txt).

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

FAILURES = []


def check(cond, what, detail=""):
    print(f"{'PASS' if cond else 'FAIL'} {what}")
    if not cond:
        FAILURES.append(what)
        if detail:
            print("  " + detail.replace("\n", "\n  "))
    return cond


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
    print(f"{len(FAILURES)} failed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
