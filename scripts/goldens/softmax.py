"""Goldens of the softmax family: f64 inputs, PyTorch's outputs and its
autograd gradients of softmax, log_softmax and softmin along each dim of a
[4, 5, 6] tensor, and the forward of rows holding -inf, only -inf, +inf
and NaN; softmax and log_softmax under a bool keep mask (the composite
op(x.masked_fill(~keep, -inf)), one row with nothing kept) and an additive
mask (op(x + mask), some -inf), forward and gradient; and each op of a bf16
and an f16 x with dtype=torch.float32 (y and dy in f32, dx in x's dtype,
all stored as f64). Checked by
crates/baracuda-kernels/tests/golden_softmax.rs."""

SHAPE = (4, 5, 6)
OPS = ("softmax", "log_softmax", "softmin")


def make(torch):
    g = torch.Generator().manual_seed(2028)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
    fns = {
        "softmax": torch.softmax,
        "log_softmax": torch.log_softmax,
        "softmin": lambda x, d: torch.nn.functional.softmin(x, d),
    }
    out = {}
    for name in OPS:
        for dim in range(len(SHAPE)):
            x = (r(*SHAPE) * 8 - 4).requires_grad_()
            y = fns[name](x, dim)
            dy = r(*SHAPE) * 2 - 1
            (dx,) = torch.autograd.grad(y, (x,), dy)
            key = f"{name}.{dim}"
            out.update({f"{key}.x": x, f"{key}.dy": dy, f"{key}.y": y, f"{key}.dx": dx})
        inf, nan = float("inf"), float("nan")
        s = torch.tensor([[-inf, 0.0, 1.0], [-inf, -inf, -inf], [inf, 0.0, 1.0], [nan, 0.0, 1.0],
                          [-inf, inf, 2.0]], dtype=torch.float64)
        out[f"special.{name}.x"] = s
        out[f"special.{name}.y"] = fns[name](s, 1)
    masked(torch, r, fns, out)
    widened(torch, r, out)
    return out


def masked(torch, r, fns, out):
    """masked.{op}.{keep|add}.{dim}.{x,mask,dy,y,dx}: the keep mask as 0/1."""
    for name in ("softmax", "log_softmax"):
        for dim in range(len(SHAPE)):
            keep = r(*SHAPE) < 0.7
            row = [0] * len(SHAPE)
            row[dim] = slice(None)
            keep[tuple(row)] = False  # a row with nothing kept
            row[0] = 1
            keep[tuple(row)] = True  # and one all kept
            add = torch.where(r(*SHAPE) < 0.15, torch.tensor(float("-inf"), dtype=torch.float64),
                              r(*SHAPE) * 4 - 2)
            for kind, mask, f in (("keep", keep.double(), lambda x: x.masked_fill(~keep, float("-inf"))),
                                  ("add", add, lambda x: x + add)):
                x = (r(*SHAPE) * 8 - 4).requires_grad_()
                y = fns[name](f(x), dim)
                dy = r(*SHAPE) * 2 - 1
                (dx,) = torch.autograd.grad(y, (x,), dy)
                key = f"masked.{name}.{kind}.{dim}"
                out.update({f"{key}.x": x, f"{key}.mask": mask, f"{key}.dy": dy, f"{key}.y": y,
                            f"{key}.dx": dx})


def widened(torch, r, out):
    """dtype.{op}.{bf16|f16}.{dim}.{x,dy,y,dx}: op(x, dim, dtype=torch.float32)
    of a 16-bit x, y and dy f32, dx in x's dtype (autograd's)."""
    fns = {
        "softmax": lambda x, d: torch.softmax(x, d, dtype=torch.float32),
        "log_softmax": lambda x, d: torch.log_softmax(x, d, dtype=torch.float32),
        "softmin": lambda x, d: torch.nn.functional.softmin(x, d, dtype=torch.float32),
    }
    for name in OPS:
        for dt_name, dt in (("bf16", torch.bfloat16), ("f16", torch.float16)):
            for dim in range(len(SHAPE)):
                x = (r(*SHAPE) * 8 - 4).to(dt).requires_grad_()
                y = fns[name](x, dim)
                dy = (r(*SHAPE) * 2 - 1).float()
                (dx,) = torch.autograd.grad(y, (x,), dy)
                assert y.dtype == torch.float32 and dx.dtype == dt
                key = f"dtype.{name}.{dt_name}.{dim}"
                out.update({f"{key}.x": x.double(), f"{key}.dy": dy.double(), f"{key}.y": y.double(),
                            f"{key}.dx": dx.double()})
