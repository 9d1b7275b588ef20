"""PyTorch baselines of the conv family, from bench/cases/conv.json (which
crates/baracuda-bench/src/conv.rs reads too), with
torch.backends.cudnn.benchmark = True and TF32 off for the IEEE f32 cases.
Each pass's fn is a list of callables, one per buffer set (rotation() in
bench/torch_baseline.py, which times them)."""
from . import caselist
from .caselist import Op

SPATIAL = ("bf16", "f16", "f32")
LAYOUTS = ("channels_first", "channels_last")
SETTINGS = {}
OPS = {
    "conv": Op(("fw", "bw_data", "dw"), SPATIAL,
               {"layout": str, "batch": int, "c_in": int, "c_out": int, "input": [int], "filter": int,
                "stride": int, "padding": int, "groups": int}),
    "max_pool2d": Op(("fw", "bw"), SPATIAL,
                     {"layout": str, "batch": int, "channels": int, "input": [int], "window": int, "stride": int,
                      "padding": int}),
    "adaptive_avg_pool2d": Op(("fw", "bw"), SPATIAL,
                              {"layout": str, "batch": int, "channels": int, "input": [int], "output": [int]}),
}


def _check(case, ok, why):
    if not ok:
        raise caselist.CaseError(f"conv case {case['name']!r}: {why}")


def _prod(v):
    out = 1
    for x in v:
        out *= x
    return out


