"""Goldens of the scans on integer inputs (int32, int64): PyTorch's outputs,
in the dtypes PyTorch gives them (int64 for cumsum and cumprod, the
input's for cummax and cummin), and the indices of cummax/cummin, along
each dim of a [4, 5, 6] tensor, forward and reversed (the scan of x
flipped along the dim, flipped back): running sums over the dtype's range
(int64: near 2^62, so that they wrap around), products of odd factors in
[-7, 7], ties in [-3, 3] for cummax/cummin; and lines of 40 odd factors
whose running products wrap around 2^64. Integer tensors are stored as
themselves, so every value is exact. Checked by
crates/baracuda-kernels/tests/golden_scan.rs."""

SHAPE = (4, 5, 6)
OPS = ("cumsum", "cumprod", "cummax", "cummin")
DTYPES = ("int32", "int64")


def put(torch, out, key, name, x, dim, flip):
    src = x.flip(dim) if flip else x
    if name in ("cummax", "cummin"):
        y, i = getattr(torch, name)(src, dim)
    else:
        y, i = getattr(torch, name)(src, dim), None
    if flip:
        y = y.flip(dim)
        # indices count along the flipped line; as positions of x
        i = None if i is None else (x.shape[dim] - 1 - i).flip(dim)
    out.update({f"{key}.x": x, f"{key}.y": y})
    if i is not None:
        out[f"{key}.i"] = i


def make(torch):
    g = torch.Generator().manual_seed(2033)
    out = {}
    for dname in DTYPES:
        dt = getattr(torch, dname)
        hi = 2 ** (31 if dt == torch.int32 else 62)
        for name in OPS:
            for dim in range(len(SHAPE)):
                for flip in (False, True):
                    if name == "cumprod":
                        x = torch.randint(0, 8, SHAPE, generator=g) * 2 - 7
                    elif name == "cumsum":
                        x = torch.randint(-hi, hi, SHAPE, generator=g, dtype=torch.int64)
                    else:
                        x = torch.randint(-3, 4, SHAPE, generator=g)
                    key = f"{dname}.{name}.{dim}.{'rev' if flip else 'fwd'}"
                    put(torch, out, key, name, x.to(dt), dim, flip)
        x = (torch.randint(0, 8, (3, 40), generator=g) * 2 - 7).to(dt)
        put(torch, out, f"{dname}.long.cumprod", "cumprod", x, 1, False)
        x = torch.randint(-hi, hi, (3, 40), generator=g, dtype=torch.int64).to(dt)
        put(torch, out, f"{dname}.long.cumsum", "cumsum", x, 1, False)
    return out
