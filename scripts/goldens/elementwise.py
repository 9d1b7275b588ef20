"""Goldens of the elementwise family: f64 inputs, PyTorch's outputs and its
autograd gradients for every unary and binary op (binary with broadcasting,
and with ties for maximum/minimum). Checked by
crates/baracuda-kernels/tests/golden_elementwise.rs.

add_alpha and sub_alpha are torch.add / torch.sub with the GPU rows'
alpha (2.5, -0.75); prelu is F.prelu with b [1, 3] as the 1-D weight of
x's channels (dim 1).

The unary ops after the first eight (UNARY_SPECIAL) also run on special
values (NaN, +-inf, +-0, huge, tiny, their domain edges and kinks), on CUDA
when there is a GPU: the CUDA kernels and their edge cases are what
UnaryPlan matches. Their parameters are the GPU test rows' (tests/gpu/
main.rs), keyed by the row name without `unary_`.

The ternary ops (lerp, addcmul, addcdiv, clamp with tensor bounds, where)
run on three broadcast operands, a [4, 3], b [1, 3], c [4, 1] (where: cond
[4, 1], a [4, 3], b [1, 3]); the gated activations (glu, swiglu, geglu,
reglu) on x [3, 8] split along the last dim, and glu also along dim 0 of
x [4, 3]. Their parameters are the GPU rows' (`ternary_<name>`,
`gated_<name>`).

The logic ops (comparisons, isclose, logical and bitwise ops, shifts, gcd,
lcm; the predicates, logical_not, bitwise_not) run on CUDA when there is a
GPU, in their own dtypes: `logic.<case>.<dtype>.{a,b,out}` (binary, a and
b of one shape [n]) and `logic.<op>.<dtype>.{x,out}` (unary), every tensor
stored as f64 (bool as 0 and 1; every input exact in f64). <case> is a
name of reference::elementwise::binary_logic_cases() (the GPU rows'
`logic_<case>`), <dtype> an ElementKind name. The inputs hold every pair
of the dtype's special values (floats: +-0, NaN, +-inf, the largest
finite value, a subnormal; integers: their limits; shift counts at, past
and below the width) and clustered values (ties and near ties for isclose).
lcm on i32 and i64 leaves out the pairs whose a / gcd * b overflows (C++
leaves it undefined; the reference wraps).

The mixed-dtype binary ops (add, mul, div, add_alpha with alpha 2.5) run
on a [4, 3] of one dtype and b [1, 3] of another, on CUDA when there is a
GPU: `promoted.<op>.<a dtype>_<b dtype>.{a,b,dy,out,da,db}`, out and dy in
torch.result_type(a, b), da and db in their inputs' dtypes, all stored as
f64."""

UNARY = ["relu", "gelu_erf", "gelu_tanh", "silu", "sigmoid", "tanh", "exp", "neg"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "atan2", "hypot", "copysign", "pow",
          "fmod", "remainder", "xlogy", "logaddexp", "logaddexp2", "fmax", "fmin", "xlog1py",
          "heaviside", "div_floor", "div_trunc", "nextafter", "add_alpha", "sub_alpha", "prelu"]
# binary ops without a backward (PyTorch raises): out only, no da / db
BINARY_NO_GRAD = ["heaviside", "nextafter"]
# mixed-dtype binary ops (the GPU rows binary_promoted_<op>) and their
# (a, b) dtype pairs
PROMOTED = ["add", "mul", "div", "add_alpha"]
PROMOTED_PAIRS = [("bf16", "f32"), ("f16", "bf16"), ("f32", "f64"), ("f64", "bf16")]


