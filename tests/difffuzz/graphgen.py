"""Random valid .graph programs over Kiln's operator table (NNSmith-style), for difffuzz.py.

The op list comes from `kilnc --list-ops=json` (ir/ops.cpp's rows), never from a list of our
own: every op of the table must have a rule in RULES or a reason in EXCLUDED, else generation
stops with an error naming it, so a new op cannot be skipped silently. Each rule also names the
attribute struct it writes, and a row whose struct changed is an error too (the rule is stale).

Values stay where every device must agree with the reference interpreter:
- domains by construction: log/sqrt/rsqrt/div/pow/fmod take add(abs(x), c) or a positive
  constant, exp and sin/cos take clamped operands, reduce_prod reduces few elements, and a value
  whose magnitude bound grows past its dtype's budget is squashed (tanh or clamp);
- discontinuous ops (floor, ceil, round, sign, fmod's dividend, comparisons, casts to integers
  or bool, argmax, topk) only take *exact* operands: values every backend computes bit for bit
  (inputs, constants, iota, and what layout ops, neg/abs/relu/max/min/clamp/where/compare/
  casts make of them). A sum computed in another order or an f16 intermediate kept in f32
  inside a fused kernel (the reference rounds every op's output) would otherwise flip a floor or
  a comparison, which is a precision difference, not a bug;
- gather indices are in range (an input whose `# domain:` says `below [n]`).

Every statement carries its type (`name = expr : type`, checked by kilnc), and the file's
comments say how to make inputs: `# dims: N=3` (symbol sizes, as tests/backends/patterns) and
`# domain: NAME KIND [ARGS]` per input whose values are not the default uniform [-1, 1)
(KIND: below [n] for indices in [0, n), int [lo, hi] for integers, bool). difffuzz.py makes the
.npy inputs from these comments, so a shrunk or committed graph carries what it needs.
"""
import json
import math
import random
import subprocess

FLOATS = ("f32", "f16")
INTS = ("i32", "i64")
# bf16, i8 and u8 are in the table but not generated yet: NumPy has no bf16 (kiln-run reads it
# from f32 files, which the .npy writer would have to round), and i8/u8 wrap after a few adds.
GENERATED_DTYPES = FLOATS + INTS + ("bool",)

# How large |x| may grow before a value is squashed back: f16's range ends at 65504, and its
# 11-bit mantissa makes sums of large values lose what the tolerance (1e-2 of the tensor's
# scale) allows.
MAGNITUDE_BUDGET = {"f32": 1e4, "f16": 60.0, "i32": 1e6, "i64": 1e6}

SYMBOL = "N"  # the one symbolic size; only ever a leading (batch) dim of an input

# Ops of the table the generator does not build, and why. (None today.)
EXCLUDED = {}


def list_ops(kilnc):
    out = subprocess.run([kilnc, "--list-ops=json"], check=True, stdout=subprocess.PIPE).stdout
    return json.loads(out)


class NoOperand(Exception):
    """A rule found no operand it can use (the generator draws another op)."""


class GeneratorError(Exception):
    """The generator's rules disagree with the operator table."""


class Value:
    def __init__(self, name, dtype, shape, mag, exact):
        self.name, self.dtype, self.shape, self.mag, self.exact = name, dtype, list(shape), mag, exact

    def type_text(self):
        return "%s[%s]" % (self.dtype, ", ".join(str(d) for d in self.shape))

    @property
    def rank(self):
        return len(self.shape)


def is_float(dtype):
    return dtype in FLOATS


def fmt_float(x):
    return repr(float(x))


def broadcast(a, b):
    out = []
    for i in range(max(len(a), len(b))):
        da = a[len(a) - 1 - i] if i < len(a) else 1
        db = b[len(b) - 1 - i] if i < len(b) else 1
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            return None
    return out[::-1]


def window(size, k, stride, dil, p0, p1):
    return (size + p0 + p1 - dil * (k - 1) - 1) // stride + 1


