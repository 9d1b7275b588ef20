"""PyTorch baselines of the reduce family, from bench/cases/reduce.json
(which crates/baracuda-bench/src/reduce.rs reads too): reductions of
contiguous tensors over the case's dims (keepdim false; the norm is
torch.linalg.vector_norm with p = 2; argmax and argmin take one dim and
write i64 indices; all and any write bool, count_nonzero i64; var_mean and
std_mean write both outputs), torch.trace of a matrix (bytes: its diagonal
read and the scalar written; it rotates by the whole matrix), each timed eagerly and as
torch.compile of the same function (the third element of what cases()
yields; torch_baseline.py reports it as compile_ms), and the
device-to-device copy ceiling. Inputs rotate over buffer sets by L2 size,
as on the Rust side (all of the issue's cases are larger than L2: one
set)."""
from . import caselist
from .caselist import Op

FLOATS = ("bf16", "f16", "f32", "f64")
# The scans that take integers (as baracuda's ScanPlan): cumsum and cumprod
# write i64, cummax and cummin the input's dtype.
INTS = ("i32", "i64")

# op -> function of (torch, dims) returning x -> y, so that the table is
# known without importing torch.
REDUCE = {
    "sum": lambda torch, d: lambda x: x.sum(d),
    "mean": lambda torch, d: lambda x: x.mean(d),
    "nansum": lambda torch, d: lambda x: x.nansum(d),
    "nanmean": lambda torch, d: lambda x: x.nanmean(d),
    "amax": lambda torch, d: lambda x: x.amax(d),
    "amin": lambda torch, d: lambda x: x.amin(d),
    "var": lambda torch, d: lambda x: x.var(d),
    "std": lambda torch, d: lambda x: x.std(d),
    "logsumexp": lambda torch, d: lambda x: x.logsumexp(d),
    "norm": lambda torch, d: lambda x: torch.linalg.vector_norm(x, 2, d),
    "argmax": lambda torch, d: lambda x: x.argmax(d[0]),
    "argmin": lambda torch, d: lambda x: x.argmin(d[0]),
    "all": lambda torch, d: lambda x: torch.all(x, dim=d),
    "any": lambda torch, d: lambda x: torch.any(x, dim=d),
    "count_nonzero": lambda torch, d: lambda x: torch.count_nonzero(x, dim=d),
    "var_mean": lambda torch, d: lambda x: torch.var_mean(x, d),
    "std_mean": lambda torch, d: lambda x: torch.std_mean(x, d),
}
# Ops whose output is i64 indices over exactly one dim.
INDEX_OPS = ("argmax", "argmin")
# Bytes of one output element of the ops whose output is not the input's
# dtype.
OUT_SIZE = {"argmax": 8, "argmin": 8, "all": 1, "any": 1, "count_nonzero": 8}
# Outputs per output position of the ops that write more than one.
OUTPUTS = {"var_mean": 2, "std_mean": 2}
# Scans along one dim (inclusive, forward); cummax/cummin return indices too.
SCAN = {
    "cumsum": lambda torch, d: lambda x: x.cumsum(d),
    "cumprod": lambda torch, d: lambda x: x.cumprod(d),
    "cummax": lambda torch, d: lambda x: x.cummax(d),
    "cummin": lambda torch, d: lambda x: x.cummin(d),
    "logcumsumexp": lambda torch, d: lambda x: x.logcumsumexp(d),
}
SETTINGS = {}
OPS = {"copy": Op(("fw",), FLOATS, {"shape": [int]})}
OPS.update({op: Op(("fw",), FLOATS, {"shape": [int], "dims": [int]}) for op in REDUCE})
OPS.update({op: Op(("fw",), FLOATS + (INTS if op != "logcumsumexp" else ()), {"shape": [int], "dim": int})
            for op in SCAN})
OPS["trace"] = Op(("fw",), FLOATS, {"shape": [int]})
# The ranks baracuda-bench is built for: (rank of x, rank of y).
RANKS = ((1, 0), (2, 1), (3, 1), (4, 1))


def _prod(v):
    out = 1
    for e in v:
        out *= e
    return out


def rows(case):
    shape, size = case["shape"], caselist.SIZE[case["dtype"]]
    n = _prod(shape)
    shape_s = f"[{', '.join(map(str, shape))}]"
    if case["op"] == "copy":
        return [caselist.row(case, p, shape_s, bytes=2 * n * size, rotation_bytes=2 * n * size)
                for p in case["passes"]]
    if case["op"] == "trace":
        if len(shape) != 2:
            raise caselist.CaseError(f"trace case {case['name']!r}: shape {shape} is not a matrix")
        b = (min(shape) + 1) * size
        return [caselist.row(case, p, shape_s, bytes=b, rotation_bytes=n * size) for p in case["passes"]]
    if case["op"] in SCAN:
        dim = case["dim"]
        if dim >= len(shape) or len(shape) not in (1, 2):
            raise caselist.CaseError(f"scan case {case['name']!r}: dim {dim} of shape {shape} (ranks 1 and 2 are built)")
        # integer cumsum and cumprod write i64 (PyTorch's promotion)
        widen = case["dtype"] in INTS and case["op"] in ("cumsum", "cumprod")
        b = n * size + n * (8 if widen else size) + (8 * n if case["op"] in ("cummax", "cummin") else 0)
        return [caselist.row(case, p, shape_s, bytes=b, rotation_bytes=b) for p in case["passes"]]
    dims = case["dims"]
    if len(set(dims)) != len(dims) or any(d >= len(shape) for d in dims):
        raise caselist.CaseError(f"reduce case {case['name']!r}: dims {dims} of a rank-{len(shape)} shape")
    if (len(shape), len(shape) - len(dims)) not in RANKS:
        raise caselist.CaseError(f"reduce case {case['name']!r}: ranks not built (takes {RANKS})")
    if case["op"] in INDEX_OPS and len(dims) != 1:
        raise caselist.CaseError(f"reduce case {case['name']!r}: {case['op']} takes one dim")
    n_out = _prod(shape[d] for d in range(len(shape)) if d not in dims)
    b = n * size + n_out * OUT_SIZE.get(case["op"], size) * OUTPUTS.get(case["op"], 1)
    return [caselist.row(case, p, shape_s, bytes=b, rotation_bytes=b) for p in case["passes"]]


def cases(torch, settings, cases):
    from torch_baseline import rotation

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    for case in cases:
        (row,) = rows(case)
        dtype = caselist.torch_dtype(torch, case["dtype"])
        sets = rotation(torch, row["rotation_bytes"])
        xs = [(torch.rand(case["shape"], device=dev, generator=g) * 4 - 2).to(dtype) for _ in range(sets)]
        if case["op"] == "copy":
            ys = [torch.empty_like(x) for x in xs]
            yield row, [(lambda x=x, y=y: y.copy_(x)) for x, y in zip(xs, ys)]
            del ys
        else:
            if case["op"] == "trace":
                f = lambda x: torch.trace(x)
            elif case["op"] in SCAN:
                f = SCAN[case["op"]](torch, case["dim"])
            else:
                f = REDUCE[case["op"]](torch, tuple(case["dims"]))
            compiled = torch.compile(f, dynamic=False)
            yield (row, [(lambda x=x: f(x)) for x in xs], [(lambda x=x: compiled(x)) for x in xs])
        del xs
