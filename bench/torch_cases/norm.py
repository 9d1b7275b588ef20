"""PyTorch baselines of the norm family, from bench/cases/norm.json (which
crates/baracuda-bench/src/norm.rs reads too): F.layer_norm (weight and
bias) and F.rms_norm (weight) over the last dim of a contiguous matrix,
their residual forms (s = x + r; y = norm(s), returning s and y; the
backward through autograd with gradients dy of y and ds of s), and
F.group_norm (weight and bias) of a contiguous [N, C, spatial...] in
`groups` groups, and F.batch_norm in training (weight, bias, running
statistics updated with momentum 0.1) of [N, C, spatial...] in `layout`
(torch.channels_last / channels_last_3d for "channels_last") with the
parameters and running statistics in the dtype or f32 (`params`), eps 1e-5, forward and backward (dx and every parameter gradient, through
autograd), each timed eagerly and as torch.compile of the same forward
(the third element of what cases() yields), and the device-to-device copy
ceiling. Inputs rotate over buffer sets by L2 size, as on the Rust side."""
from . import caselist
from .caselist import Op

FLOATS = ("bf16", "f16", "f32", "f64")
# op -> parameters (weight, bias) it takes
PARAMS = {"layer_norm": 2, "rms_norm": 1, "group_norm": 2, "batch_norm": 2,
          "layer_norm_residual": 2, "rms_norm_residual": 1}
# the residual forms: r read and s written besides x and y, ds read
RESIDUAL = ("layer_norm_residual", "rms_norm_residual")
EPS = 1e-5
SETTINGS = {}
OPS = {"copy": Op(("fw",), FLOATS, {"shape": [int]})}
OPS.update({op: Op(("fw", "bw"), FLOATS, {"shape": [int]}) for op in ("layer_norm", "rms_norm") + RESIDUAL})
OPS["group_norm"] = Op(("fw", "bw"), FLOATS, {"shape": [int], "groups": int})
OPS["batch_norm"] = Op(("fw", "bw"), FLOATS, {"shape": [int]},
                       {"layout": "channels_first", "params": "same"})


def rows(case):
    shape, size = case["shape"], caselist.SIZE[case["dtype"]]
    n = 1
    for e in shape:
        n *= e
    shape_s = f"[{', '.join(map(str, shape))}]"
    if case["op"] == "copy":
        return [caselist.row(case, p, shape_s, bytes=2 * n * size, rotation_bytes=2 * n * size)
                for p in case["passes"]]
    if case["op"] == "batch_norm":
        return _batch_rows(case, shape, shape_s, n, size)
    if case["op"] == "group_norm":
        if not 3 <= len(shape) <= 5:
            raise caselist.CaseError(f"norm case {case['name']!r}: shape {shape} is not [N, C, spatial] of rank 3 to 5")
        h = shape[1]
    elif len(shape) != 2:
        raise caselist.CaseError(f"norm case {case['name']!r}: shape {shape} is not (rows, h)")
    else:
        h = shape[1]
    p = PARAMS[case["op"]]
    e = 1 if case["op"] in RESIDUAL else 0
    work = {"fw": ((2 + 2 * e) * n + p * h) * size, "bw": ((3 + e) * n + 2 * p * h) * size}
    return [caselist.row(case, q, shape_s, bytes=work[q], rotation_bytes=(3 + e) * n * size)
            for q in case["passes"]]


def _batch_rows(case, shape, shape_s, n, size):
    """The rows of a BatchNorm case, its work as the Rust side counts it."""
    if not 2 <= len(shape) <= 5:
        raise caselist.CaseError(f"norm case {case['name']!r}: shape {shape} is not [N, C, spatial...] of rank 2 to 5")
    if case["layout"] not in ("channels_first", "channels_last"):
        raise caselist.CaseError(f"norm case {case['name']!r}: layout {case['layout']!r}")
    f32 = case["params"] == "f32"
    if case["params"] not in ("same", "f32") or (f32 and case["dtype"] not in ("bf16", "f16")):
        raise caselist.CaseError(f"norm case {case['name']!r}: params {case['params']!r} for {case['dtype']}")
    ch, psize = shape[1], (4 if f32 else size)
    work = {"fw": 2 * n * size + 6 * ch * psize, "bw": 3 * n * size + 3 * ch * psize}
    return [caselist.row(case, q, shape_s, bytes=work[q], rotation_bytes=3 * n * size)
            for q in case["passes"]]


def _memory_format(torch, case):
    """The memory format of a BatchNorm case's x, y, dy."""
    if case.get("layout") != "channels_last":
        return torch.contiguous_format
    return {4: torch.channels_last, 5: torch.channels_last_3d}.get(len(case["shape"]), torch.contiguous_format)


