"""Goldens of the softmax family: f64 inputs, PyTorch's outputs and its
autograd gradients of softmax, log_softmax and softmin along each dim of a
[4, 5, 6] tensor, and the forward of rows holding -inf, only -inf, +inf
and NaN; softmax and log_softmax under a bool keep mask (the composite
op(x.masked_fill(~keep, -inf)), one row with nothing kept) and an additive
mask (op(x + mask), some -inf), forward and gradient; and each op of a bf16
and an f16 x with dtype=torch.float32 (y and dy in f32, dx in x's dtype,
all stored as f64); and F.gumbel_softmax with given gumbels (its body with
`gumbels` in place of the draw: soft and hard, forward and the logits'
gradient); and sparsemax along each dim (no PyTorch op: the sorted-row
threshold written in torch below, its gradient by autograd). Checked by
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
    gumbel(torch, r, out)
    sparse(torch, r, out)
    return out


def sparsemax(torch, x, dim):
    """Martins & Astudillo (2016): y = max(x - tau, 0), tau from the row
    sorted in decreasing order."""
    z = x.movedim(dim, -1)
    zs, _ = z.sort(-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    cum = zs.cumsum(-1)
    kz = (1 + k * zs > cum).sum(-1, keepdim=True)
    tau = (cum.gather(-1, kz - 1) - 1) / kz
    return (z - tau).clamp(min=0).movedim(-1, dim)


def sparse(torch, r, out):
    """sparsemax.{dim}.{x,dy,y,dx}."""
    for dim in range(len(SHAPE)):
        x = (r(*SHAPE) * 2 - 1).requires_grad_()
        y = sparsemax(torch, x, dim)
        dy = r(*SHAPE) * 2 - 1
        (dx,) = torch.autograd.grad(y, (x,), dy)
        out.update({f"sparsemax.{dim}.x": x, f"sparsemax.{dim}.dy": dy, f"sparsemax.{dim}.y": y,
                    f"sparsemax.{dim}.dx": dx})


def gumbel(torch, r, out):
    """gumbel.{soft|hard}.{dim}.{x,g,dy,y,soft,dx} at tau 0.7: torch's
    F.gumbel_softmax with the gumbels given (the same code after the draw)."""
    tau = 0.7
    for hard in (False, True):
        for dim in range(len(SHAPE)):
            x = (r(*SHAPE) * 8 - 4).requires_grad_()
            g = -(-(r(*SHAPE) * 0.999999 + 1e-6).log()).log()  # -log(Exponential)
            y_soft = ((x + g) / tau).softmax(dim)
            if hard:
                index = y_soft.max(dim, keepdim=True)[1]
                y_hard = torch.zeros_like(x, memory_format=torch.legacy_contiguous_format).scatter_(dim, index, 1.0)
                y = y_hard - y_soft.detach() + y_soft
            else:
                y = y_soft
            dy = r(*SHAPE) * 2 - 1
            (dx,) = torch.autograd.grad(y, (x,), dy)
            key = f"gumbel.{'hard' if hard else 'soft'}.{dim}"
            out.update({f"{key}.x": x, f"{key}.g": g, f"{key}.dy": dy, f"{key}.y": y,
                        f"{key}.soft": y_soft, f"{key}.dx": dx})


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