def unary_special(torch):
    """name -> (function, lo, hi, edges): random inputs in [lo, hi), plus
    the specials and the edges."""
    F = torch.nn.functional
    t = torch
    half = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]
    unit = [1.0, -1.0, 0.999, -0.999, 1.001, -1.001]
    # no negative integers past the specials' (PyTorch's trigamma: see digamma)
    polyg = [1.0, 2.0, -0.5, -1.5, -0.25, 10.0, 9.5, 25.0, 24.5]
    bessel = [9.0, -9.0, 9.5, 20.0, -20.0, 21.0, 40.0, 88.0, 90.0, -90.0, 700.0, 720.0]
    powe = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5]
    return {
        "abs": (t.abs, -5, 5, []), "sign": (t.sign, -5, 5, []), "sgn": (t.sgn, -5, 5, []),
        "reciprocal": (t.reciprocal, 0.05, 5, []), "sqrt": (t.sqrt, 0.01, 10, []),
        "rsqrt": (t.rsqrt, 0.01, 10, []), "square": (t.square, -5, 5, []),
        "exp2": (t.exp2, -5, 5, []), "expm1": (t.expm1, -5, 5, []),
        "log": (t.log, 0.01, 10, []), "log2": (t.log2, 0.01, 10, []),
        "log10": (t.log10, 0.01, 10, []), "log1p": (t.log1p, -0.99, 5, [-1.0, -1.5, -0.999]),
        "sin": (t.sin, -5, 5, []), "cos": (t.cos, -5, 5, []), "tan": (t.tan, -1.5, 1.5, []),
        "asin": (t.asin, -0.999, 0.999, unit), "acos": (t.acos, -0.999, 0.999, unit),
        "atan": (t.atan, -5, 5, []), "sinh": (t.sinh, -5, 5, []), "cosh": (t.cosh, -5, 5, []),
        "asinh": (t.asinh, -5, 5, []), "acosh": (t.acosh, 1.001, 10, [1.0, 0.5, -1.0, 1.001, -2.0]),
        "atanh": (t.atanh, -0.999, 0.999, unit), "erf": (t.erf, -5, 5, []),
        "erfc": (t.erfc, -5, 5, []), "erfinv": (t.erfinv, -0.999, 0.999, unit),
        # no negative integers: PyTorch's trigamma (digamma's gradient) is a
        # large finite value there where the reference has the pole's inf
        "lgamma": (t.lgamma, 0.05, 12, [1.0, 2.0, -0.5, -1.5, -0.25]),
        "digamma": (t.digamma, 0.05, 12, [1.0, 2.0, -0.5, -1.5, -0.25, 1.4616321449683622]),
        "sinc": (t.sinc, -5, 5, [1.0, -1.0, 2.0, 0.125]),
        "logsigmoid": (F.logsigmoid, -5, 5, []), "softsign": (F.softsign, -5, 5, []),
        "mish": (F.mish, -5, 5, []), "hardswish": (F.hardswish, -5, 5, [-3.0, 3.0]),
        "hardsigmoid": (F.hardsigmoid, -5, 5, [-3.0, 3.0]), "relu6": (F.relu6, -5, 5, [6.0]),
        "selu": (F.selu, -5, 5, []), "tanhshrink": (F.tanhshrink, -5, 5, []),
        "floor": (t.floor, -5, 5, half), "ceil": (t.ceil, -5, 5, half),
        "round": (t.round, -5, 5, half), "trunc": (t.trunc, -5, 5, half),
        "frac": (t.frac, -5, 5, half),
        "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), -5, 5, []),
        "elu": (lambda x: F.elu(x, 1.5), -5, 5, []),
        "celu": (lambda x: F.celu(x, 0.75), -5, 5, []),
        "softplus": (lambda x: F.softplus(x, 2.0, 4.0), -5, 5, [2.0, -2.0]),
        "softplus_default": (F.softplus, -5, 5, []),
        "hardtanh": (lambda x: F.hardtanh(x, -1.5, 2.0), -5, 5, [-1.5, 2.0]),
        "clamp": (lambda x: t.clamp(x, -1.0, 2.0), -5, 5, [2.0]),
        "clamp_min": (lambda x: t.clamp(x, min=-0.5), -5, 5, [-0.5]),
        "clamp_max": (lambda x: t.clamp(x, max=0.25), -5, 5, [0.25]),
        "logit": (t.logit, 0.01, 0.99, [1.0, -0.5, 1.5]),
        "logit_eps": (lambda x: t.logit(x, 0.125), 0.01, 0.99, [1.0, -0.5, 1.5, 0.125, 0.875, 0.0625]),
        "softshrink": (lambda x: F.softshrink(x, 0.75), -5, 5, [0.75, -0.75]),
        "hardshrink": (lambda x: F.hardshrink(x, 1.25), -5, 5, [1.25, -1.25]),
        "threshold": (lambda x: F.threshold(x, -1.0, 2.0), -5, 5, []),
        "nan_to_num": (t.nan_to_num, -5, 5, []),
        "nan_to_num_values": (lambda x: t.nan_to_num(x, 1.5, 100.0, -1e6), -5, 5, []),
        "i0": (t.special.i0, -12, 12, bessel), "i0e": (t.special.i0e, -12, 12, bessel),
        "i1": (t.special.i1, -12, 12, bessel), "i1e": (t.special.i1e, -12, 12, bessel),
        **{f"polygamma_{n}": ((lambda n: lambda x: t.polygamma(n, x))(n), 0.25, 30, polyg)
           for n in range(5)},
        "round_decimals": (lambda x: t.round(x, decimals=2), -5, 5,
                           [0.125, 0.375, -0.125, 0.25, 12.5]),
        "round_decimals_neg": (lambda x: t.round(x, decimals=-1), -50, 50, [25.0, 35.0, -25.0, 125.0]),
        # pow with a scalar exponent (PyTorch's dispatch: sqrt, rsqrt, x*x,
        # ...) and a scalar base
        "pow_scalar": (lambda x: t.pow(x, 2.5), 0.2, 4, powe),
        "pow_scalar_sqrt": (lambda x: t.pow(x, 0.5), 0.2, 4, powe),
        "pow_scalar_rsqrt": (lambda x: t.pow(x, -0.5), 0.2, 4, powe),
        "pow_scalar_three_halves": (lambda x: t.pow(x, 1.5), 0.2, 4, powe),
        "pow_scalar_cube": (lambda x: t.pow(x, 3.0), -3, 3, powe),
        "pow_scalar_inv_square": (lambda x: t.pow(x, -2.0), 0.2, 4, powe),
        "pow_scalar_zero": (lambda x: t.pow(x, 0.0), -3, 3, powe),
        "rpow_scalar": (lambda x: t.pow(2.0, x), -5, 5, powe),
        "rpow_scalar_zero": (lambda x: t.pow(0.0, x), 0, 3, powe),
        "rpow_scalar_half": (lambda x: t.pow(0.5, x), -5, 5, powe),
    }


