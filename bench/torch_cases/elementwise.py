"""PyTorch baselines of the elementwise family, from bench/cases/
elementwise.json (which crates/baracuda-bench/src/elementwise.rs reads too):
unary and binary ops on contiguous tensors, their backward passes, casts
between dtypes (`x.to(to)`), the binary logic ops (comparisons, logical and
bitwise ops; with `cols`, b a row [1, cols] broadcast over a
[len / cols, cols]), and the device-to-device copy ceiling. The
unary ops of COMPILED are also timed as torch.compile of the same function
(compile_ms).

Every case, the copy included, rotates over the file's `placements` buffer
sets: its inputs are that many separate allocations of random values, and
calls rotate through them (each pass's fn is a list of one callable per
set, which torch_baseline.time_ms calls in turn, as baracuda-bench's
time_rotating_ms does). The ops are called in their functional forms, as
models call them; outputs come from the caching allocator (inside the
timed CUDA graph, from the graph's pool). A run through the out= forms
measured several ops slower than the functional forms had in the run
before (H200, bf16 div 0.409 ms against 0.366, silu and sigmoid 6%), so
the baseline stays PyTorch as it is used. Why rotate: where the allocator
places a memory-bound kernel's buffers moves its time by more than the
0.1% the elementwise table is asked to resolve. On an H200 the bf16 add
of 2^28 elements on three separate allocations of a, b, y took 0.3798 /
0.3800 / 0.3779 ms with torch.add and 0.3698 / 0.3693 / 0.3691 ms with
ours (docs/perf-notes/experiments/binary_hints.cu measures the spread), so each
side's time is the average over the placements rather than one draw.

cases() is a generator, in file order: a case's sets are made when it
comes up and dropped when the next case's are, so no more than two cases'
sets are alive at once (the largest, f32 mul backward of 2^28 elements, is
5 tensors of 1 GiB per set, 15 GiB with 3 placements)."""
import math

from . import caselist
from .caselist import Op

FLOATS = ("bf16", "f16", "f32", "f64")

# op -> (forward, backward or None), each a function of torch that returns
# what PyTorch runs, so that the table is known without importing torch.
# Backward passes as autograd runs them: the aten *_backward kernels.
UNARY = {
    "relu": (lambda torch: torch.relu, None),
    "gelu_erf": (lambda torch: torch.nn.functional.gelu, None),
    "gelu_tanh": (lambda torch: lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
                  lambda torch: lambda x, dy: torch.ops.aten.gelu_backward(dy, x, approximate="tanh")),
    "silu": (lambda torch: torch.nn.functional.silu,
             lambda torch: lambda x, dy: torch.ops.aten.silu_backward(dy, x)),
    "sigmoid": (lambda torch: torch.sigmoid, None),
    "tanh": (lambda torch: torch.tanh, None),
    "exp": (lambda torch: torch.exp, None),
    "neg": (lambda torch: torch.neg, None),
}
# The unary ops timed eagerly and as torch.compile of the same function
# (compile_ms): forward as PyTorch's function; backward as autograd runs
# it, the aten *_backward kernel where there is one, else the formula of
# derivatives.yaml written in x (its `result` recomputed from x).
COMPILED = {
    "sqrt": (lambda torch: torch.sqrt, lambda torch: lambda x, dy: dy / (2 * torch.sqrt(x))),
    "abs": (lambda torch: torch.abs, lambda torch: lambda x, dy: dy * torch.sgn(x)),
    "log": (lambda torch: torch.log, lambda torch: lambda x, dy: dy.div(x)),
    "sin": (lambda torch: torch.sin, lambda torch: lambda x, dy: dy * torch.cos(x)),
    "erfinv": (lambda torch: torch.erfinv,
               lambda torch: lambda x, dy: 0.5 * 1.7724538509055159 * torch.exp(torch.erfinv(x).pow(2)) * dy),
    "lgamma": (lambda torch: torch.lgamma, lambda torch: lambda x, dy: dy * torch.digamma(x)),
    "softplus": (lambda torch: torch.nn.functional.softplus,
                 lambda torch: lambda x, dy: torch.ops.aten.softplus_backward(dy, x, 1.0, 20.0)),
    "mish": (lambda torch: torch.nn.functional.mish,
             lambda torch: lambda x, dy: torch.ops.aten.mish_backward(dy, x)),
}
UNARY.update(COMPILED)
# Where a unary op's inputs are drawn from (the default [-4, 4)): its
# domain, as reference::unary_domain on the Rust side.
DOMAIN = {"sqrt": (0.01, 10), "log": (0.01, 10), "erfinv": (-0.999, 0.999), "lgamma": (0.05, 12)}
BINARY = {
    "add": (lambda torch: torch.add, None),
    "sub": (lambda torch: torch.sub, None),
    # mul backward: da = dy * b, db = dy * a (two kernels in autograd)
    "mul": (lambda torch: torch.mul, lambda torch: lambda a, b, dy: (dy * b, dy * a)),
    "div": (lambda torch: torch.div, None),
    "maximum": (lambda torch: torch.maximum, None),
    "minimum": (lambda torch: torch.minimum, None),
    "atan2": (lambda torch: torch.atan2, None),
    "hypot": (lambda torch: torch.hypot, None),
    "copysign": (lambda torch: torch.copysign, None),
    "pow": (lambda torch: torch.pow, None),
    "fmod": (lambda torch: torch.fmod, None),
    "remainder": (lambda torch: torch.remainder, None),
    "xlogy": (lambda torch: torch.xlogy, None),
    "logaddexp": (lambda torch: torch.logaddexp, None),
    "logaddexp2": (lambda torch: torch.logaddexp2, None),
    "fmax": (lambda torch: torch.fmax, None),
    "fmin": (lambda torch: torch.fmin, None),
}
# The binary logic ops (forward only), by PyTorch's function name: output
# bool, or the input dtype for the bitwise and integer ops (BITS).
LOGIC = ("eq", "ne", "lt", "le", "gt", "ge", "isclose", "logical_and", "logical_or", "logical_xor",
         "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
         "gcd", "lcm")
