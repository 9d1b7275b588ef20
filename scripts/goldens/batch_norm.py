"""Goldens of BatchNorm: f64 inputs, PyTorch's outputs, statistics,
updated running statistics and autograd gradients of F.batch_norm over
ranks 2 to 5 (BatchNorm1d on [N, C] and [N, C, L], 2d, 3d), in training
(with and without running statistics, several momenta, two values per
channel) and in eval, weight and bias present and absent.
Checked by crates/baracuda-kernels/tests/golden_batch_norm.rs."""

EPS = 1e-5
# name -> (shape, training, running statistics, momentum, weight, bias)
CASES = {
    "train.r2.wb": ((5, 3), True, True, 0.1, True, True),
    "train.r2.two": ((2, 4), True, True, 0.1, True, True),
    "train.r3.wb": ((2, 3, 4), True, True, 0.3, True, True),
    "train.r4.none": ((2, 3, 2, 3), True, False, 0.1, False, False),
    "train.r5.w": ((1, 2, 2, 2, 3), True, True, 1.0, True, False),
    "eval.r3.wb": ((2, 3, 4), False, True, 0.1, True, True),
    "eval.r4.none": ((3, 2, 2, 2), False, True, 0.1, False, False),
    "eval.r2.one": ((1, 3), False, True, 0.1, True, True),
}


def make(torch):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(2031)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
    out = {}
    for name, (shape, training, running, momentum, has_w, has_b) in CASES.items():
        c = shape[1]
        x = (r(*shape) * 4 - 2 + 1.5).requires_grad_()
        w = (r(c) + 0.5).requires_grad_() if has_w else None
        b = (r(c) * 2 - 1).requires_grad_() if has_b else None
        rm = r(c) - 0.5 if running else None
        rv = r(c) * 1.5 + 0.5 if running else None
        rm_out = rm.clone() if running else None
        rv_out = rv.clone() if running else None
        y = F.batch_norm(x, rm_out, rv_out, w, b, training, momentum, EPS)
        dims = [0] + list(range(2, len(shape)))
        if training:
            mean = x.detach().mean(dims)
            var = x.detach().var(dims, correction=0)
        else:
            mean, var = rm, rv
        dy = r(*shape) * 2 - 1
        present = [t for t in (x, w, b) if t is not None]
        grads = list(torch.autograd.grad(y, present, dy))
        out.update({f"{name}.x": x, f"{name}.dy": dy, f"{name}.y": y, f"{name}.dx": grads.pop(0),
                    f"{name}.mean": mean, f"{name}.rstd": 1.0 / torch.sqrt(var + EPS)})
        for key, t in (("weight", w), ("bias", b)):
            if t is not None:
                out[f"{name}.{key}"] = t
                out[f"{name}.d{key}"] = grads.pop(0)
        if running:
            out.update({f"{name}.running_mean": rm, f"{name}.running_var": rv,
                        f"{name}.running_mean_out": rm_out, f"{name}.running_var_out": rv_out})
    return out