class Generator:
    def __init__(self, table, seed, max_nodes=12, symbolic=None):
        self.rng = random.Random(seed)
        self.table = {op["name"]: op for op in table}
        self._check_rules()
        self.max_nodes = max_nodes
        rng = self.rng
        self.symbolic = rng.random() < 0.3 if symbolic is None else symbolic
        self.binding = rng.randint(1, 5)
        self.inputs, self.domains, self.statements, self.pool = [], {}, [], []
        self.count = 0
        self.symbol_bound = False  # an input with N exists (iota may use N only then)

    def _check_rules(self):
        for name, op in self.table.items():
            if name in EXCLUDED:
                continue
            if name not in RULES:
                raise GeneratorError("op '%s' (family %s) of kilnc's table has no rule in tests/difffuzz/"
                                     "graphgen.py RULES and is not in EXCLUDED" % (name, op["family"]))
            attrs = RULES[name][0]
            if attrs != op["attrs"]:
                raise GeneratorError("the rule for '%s' writes %sAttrs, but the table says %sAttrs: update the rule"
                                     % (name, attrs, op["attrs"]))
        for name in list(RULES) + list(EXCLUDED):
            if name not in self.table:
                raise GeneratorError("graphgen.py has a rule for '%s', which kilnc's table lacks" % name)

    # ---- building blocks -----------------------------------------------------------------

    def fresh(self, prefix="v"):
        self.count += 1
        return "%s%d" % (prefix, self.count)

    def dtypes_of(self, op, allowed=GENERATED_DTYPES):
        return [d for d in self.table[op]["dtypes"] if d in allowed]

    def random_shape(self, rank=None, allow_symbol=True, lo=1, hi=6):
        rng = self.rng
        rank = rng.randint(0, 4) if rank is None else rank
        shape = [rng.choice([1, rng.randint(lo, hi), rng.randint(lo, hi)]) for _ in range(rank)]
        if rank and allow_symbol and self.symbolic and rng.random() < 0.5:
            shape[0] = SYMBOL
        return shape

    def new_input(self, dtype, shape, domain=None):
        name = self.fresh("in")
        if domain is None:
            if is_float(dtype):
                domain, mag = None, 1.0
            elif dtype == "bool":
                domain, mag = "bool", 1.0
            else:
                domain, mag = "int [-4, 4]", 4.0
        else:
            mag = 1.0
        v = Value(name, dtype, shape, mag, True)
        if domain:
            self.domains[name] = domain
        self.inputs.append(v)
        if SYMBOL in shape:
            self.symbol_bound = True
        self.pool.append(v)
        return v

    def emit(self, op, operands, attrs, dtype, shape, mag, exact, pool=True):
        name = self.fresh()
        args = [o.name if isinstance(o, Value) else o for o in operands] + attrs
        v = Value(name, dtype, shape, mag, exact)
        self.statements.append("%s = %s(%s) : %s" % (name, op, ", ".join(args), v.type_text()))
        if pool:
            self.pool.append(v)
        return v

    def const(self, dtype, value):
        if dtype == "bool":
            text = "true" if value else "false"
        else:
            text = fmt_float(value) if is_float(dtype) else str(int(value))
        return "const %s[] %s" % (dtype, text)

    def pick(self, pred, new=None):
        """A pool value satisfying pred (favouring recent ones, which makes chains), else new()."""
        cands = [v for v in self.pool if pred(v)]
        if cands and (new is None or self.rng.random() < 0.8):
            recent = cands[-4:]
            return self.rng.choice(recent if self.rng.random() < 0.6 else cands)
        return new() if new else None

    def operand(self, dtypes, exact=False, pred=lambda v: True, rank=None, allow_symbol=True):
        """A value of one of `dtypes` satisfying pred: from the pool, else a new input."""
        dtypes = list(dtypes)
        if not dtypes:
            raise NoOperand()

        def new():
            for _ in range(20):
                v = Value("", self.rng.choice(dtypes), self.random_shape(rank, allow_symbol), 1.0, True)
                if pred(v):
                    return self.new_input(v.dtype, v.shape)
            raise NoOperand()
        return self.pick(lambda v: v.dtype in dtypes and (v.exact or not exact) and pred(v)
                         and (rank is None or v.rank == rank) and (allow_symbol or SYMBOL not in v.shape), new)

    # Guards: each returns a value in a safe domain.
    def positive(self, v, offset=0.5):
        """|v| + offset: at least `offset`; exact when v is and the add rounds the same everywhere
        (integers, and f32, whose add is correctly rounded on every backend)."""
        a = self.emit("abs", [v], [], v.dtype, v.shape, v.mag, v.exact)
        off = offset if is_float(v.dtype) else 1
        return self.emit("add", [a, self.const(v.dtype, off)], [], v.dtype, v.shape, v.mag + off,
                         v.exact and v.dtype != "f16")

    def bounded(self, v, limit):
        if v.mag <= limit:
            return v
        return self.emit("clamp", [v], ["min=%s" % fmt_float(-limit), "max=%s" % fmt_float(limit)], v.dtype,
                         v.shape, limit, v.exact)

    def squash(self, v):
        """Keeps a value's magnitude bound within its dtype's budget."""
        budget = MAGNITUDE_BUDGET.get(v.dtype)
        if budget is None or v.mag <= budget:
            return v
        if is_float(v.dtype) and not v.exact and self.rng.random() < 0.5:
            return self.emit("tanh", [v], [], v.dtype, v.shape, 1.0, False)
        lim = budget / 4
        return self.emit("clamp", [v], ["min=%s" % fmt_float(-lim), "max=%s" % fmt_float(lim)], v.dtype, v.shape,
                         lim, v.exact)

    def broadcast_partner(self, a, dtype=None, exact=False):
        """A second operand for `a` that broadcasts with it: a pool value, a new input of a
        broadcast-compatible shape (dims dropped or set to 1, and a's 1-dims widened), or a
        scalar constant."""
        rng = self.rng
        dtype = dtype or a.dtype
        r = rng.random()
        if r < 0.15:
            return self.const(dtype, rng.choice([0.5, 2.0, -1.5, 3.0]) if is_float(dtype) else rng.randint(-3, 3))
        if r < 0.5:
            v = self.pick(lambda v: v is not a and v.dtype == dtype and (v.exact or not exact)
                          and broadcast(a.shape, v.shape) is not None)
            if v is not None:
                return v
        keep = rng.randint(0, a.rank)
        shape = []
        for d in a.shape[a.rank - keep:]:
            if d == 1 and rng.random() < 0.3:
                shape.append(rng.randint(2, 4))
            elif d != SYMBOL and rng.random() < 0.3:
                shape.append(1)
            else:
                shape.append(d)
        if keep == a.rank and a.rank < 4 and rng.random() < 0.15:
            shape.insert(0, rng.randint(2, 3))
        return self.new_input(dtype, shape)

    # ---- the graph ------------------------------------------------------------------------

    def generate(self):
        ops = [n for n in self.table if n not in EXCLUDED]
        weights = [RULES[n][2] for n in ops]
        attempts = 0
        while len(self.statements) < self.max_nodes and attempts < self.max_nodes * 10:
            attempts += 1
            op = self.rng.choices(ops, weights)[0]
            try:
                v = RULES[op][1](self, op)
            except NoOperand:
                continue
            if v is not None:
                self.squash(v)
        return self.render()

    def outputs(self):
        used = set()
        for s in self.statements:
            rhs = s.split("=", 1)[1]
            for tok in rhs.replace("(", " ").replace(")", " ").replace(",", " ").split():
                used.add(tok)
        computed = [v for v in self.pool if v not in self.inputs]
        outs = [v for v in computed if v.name not in used]
        extra = [v for v in computed if v not in outs]
        self.rng.shuffle(extra)
        outs += extra[: self.rng.randint(0, 1)]
        return outs or computed[-1:]

    def render(self):
        outs = self.outputs()
        lines = ["# difffuzz graph (tests/difffuzz/graphgen.py)"]
        if self.symbol_bound:
            lines.append("# dims: %s=%d" % (SYMBOL, self.binding))
        for name, domain in self.domains.items():
            lines.append("# domain: %s %s" % (name, domain))
        sig_in = ", ".join("%s: %s" % (v.name, v.type_text()) for v in self.inputs)
        sig_out = ", ".join("%s: %s" % (v.name, v.type_text()) for v in outs)
        lines.append("graph fuzz(%s) -> (%s) {" % (sig_in, sig_out))
        lines += ["  " + s for s in self.statements]
        lines.append("}")
        return "\n".join(lines) + "\n"


