"""Goldens of GroupNorm: f64 inputs, PyTorch's outputs, statistics and
autograd gradients of F.group_norm (1 group, some groups, ranks 3 to 5,
weight and bias present and absent) and of F.instance_norm with
use_input_stats=True and no running statistics (the case groups = C).
Checked by crates/baracuda-kernels/tests/golden_norm.rs."""

from norm import record

EPS = 1e-5
# name -> (shape, groups, weight, bias, instance_norm)
CASES = {
    "g1.wb": ((2, 6, 5), 1, True, True, False),
    "g3.wb": ((2, 6, 5), 3, True, True, False),
    "g3.none": ((2, 6, 5), 3, False, False, False),
    "g2.r4.w": ((2, 4, 3, 2), 2, True, False, False),
    "g4.r5.wb": ((1, 4, 2, 2, 3), 4, True, True, False),
    "inst.wb": ((2, 6, 5), 6, True, True, True),
    "inst.none": ((3, 4, 2, 3), 4, False, False, True),
}


def make(torch):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(2029)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
    out = {}
    for name, (shape, groups, has_w, has_b, inst) in CASES.items():
        c = shape[1]
        x = (r(*shape) * 4 - 2 + 1.5).requires_grad_()
        w = (r(c) + 0.5).requires_grad_() if has_w else None
        b = (r(c) * 2 - 1).requires_grad_() if has_b else None
        if inst:
            y = F.instance_norm(x, weight=w, bias=b, use_input_stats=True, eps=EPS)
        else:
            y = F.group_norm(x, groups, w, b, EPS)
        xg = x.detach().reshape(shape[0], groups, -1)
        mean = xg.mean(-1)
        var = xg.var(-1, correction=0)
        record(torch, out, name, (x, w, b), y, (mean, var), r(*shape) * 2 - 1, EPS)
    return out
