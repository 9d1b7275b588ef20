"""Goldens of the reduce family on integer inputs (int32, int64): PyTorch's
outputs, in the dtypes PyTorch gives them (int64 for sum, nansum, prod and
trace; the input's for amax, amin and the values of max/min), of every
reduction that takes integers over dims (0, 2) of a [4, 5, 6] tensor:
sums over the dtype's range (int64: near 2^62, so that they wrap around),
products of odd factors in [-7, 7] (24 per output: past 2^64, so that they
wrap around), the dtype's limits for amax and amin; the empty sum and
product; max/min with indices over dim 1 and argmax/argmin over all dims,
with ties; the trace of non-square matrices. Integer tensors are stored
as themselves (int32 or int64), so every value is exact. Checked by
crates/baracuda-kernels/tests/golden_reduce.rs."""

SHAPE = (4, 5, 6)
DIMS = (0, 2)
DTYPES = ("int32", "int64")
TRACES = {"4x6": (4, 6), "5x3": (5, 3), "1x1": (1, 1)}


def wide(torch, g, dtype, *shape):
    """Values over the dtype's range (int64: up to 2^62 in magnitude)."""
    bits = 31 if dtype == torch.int32 else 62
    hi = 2 ** bits
    return torch.randint(-hi, hi, shape, generator=g, dtype=torch.int64).to(dtype)


def make(torch):
    g = torch.Generator().manual_seed(2031)
    out = {}
    for name in DTYPES:
        dt = getattr(torch, name)
        info = torch.iinfo(dt)
        fns = {
            "sum": lambda x: x.sum(DIMS),
            "nansum": lambda x: x.nansum(DIMS),
            "prod": lambda x: x.prod(0).prod(1),
            "amax": lambda x: x.amax(DIMS),
            "amin": lambda x: x.amin(DIMS),
        }
        for op, f in fns.items():
            if op == "prod":
                x = (torch.randint(0, 8, SHAPE, generator=g) * 2 - 7).to(dt)
            else:
                x = wide(torch, g, dt, *SHAPE)
            if op in ("amax", "amin"):
                x[0, 1, 0] = info.max
                x[1, 1, 3] = info.min
                x[2, 3, 5] = info.max
            out[f"{name}.{op}.x"] = x
            out[f"{name}.{op}.y"] = f(x)
        e = torch.zeros(3, 0, dtype=dt)
        out[f"{name}.empty.sum.y"] = e.sum(1)
        out[f"{name}.empty.nansum.y"] = e.nansum(1)
        out[f"{name}.empty.prod.y"] = e.prod(1)
        # max / min with indices over dim 1 (ties: the first index);
        # argmax / argmin of all
        for op in ("max", "min"):
            x = torch.randint(-3, 4, SHAPE, generator=g).to(dt)
            values, indices = getattr(torch, op)(x, 1)
            k = f"{name}.{op}_indices"
            out.update({f"{k}.x": x, f"{k}.values": values, f"{k}.indices": indices})
            out[f"{name}.arg{op}_all.x"] = x
            out[f"{name}.arg{op}_all.indices"] = getattr(torch, f"arg{op}")(x).reshape(1)
        for key, shape in TRACES.items():
            x = wide(torch, g, dt, *shape)
            out[f"{name}.trace.{key}.x"] = x
            out[f"{name}.trace.{key}.y"] = torch.trace(x).reshape(1)
    return out
