"""Goldens of the shape family: f64 inputs, PyTorch's outputs and its
autograd gradients of flip, roll, tril, triu, F.pad (constant, reflect,
replicate, circular; negative pads crop), cat and stack. Each case stores
its parameters next to its tensors (`<case>.shape`, `.dims`, `.shifts`,
`.diagonal`, `.pad`, `.value`, `.dim`), so the Rust side reads the case
list from the file. Checked by crates/baracuda-kernels/tests/golden_shape.rs."""

FLIPS = [((5,), (0,)), ((3, 4), (1,)), ((3, 4), (0, -1)), ((2, 3, 4), (0, 2)), ((2, 3, 4), (0, 1, 2))]
ROLLS = [((5,), (2,), (0,)), ((3, 4), (1,), (1,)), ((3, 4), (-5, 7), (0, 1)),
         ((2, 3, 4), (2, -1), (1, 1)), ((3, 4), (5,), ()), ((2, 3, 4), (-7,), ())]
TRIS = [((4, 4), 0), ((3, 5), 1), ((5, 3), -2), ((2, 3, 4), 0), ((2, 4, 3), 10), ((3, 3), -10)]
PADS = {
    "constant": [((3, 5), (1, 2)), ((2, 3, 4), (1, 0, 2, 1)), ((2, 3, 4), (-1, 2, 1, -1)),
                 ((2, 3, 4), (1, 1, 1, 1, 1, 1)), ((4, 5), (-2, -3))],
    "reflect": [((2, 5), (2, 3)), ((1, 2, 5), (4, 4)), ((2, 4, 5), (1, 3, 2, 0)),
                ((1, 2, 3, 4, 5), (1, 2, 2, 1, 1, 1)), ((2, 6), (-2, 3)), ((2, 3, 5), (2, -1, -1, 2))],
    "replicate": [((2, 5), (2, 3)), ((1, 2, 3), (6, 1)), ((2, 4, 5), (1, 3, 2, 0)),
                  ((1, 2, 3, 4, 5), (1, 2, 2, 1, 1, 1)), ((2, 6), (-2, 3))],
    "circular": [((2, 5), (2, 3)), ((1, 2, 5), (5, 5)), ((2, 4, 5), (1, 3, 2, 0)),
                 ((1, 2, 3, 4, 5), (1, 2, 2, 1, 1, 1)), ((2, 6), (-2, 3)), ((2, 6), (3, -1)),
                 ((2, 4), (-2, -2))],
}
CATS = [(((2, 3), (2, 1), (2, 4)), 1), (((2, 3), (1, 3)), 0), (((2, 3, 4), (2, 0, 4), (2, 2, 4)), -2),
        (((3,), (0,), (2,)), 0)]
STACKS = [((3,), 2, 0), ((3,), 2, 1), ((2, 3), 3, 1), ((2, 3), 3, -1)]


def make(torch):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(2031)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64) * 4 - 2
    t = lambda v: torch.tensor(list(v), dtype=torch.float64)
    out = {}

    def grad_case(key, xs, y, params):
        dy = r(*y.shape)
        dxs = torch.autograd.grad(y, xs, dy)
        out[f"{key}.y"] = y
        out[f"{key}.dy"] = dy
        for k, (x, dx) in enumerate(zip(xs, dxs)):
            suffix = "" if len(xs) == 1 else str(k)
            out[f"{key}.x{suffix}"] = x
            out[f"{key}.dx{suffix}"] = dx
        for name, v in params.items():
            out[f"{key}.{name}"] = t(v)

    for i, (shape, dims) in enumerate(FLIPS):
        x = r(*shape).requires_grad_()
        grad_case(f"flip.{i}", [x], torch.flip(x, dims), {"shape": shape, "dims": dims})
    for i, (shape, shifts, dims) in enumerate(ROLLS):
        x = r(*shape).requires_grad_()
        y = torch.roll(x, shifts, dims) if dims else torch.roll(x, shifts[0])
        grad_case(f"roll.{i}", [x], y, {"shape": shape, "shifts": shifts, "dims": dims})
    for fn in ("tril", "triu"):
        for i, (shape, k) in enumerate(TRIS):
            x = r(*shape).requires_grad_()
            grad_case(f"{fn}.{i}", [x], getattr(torch, fn)(x, k), {"shape": shape, "diagonal": (k,)})
    for mode, cases in PADS.items():
        for i, (shape, pad) in enumerate(cases):
            x = r(*shape).requires_grad_()
            value = 1.25 if mode == "constant" else 0.0
            y = F.pad(x, pad, mode=mode, value=value) if mode == "constant" else F.pad(x, pad, mode=mode)
            grad_case(f"pad_{mode}.{i}", [x], y, {"shape": shape, "pad": pad, "value": (value,)})
    for i, (shapes, dim) in enumerate(CATS):
        xs = [r(*s).requires_grad_() for s in shapes]
        y = torch.cat(xs, dim)
        params = {f"shape{k}": s for k, s in enumerate(shapes)}
        params["dim"] = (dim,)
        grad_case(f"cat.{i}", xs, y, params)
    for i, (shape, count, dim) in enumerate(STACKS):
        xs = [r(*shape).requires_grad_() for _ in range(count)]
        grad_case(f"stack.{i}", xs, torch.stack(xs, dim), {"shape": shape, "dim": (dim,)})
    return out