def _batch_norm_rows(torch, case, by_pass, xs, rand, shape, sets):
    """The rows of a BatchNorm case: F.batch_norm in training updating the
    running statistics, forward, and backward to x, weight and bias."""
    F = torch.nn.functional
    ch = shape[1]
    pdtype = torch.float32 if case["params"] == "f32" else xs[0].dtype
    fmt = _memory_format(torch, case)
    xs = [x.contiguous(memory_format=fmt) for x in xs]
    w = rand([ch], 0.5, 1.5).to(pdtype).requires_grad_()
    b = rand([ch], -1.0, 1.0).to(pdtype).requires_grad_()
    rm = rand([ch], -0.5, 0.5).to(pdtype)
    rv = rand([ch], 0.5, 1.5).to(pdtype)

    def f(x, w, b, rm=rm, rv=rv):
        return F.batch_norm(x, rm, rv, w, b, True, 0.1, EPS)

    compiled = torch.compile(f, dynamic=False)
    for row in by_pass:
        if row["pass"] == "fw":
            w0, b0 = w.detach(), b.detach()
            yield (row, [(lambda x=x: f(x, w0, b0)) for x in xs],
                   [(lambda x=x: compiled(x, w0, b0)) for x in xs])
            continue
        xg = [x.detach().requires_grad_() for x in xs]
        dys = [rand(shape, -1.0, 1.0).contiguous(memory_format=fmt) for _ in range(sets)]

        def grads(fn):
            # running statistics of each graph's own: a later forward's
            # in-place update would invalidate what an earlier graph saved
            outs = [fn(x, w, b, rm.clone(), rv.clone()) for x in xg]
            return [(lambda y=y, x=x, dy=dy: torch.autograd.grad(y, [x, w, b], dy, retain_graph=True))
                    for y, x, dy in zip(outs, xg, dys)]

        yield row, grads(f), grads(compiled)
        del xg, dys


def _fn(torch, case):
    F = torch.nn.functional
    op = case["op"]
    if op == "group_norm":
        groups = case["groups"]
        return lambda x, w, b: F.group_norm(x, groups, w, b, EPS)
    if op == "layer_norm":
        return lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, EPS)
    if op == "rms_norm":
        return lambda x, w, b: F.rms_norm(x, (x.shape[-1],), w, EPS)
    norm = _fn(torch, {"op": op[: -len("_residual")]})

    def residual(x, r, w, b):
        s = x + r
        return s, norm(s, w, b)

    return residual


def cases(torch, settings, cases):
    from torch_baseline import rotation

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    for case in cases:
        by_pass = rows(case)
        dtype = caselist.torch_dtype(torch, case["dtype"])
        sets = rotation(torch, by_pass[0]["rotation_bytes"])
        shape = case["shape"]

        def rand(s, lo=-2.0, hi=2.0):
            return (torch.rand(s, device=dev, generator=g) * (hi - lo) + lo).to(dtype)

        xs = [rand(shape) for _ in range(sets)]
        if case["op"] == "copy":
            ys = [torch.empty_like(x) for x in xs]
            for row in by_pass:
                yield row, [(lambda x=x, y=y: y.copy_(x)) for x, y in zip(xs, ys)]
            del ys, xs
            continue
        if case["op"] == "batch_norm":
            yield from _batch_norm_rows(torch, case, by_pass, xs, rand, shape, sets)
            del xs
            continue
        h = shape[1] if case["op"] == "group_norm" else shape[-1]
        w = rand([h], 0.5, 1.5).requires_grad_()
        b = rand([h], -1.0, 1.0).requires_grad_() if PARAMS[case["op"]] == 2 else None
        f = _fn(torch, case)
        compiled = torch.compile(f, dynamic=False)
        if case["op"] in RESIDUAL:
            yield from _residual_rows(torch, by_pass, f, compiled, xs, w, b, rand, shape, sets)
            del xs
            continue
        for row in by_pass:
            if row["pass"] == "fw":
                # parameters without grad: no autograd graph is recorded
                w0, b0 = w.detach(), (b.detach() if b is not None else None)
                yield (row, [(lambda x=x: f(x, w0, b0)) for x in xs],
                       [(lambda x=x: compiled(x, w0, b0)) for x in xs])
                continue
            params = [w] + ([b] if b is not None else [])
            xg = [x.detach().requires_grad_() for x in xs]
            dys = [rand(shape, -1.0, 1.0) for _ in range(sets)]

            def grads(fn):
                outs = [fn(x, w, b) for x in xg]
                return [(lambda y=y, x=x, dy=dy: torch.autograd.grad(y, [x] + params, dy, retain_graph=True))
                        for y, x, dy in zip(outs, xg, dys)]

            yield row, grads(f), grads(compiled)
            del xg, dys
        del xs


def _residual_rows(torch, by_pass, f, compiled, xs, w, b, rand, shape, sets):
    """The rows of a residual case: the forward (s, y) = f(x, r, w, b), and
    the backward of both outputs (dy into y, ds into s) to x, r and the
    parameters."""
    rs = [rand(shape, -1.0, 1.0) for _ in range(sets)]
    for row in by_pass:
        if row["pass"] == "fw":
            w0, b0 = w.detach(), (b.detach() if b is not None else None)
            yield (row, [(lambda x=x, r=r: f(x, r, w0, b0)) for x, r in zip(xs, rs)],
                   [(lambda x=x, r=r: compiled(x, r, w0, b0)) for x, r in zip(xs, rs)])
            continue
        params = [w] + ([b] if b is not None else [])
        xg = [x.detach().requires_grad_() for x in xs]
        rg = [r.detach().requires_grad_() for r in rs]
        dys = [rand(shape, -1.0, 1.0) for _ in range(sets)]
        dss = [rand(shape, -1.0, 1.0) for _ in range(sets)]

        def grads(fn):
            outs = [fn(x, r, w, b) for x, r in zip(xg, rg)]
            return [(lambda o=o, x=x, r=r, dy=dy, ds=ds:
                     torch.autograd.grad(o, [x, r] + params, (ds, dy), retain_graph=True))
                    for o, x, r, dy, ds in zip(outs, xg, rg, dys, dss)]

        yield row, grads(f), grads(compiled)
        del xg, rg, dys, dss
    del rs