# ---- rules: op name -> (attribute struct, builder, weight) ---------------------------------
# A builder adds the op (and any guards it needs) and returns the new value, or None when it
# cannot build the op from what it has (the generator then draws another op).

SIN_COS_LIMIT = 10.0
DISCONTINUOUS_UNARY = {"floor", "ceil", "round", "sign"}


def unary_rule(g, op):
    dtypes = g.dtypes_of(op)
    if not dtypes:
        return None
    exact = op in DISCONTINUOUS_UNARY
    x = g.operand(dtypes, exact=exact)
    mag, out_exact = x.mag, x.exact and op in {"neg", "abs", "relu", "floor", "ceil", "round", "sign", "not"}
    attrs = []
    if op in ("log", "sqrt", "rsqrt", "reciprocal"):
        x = g.positive(x)
        mag = {"log": math.log(x.mag) + 1, "sqrt": math.sqrt(x.mag), "rsqrt": 1.5, "reciprocal": 2.0}[op]
    elif op == "exp":
        x = g.bounded(x, 4.0)
        mag = math.exp(x.mag)
    elif op in ("sin", "cos"):
        x = g.bounded(x, SIN_COS_LIMIT)
        mag = 1.0
    elif op in ("tanh", "sigmoid", "erf", "sign", "not"):
        mag = 1.0
    elif op == "atan":
        mag = 1.6
    elif op == "gelu":
        attrs = g.rng.choice([[], ['approximate="tanh"'], ['approximate="none"']])
    elif op in ("floor", "ceil", "round"):
        mag = x.mag + 1
    return g.emit(op, [x], attrs, x.dtype, x.shape, mag, out_exact)


def binary_rule(g, op):
    rng = g.rng
    dtypes = g.dtypes_of(op)
    a = g.operand(dtypes, exact=op == "fmod")
    if op in ("div", "fmod"):
        # A divisor at least 0.5 (1 for integers). fmod jumps where a / b crosses an integer, so its
        # operands must be exact; in f16 |b| + 0.5 is not (the reference rounds it to f16, a
        # fused kernel keeps it in f32), so f16 divides by a constant.
        partner = None
        if not (op == "fmod" and a.dtype == "f16") and rng.random() < 0.7:
            partner = g.broadcast_partner(a, exact=op == "fmod")
        if isinstance(partner, Value):
            b = g.positive(partner)
            bmag, bexact, shape = b.mag, b.exact, broadcast(a.shape, b.shape)
        else:
            b = g.const(a.dtype, rng.choice([0.75, 1.5, 3.0]) if is_float(a.dtype) else rng.randint(1, 4))
            bmag, bexact, shape = 3.0, True, a.shape
        if op == "div":
            mag, exact = (a.mag / 0.5 if is_float(a.dtype) else a.mag), a.exact and bexact and not is_float(a.dtype)
        else:
            mag, exact = min(a.mag, bmag), a.exact and bexact
        return g.emit(op, [a, b], [], a.dtype, shape, mag, exact)
    if op == "pow":
        if is_float(a.dtype):
            base = g.positive(g.bounded(a, 4.0))
            e = g.broadcast_partner(base)
            e = g.bounded(e, 2.0) if isinstance(e, Value) else g.const(a.dtype, rng.choice([2.0, -1.0, 0.5]))
            shape = broadcast(base.shape, e.shape) if isinstance(e, Value) else base.shape
            return g.emit(op, [base, e], [], a.dtype, shape, base.mag ** 2 + 2, False)
        base = g.bounded(a, 3.0)
        e = g.const(a.dtype, rng.randint(-1, 3))
        return g.emit(op, [base, e], [], a.dtype, base.shape, 30.0, True)
    b = g.broadcast_partner(a)
    shape = broadcast(a.shape, b.shape) if isinstance(b, Value) else a.shape
    bmag = b.mag if isinstance(b, Value) else 3.0
    bexact = b.exact if isinstance(b, Value) else True
    mag = {"add": a.mag + bmag, "sub": a.mag + bmag, "mul": a.mag * bmag}.get(op, max(a.mag, bmag))
    # add/sub/mul round once (identically) in f32 and integers, but f16 intermediates differ, and
    # a mul feeding an add may become an fma on a device.
    exact = a.exact and bexact and (op in ("maximum", "minimum") or not is_float(a.dtype))
    return g.emit(op, [a, b], [], a.dtype, shape, mag, exact)


