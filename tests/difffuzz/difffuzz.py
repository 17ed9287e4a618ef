#!/usr/bin/python3
"""Differential fuzzing: random valid graphs (graphgen.py) compiled at -O0 and -O2 and run on
every available device, each output compared with the reference interpreter's.

Usage:
  difffuzz.py --kilnc KILNC --kiln-run KILN_RUN --work DIR (--count N | --time-budget SECONDS)
              [--seed S] [--max-nodes M] [--shrink-budget SECONDS] [--regressions DIR]
  difffuzz.py ... --replay FILE.graph [FILE.graph ...]

Per graph: the inputs as .npy files (from the graph's `# dims:` and `# domain:` comments, seeded);
`kilnc -O0` and `kilnc -O2` for every target with a device here; the truth is the reference
interpreter running the -O0 artifact (`kiln-run --device=reference --output-dir`); every other
(artifact, device) pair, -O2 on the reference included, runs with `kiln-run --check-against`,
which compares with kiln-run --check's dtype-aware tolerances (tools/kiln-run/report.cpp, one
place for them). A failure is a compile error of a graph the -O0 compile accepts, a graph that
no compile accepts (a generator bug: the graph is meant to be valid), a run error or crash, or
a mismatch. Each failure is shrunk (outputs dropped, nodes turned into inputs or bypassed, dead
code removed, sizes and the symbol's binding reduced) while it persists as the same kind on the
same device and opt level (and while the reference stays free of NaN/inf if it was), and its
minimal graph and a command that reproduces it are written under WORK/failures/.

Seeds: --count N runs seeds S .. S+N-1; --time-budget runs seeds from S on until the budget is
spent (a graph still running then is abandoned and counted neither way, so the budget bounds the
run's time) (--count 0 --time-budget 0 is the unbounded mode: until interrupted). Every seed printed is
reproducible alone with `--seed SEED --count 1`. --regressions DIR also replays every DIR/*.graph
first (the committed regression graphs).

--drivers vulkan (a comma list) runs those drivers' devices only, beside the reference (a quick
mode: PoCL compiles every kernel when it loads an artifact, which dominates the run time).
Drivers without a device are skipped (and said so) unless KILN_REQUIRE_DRIVERS names them, which
makes their absence a failure, as in tests/backends/run_backends.py. Exit status 1 on any failure.
"""
import argparse
import os
import re
import shutil
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "backends"))
sys.path.insert(0, HERE)
import graphgen  # noqa: E402
from run_backends import DRIVERS, run, select_devices  # noqa: E402

NPY_DTYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64, "bool": np.bool_,
              "i8": np.int8, "u8": np.uint8}


# ---- the graph text: signature, comments, statements ----------------------------------------

