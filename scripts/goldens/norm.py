"""Goldens of the norm family: f64 inputs, PyTorch's outputs, saved
statistics and autograd gradients of F.layer_norm (weight and bias, weight
only, none; normalized_shape of one and of two dims) and F.rms_norm
(weight, none) over a [3, 4, 5] tensor, layer_norm over rows of one
element, and the residual forms s = x + r; y = norm(s) (RESIDUAL_CASES:
s and the gradients of x and r, given dy and, in some cases, a ds into s).
Checked by crates/baracuda-kernels/tests/golden_norm.rs."""

SHAPE = (3, 4, 5)
EPS = 1e-5
# name -> (layer, normalized dims, weight, bias)
CASES = {
    "layer.1.wb": (True, 1, True, True),
    "layer.1.w": (True, 1, True, False),
    "layer.1.none": (True, 1, False, False),
    "layer.2.wb": (True, 2, True, True),
    "rms.1.w": (False, 1, True, False),
    "rms.1.none": (False, 1, False, False),
    "rms.2.w": (False, 2, True, False),
}

# the residual forms: name -> (layer, normalized dims, weight, bias, ds)
RESIDUAL_CASES = {
    "res.layer.1.wb.ds": (True, 1, True, True, True),
    "res.layer.2.none": (True, 2, False, False, False),
    "res.rms.1.w.ds": (False, 1, True, False, True),
    "res.rms.1.none": (False, 1, False, False, False),
}


def make(torch):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(2028)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
    out = {}
    cases = dict(CASES)
    cases["layer.h1.wb"] = (True, 1, True, True)
    for name, (layer, k, has_w, has_b) in cases.items():
        shape = (6, 1) if name == "layer.h1.wb" else SHAPE
        norm_shape = shape[len(shape) - k:]
        x = (r(*shape) * 4 - 2 + (1.5 if layer else 0.0)).requires_grad_()
        w = (r(*norm_shape) + 0.5).requires_grad_() if has_w else None
        b = (r(*norm_shape) * 2 - 1).requires_grad_() if has_b else None
        dims = tuple(range(len(shape) - k, len(shape)))
        if layer:
            y = F.layer_norm(x, norm_shape, w, b, EPS)
            mean = x.detach().mean(dims)
            var = x.detach().var(dims, correction=0)
        else:
            y = F.rms_norm(x, norm_shape, w, EPS)
            mean = torch.zeros_like(x.detach().mean(dims))
            var = (x.detach() ** 2).mean(dims)
        record(torch, out, name, (x, w, b), y, (mean, var), r(*shape) * 2 - 1)
    for name, (layer, k, has_w, has_b, has_ds) in RESIDUAL_CASES.items():
        norm_shape = SHAPE[len(SHAPE) - k:]
        x = (r(*SHAPE) * 4 - 2 + (1.5 if layer else 0.0)).requires_grad_()
        res = (r(*SHAPE) * 2 - 1).requires_grad_()
        w = (r(*norm_shape) + 0.5).requires_grad_() if has_w else None
        b = (r(*norm_shape) * 2 - 1).requires_grad_() if has_b else None
        dims = tuple(range(len(SHAPE) - k, len(SHAPE)))
        s = x + res
        if layer:
            y = F.layer_norm(s, norm_shape, w, b, EPS)
            mean = s.detach().mean(dims)
            var = s.detach().var(dims, correction=0)
        else:
            y = F.rms_norm(s, norm_shape, w, EPS)
            mean = torch.zeros_like(s.detach().mean(dims))
            var = (s.detach() ** 2).mean(dims)
        dy = r(*SHAPE) * 2 - 1
        ds = r(*SHAPE) * 2 - 1 if has_ds else None
        present = [t for t in (x, res, w, b) if t is not None]
        if has_ds:
            grads = list(torch.autograd.grad((y, s), present, (dy, ds)))
        else:
            grads = list(torch.autograd.grad(y, present, dy))
        out.update({f"{name}.x": x, f"{name}.r": res, f"{name}.s": s, f"{name}.y": y,
                    f"{name}.dy": dy, f"{name}.mean": mean, f"{name}.rstd": 1.0 / torch.sqrt(var + EPS),
                    f"{name}.dx": grads.pop(0), f"{name}.dr": grads.pop(0)})
        if has_ds:
            out[f"{name}.ds"] = ds
        for key, t in (("weight", w), ("bias", b)):
            if t is not None:
                out[f"{name}.{key}"] = t
                out[f"{name}.d{key}"] = grads.pop(0)
    return out


def record(torch, out, name, inputs, y, stats, dy, eps=EPS):
    """Case `name` into `out`: x, weight and bias (`inputs`, None when
    absent), y, the mean and rstd from `stats` (mean, variance), dy and the
    autograd gradients of every input present."""
    x, w, b = inputs
    mean, var = stats
    present = [t for t in inputs if t is not None]
    grads = list(torch.autograd.grad(y, present, dy))
    out.update({f"{name}.x": x, f"{name}.dy": dy, f"{name}.y": y, f"{name}.dx": grads.pop(0),
                f"{name}.mean": mean, f"{name}.rstd": 1.0 / torch.sqrt(var + eps)})
    for key, t in (("weight", w), ("bias", b)):
        if t is not None:
            out[f"{name}.{key}"] = t
            out[f"{name}.d{key}"] = grads.pop(0)