def bitwise_rule(g, op):
    """bitwise_not/and/or/xor and the shifts, on integers: exact, bounded by a power of two."""
    rng = g.rng
    dtypes = g.dtypes_of(op)
    a = g.operand(dtypes, exact=True)
    if op == "bitwise_not":
        return g.emit(op, [a], [], a.dtype, a.shape, a.mag + 1, True)
    if op in ("shift_left", "shift_right"):
        # Amounts from -1 to past the width: out-of-range shifts have defined results too.
        b = g.const(a.dtype, rng.choice([-1, 0, 1, 3, 64 if a.dtype == "i64" else 32]))
        mag = a.mag * 8 if op == "shift_left" else a.mag
        return g.emit(op, [a, b], [], a.dtype, a.shape, mag, True)
    b = g.broadcast_partner(a, exact=True)
    shape = broadcast(a.shape, b.shape) if isinstance(b, Value) else a.shape
    bmag = b.mag if isinstance(b, Value) else 3.0
    return g.emit(op, [a, b], [], a.dtype, shape, 2 * max(a.mag, bmag) + 1, True)


def compare_rule(g, op):
    dtypes = g.dtypes_of(op)
    a = g.operand(dtypes, exact=True)
    b = g.broadcast_partner(a, exact=True)
    shape = broadcast(a.shape, b.shape) if isinstance(b, Value) else a.shape
    return g.emit(op, [a, b], [], "bool", shape, 1.0, True)


def logic_rule(g, op):
    a = g.operand(["bool"])
    b = g.broadcast_partner(a)
    if not isinstance(b, Value):
        b = g.const("bool", 0).replace(" 0", " " + g.rng.choice(["true", "false"]))
        return g.emit(op, [a, b], [], "bool", a.shape, 1.0, True)
    return g.emit(op, [a, b], [], "bool", broadcast(a.shape, b.shape), 1.0, True)


def where_rule(g, op):
    cond = g.operand(["bool"])
    a = g.operand([d for d in GENERATED_DTYPES if d != "bool"] + ["bool"],
                  pred=lambda v: broadcast(v.shape, cond.shape) is not None)
    b = g.broadcast_partner(a)
    shape = broadcast(cond.shape, a.shape)
    if shape is not None and isinstance(b, Value):
        shape = broadcast(shape, b.shape)
    if shape is None:
        return None
    bmag, bexact = (b.mag, b.exact) if isinstance(b, Value) else (3.0, True)
    return g.emit(op, [cond, a, b], [], a.dtype, shape, max(a.mag, bmag), a.exact and bexact)


def cast_rule(g, op):
    rng = g.rng
    to = rng.choice(GENERATED_DTYPES)
    # To an integer or bool a value must be exact (truncation and the nonzero test are
    # discontinuous); to a float anything goes.
    x = g.operand(GENERATED_DTYPES, exact=not is_float(to))
    if not is_float(to) and is_float(x.dtype) and rng.random() < 0.7:
        x = g.emit("mul", [x, g.const(x.dtype, 4.0)], [], x.dtype, x.shape, x.mag * 4, x.exact)
    mag = 1.0 if to == "bool" else x.mag
    exact = x.exact or (x.dtype == to)
    return g.emit(op, [x], ["to=%s" % to], to, x.shape, mag, exact)


def clamp_rule(g, op):
    rng = g.rng
    x = g.operand(g.dtypes_of(op))
    lo, hi = sorted([rng.uniform(-1, 0.5), rng.uniform(-0.5, 1)])
    if not is_float(x.dtype):
        lo, hi = sorted([rng.randint(-3, 0), rng.randint(0, 3)])
    attrs = rng.choice([["min=%s" % lo, "max=%s" % hi], ["min=%s" % lo], ["max=%s" % hi]])
    return g.emit(op, [x], attrs, x.dtype, x.shape, x.mag, x.exact)


def reduce_axes(g, x):
    rng = g.rng
    keepdims = rng.random() < 0.5
    if x.rank == 0 or rng.random() < 0.15:
        return [], list([1] * x.rank if keepdims else []), keepdims, list(range(x.rank))
    axes = sorted(rng.sample(range(x.rank), rng.randint(1, x.rank)))
    shape = [(1 if i in axes else d) for i, d in enumerate(x.shape) if keepdims or i not in axes]
    spelled = [a - x.rank if rng.random() < 0.3 else a for a in axes]
    return ["axes=[%s]" % ", ".join(map(str, spelled))], shape, keepdims, axes