def split_top(text):
    """Splits at commas outside brackets and parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


class GraphText:
    """A difffuzz graph as parts the shrinker edits: comments, inputs and outputs
    (name, type), statements (name, expression, type)."""
    SIG = re.compile(r"graph\s+(\w+)\((.*?)\)\s*->\s*\((.*?)\)\s*\{(.*)\}", re.S)

    def __init__(self, text):
        m = self.SIG.search(text)
        if not m:
            raise ValueError("not a difffuzz graph (no signature)")
        self.comments = [l for l in text[: m.start()].splitlines() if l.startswith("#")]
        self.name = m.group(1)
        self.inputs = [tuple(p.split(":", 1)) for p in split_top(m.group(2))]
        self.inputs = [(n.strip(), t.strip()) for n, t in self.inputs]
        self.outputs = [tuple(x.strip() for x in p.split(":", 1)) for p in split_top(m.group(3))]
        self.statements = []
        for line in m.group(4).splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, rest = line.split("=", 1)
            expr, typ = rest.rsplit(":", 1)
            self.statements.append((name.strip(), expr.strip(), typ.strip()))

    def render(self):
        lines = list(self.comments)
        lines.append("graph %s(%s) -> (%s) {" % (self.name, ", ".join("%s: %s" % i for i in self.inputs),
                                                  ", ".join("%s: %s" % o for o in self.outputs)))
        lines += ["  %s = %s : %s" % s for s in self.statements]
        lines.append("}")
        return "\n".join(lines) + "\n"

    def dims(self):
        for c in self.comments:
            m = re.match(r"#\s*dims:\s*(.*)", c)
            if m:
                return dict((b.split("=")[0], int(b.split("=")[1])) for b in m.group(1).split())
        return {}

    def domains(self):
        out = {}
        for c in self.comments:
            m = re.match(r"#\s*domain:\s*(\S+)\s+(.*)", c)
            if m:
                out[m.group(1)] = m.group(2).strip()
        return out

    def copy(self):
        return GraphText(self.render())


def uses(expr):
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", re.sub(r"\b(const|f32|f16|bf16|i64|i32|i8|u8|bool)\b", " ",
                                                             expr)))


def remove_dead(g):
    needed = set(n for n, _ in g.outputs)
    kept = []
    for name, expr, typ in reversed(g.statements):
        if name in needed:
            kept.append((name, expr, typ))
            needed |= uses(expr)
    g.statements = kept[::-1]
    g.inputs = [i for i in g.inputs if i[0] in needed]
    names = set(n for n, _ in g.inputs)
    g.comments = [c for c in g.comments if not (c.startswith("# domain:") and c.split()[2] not in names)]
    symbols = set(re.findall(r"[A-Za-z_]\w*", " ".join(t.split("[", 1)[1] for _, t in g.inputs)))
    g.comments = [c if not c.startswith("# dims:") else
                  "# dims: " + " ".join(b for b in c.split(":", 1)[1].split() if b.split("=")[0] in symbols)
                  for c in g.comments]
    g.comments = [c for c in g.comments if c.strip() != "# dims:"]
    return g


# ---- inputs -------------------------------------------------------------------------------

def parse_type(typ):
    m = re.match(r"(\w+)\[(.*)\]", typ.strip())
    dims = [d.strip() for d in m.group(2).split(",") if d.strip()]
    return m.group(1), dims


def make_inputs(g, seed, folder):
    """One .npy per input, from the graph's comments; returns kiln-run's --input arguments."""
    rng = np.random.default_rng(seed)
    dims, domains = g.dims(), g.domains()
    args = []
    os.makedirs(folder, exist_ok=True)
    for name, typ in g.inputs:
        dtype, shape = parse_type(typ)
        shape = [int(d) if d.isdigit() else dims[d] for d in shape]
        domain = domains.get(name, "")
        if domain.startswith("below"):
            n = int(re.search(r"\[(\d+)\]", domain).group(1))
            data = rng.integers(0, n, size=shape)
        elif domain.startswith("int"):
            lo, hi = map(int, re.search(r"\[(-?\d+),\s*(-?\d+)\]", domain).groups())
            data = rng.integers(lo, hi + 1, size=shape)
        elif dtype == "bool" or domain == "bool":
            data = rng.random(size=shape) < 0.5
        else:
            data = rng.uniform(-1.0, 1.0, size=shape)
        path = os.path.join(folder, name + ".npy")
        np.save(path, np.asarray(data).astype(NPY_DTYPES[dtype]))
        args += ["--input", "%s=%s" % (name, path)]
    return args


# ---- one graph through every compile and device --------------------------------------------

# A run's time limit: PoCL compiles every kernel of an artifact when it loads it, which takes
# minutes for an -O0 artifact of a dozen kernels on a loaded 2-core machine.
RUN_TIMEOUT = 300


def failure_kind(rc):
    """What a tool's nonzero exit status means (docs/tools.md: 1 user error, 2 internal)."""
    return {1: "error", 124: "timeout"}.get(rc, "crash")


class BudgetSpent(Exception):
    """The time budget ran out in the middle of a graph, which is then neither passed nor failed."""


class Failure:
    def __init__(self, kind, opt, device, log):
        self.kind, self.opt, self.device, self.log = kind, opt, device, log

    def signature(self):
        return (self.kind, self.opt, self.device.split(":")[0])

    def __str__(self):
        return "%s at %s on %s" % (self.kind, self.opt, self.device)