LOGIC_DTYPES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
                "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32", "i64": "int64",
                "bool": "bool"}
FLOATS = ["f64", "f32", "f16", "bf16"]
INTS = ["i8", "u8", "i16", "i32", "i64"]


def logic_binary(torch):
    """case -> (function, dtypes, values): values "compare", "bits",
    "shift" or "divisors" (how logic_values draws a and b)."""
    t = torch
    everything = ["f64", "f16", "bf16", "i8", "u8", "i64", "bool"]
    return {
        "eq": (t.eq, everything, "compare"), "ne": (t.ne, everything, "compare"),
        "lt": (t.lt, everything, "compare"), "le": (t.le, everything, "compare"),
        "gt": (t.gt, everything, "compare"), "ge": (t.ge, everything, "compare"),
        "isclose": (t.isclose, FLOATS, "compare"),
        "logical_and": (t.logical_and, everything, "compare"),
        "logical_or": (t.logical_or, everything, "compare"),
        "logical_xor": (t.logical_xor, everything, "compare"),
        "bitwise_and": (t.bitwise_and, INTS + ["bool"], "bits"),
        "bitwise_or": (t.bitwise_or, INTS + ["bool"], "bits"),
        "bitwise_xor": (t.bitwise_xor, INTS + ["bool"], "bits"),
        "bitwise_left_shift": (t.bitwise_left_shift, INTS, "shift"),
        "bitwise_right_shift": (t.bitwise_right_shift, INTS, "shift"),
        "gcd": (t.gcd, INTS, "divisors"),
        "lcm": (t.lcm, INTS, "divisors"),
        "isclose_loose": (lambda a, b: t.isclose(a, b, rtol=0.05, atol=0.01, equal_nan=True),
                          FLOATS, "compare"),
        "isclose_atol": (lambda a, b: t.isclose(a, b, rtol=0.0, atol=0.125), FLOATS, "compare"),
        "isclose_exact": (lambda a, b: t.isclose(a, b, rtol=0.0, atol=0.0, equal_nan=True),
                          FLOATS, "compare"),
    }


def logic_unary(torch):
    """op -> (function, dtypes)."""
    t = torch
    tests = ["f32", "f16", "bf16", "i32", "bool"]
    return {
        "isnan": (t.isnan, tests), "isinf": (t.isinf, tests), "isfinite": (t.isfinite, tests),
        "isposinf": (t.isposinf, tests), "isneginf": (t.isneginf, tests),
        "signbit": (t.signbit, ["f32", "bf16", "i8", "u8", "i64"]),
        "logical_not": (t.logical_not, tests),
        "bitwise_not": (t.bitwise_not, ["i8", "u8", "i64", "bool"]),
    }