def reduced_count(g, x, axes):
    n = 1
    for a in axes:
        n *= g.binding if x.shape[a] == SYMBOL else x.shape[a]
    return n


def reduce_rule(g, op):
    dtypes = g.dtypes_of(op)
    x = g.operand(dtypes, rank=g.rng.randint(1, 4))
    attrs, shape, keepdims, axes = reduce_axes(g, x)
    if keepdims:
        attrs.append("keepdims=true")
    n = reduced_count(g, x, axes)
    if op in ("reduce_max", "reduce_min"):
        mag = x.mag
    elif op == "reduce_mean":
        mag = x.mag
    elif op == "reduce_prod":
        # Products of many factors overflow or vanish: few elements of magnitude at most 2.
        if n > 8 or any(x.shape[a] == SYMBOL for a in axes):
            return None
        x = g.bounded(x, 2.0)
        mag = x.mag ** n
    else:
        mag = x.mag * max(n, 1) * (g.binding if any(x.shape[a] == SYMBOL for a in axes) else 1)
    exact = x.exact and (op in ("reduce_max", "reduce_min") or not is_float(x.dtype))
    return g.emit(op, [x], attrs, x.dtype, shape, mag, exact)


def argmax_rule(g, op):
    x = g.operand(g.dtypes_of(op), exact=True, rank=g.rng.randint(1, 4))
    axis = g.rng.randrange(x.rank)
    keepdims = g.rng.random() < 0.5
    shape = [(1 if i == axis else d) for i, d in enumerate(x.shape) if keepdims or i != axis]
    attrs = ["axis=%d" % (axis - x.rank if g.rng.random() < 0.3 else axis)] + (["keepdims=true"] if keepdims else [])
    return g.emit(op, [x], attrs, "i64", shape, 10.0, True)


def softmax_rule(g, op):
    x = g.operand(g.dtypes_of(op), rank=g.rng.randint(1, 4))
    axis = g.rng.randrange(x.rank)
    attrs = [] if axis == x.rank - 1 and g.rng.random() < 0.5 else ["axis=%d" % axis]
    mag = 1.0 if op == "softmax" else 2 * x.mag + math.log(100)
    return g.emit(op, [x], attrs, x.dtype, x.shape, mag, False)


def layer_norm_rule(g, op):
    rng = g.rng
    x = g.operand(g.dtypes_of(op), rank=rng.randint(1, 4), allow_symbol=True)
    axis = rng.randrange(x.rank)
    if SYMBOL in x.shape[axis:]:
        axis = x.rank - 1
        if x.shape[axis] == SYMBOL:
            return None
    trailing = x.shape[axis:]
    scale = g.new_input(x.dtype, trailing)
    bias = g.new_input(x.dtype, trailing)
    attrs = [] if axis == x.rank - 1 else ["axis=%d" % axis]
    if rng.random() < 0.4:
        attrs.append("epsilon=%s" % rng.choice(["0.001", "0.1"]))
    # x - mean over a row of nearly equal values, divided by a small deviation, magnifies the
    # rounding of x: normalized rows need spread, which fresh inputs have.
    n = 1
    for d in trailing:
        n *= d
    return g.emit(op, [x, scale, bias], attrs, x.dtype, x.shape, 2 * math.sqrt(n) + 2, False)


def matmul_rule(g, op):
    rng = g.rng
    dtypes = g.dtypes_of(op, FLOATS + INTS)
    a = g.operand(dtypes, pred=lambda v: v.rank >= 1 and v.shape[-1] != SYMBOL)
    k = a.shape[-1]
    if a.rank == 1 or rng.random() < 0.15:
        bshape = [k] if rng.random() < 0.3 else [k, rng.randint(1, 9)]
    else:
        batch = a.shape[:-2]
        # b's batch: a's, a suffix of it, or with 1s that broadcast.
        bbatch = [d if rng.random() < 0.7 else 1 for d in batch[len(batch) - rng.randint(0, len(batch)):]]
        bshape = bbatch + [k, rng.randint(1, 9)]
    b = g.pick(lambda v: v.dtype == a.dtype and v.shape == bshape) or g.new_input(a.dtype, bshape)
    av = a.shape if a.rank > 1 else [1] + a.shape
    bv = b.shape if b.rank > 1 else b.shape + [1]
    batch = broadcast(av[:-2], bv[:-2])
    if batch is None:
        return None
    shape = batch + (av[-2:-1] if a.rank > 1 else []) + (bv[-1:] if b.rank > 1 else [])
    kk = g.binding if k == SYMBOL else k
    return g.emit(op, [a, b], [], a.dtype, shape, a.mag * b.mag * kk, not is_float(a.dtype))