class Harness:
    def __init__(self, kilnc, kiln_run, devices, targets):
        self.kilnc, self.kiln_run, self.devices, self.targets = kilnc, kiln_run, devices, targets
        self.deadline = None  # time.time() after which a graph is abandoned (--time-budget)

    def run(self, cmd):
        """run_backends.run with RUN_TIMEOUT, cut at the deadline (then BudgetSpent, not a failure)."""
        timeout = RUN_TIMEOUT
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.time())
            if timeout <= 0:
                raise BudgetSpent()
        rc, out = run(cmd, timeout)
        if rc == 124 and self.deadline is not None and time.time() >= self.deadline:
            raise BudgetSpent()
        return rc, out

    def compile_cmd(self, graph_path, opt, art):
        cmd = [self.kilnc, graph_path, opt, "-o", art, "-j1"]
        return cmd + (["--target=" + ",".join(self.targets)] if self.targets else [])

    def check(self, g, folder, seed):
        """Runs one graph; returns (failures, whether the reference outputs are all finite)."""
        os.makedirs(folder, exist_ok=True)
        graph_path = os.path.join(folder, "graph.graph")
        with open(graph_path, "w") as f:
            f.write(g.render())
        inputs = make_inputs(g, seed, os.path.join(folder, "inputs"))
        arts = {}
        for opt in ("-O0", "-O2"):
            art = os.path.join(folder, "model%s.kiln" % opt)
            rc, out = self.run(self.compile_cmd(graph_path, opt, art))
            arts[opt] = (rc, out, art)
        if arts["-O0"][0] != 0:
            kind = "compile-" + failure_kind(arts["-O0"][0])
            return [Failure(kind, "-O0", "none", arts["-O0"][1])], True
        failures = []
        if arts["-O2"][0] != 0:
            kind = "compile-" + failure_kind(arts["-O2"][0])
            failures.append(Failure(kind, "-O2", "none", arts["-O2"][1]))
        ref_dir = os.path.join(folder, "reference")
        shutil.rmtree(ref_dir, ignore_errors=True)
        rc, out = self.run([self.kiln_run, arts["-O0"][2], "--device=reference", "--output-dir", ref_dir] + inputs)
        if rc != 0:
            return failures + [Failure("run-" + failure_kind(rc), "-O0", "reference", out)], True
        finite = all(np.all(np.isfinite(np.load(os.path.join(ref_dir, f)).astype(np.float64)))
                     for f in os.listdir(ref_dir))
        for opt in ("-O0", "-O2"):
            if arts[opt][0] != 0:
                continue
            for device in (["reference"] if opt == "-O2" else []) + self.devices:
                rc, out = self.run([self.kiln_run, arts[opt][2], "--device=" + device, "--check-against", ref_dir]
                                   + inputs)
                if rc == 0:
                    continue
                kind = "mismatch" if rc == 1 and re.search(r"\bFAIL\b", out) else "run-" + failure_kind(rc)
                failures.append(Failure(kind, opt, device, out))
        return failures, finite

    def repro(self, graph_path, folder):
        """The commands that reproduce a case, as a shell script's lines."""
        g = GraphText(open(graph_path).read())
        lines = ["#!/bin/sh", "# inputs: python3 - (see difffuzz.py make_inputs), or replay with difffuzz.py --replay",
                 "set -x"]
        inputs = make_inputs(g, 0, os.path.join(folder, "inputs"))
        for opt in ("-O0", "-O2"):
            lines.append(" ".join(self.compile_cmd(graph_path, opt, os.path.join(folder, "model%s.kiln" % opt))))
        lines.append(" ".join([self.kiln_run, os.path.join(folder, "model-O0.kiln"), "--device=reference",
                               "--output-dir", os.path.join(folder, "reference")] + inputs))
        for opt in ("-O0", "-O2"):
            for device in ["reference"] + self.devices:
                lines.append(" ".join([self.kiln_run, os.path.join(folder, "model%s.kiln" % opt), "--device=" + device,
                                       "--check-against", os.path.join(folder, "reference")] + inputs))
        return "\n".join(lines) + "\n"