BITS = LOGIC[LOGIC.index("bitwise_and"):]
# Ternary ops and where: forward as PyTorch's function; backward as the
# formulas of derivatives.yaml autograd runs (addcmul's da is dy itself).
# Both timed eagerly and as torch.compile of the same function.
TERNARY = {
    "lerp": (lambda torch: torch.lerp,
             lambda torch: lambda a, b, c, dy: (dy * (1 - c), dy * c, dy * (b - a))),
    "addcmul": (lambda torch: torch.addcmul, lambda torch: lambda a, b, c, dy: (dy, dy * c, dy * b)),
    "addcdiv": (lambda torch: torch.addcdiv,
                lambda torch: lambda a, b, c, dy: (dy, dy / c, -dy * b / (c * c))),
    "clamp": (lambda torch: lambda a, b, c: torch.clamp(a, b, c),
              lambda torch: lambda a, b, c, dy: (torch.where((a >= b) & (a <= c), dy, 0),
                                                 torch.where((a < b) & (b < c), dy, 0),
                                                 torch.where((a > c) | (c < b), dy, 0))),
    "where": (lambda torch: torch.where,
              lambda torch: lambda k, dy: (torch.where(k, dy, 0), torch.where(k, 0, dy))),
}


def _gated(act, glu=False):
    """Forward and backward of a gated op of x's halves a, b along the last
    dim: act(a) * b (glu: a * sigmoid(b)), as a model writes it; the
    backward as autograd runs it (the activation's aten backward at dy * b,
    and dy * act(a)), the halves of dx concatenated."""
    def fw(torch):
        F = torch.nn.functional
        if glu:
            return lambda x: F.glu(x, -1)
        f = act(torch)
        return lambda x: (lambda a, b: f(a) * b)(*x.chunk(2, -1))

    def bw(torch):
        if glu:
            return lambda x, dy: torch.ops.aten.glu_backward(dy, x, -1)
        f, df = act(torch), act_bw[act](torch)
        return lambda x, dy: (lambda a, b: torch.cat([df(dy * b, a), dy * f(a)], -1))(*x.chunk(2, -1))
    return fw, bw


def _silu(torch):
    return torch.nn.functional.silu


def _gelu(torch):
    return torch.nn.functional.gelu


def _gelu_tanh(torch):
    return lambda x: torch.nn.functional.gelu(x, approximate="tanh")


def _relu(torch):
    return torch.relu


act_bw = {
    _silu: lambda torch: lambda dy, x: torch.ops.aten.silu_backward(dy, x),
    _gelu: lambda torch: lambda dy, x: torch.ops.aten.gelu_backward(dy, x),
    _gelu_tanh: lambda torch: lambda dy, x: torch.ops.aten.gelu_backward(dy, x, approximate="tanh"),
    _relu: lambda torch: lambda dy, x: torch.ops.aten.threshold_backward(dy, torch.relu(x), 0),
}
GATED = {
    "glu": _gated(None, glu=True),
    "swiglu": _gated(_silu),
    "geglu_erf": _gated(_gelu),
    "geglu_tanh": _gated(_gelu_tanh),
    "reglu": _gated(_relu),
}
# The last dim of a gated case's x: [len / GATED_WIDTH, GATED_WIDTH].
GATED_WIDTH = 8192
SETTINGS = {"placements": int}
OPS = {"copy": Op(("fw",), FLOATS, {"len": int}),
       "fill": Op(("fw",), FLOATS, {"len": int}),
       "cast": Op(("fw",), ("bf16", "f32"), {"len": int, "to": str})}