def logic_specials(torch, dtype, values, count=False):
    """The special values of dtype (a torch dtype name) for an input drawn
    as values says (count: a shift's count), all exact in f64."""
    if dtype == "bool":
        return [0, 1]
    if dtype.startswith("float") or dtype.startswith("bfloat"):
        big = torch.finfo(getattr(torch, dtype)).max
        return [0.0, -0.0, float("nan"), float("inf"), float("-inf"), big, -big, 1e-40, 1.0,
                -1.0, 0.5, 1.0078125]
    info = torch.iinfo(getattr(torch, dtype))
    # i64's largest value is no f64: 2^53 stands in
    lo, hi = info.min, min(info.max, 2 ** 53)
    if count and values == "shift":
        w = info.bits
        return [0, 1, 127, 128, 200, 255, w - 1, w, w + 1] if lo == 0 else \
            [0, 1, w - 2, w - 1, w, w + 1, 2 * w, -1, -w, lo]
    if values == "divisors" and info.bits >= 32:
        # no overflow of a / gcd * b in lcm (C++ leaves it undefined)
        return [0, 1, -1, 6, -6, 12, -18, 127, 1000003, -65536]
    base = [lo, hi, 0, 1, lo + 1, hi - 1, 6, 127, 12]
    return base + ([-1, -6, -18] if lo < 0 else [18])


def logic_values(torch, g, dtype, values):
    """a and b of one shape: every pair of the specials, then clustered
    values (a few bases plus small offsets; integers also over their
    range)."""
    sa = logic_specials(torch, dtype, values)
    sb = logic_specials(torch, dtype, values, count=True)
    a = [x for x in sa for _ in sb]
    b = [y for _ in sa for y in sb]
    n = 64
    pick = lambda seq: [seq[i] for i in torch.randint(len(seq), (n,), generator=g).tolist()]
    if dtype.startswith("float") or dtype.startswith("bfloat"):
        bases, offsets = [-2.0, -0.5, 0.0, 0.25, 1.0, 3.0], [0.0, 2 ** -8, -2 ** -8, 2 ** -6, -2 ** -6,
                                                             2 ** -4, -2 ** -4, 0.25, -0.25]
        a += [x + y for x, y in zip(pick(bases), pick(offsets))]
        b += [x + y for x, y in zip(pick(bases), pick(offsets))]
    elif dtype == "bool":
        a += pick([0, 1])
        b += pick([0, 1])
    else:
        small = list(range(-20, 21)) if sa[0] < 0 else list(range(0, 41))
        a += pick(small)
        b += pick(small if values != "shift" else sb)
    t = lambda v: torch.tensor(v, dtype=torch.float64).to(getattr(torch, dtype))
    return t(a), t(b)


SPECIALS = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e300, -1e300, 1e30, -1e30,
            100.0, -100.0, 1e-30, -1e-30, 1e-5, -1e-5, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0,
            6.0, -6.0]


