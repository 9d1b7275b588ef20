"""Goldens of the softmax family: f64 inputs, PyTorch's outputs and its
autograd gradients of softmax, log_softmax and softmin along each dim of a
[4, 5, 6] tensor, and the forward of rows holding -inf, only -inf, +inf
and NaN. Checked by crates/baracuda-kernels/tests/golden_softmax.rs."""

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
    return out