OPS.update({op: Op(("fw", "bw") if bw else ("fw",), FLOATS, {"len": int})
            for op, (_, bw) in {**UNARY, **BINARY}.items()})
OPS.update({op: Op(("fw", "bw"), FLOATS, {"len": int}) for op in {**TERNARY, **GATED}})
# add of a (dtype) and b (b_dtype) of different float dtypes, the output in
# torch.result_type(a, b): PromotedBinaryPlan on the Rust side.
OPS["add_promoted"] = Op(("fw",), FLOATS, {"len": int, "b_dtype": str})


def _result_dtype(a, b):
    """torch.result_type of two different float dtypes, by name."""
    order = {"f16": 0, "bf16": 0, "f32": 1, "f64": 2}
    if order[a] == order[b]:
        return "f32"
    return a if order[a] > order[b] else b
OPS.update({op: Op(("fw",), ("i32",) if op in BITS else FLOATS if op == "isclose" else FLOATS + ("i32",),
                   {"len": int}, {"cols": 0})
            for op in LOGIC})


def _tensors(op, pass_):
    """Tensors of len elements a pass reads or writes."""
    if op == "copy":
        return 2
    if op == "fill":
        return 1
    if op in UNARY:
        return 2 if pass_ == "fw" else 3
    if op == "where":
        return 3
    if op in TERNARY:
        return 4 if pass_ == "fw" else 7
    return 3 if pass_ == "fw" else 5


