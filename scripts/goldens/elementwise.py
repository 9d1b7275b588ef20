"""Goldens of the elementwise family: f64 inputs, PyTorch's outputs and its
autograd gradients for every unary and binary op (binary with broadcasting,
and with ties for maximum/minimum). Checked by
crates/baracuda-kernels/tests/golden_elementwise.rs."""

UNARY = ["relu", "gelu_erf", "gelu_tanh", "silu", "sigmoid", "tanh", "exp", "neg"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]


def make(torch):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(2026)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
    fns = {
        "relu": torch.relu, "gelu_erf": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp, "neg": torch.neg,
    }
    out = {}
    for name in UNARY:
        x = (r(67) * 8 - 4).requires_grad_()
        dy = r(67) * 2 - 1
        y = fns[name](x)
        (dx,) = torch.autograd.grad(y, (x,), dy)
        out.update({f"unary.{name}.x": x, f"unary.{name}.dy": dy, f"unary.{name}.y": y, f"unary.{name}.dx": dx})
    bfns = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
            "maximum": torch.maximum, "minimum": torch.minimum}
    for name in BINARY:
        # a [4, 3], b [1, 3]: b broadcast over rows; its gradient sums them
        a = r(4, 3) * 4 - 2
        b = r(1, 3) + 0.5
        if name in ("maximum", "minimum"):
            a = torch.floor(a * 2) / 2
            b = torch.floor(b * 2) / 2
            a[1] = b[0]  # a tie in every column
        a.requires_grad_()
        b.requires_grad_()
        y = bfns[name](a, b)
        dy = r(4, 3) * 2 - 1
        da, db = torch.autograd.grad(y, (a, b), dy)
        out.update({f"binary.{name}.a": a, f"binary.{name}.b": b, f"binary.{name}.dy": dy,
                    f"binary.{name}.out": y, f"binary.{name}.da": da, f"binary.{name}.db": db})
    return out