def attention_rule(g, op):
    rng = g.rng
    dtype = rng.choice(g.dtypes_of(op, FLOATS))
    sq, sk, d, dv = rng.randint(1, 9), rng.randint(1, 9), rng.choice([4, 8, 16]), rng.choice([4, 8, 16])
    bshd = rng.random() < 0.3
    if bshd:
        b, h = rng.randint(1, 2), rng.randint(1, 3)
        q, k, v = ([b, sq, h, d], [b, sk, h, d], [b, sk, h, dv])
        out = [b, sq, h, dv]
        mask_full = [b, h, sq, sk]
    else:
        batch = [rng.randint(1, 3) for _ in range(rng.randint(0, 2))]
        q, k, v = (batch + [sq, d], batch + [sk, d], batch + [sk, dv])
        out = batch + [sq, dv]
        mask_full = batch + [sq, sk]
    operands = [g.new_input(dtype, q), g.new_input(dtype, k), g.new_input(dtype, v)]
    causal = rng.random() < 0.3
    if rng.random() < 0.4:
        mshape = [dd if rng.random() < 0.5 else 1 for dd in mask_full][rng.randint(0, 2):]
        operands.append(g.new_input(dtype, mshape))
    attrs = (['layout="bshd"'] if bshd else []) + (["causal=true"] if causal else [])
    if rng.random() < 0.3:
        attrs.append("scale=0.3")
    return g.emit(op, operands, attrs, dtype, out, 3.0, False)


def factor_shape(g, dims):
    """A random reshape target for static dims: the element count refactored."""
    n = 1
    for d in dims:
        n *= d
    out = []
    while n > 1 and len(out) < 3:
        divisors = [f for f in range(2, n + 1) if n % f == 0]
        f = g.rng.choice(divisors)
        out.append(f)
        n //= f
    if n > 1:
        out.append(n)
    if g.rng.random() < 0.3:
        out.insert(g.rng.randint(0, len(out)), 1)
    return out


def reshape_rule(g, op):
    rng = g.rng
    x = g.operand(g.dtypes_of(op))
    lead = [SYMBOL] if x.shape[:1] == [SYMBOL] else []
    if SYMBOL in x.shape[len(lead):]:
        return None
    target = lead + factor_shape(g, x.shape[len(lead):])
    spelled = list(target)
    static = [i for i, d in enumerate(spelled) if d != SYMBOL]
    if static and rng.random() < 0.4:
        spelled[rng.choice(static)] = -1
    return g.emit(op, [x], ["shape=[%s]" % ", ".join(map(str, spelled))], x.dtype, target, x.mag, x.exact)


def transpose_rule(g, op):
    x = g.operand(g.dtypes_of(op), pred=lambda v: v.rank >= 2)
    perm = list(range(x.rank))
    g.rng.shuffle(perm)
    return g.emit(op, [x], ["perm=[%s]" % ", ".join(map(str, perm))], x.dtype, [x.shape[p] for p in perm],
                  x.mag, x.exact)


def broadcast_to_rule(g, op):
    rng = g.rng
    x = g.operand(g.dtypes_of(op), pred=lambda v: v.rank <= 3)
    target = [rng.randint(2, 4) if d == 1 and rng.random() < 0.6 else d for d in x.shape]
    if rng.random() < 0.5:
        target.insert(0, rng.randint(1, 3))
    return g.emit(op, [x], ["shape=[%s]" % ", ".join(map(str, target))], x.dtype, target, x.mag, x.exact)


def slice_rule(g, op):
    rng = g.rng
    x = g.operand(g.dtypes_of(op), pred=lambda v: any(d != SYMBOL and d > 1 for d in v.shape))
    axes = [i for i, d in enumerate(x.shape) if d != SYMBOL and d > 1]
    if not axes:
        return None
    axes = sorted(rng.sample(axes, rng.randint(1, len(axes))))
    starts, ends, steps, shape = [], [], [], list(x.shape)
    for a in axes:
        n = x.shape[a]
        step = rng.choice([1, 1, 1, 2, -1, 3])
        if step > 0:
            s, e = rng.randint(0, n - 1), rng.randint(1, n + 2)
            e = max(e, s + 1)
            length = (min(e, n) - s + step - 1) // step
            s_sp = s - n if rng.random() < 0.2 else s
            e_sp = e
        else:
            s, e = rng.randint(1, n - 1), rng.randint(-1, 0)
            length = (s - e + (-step) - 1) // (-step)
            s_sp = s
            e_sp = -n - 1 if e == -1 else e  # -n-1 clamps to "before the first element"
        starts.append(s_sp)
        ends.append(e_sp)
        steps.append(step)
        shape[a] = length
    attrs = ["starts=[%s]" % ", ".join(map(str, starts)), "ends=[%s]" % ", ".join(map(str, ends)),
             "axes=[%s]" % ", ".join(map(str, axes))]
    if any(s != 1 for s in steps):
        attrs.append("steps=[%s]" % ", ".join(map(str, steps)))
    return g.emit(op, [x], attrs, x.dtype, shape, x.mag, x.exact)


def concat_rule(g, op):
    rng = g.rng
    x = g.operand(g.dtypes_of(op), pred=lambda v: v.rank >= 1 and any(d != SYMBOL for d in v.shape))
    axes = [i for i, d in enumerate(x.shape) if d != SYMBOL]
    if not axes:
        return None
    axis = rng.choice(axes)
    parts, total = [x], x.shape[axis]
    for _ in range(rng.randint(1, 2)):
        shape = list(x.shape)
        shape[axis] = rng.randint(1, 4)
        p = g.pick(lambda v: v.dtype == x.dtype and v.shape == shape and v is not x) or g.new_input(x.dtype, shape)
        parts.append(p)
        total += p.shape[axis]
    rng.shuffle(parts)
    shape = list(x.shape)
    shape[axis] = total
    attrs = ["axis=%d" % (axis - x.rank if rng.random() < 0.3 else axis)]
    return g.emit(op, parts, attrs, x.dtype, shape, max(p.mag for p in parts), all(p.exact for p in parts))


