"""PyTorch baselines of the shape family, from bench/cases/shape.json
(which crates/baracuda-bench/src/shape.rs reads too): flip, roll,
tril/triu, F.pad, repeat and unfold of one contiguous tensor, forward (x
to y; unfold's window view materialised with contiguous, as baracuda
writes it) and backward (dy to dx, the op autograd runs: the inverse flip
or roll, the same triangle, aten's reflection/replication_pad*d_backward,
the constant pad by the negated list, repeat's sum over the copies,
aten's unfold_backward); the copy of a view with two dims exchanged
into a contiguous tensor (`transpose`, forward); cat of `count` inputs
along `dim`,
forward and backward (dy's slices materialised with clone: autograd
hands back views, which move nothing, while baracuda writes each input's
gradient); each timed eagerly and as torch.compile of the same function,
and the device-to-device copy ceiling. Traffic: every pass reads its
input and writes its output once."""
from . import caselist
from .caselist import Op

FLOATS = ("bf16", "f16", "f32", "f64")
PAD_MODES = ("constant", "reflect", "replicate", "circular")

SETTINGS = {}
OPS = {
    "copy": Op(("fw",), FLOATS, {"shape": [int]}),
    "flip": Op(("fw", "bw"), FLOATS, {"shape": [int], "dims": [int]}),
    "roll": Op(("fw", "bw"), FLOATS, {"shape": [int], "shifts": [int], "dims": [int]}),
    "tril": Op(("fw", "bw"), FLOATS, {"shape": [int], "diagonal": int}),
    "triu": Op(("fw", "bw"), FLOATS, {"shape": [int], "diagonal": int}),
    "cat": Op(("fw", "bw"), FLOATS, {"shape": [int], "count": int, "dim": int}),
    "repeat": Op(("fw", "bw"), FLOATS, {"shape": [int], "repeats": [int]}),
    "unfold": Op(("fw", "bw"), FLOATS, {"shape": [int], "dim": int, "size": int, "step": int}),
    "transpose": Op(("fw",), FLOATS, {"shape": [int], "dims": [int]}),
}
# circular's backward is a composite of slices (no one aten op): forward only
OPS.update({f"pad_{m}": Op(("fw", "bw") if m != "circular" else ("fw",), FLOATS,
                           {"shape": [int], "pad": [int]}) for m in PAD_MODES})


def _shape_s(shape):
    return f"[{', '.join(map(str, shape))}]"


def _prod(shape):
    n = 1
    for e in shape:
        n *= e
    return n