def rows(case):
    n, size = case["len"], caselist.SIZE[case["dtype"]]
    if case["op"] in LOGIC:
        cols = case["cols"]
        if cols and n % cols:
            raise caselist.CaseError(f"elementwise case {case['name']!r}: cols {cols} does not divide len {n}")
        shape = f"[{n // cols}, {cols}] x [1, {cols}]" if cols else f"[{n}]"
        out = size if case["op"] in BITS else 1
        return [caselist.row(case, p, shape, bytes=(n + (cols or n)) * size + n * out)
                for p in case["passes"]]
    if case["op"] == "add_promoted":
        b_dt = case["b_dtype"]
        moved = n * (size + caselist.SIZE[b_dt] + caselist.SIZE[_result_dtype(case["dtype"], b_dt)])
        return [caselist.row(case, p, f"[{n}]", bytes=moved) for p in case["passes"]]
    if case["op"] == "cast":
        moved = n * (size + caselist.SIZE[case["to"]])
        return [caselist.row(case, p, f"[{n}]", bytes=moved) for p in case["passes"]]
    if case["op"] in GATED:
        return [caselist.row(case, p, f"[{n}]", bytes=(3 if p == "fw" else 5) * n // 2 * size)
                for p in case["passes"]]
    cond = n if case["op"] == "where" else 0
    return [caselist.row(case, p, f"[{n}]", bytes=_tensors(case["op"], p) * n * size + cond)
            for p in case["passes"]]


def cases(torch, settings, cases):
    dev = "cuda"
    placements = settings["placements"]
    g = torch.Generator(device=dev).manual_seed(0)

    def rand(n, lo, hi, dtype):
        """placements tensors of n uniform values in [lo, hi), each its own
        allocation."""
        return [(torch.rand(n, device=dev, generator=g) * (hi - lo) + lo).to(dtype) for _ in range(placements)]

    for case in cases:
        op, n, dtype = case["op"], case["len"], caselist.torch_dtype(torch, case["dtype"])
        by_pass = {r["pass"]: r for r in rows(case)}
        if op == "copy":
            xs = rand(n, -4, 4, dtype)
            ys = [torch.empty_like(x) for x in xs]
            yield by_pass["fw"], [(lambda x=x, y=y: y.copy_(x)) for x, y in zip(xs, ys)]
            del xs, ys
        elif op == "fill":
            ys = [torch.empty(n, device=dev, dtype=dtype) for _ in range(placements)]
            yield by_pass["fw"], [(lambda y=y: y.fill_(1.5)) for y in ys]
            del ys
        elif op == "add_promoted":
            b_dtype = caselist.torch_dtype(torch, case["b_dtype"])
            as_, bs = rand(n, -2, 2, dtype), rand(n, 0.5, 2, b_dtype)
            c = torch.compile(torch.add, dynamic=False)
            yield (by_pass["fw"], [(lambda a=a, b=b: torch.add(a, b)) for a, b in zip(as_, bs)],
                   [(lambda a=a, b=b, c=c: c(a, b)) for a, b in zip(as_, bs)])
            del as_, bs
        elif op == "cast":
            to = caselist.torch_dtype(torch, case["to"])
            xs = rand(n, -4, 4, dtype)
            yield by_pass["fw"], [(lambda x=x: x.to(to)) for x in xs]
            del xs
        elif op in UNARY:
            fw, bw = UNARY[op]
            xs = rand(n, *DOMAIN.get(op, (-4, 4)), dtype)
            if "fw" in by_pass:
                f = fw(torch)
                eager = [(lambda x=x, f=f: f(x)) for x in xs]
                if op in COMPILED:
                    c = torch.compile(f, dynamic=False)
                    yield by_pass["fw"], eager, [(lambda x=x, c=c: c(x)) for x in xs]
                else:
                    yield by_pass["fw"], eager
            if "bw" in by_pass:
                b = bw(torch)
                dys = rand(n, -1, 1, dtype)
                eager = [(lambda x=x, dy=dy, b=b: b(x, dy)) for x, dy in zip(xs, dys)]
                if op in COMPILED:
                    c = torch.compile(b, dynamic=False)
                    yield by_pass["bw"], eager, [(lambda x=x, dy=dy, c=c: c(x, dy)) for x, dy in zip(xs, dys)]
                else:
                    yield by_pass["bw"], eager
                del dys
            del xs
        elif op in TERNARY or op in GATED:
            yield from _compiled_case(torch, case, by_pass, rand, placements, dev)
        elif op in LOGIC:
            cols = case["cols"]
            shapes = ((n // cols, cols), (1, cols)) if cols else ((n,), (n,))
            if dtype.is_floating_point:
                make = lambda shape: rand(math.prod(shape), -2, 2, dtype)
            else:
                make = lambda shape: [torch.randint(-2 ** 31, 2 ** 31, (math.prod(shape),), device=dev,
                                                    generator=g, dtype=dtype) for _ in range(placements)]
            as_ = [a.view(shapes[0]) for a in make(shapes[0])]
            bs = [b.view(shapes[1]) for b in make(shapes[1])]
            f = getattr(torch, op)
            yield by_pass["fw"], [(lambda a=a, b=b, f=f: f(a, b)) for a, b in zip(as_, bs)]
            del as_, bs
        else:
            fw, bw = BINARY[op]
            as_, bs = rand(n, -2, 2, dtype), rand(n, 0.5, 2, dtype)
            if "fw" in by_pass:
                f = fw(torch)
                yield by_pass["fw"], [(lambda a=a, b=b, f=f: f(a, b)) for a, b in zip(as_, bs)]
            if "bw" in by_pass:
                b_ = bw(torch)
                dys = rand(n, -1, 1, dtype)
                yield by_pass["bw"], [(lambda a=a, b=b, dy=dy, f=b_: f(a, b, dy)) for a, b, dy in zip(as_, bs, dys)]
                del dys
            del as_, bs


def _compiled_case(torch, case, by_pass, rand, placements, dev):
    """A ternary, where or gated case: each pass timed eagerly and as
    torch.compile of the same function."""
    op, n, dtype = case["op"], case["len"], caselist.torch_dtype(torch, case["dtype"])
    if op in GATED:
        fw, bw = GATED[op]
        ins = [[x.view(n // GATED_WIDTH, GATED_WIDTH)] for x in rand(n, -4, 4, dtype)]
        dys = [[dy.view(n // GATED_WIDTH, GATED_WIDTH // 2)] for dy in rand(n // 2, -1, 1, dtype)]
    elif op == "where":
        fw, bw = TERNARY[op]
        g = torch.Generator(device=dev).manual_seed(1)
        conds = [torch.rand(n, device=dev, generator=g) < 0.5 for _ in range(placements)]
        ins = [[k, a, b] for k, a, b in zip(conds, rand(n, -2, 2, dtype), rand(n, -2, 2, dtype))]
        dys = [[dy] for dy in rand(n, -1, 1, dtype)]
    else:
        fw, bw = TERNARY[op]
        ins = [list(t) for t in zip(rand(n, -2, 2, dtype), rand(n, -2, 2, dtype), rand(n, 0.5, 2, dtype))]
        dys = [[dy] for dy in rand(n, -1, 1, dtype)]
    for pass_, make, args in (("fw", fw, ins), ("bw", bw, None)):
        if pass_ not in by_pass:
            continue
        f = make(torch)
        if pass_ == "bw":
            # where's backward reads the condition and dy; the others every
            # input and dy
            args = [(i[:1] if op == "where" else i) + d for i, d in zip(ins, dys)]
        c = torch.compile(f, dynamic=False)
        yield (by_pass[pass_], [(lambda a=a, f=f: f(*a)) for a in args],
               [(lambda a=a, c=c: c(*a)) for a in args])
    del ins, dys