def gather_rule(g, op):
    rng = g.rng
    x = g.operand(g.dtypes_of(op), pred=lambda v: any(d != SYMBOL for d in v.shape))
    axes = [i for i, d in enumerate(x.shape) if d != SYMBOL]
    if not axes:
        return None
    axis = rng.choice(axes)
    n = x.shape[axis]
    ishape = [rng.randint(1, 5) for _ in range(rng.randint(0, 2))]
    # Indices in range only (out-of-range gather is being defined elsewhere); a static axis, so
    # that the range does not depend on a symbol's binding.
    idx = g.new_input(rng.choice(INTS), ishape, domain="below [%d]" % n)
    idx.mag = float(n)
    attrs = [] if axis == 0 and rng.random() < 0.5 else ["axis=%d" % (axis - x.rank if rng.random() < 0.3 else axis)]
    return g.emit(op, [x, idx], attrs, x.dtype, x.shape[:axis] + ishape + x.shape[axis + 1:], x.mag, x.exact)


def iota_rule(g, op):
    rng = g.rng
    dtype = rng.choice(g.dtypes_of(op, FLOATS + INTS))
    shape = g.random_shape(rng.randint(1, 3), allow_symbol=g.symbol_bound)
    axis = rng.randrange(len(shape))
    attrs = ["shape=[%s]" % ", ".join(map(str, shape)), "axis=%d" % axis, "dtype=%s" % dtype]
    return g.emit(op, [], attrs, dtype, shape, 8.0, True)


def topk_rule(g, op):
    rng = g.rng
    x = g.operand(g.dtypes_of(op), exact=True, pred=lambda v: v.rank >= 1 and v.shape[-1] != SYMBOL)
    axes = [i for i, d in enumerate(x.shape) if d != SYMBOL]
    axis = rng.choice(axes)
    k = rng.randint(1, x.shape[axis])
    shape = list(x.shape)
    shape[axis] = k
    attrs = ["k=%d" % k] + ([] if axis == x.rank - 1 else ["axis=%d" % axis])
    if rng.random() < 0.4:
        attrs.append("largest=false")
    return g.emit(op, [x], attrs, "i64", shape, float(x.shape[axis]), True)


def scatter_rule(g, op):
    rng = g.rng
    x = g.operand(g.dtypes_of(op), pred=lambda v: v.rank >= 1 and any(d != SYMBOL for d in v.shape))
    axis = rng.choice([i for i, d in enumerate(x.shape) if d != SYMBOL])
    n = x.shape[axis]
    # Updates as large as the data or smaller off the axis, any length along it.
    shape = [d if d == SYMBOL or rng.random() < 0.6 else rng.randint(1, d) for d in x.shape]
    shape[axis] = rng.randint(1, n + 2)
    reduction = "none" if x.dtype == "bool" else rng.choice(["none", "none", "add", "mul", "max", "min"])
    u = g.pick(lambda v: v.dtype == x.dtype and v.shape == shape and v is not x) or g.new_input(x.dtype, shape)
    if reduction == "mul":
        u = g.bounded(u, 1.0)  # products of updates must not grow past the budget
    # Every index class the op defines: negative (from the end), in range, out of range (dropped).
    idx = g.new_input(rng.choice(INTS), shape, domain="int [%d, %d]" % (-n - 1, n))
    idx.mag = float(n + 1)
    attrs = ([] if axis == 0 and rng.random() < 0.5 else ["axis=%d" % (axis - x.rank if rng.random() < 0.3 else axis)])
    if reduction != "none" or rng.random() < 0.3:
        attrs.append('reduction="%s"' % reduction)
    k = shape[axis]  # updates one element can receive
    mag = {"add": x.mag + k * u.mag, "mul": x.mag}.get(reduction, max(x.mag, u.mag))
    # A float sum or product rounds differently in the reference's double than in f32 kernels.
    exact = x.exact and u.exact and (reduction in ("none", "max", "min") or not is_float(x.dtype))
    return g.emit(op, [x, idx, u], attrs, x.dtype, x.shape, mag, exact)


def image(g, op, dtypes):
    rng = g.rng
    return g.pick(lambda v: v.dtype in dtypes and v.rank == 4 and SYMBOL not in v.shape[1:],
                  lambda: g.new_input(rng.choice(dtypes), [rng.choice([1, 2, SYMBOL if g.symbolic else 1]),
                                                           rng.randint(1, 4), rng.randint(3, 9), rng.randint(3, 9)]))


