"""Goldens of the scans: f64 inputs, PyTorch's outputs (and indices for
cummax/cummin) and autograd gradients of cumsum, cumprod, cummax, cummin
and logcumsumexp along each dim of a [4, 5, 6] tensor, forward and
reversed (the scan of x flipped along the dim, flipped back), and special
lines: ties and NaN for cummax/cummin, zeros for cumprod's gradient, -inf
and +inf for logcumsumexp. Checked by
crates/baracuda-kernels/tests/golden_scan.rs."""

SHAPE = (4, 5, 6)
OPS = ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp")


def scan(torch, name, x, dim):
    """(values, indices or None) of op `name` along `dim`."""
    if name in ("cummax", "cummin"):
        v, i = getattr(torch, name)(x, dim)
        return v, i.to(torch.float64)
    return getattr(torch, name)(x, dim), None


def put(torch, out, key, name, x, dim, dy, flip):
    x = x.clone().requires_grad_()
    src = x.flip(dim) if flip else x
    y, i = scan(torch, name, src, dim)
    if flip:
        y = y.flip(dim)
        # indices count along the flipped line; as positions of x
        i = None if i is None else (x.shape[dim] - 1 - i).flip(dim)
    (dx,) = torch.autograd.grad(y, (x,), dy)
    out.update({f"{key}.x": x, f"{key}.dy": dy, f"{key}.y": y, f"{key}.dx": dx})
    if i is not None:
        out[f"{key}.i"] = i


def make(torch):
    g = torch.Generator().manual_seed(2029)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
    out = {}
    for name in OPS:
        for dim in range(len(SHAPE)):
            for flip in (False, True):
                # cumprod: factors near 1 keep products of 6 well scaled
                x = r(*SHAPE) + 0.5 if name == "cumprod" else r(*SHAPE) * 4 - 2
                dy = r(*SHAPE) * 2 - 1
                put(torch, out, f"{name}.{dim}.{'rev' if flip else 'fwd'}", name, x, dim, dy, flip)
    inf, nan = float("inf"), float("nan")
    special = {
        # ties (later ones win) and NaN (the latest NaN wins)
        "cummax": [[1.0, 2.0, 2.0, 0.0, 2.0, 1.0], [0.0, nan, 3.0, nan, 1.0, 5.0]],
        "cummin": [[1.0, 0.0, 0.0, 2.0, 0.0, 1.0], [0.0, nan, -3.0, nan, 1.0, -5.0]],
        # one zero, two zeros, a zero first
        "cumprod": [[2.0, 0.0, 3.0, 0.5, 1.5, 2.0], [1.5, 0.0, 2.0, 0.0, 3.0, 0.5],
                    [0.0, 2.0, 3.0, 0.5, 1.5, 2.0]],
        "logcumsumexp": [[-inf, -inf, 0.0, 1.0, -inf, 2.0], [0.0, inf, 1.0, -inf, 2.0, 3.0]],
    }
    for name, rows in special.items():
        x = torch.tensor(rows, dtype=torch.float64)
        # gradients where PyTorch defines them finitely (no NaN or +inf)
        dy = r(*x.shape) * 2 - 1
        put(torch, out, f"special.{name}", name, x, 1, dy, False)
    return out