def make(torch):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(2026)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
    fns = {
        "relu": torch.relu, "gelu_erf": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp, "neg": torch.neg,
    }
    out = {}
    for name in UNARY:
        x = (r(67) * 8 - 4).requires_grad_()
        dy = r(67) * 2 - 1
        y = fns[name](x)
        (dx,) = torch.autograd.grad(y, (x,), dy)
        out.update({f"unary.{name}.x": x, f"unary.{name}.dy": dy, f"unary.{name}.y": y, f"unary.{name}.dx": dx})
    bfns = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
            "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2,
            "hypot": torch.hypot, "copysign": torch.copysign, "pow": torch.pow, "fmod": torch.fmod,
            "remainder": torch.remainder, "xlogy": torch.xlogy, "logaddexp": torch.logaddexp,
            "logaddexp2": torch.logaddexp2, "fmax": torch.fmax, "fmin": torch.fmin,
            "xlog1py": torch.special.xlog1py, "heaviside": torch.heaviside,
            "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
            "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
            "nextafter": torch.nextafter,
            "add_alpha": lambda a, b: torch.add(a, b, alpha=2.5),
            "sub_alpha": lambda a, b: torch.sub(a, b, alpha=-0.75),
            # b [1, 3] is the weight of x's 3 channels (dim 1), as F.prelu
            # reshapes its 1-D weight
            "prelu": lambda a, b: F.prelu(a, b.reshape(-1))}
    for name in BINARY:
        # a [4, 3], b [1, 3]: b broadcast over rows; its gradient sums them
        a = r(4, 3) * 4 - 2
        b = r(1, 3) + 0.5
        if name in ("maximum", "minimum", "fmax", "fmin"):
            a = torch.floor(a * 2) / 2
            b = torch.floor(b * 2) / 2
            a[1] = b[0]  # a tie in every column
        if name in ("fmax", "fmin"):
            a[2, 0] = float("nan")  # a NaN operand is ignored
        if name == "pow":
            a = a.abs() + 0.25  # positive bases; b in [0.5, 1.5)
            a[0, 0] = 0.0  # 0^b with b >= 0: the gradient wrt b is 0
        if name in ("xlogy", "xlog1py", "heaviside"):
            a[0, :] = 0.0  # x == 0: 0, and no gradient wrt x (heaviside: b)
        if name == "xlog1py":
            b = b - 1.25  # b in [-0.75, 0.25): log1p of negative and positive b
        if name == "heaviside":
            a[1, 0] = float("nan")  # a NaN a gives 0
        if name == "nextafter":
            a[0, :] = torch.tensor([0.0, -0.0, float("inf")], dtype=a.dtype)
            a[1, :] = b[0]  # a == b gives b
        if name in ("add_alpha", "sub_alpha"):
            a[0, :] = torch.tensor([-0.0, float("inf"), float("nan")], dtype=a.dtype)
        if name == "prelu":
            # x == 0 and -0 take the weight's side; NaN gives NaN and a NaN
            # weight gradient
            a[0, :] = torch.tensor([0.0, -0.0, float("nan")], dtype=a.dtype)
        if name in ("copysign", "fmod", "remainder", "div_floor", "div_trunc"):
            b = b * torch.tensor([[1.0, -1.0, 1.0]], dtype=b.dtype)  # a negative divisor / sign
        a.requires_grad_()
        b.requires_grad_()
        if name in BINARY_NO_GRAD:
            y = bfns[name](a.detach(), b.detach())
            out.update({f"binary.{name}.a": a, f"binary.{name}.b": b, f"binary.{name}.out": y})
            continue
        y = bfns[name](a, b)
        dy = r(4, 3) * 2 - 1
        da, db = torch.autograd.grad(y, (a, b), dy)
        out.update({f"binary.{name}.a": a, f"binary.{name}.b": b, f"binary.{name}.dy": dy,
                    f"binary.{name}.out": y, f"binary.{name}.da": da, f"binary.{name}.db": db})
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    for name, (f, lo, hi, edges) in unary_special(torch).items():
        x0 = torch.cat([torch.tensor(SPECIALS + edges, dtype=torch.float64), r(40) * (hi - lo) + lo])
        x = x0.to(dev).requires_grad_()
        dy = (r(len(x0)) * 2 - 1).to(dev)
        y = f(x)
        (dx,) = torch.autograd.grad(y, (x,), dy)
        out.update({f"unary.{name}.x": x, f"unary.{name}.dy": dy, f"unary.{name}.y": y, f"unary.{name}.dx": dx})
    tfns = {
        "lerp": torch.lerp,
        "addcmul": lambda a, b, c: torch.addcmul(a, b, c, value=0.5),
        "addcdiv": lambda a, b, c: torch.addcdiv(a, b, c, value=-1.5),
        "clamp": lambda a, b, c: torch.clamp(a, min=b, max=c),
    }
    for name, f in tfns.items():
        a = r(4, 3) * 4 - 2
        b = r(1, 3) * 4 - 2
        c = r(4, 1) * 4 - 2
        if name == "lerp":
            # both forms and weights outside [0, 1]
            c = torch.tensor([[-0.75], [0.25], [0.5], [1.5]], dtype=torch.float64)
        if name == "addcdiv":
            c = (r(4, 1) + 0.5) * torch.tensor([[1.0], [-1.0], [1.0], [-1.0]], dtype=torch.float64)
        if name == "clamp":
            # a grid: ties with the bounds, and rows whose min > max
            a = torch.floor(a * 2) / 2
            b = torch.tensor([[-1.0, 0.0, 0.5]], dtype=torch.float64)
            c = torch.tensor([[1.0], [0.5], [-0.5], [0.0]], dtype=torch.float64)
            a[0, 0] = -1.0
            a[1, 2] = 0.5
            a[3, 1] = float("nan")
        a.requires_grad_()
        b.requires_grad_()
        c.requires_grad_()
        y = f(a, b, c)
        dy = r(4, 3) * 2 - 1
        da, db, dc = torch.autograd.grad(y, (a, b, c), dy)
        out.update({f"ternary.{name}.a": a, f"ternary.{name}.b": b, f"ternary.{name}.c": c,
                    f"ternary.{name}.dy": dy, f"ternary.{name}.out": y, f"ternary.{name}.da": da,
                    f"ternary.{name}.db": db, f"ternary.{name}.dc": dc})
    cond = torch.tensor([[True], [False], [True], [False]])
    a = (r(4, 3) * 4 - 2).requires_grad_()
    b = (r(1, 3) * 4 - 2).requires_grad_()
    y = torch.where(cond, a, b)
    dy = r(4, 3) * 2 - 1
    da, db = torch.autograd.grad(y, (a, b), dy)
    out.update({"ternary.where.cond": cond.to(torch.float64), "ternary.where.a": a,
                "ternary.where.b": b, "ternary.where.dy": dy, "ternary.where.out": y,
                "ternary.where.da": da, "ternary.where.db": db})
    gfns = {
        "glu": lambda x: F.glu(x, -1),
        "swiglu": lambda x: F.silu(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1],
        "geglu_erf": lambda x: F.gelu(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1],
        "geglu_tanh": lambda x: F.gelu(x.chunk(2, -1)[0], approximate="tanh") * x.chunk(2, -1)[1],
        "reglu": lambda x: F.relu(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1],
        "glu_dim0": lambda x: F.glu(x, 0),
    }
    for name, f in gfns.items():
        x = (r(4, 3) if name == "glu_dim0" else r(3, 8)) * 8 - 4
        x = x.requires_grad_()
        y = f(x)
        dy = r(*y.shape) * 2 - 1
        (dx,) = torch.autograd.grad(y, (x,), dy)
        out.update({f"gated.{name}.x": x, f"gated.{name}.dy": dy, f"gated.{name}.y": y,
                    f"gated.{name}.dx": dx})
    lg = torch.Generator().manual_seed(2027)
    f64 = lambda v: v.to(torch.float64)
    for case, (f, dtypes, values) in logic_binary(torch).items():
        for dt in dtypes:
            a, b = logic_values(torch, lg, LOGIC_DTYPES[dt], values)
            y = f(a.to(dev), b.to(dev))
            out.update({f"logic.{case}.{dt}.a": f64(a), f"logic.{case}.{dt}.b": f64(b),
                        f"logic.{case}.{dt}.out": f64(y)})
    for name, (f, dtypes) in logic_unary(torch).items():
        for dt in dtypes:
            x, _ = logic_values(torch, lg, LOGIC_DTYPES[dt], "compare")
            y = f(x.to(dev))
            out.update({f"logic.{name}.{dt}.x": f64(x), f"logic.{name}.{dt}.out": f64(y)})
    # Mixed dtypes (PromotedBinaryPlan): PyTorch promotes a and b to
    # torch.result_type(a, b) inside the op; autograd sums each gradient in
    # that dtype over the broadcast axes and casts it to its input's dtype.
    # promoted.<op>.<a dtype>_<b dtype>.{a,b,dy,out,da,db}, every tensor
    # stored as f64 (the inputs exact in their dtypes).
    pdt = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}
    for name in PROMOTED:
        for adt, bdt in PROMOTED_PAIRS:
            a = (r(4, 3) * 4 - 2).to(pdt[adt])
            b = (r(1, 3) + 0.5).to(pdt[bdt])
            a[0, 0] = float("inf") if name != "div" else 0.0
            a = a.to(dev).requires_grad_()
            b = b.to(dev).requires_grad_()
            y = bfns[name](a, b)
            dy = (r(4, 3) * 2 - 1).to(y.dtype).to(dev)
            da, db = torch.autograd.grad(y, (a, b), dy)
            assert y.dtype == torch.result_type(a, b) and da.dtype == a.dtype and db.dtype == b.dtype
            k = f"promoted.{name}.{adt}_{bdt}"
            out.update({f"{k}.a": f64(a), f"{k}.b": f64(b), f"{k}.dy": f64(dy),
                        f"{k}.out": f64(y), f"{k}.da": f64(da), f"{k}.db": f64(db)})
    return out