def conv2d_rule(g, op):
    rng = g.rng
    x = image(g, op, g.dtypes_of(op, FLOATS))
    cl = rng.random() < 0.25
    n, c, h, w = (x.shape[0], x.shape[3], x.shape[1], x.shape[2]) if cl else x.shape
    groups = rng.choice([d for d in (1, 2, c) if c % d == 0])
    cout = groups * rng.randint(1, 3)
    kh, kw = rng.randint(1, min(3, h)), rng.randint(1, min(3, w))
    strides = [rng.randint(1, 2), rng.randint(1, 2)]
    dil = [1, 1] if rng.random() < 0.7 else [rng.randint(1, 2), rng.randint(1, 2)]
    pads = [rng.randint(0, 1) for _ in range(4)]
    oh = window(h, kh, strides[0], dil[0], pads[0], pads[2])
    ow = window(w, kw, strides[1], dil[1], pads[1], pads[3])
    if oh < 1 or ow < 1:
        return None
    wshape = [cout, kh, kw, c // groups] if cl else [cout, c // groups, kh, kw]
    operands = [x, g.new_input(x.dtype, wshape)]
    if rng.random() < 0.5:
        operands.append(g.new_input(x.dtype, [cout]))
    attrs = ["strides=[%d, %d]" % tuple(strides), "pads=[%s]" % ", ".join(map(str, pads)),
             "dilations=[%d, %d]" % tuple(dil), "groups=%d" % groups] + (["channels_last=true"] if cl else [])
    shape = [n, oh, ow, cout] if cl else [n, cout, oh, ow]
    return g.emit(op, operands, attrs, x.dtype, shape, x.mag * (c // groups) * kh * kw + 1, False)


def pool_rule(g, op):
    rng = g.rng
    x = image(g, op, g.dtypes_of(op, FLOATS + INTS if op == "max_pool2d" else FLOATS))
    cl = rng.random() < 0.25
    n, c, h, w = (x.shape[0], x.shape[3], x.shape[1], x.shape[2]) if cl else x.shape
    kh, kw = rng.randint(1, min(3, h)), rng.randint(1, min(3, w))
    strides = [rng.randint(1, 2), rng.randint(1, 2)]
    pads = [rng.randint(0, kh - 1), rng.randint(0, kw - 1), rng.randint(0, kh - 1), rng.randint(0, kw - 1)]
    oh, ow = window(h, kh, strides[0], 1, pads[0], pads[2]), window(w, kw, strides[1], 1, pads[1], pads[3])
    attrs = ["kernel=[%d, %d]" % (kh, kw), "strides=[%d, %d]" % tuple(strides), "pads=[%s]" % ", ".join(map(str, pads))]
    if op == "avg_pool2d" and rng.random() < 0.5:
        attrs.append("count_include_pad=true")
    if cl:
        attrs.append("channels_last=true")
    shape = [n, oh, ow, c] if cl else [n, c, oh, ow]
    exact = x.exact and op == "max_pool2d"
    return g.emit(op, [x], attrs, x.dtype, shape, x.mag, exact)


def global_pool_rule(g, op):
    x = image(g, op, g.dtypes_of(op, FLOATS))
    return g.emit(op, [x], [], x.dtype, [x.shape[0], x.shape[1], 1, 1], x.mag, False)


UNARY_OPS = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "relu", "silu", "erf",
             "sin", "cos", "atan", "floor", "ceil", "round", "sign", "gelu", "not"]
RULES = {}
for _name in UNARY_OPS:
    RULES[_name] = ("Gelu" if _name == "gelu" else "No", unary_rule, 1.0)
for _name in ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "fmod"]:
    RULES[_name] = ("No", binary_rule, 2.0 if _name in ("add", "mul") else 1.0)
for _name in ["bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"]:
    RULES[_name] = ("No", bitwise_rule, 0.4)
for _name in ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]:
    RULES[_name] = ("No", compare_rule, 0.5)
for _name in ["and", "or", "xor"]:
    RULES[_name] = ("No", logic_rule, 0.4)
RULES.update({
    "where": ("No", where_rule, 1.5),
    "cast": ("Cast", cast_rule, 1.5),
    "clamp": ("Clamp", clamp_rule, 0.7),
    "reduce_sum": ("Reduce", reduce_rule, 1.2),
    "reduce_mean": ("Reduce", reduce_rule, 1.0),
    "reduce_max": ("Reduce", reduce_rule, 1.0),
    "reduce_min": ("Reduce", reduce_rule, 0.7),
    "reduce_prod": ("Reduce", reduce_rule, 0.5),
    "argmax": ("ArgMax", argmax_rule, 0.7),
    "softmax": ("Axis", softmax_rule, 1.2),
    "log_softmax": ("Axis", softmax_rule, 0.7),
    "layer_norm": ("LayerNorm", layer_norm_rule, 1.0),
    "matmul": ("No", matmul_rule, 2.0),
    "attention": ("Attention", attention_rule, 0.7),
    "reshape": ("Reshape", reshape_rule, 1.2),
    "transpose": ("Transpose", transpose_rule, 1.2),
    "broadcast_to": ("BroadcastTo", broadcast_to_rule, 0.8),
    "slice": ("Slice", slice_rule, 1.0),
    "concat": ("Axis", concat_rule, 1.0),
    "gather": ("Axis", gather_rule, 0.8),
    "iota": ("Iota", iota_rule, 0.4),
    "topk": ("TopK", topk_rule, 0.6),
    "scatter": ("Scatter", scatter_rule, 0.6),
    "conv2d": ("Conv2d", conv2d_rule, 1.0),
    "max_pool2d": ("Pool2d", pool_rule, 0.6),
    "avg_pool2d": ("Pool2d", pool_rule, 0.6),
    "global_avg_pool2d": ("No", global_pool_rule, 0.4),
})
