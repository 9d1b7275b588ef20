"""PyTorch baselines of the softmax family, from bench/cases/softmax.json
(which crates/baracuda-bench/src/softmax.rs reads too): softmax and
log_softmax along the last dim of a contiguous [rows, extent] matrix, the
forward and the backward as autograd runs it (aten's
_softmax_backward_data / _log_softmax_backward_data from y and dy), each
timed eagerly and as torch.compile of the same function, and the
device-to-device copy ceiling. Traffic: forward 2 tensors (x, y),
backward 3 (y, dy, dx). A case with a keep mask ("keep_row": [1, n]
broadcast, every third column masked; "keep_causal": keep[r, k] = k <= r
mod n in full, bool) runs the composite x.masked_fill(~keep, -inf).op(-1)
and its autograd backward (the op's backward, then masked_fill(~keep, 0)),
and adds the mask's bytes to both passes."""
from . import caselist
from .caselist import Op

FLOATS = ("bf16", "f16", "f32", "f64")

# op -> (forward, backward), functions of torch returning x -> y and
# (y, dy) -> dx, so that the table is known without importing torch.
SOFTMAX = {
    "softmax": (lambda torch: lambda x: torch.softmax(x, -1),
                lambda torch: lambda y, dy: torch.ops.aten._softmax_backward_data(dy, y, -1, y.dtype)),
    "log_softmax": (lambda torch: lambda x: torch.log_softmax(x, -1),
                    lambda torch: lambda y, dy: torch.ops.aten._log_softmax_backward_data(dy, y, -1, y.dtype)),
}
SETTINGS = {}
OPS = {"copy": Op(("fw",), FLOATS, {"shape": [int]})}
OPS.update({op: Op(("fw", "bw"), FLOATS, {"shape": [int]}, optional={"mask": "none"}) for op in SOFTMAX})
MASKS = ("none", "keep_row", "keep_causal")


def mask_bytes(case):
    rows_, n = case["shape"]
    return {"none": 0, "keep_row": n, "keep_causal": rows_ * n}[case.get("mask", "none")]


def rows(case):
    shape, size = case["shape"], caselist.SIZE[case["dtype"]]
    n = 1
    for e in shape:
        n *= e
    shape_s = f"[{', '.join(map(str, shape))}]"
    if case["op"] == "copy":
        return [caselist.row(case, p, shape_s, bytes=2 * n * size, rotation_bytes=2 * n * size)
                for p in case["passes"]]
    if len(shape) != 2:
        raise caselist.CaseError(f"softmax case {case['name']!r}: shape {shape} is not [rows, extent]")
    if case.get("mask", "none") not in MASKS:
        raise caselist.CaseError(f"softmax case {case['name']!r}: mask {case['mask']!r} (takes {MASKS})")
    out = []
    for p in case["passes"]:
        b = (3 if p == "bw" else 2) * n * size + mask_bytes(case)
        out.append(caselist.row(case, p, shape_s, bytes=b, rotation_bytes=b))
    return out


def cases(torch, settings, cases):
    from torch_baseline import rotation

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    for case in cases:
        by_pass = {r["pass"]: r for r in rows(case)}
        dtype = caselist.torch_dtype(torch, case["dtype"])
        sets = rotation(torch, max(r["rotation_bytes"] for r in by_pass.values()))
        xs = [(torch.rand(case["shape"], device=dev, generator=g) * 8 - 4).to(dtype) for _ in range(sets)]
        if case["op"] == "copy":
            ys = [torch.empty_like(x) for x in xs]
            yield by_pass["fw"], [(lambda x=x, y=y: y.copy_(x)) for x, y in zip(xs, ys)]
            del ys
        else:
            fw, bw = SOFTMAX[case["op"]]
            mask = case.get("mask", "none")
            if mask != "none":
                rows_, n = case["shape"]
                if mask == "keep_row":
                    keep = (torch.arange(n, device=dev) % 3 != 1).view(1, n)
                else:
                    r = torch.arange(rows_, device=dev).view(rows_, 1) % n
                    keep = torch.arange(n, device=dev).view(1, n) <= r
                drop = ~keep
                inner_fw, inner_bw = fw, bw
                fw = lambda torch, f=inner_fw, drop=drop: (
                    lambda x, g=f(torch): g(x.masked_fill(drop, float("-inf"))))
                bw = lambda torch, b=inner_bw, drop=drop: (
                    lambda y, dy, g=b(torch): g(y, dy).masked_fill(drop, 0.0))
            if "fw" in by_pass:
                f = fw(torch)
                compiled = torch.compile(f, dynamic=False)
                yield (by_pass["fw"], [(lambda x=x: f(x)) for x in xs], [(lambda x=x: compiled(x)) for x in xs])
            if "bw" in by_pass:
                b = bw(torch)
                compiled = torch.compile(b, dynamic=False)
                # y = x: any values of the right range time the same
                dys = [(torch.rand(case["shape"], device=dev, generator=g) * 2 - 1).to(dtype) for _ in range(sets)]
                yield (by_pass["bw"], [(lambda y=y, dy=dy: b(y, dy)) for y, dy in zip(xs, dys)],
                       [(lambda y=y, dy=dy: compiled(y, dy)) for y, dy in zip(xs, dys)])
                del dys
        del xs