# ---- shrinking ------------------------------------------------------------------------------

def candidates(g):
    """Smaller variants of g, most aggressive first."""
    if len(g.outputs) > 1:
        for i in range(len(g.outputs)):
            c = g.copy()
            del c.outputs[i]
            yield remove_dead(c)
    out_names = set(n for n, _ in g.outputs)
    for i in range(len(g.statements)):
        name, expr, typ = g.statements[i]
        # Bypass: uses of the node read one of its operands of the same type instead.
        for operand in sorted(uses(expr)):
            otype = dict((n, t) for n, t in g.inputs)
            otype.update((n, t) for n, _, t in g.statements)
            if name in out_names or otype.get(operand) != typ:
                continue
            c = g.copy()
            pattern = re.compile(r"\b%s\b(?!\.)" % re.escape(name))
            c.statements = [(n, pattern.sub(operand, e), t) for n, e, t in c.statements if n != name]
            yield remove_dead(c)
        # Cut: the node becomes a graph input of its type.
        c = g.copy()
        del c.statements[i]
        c.inputs.append((name, typ))
        dtype = parse_type(typ)[0]
        if dtype in graphgen.INTS:
            c.comments.append("# domain: %s int [-4, 4]" % name)
        yield remove_dead(c)
    for sym, size in g.dims().items():
        if size > 1:
            c = g.copy()
            c.comments = [re.sub(r"\b%s=\d+" % sym, "%s=1" % sym, x) if x.startswith("# dims:") else x
                          for x in c.comments]
            yield c
    # Sizes: every occurrence of the number v inside brackets becomes v - 1 or 1 (types, shape
    # attributes, index ranges alike); the compile and the failure decide whether that stayed valid.
    numbers = sorted(set(int(x) for b in re.findall(r"\[([^\]]*)\]", g.render()) for x in re.findall(r"\b\d+\b", b)
                         if int(x) >= 2), reverse=True)
    for v in numbers:
        for smaller in sorted({1, v - 1}):
            text = re.sub(r"\[([^\]]*)\]", lambda m: "[" + re.sub(r"\b%d\b" % v, str(smaller), m.group(1)) + "]",
                          g.render())
            try:
                yield GraphText(text)
            except ValueError:
                pass


def shrink(harness, g, failure, finite, folder, seed, budget):
    deadline = time.time() + budget
    target = failure.signature()
    best, tries = g, 0
    progress = True
    while progress and time.time() < deadline:
        progress = False
        for c in candidates(best):
            if time.time() > deadline:
                break
            if len(c.render()) >= len(best.render()) and c.dims() == best.dims():
                continue
            tries += 1
            fails, c_finite = harness.check(c, os.path.join(folder, "shrink"), seed)
            # A candidate that no compile accepts fails only at -O0: never the target, unless
            # the target is that (a graph meant to be valid that kilnc refuses).
            if any(f.signature() == target for f in fails) and (c_finite or not finite):
                best = c
                progress = True
                break
    return best, tries


# ---- main -----------------------------------------------------------------------------------