def out_shape(case):
    """The output shape of a map case."""
    shape = list(case["shape"])
    if case["op"] == "repeat":
        return [n * r for n, r in zip(shape, case["repeats"])]
    if case["op"] == "unfold":
        d = case["dim"]
        shape[d] = (shape[d] - case["size"]) // case["step"] + 1
        return shape + [case["size"]]
    if case["op"].startswith("pad_"):
        pad = case["pad"]
        for k in range(len(pad) // 2):
            shape[len(shape) - 1 - k] += pad[2 * k] + pad[2 * k + 1]
    return shape


def rows(case):
    shape, size = case["shape"], caselist.SIZE[case["dtype"]]
    op = case["op"]
    if op in ("copy", "transpose"):
        b = 2 * _prod(shape) * size
        return [caselist.row(case, p, _shape_s(shape), bytes=b, rotation_bytes=b) for p in case["passes"]]
    if op == "cat":
        if len(shape) != 2 or case["dim"] >= 2 or case["count"] == 0:
            raise caselist.CaseError(f"cat case {case['name']!r}: takes a [rows, cols] shape, dim 0 or 1, count >= 1")
        b = 2 * case["count"] * _prod(shape) * size
        return [caselist.row(case, p, f"{case['count']}x{_shape_s(shape)}", bytes=b, rotation_bytes=b)
                for p in case["passes"]]
    top = 4 if op == "unfold" else 5
    if not 1 <= len(shape) <= top:
        raise caselist.CaseError(f"shape case {case['name']!r}: rank {len(shape)} (takes 1 to {top})")
    b = (_prod(shape) + _prod(out_shape(case))) * size
    return [caselist.row(case, p, _shape_s(shape), bytes=b, rotation_bytes=b) for p in case["passes"]]


def _fns(torch, case):
    """(forward, backward) of a map case: x -> y and (x, dy) -> dx."""
    F = torch.nn.functional
    op = case["op"]
    if op == "flip":
        dims = case["dims"]
        return (lambda x: torch.flip(x, dims)), (lambda x, dy: torch.flip(dy, dims))
    if op == "roll":
        shifts, dims = case["shifts"], case["dims"]
        if not dims:
            return (lambda x: torch.roll(x, shifts[0])), (lambda x, dy: torch.roll(dy, -shifts[0]))
        neg = [-s for s in shifts]
        return (lambda x: torch.roll(x, shifts, dims)), (lambda x, dy: torch.roll(dy, neg, dims))
    if op == "transpose":
        d0, d1 = case["dims"]
        return (lambda x: x.transpose(d0, d1).contiguous()), None
    if op == "repeat":
        reps, shape = case["repeats"], case["shape"]
        # autograd's repeat backward: dy viewed as (r0, n0, r1, n1, ...),
        # summed over the copies
        split = [e for r, n in zip(reps, shape) for e in (r, n)]
        copies = tuple(range(0, 2 * len(shape), 2))
        return (lambda x: x.repeat(*reps)), (lambda x, dy: dy.reshape(split).sum(copies))
    if op == "unfold":
        dim, size, step = case["dim"], case["size"], case["step"]
        return ((lambda x: x.unfold(dim, size, step).contiguous()),
                (lambda x, dy: torch.ops.aten.unfold_backward(dy, x.shape, dim, size, step)))
    if op in ("tril", "triu"):
        f = getattr(torch, op)
        k = case["diagonal"]
        return (lambda x: f(x, k)), (lambda x, dy: f(dy, k))
    mode = op[len("pad_"):]
    pad = case["pad"]
    fw = lambda x: F.pad(x, pad, mode=mode)
    d = len(pad) // 2
    if mode == "constant":
        neg = [-p for p in pad]
        return fw, (lambda x, dy: torch.constant_pad_nd(dy, neg))
    if mode == "reflect":
        bw = getattr(torch.ops.aten, f"reflection_pad{d}d_backward")
        return fw, (lambda x, dy: bw(dy, x, pad))
    if mode == "replicate":
        bw = getattr(torch.ops.aten, f"replication_pad{d}d_backward")
        return fw, (lambda x, dy: bw(dy, x, pad))
    return fw, None


def cases(torch, settings, cases):
    from torch_baseline import rotation

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    for case in cases:
        by_pass = {r["pass"]: r for r in rows(case)}
        dtype = caselist.torch_dtype(torch, case["dtype"])
        sets = rotation(torch, max(r["rotation_bytes"] for r in by_pass.values()))
        rand = lambda shape, lo, hi: (torch.rand(shape, device=dev, generator=g) * (hi - lo) + lo).to(dtype)
        if case["op"] == "copy":
            xs = [rand(case["shape"], -2, 2) for _ in range(sets)]
            ys = [torch.empty_like(x) for x in xs]
            yield by_pass["fw"], [(lambda x=x, y=y: y.copy_(x)) for x, y in zip(xs, ys)]
            del xs, ys
            continue
        if case["op"] == "cat":
            count, dim, shape = case["count"], case["dim"], case["shape"]
            xs = [[rand(shape, -2, 2) for _ in range(count)] for _ in range(sets)]
            if "fw" in by_pass:
                f = lambda ins: torch.cat(ins, dim)
                compiled = torch.compile(f, dynamic=False)
                yield (by_pass["fw"], [(lambda ins=ins: f(ins)) for ins in xs],
                       [(lambda ins=ins: compiled(ins)) for ins in xs])
            if "bw" in by_pass:
                out = list(shape)
                out[dim] *= count
                dys = [rand(out, -1, 1) for _ in range(sets)]
                b = lambda dy: [t.clone() for t in dy.split(shape[dim], dim)]
                compiled = torch.compile(b, dynamic=False)
                yield (by_pass["bw"], [(lambda dy=dy: b(dy)) for dy in dys],
                       [(lambda dy=dy: compiled(dy)) for dy in dys])
                del dys
            del xs
            continue
        fw, bw = _fns(torch, case)
        xs = [rand(case["shape"], -2, 2) for _ in range(sets)]
        if "fw" in by_pass:
            compiled = torch.compile(fw, dynamic=False)
            yield (by_pass["fw"], [(lambda x=x: fw(x)) for x in xs], [(lambda x=x: compiled(x)) for x in xs])
        if "bw" in by_pass:
            compiled = torch.compile(bw, dynamic=False)
            dys = [rand(out_shape(case), -1, 1) for _ in range(sets)]
            yield (by_pass["bw"], [(lambda x=x, dy=dy: bw(x, dy)) for x, dy in zip(xs, dys)],
                   [(lambda x=x, dy=dy: compiled(x, dy)) for x, dy in zip(xs, dys)])
            del dys
        del xs
