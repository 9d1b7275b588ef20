"""Goldens of LocalResponseNorm: f64 inputs, PyTorch's outputs and
autograd gradients of F.local_response_norm over ranks 3 to 5, window
sizes odd, even, 1 and wider than the channels, default and strong
constants. Checked by
crates/baracuda-kernels/tests/golden_local_response_norm.rs."""

# name -> (shape, size, alpha, beta, k)
CASES = {
    "r3.s3": ((2, 7, 5), 3, 0.5, 0.6, 2.0),
    "r3.s2": ((2, 6, 4), 2, 0.5, 0.75, 1.0),
    "r4.s5": ((2, 6, 3, 3), 5, 1e-4, 0.75, 1.0),
    "r4.s4": ((1, 5, 2, 3), 4, 2.0, 0.5, 1.5),
    "r5.s1": ((1, 3, 2, 2, 2), 1, 0.3, 0.9, 1.0),
    "r3.s9": ((2, 3, 4), 9, 0.7, 0.75, 2.0),
}


def make(torch):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(2032)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
    out = {}
    for name, (shape, size, alpha, beta, k) in CASES.items():
        x = (r(*shape) * 4 - 2).requires_grad_()
        y = F.local_response_norm(x, size, alpha, beta, k)
        dy = r(*shape) * 2 - 1
        (dx,) = torch.autograd.grad(y, [x], dy)
        out.update({f"{name}.x": x, f"{name}.y": y, f"{name}.dy": dy, f"{name}.dx": dx})
    return out