def report_failure(harness, g, failures, finite, folder, seed, shrink_budget, label):
    first = failures[0]
    print("FAIL %s: %s" % (label, "; ".join(str(f) for f in failures)))
    tail = "\n".join("    " + l for l in first.log.strip().splitlines()[-8:])
    print(tail)
    # A timeout costs minutes per try; such a case is kept whole.
    budget = 0 if first.kind.endswith("timeout") else shrink_budget
    minimal, tries = shrink(harness, g, first, finite, folder, seed, budget)
    path = os.path.join(folder, "minimal.graph")
    with open(path, "w") as f:
        f.write(minimal.render())
    with open(os.path.join(folder, "original.graph"), "w") as f:
        f.write(g.render())
    with open(os.path.join(folder, "repro.sh"), "w") as f:
        f.write(harness.repro(path, os.path.join(folder, "repro")))
    print("  shrunk in %d tries to %d statements: %s\n  reproduce: difffuzz.py ... --replay %s  (or sh %s)"
          % (tries, len(minimal.statements), path, path, os.path.join(folder, "repro.sh")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=None, help="graphs to run (seeds S .. S+N-1)")
    ap.add_argument("--time-budget", type=float, default=None,
                    help="seconds to run graphs for (with --count 0: 0 means until interrupted)")
    ap.add_argument("--max-nodes", type=int, default=10)
    ap.add_argument("--shrink-budget", type=float, default=120.0, help="seconds of shrinking per failure")
    ap.add_argument("--regressions", default=None, help="replay DIR/*.graph first")
    ap.add_argument("--replay", nargs="*", default=[], help="graphs to run instead of generated ones")
    ap.add_argument("--drivers", default="", help="comma list: these drivers only (default: %s); the "
                    "reference interpreter always runs" % ",".join(DRIVERS))
    args = ap.parse_args()
    if args.count is None and args.time_budget is None and not args.replay and not args.regressions:
        ap.error("give --count, --time-budget, --replay or --regressions")

    devices, targets, failed, skipped = select_devices(args.kilnc, args.kiln_run, args.drivers)
    for driver in skipped:
        print("skipped driver %s (no device or target; set KILN_REQUIRE_DRIVERS to make this fail)" % driver)
    usable = [t for t in targets if any(d.startswith(t + ":") for d in devices)]
    harness = Harness(args.kilnc, args.kiln_run, devices, usable)
    table = graphgen.list_ops(args.kilnc)
    print("difffuzz: devices reference%s; %d ops in kilnc's table" % ("".join(", " + d for d in devices), len(table)))
    start = time.time()
    passed = 0

    replays = list(args.replay)
    if args.regressions:
        replays = sorted(os.path.join(args.regressions, f) for f in os.listdir(args.regressions)
                         if f.endswith(".graph")) + replays
    for path in replays:
        g = GraphText(open(path).read())
        folder = os.path.join(args.work, "replay", os.path.basename(path)[:-6])
        fails, finite = harness.check(g, folder, 0)
        if fails:
            failed += 1
            print("FAIL %s: %s" % (path, "; ".join(str(f) for f in fails)))
            print("\n".join("    " + l for l in fails[0].log.strip().splitlines()[-8:]))
        else:
            passed += 1
            print("ok %s" % os.path.basename(path), flush=True)

    seed = args.seed
    unbounded = args.count == 0 and args.time_budget == 0
    while args.count is not None or args.time_budget is not None:
        if args.count and seed >= args.seed + args.count:
            break
        if args.time_budget and time.time() - start > args.time_budget:
            break
        if args.count is not None and args.count == 0 and not unbounded and not args.time_budget:
            break
        try:
            g = GraphText(graphgen.Generator(table, seed, max_nodes=args.max_nodes).generate())
        except graphgen.GeneratorError as e:
            print("FAIL generator: %s" % e)
            return 1
        folder = os.path.join(args.work, "cases", "seed-%d" % seed)
        case_start = time.time()
        # The budget bounds the whole run: a graph still running when it ends is abandoned and
        # counted neither way (a failure found before then is still shrunk, without a deadline).
        harness.deadline = start + args.time_budget if args.time_budget else None
        try:
            fails, finite = harness.check(g, folder, seed)
        except BudgetSpent:
            print("seed %d: not finished when the time budget ran out (not counted)" % seed)
            break
        harness.deadline = None
        print("seed %d: %s (%d statements, %.1f s)" % (seed, "FAIL" if fails else "ok", len(g.statements),
                                                       time.time() - case_start), flush=True)
        if fails:
            failed += 1
            report_failure(harness, g, fails, finite, os.path.join(args.work, "failures", "seed-%d" % seed), seed,
                           args.shrink_budget, "seed %d" % seed)
        else:
            passed += 1
            shutil.rmtree(folder, ignore_errors=True)
        seed += 1
    if seed > args.seed:
        print("seeds %d..%d" % (args.seed, seed - 1))
    print("%d passed, %d failed in %.0f s" % (passed, failed, time.time() - start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