def _dims(case):
    """Logical [n, c, spatial...] shapes (x, w or None, y), y by PyTorch's
    output formula (floor((in + 2 pad - k) / stride) + 1)."""
    op, inp = case["op"], case["input"]
    _check(case, case["layout"] in LAYOUTS, f"unknown layout {case['layout']!r}")
    if op == "conv":
        nd, k, s, p, groups = len(inp), case["filter"], case["stride"], case["padding"], case["groups"]
        _check(case, 1 <= nd <= 3, f"spatial rank {nd} (takes 1, 2, 3)")
        _check(case, case["layout"] == "channels_first" or nd >= 2,
               "torch has no channels-last memory format for 1-D tensors")
        _check(case, groups >= 1 and case["c_in"] % groups == 0 and case["c_out"] % groups == 0,
               "groups must divide c_in and c_out")
        out = [(i + 2 * p - k) // s + 1 for i in inp]
        x = [case["batch"], case["c_in"]] + inp
        w = [case["c_out"], case["c_in"] // groups] + [k] * nd
        y = [case["batch"], case["c_out"]] + out
    else:
        _check(case, len(inp) == 2, "2-D pooling takes a 2-D input")
        if op == "max_pool2d":
            k, s, p = case["window"], case["stride"], case["padding"]
            out = [(i + 2 * p - k) // s + 1 for i in inp]
        else:
            out = case["output"]
            _check(case, len(out) == 2, "2-D pooling gives a 2-D output")
        x, w, y = [case["batch"], case["channels"]] + inp, None, [case["batch"], case["channels"]] + out
    _check(case, all(v >= 1 for v in x + y + (w or [])), f"empty tensor: x {x} w {w} y {y}")
    return x, w, y


def rows(case):
    x, w, y = _dims(case)
    size = caselist.SIZE[case["dtype"]]
    if case["op"] == "conv":
        k = case["filter"]
        shape = f"x{x} w{w} s{case['stride']} p{case['padding']}"
        metric = dict(flops=2 * _prod(y) * w[1] * k ** len(case["input"]),
                      rotation_bytes=(_prod(x) + _prod(w) + _prod(y)) * size)
    else:
        # Each pass touches an x-sized and a y-sized tensor (and max pooling
        # the i64 indices).
        index_bytes = _prod(y) * 8 if case["op"] == "max_pool2d" else 0
        bytes_ = (_prod(x) + _prod(y)) * size + index_bytes
        shape = f"x{x} y{y}"
        metric = dict(bytes=bytes_, rotation_bytes=bytes_)
    return [caselist.row(case, p, shape, **metric) for p in case["passes"]]


def cases(torch, settings, cases):
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    for case in cases:
        by_pass = {r["pass"]: r for r in rows(case)}
        build = {"conv": _conv, "max_pool2d": _max_pool, "adaptive_avg_pool2d": _adaptive_pool}[case["op"]]
        for pass_, fns in build(torch, case, by_pass):
            if pass_ in by_pass:
                yield by_pass[pass_], fns


def _randn(torch, case, shape):
    """A random tensor of case's dtype in its layout."""
    t = torch.randn(*shape, device="cuda", dtype=caselist.torch_dtype(torch, case["dtype"]))
    if case["layout"] == "channels_last":
        t = t.to(memory_format=torch.channels_last if len(shape) == 4 else torch.channels_last_3d)
    return t


def _same_shape(case, got, want):
    _check(case, list(got.shape) == want, f"torch computes {list(got.shape)}, the case list {want}")


def _conv(torch, case, by_pass):
    """The three passes; each gets one callable per buffer set (rotation(),
    as in conv.rs)."""
    from torch_baseline import rotation
    F = torch.nn.functional
    xs, ws, ys = _dims(case)
    nd = len(case["input"])
    stride, pad, groups = case["stride"], case["padding"], case["groups"]
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]

    def make():
        return _randn(torch, case, xs), _randn(torch, case, ws)

    x, w = make()
    y = conv(x, w, stride=stride, padding=pad, groups=groups)
    _same_shape(case, y, ys)
    sets = rotation(torch, next(iter(by_pass.values()))["rotation_bytes"])
    xws = [(x, w)] + [make() for _ in range(sets - 1)]
    dys = [torch.randn_like(y) for _ in range(sets)]

    # torch.ops.aten.convolution_backward runs the same cuDNN backward
    # kernels autograd uses.
    def bw(dy, x, w, mask):
        return lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [stride] * nd, [pad] * nd, [1] * nd,
                                                           False, [0] * nd, groups, mask)

    yield "fw", [(lambda x=x, w=w: conv(x, w, stride=stride, padding=pad, groups=groups)) for x, w in xws]
    yield "bw_data", [bw(dy, x, w, [True, False, False]) for (x, w), dy in zip(xws, dys)]
    yield "dw", [bw(dy, x, w, [False, True, False]) for (x, w), dy in zip(xws, dys)]


def _max_pool(torch, case, by_pass):
    from torch_baseline import rotation
    F = torch.nn.functional
    xs, _, ys = _dims(case)
    k, s, p = case["window"], case["stride"], case["padding"]
    x = _randn(torch, case, xs)
    y, _ = F.max_pool2d(x, k, s, p, return_indices=True)
    _same_shape(case, y, ys)
    sets = rotation(torch, next(iter(by_pass.values()))["rotation_bytes"])
    xs_ = [x] + [torch.randn_like(x) for _ in range(sets - 1)]
    got = [F.max_pool2d(v, k, s, p, return_indices=True) for v in xs_]
    dys = [torch.randn_like(y) for _ in range(sets)]
    yield "fw", [(lambda v=v: F.max_pool2d(v, k, s, p, return_indices=True)) for v in xs_]
    yield "bw", [(lambda v=v, dy=dy, i=i: torch.ops.aten.max_pool2d_with_indices_backward(
        dy, v, [k, k], [s, s], [p, p], [1, 1], False, i)) for v, dy, (_, i) in zip(xs_, dys, got)]


def _adaptive_pool(torch, case, by_pass):
    from torch_baseline import rotation
    F = torch.nn.functional
    xs, _, ys = _dims(case)
    out = case["output"]
    x = _randn(torch, case, xs)
    y = F.adaptive_avg_pool2d(x, out)
    _same_shape(case, y, ys)
    sets = rotation(torch, next(iter(by_pass.values()))["rotation_bytes"])
    xs_ = [x] + [torch.randn_like(x) for _ in range(sets - 1)]
    dys = [torch.randn_like(y) for _ in range(sets)]
    yield "fw", [(lambda v=v: F.adaptive_avg_pool2d(v, out)) for v in xs_]
    yield "bw", [(lambda v=v, dy=dy: torch.ops.aten._adaptive_avg_pool2d_backward(dy, v)) for v, dy in zip(xs_, dys)]
