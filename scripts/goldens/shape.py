"""Goldens of the shape family: f64 inputs, PyTorch's outputs and its
autograd gradients of flip, roll, tril, triu, F.pad (constant, reflect,
replicate, circular; negative pads crop), repeat, repeat_interleave
(scalar and per-index counts), diagonal, diag_embed, diag, unfold,
strided slices, cat and stack. Each case stores its parameters next to
its tensors (`<case>.shape`, `.dims`, `.shifts`, `.diagonal`, `.pad`,
`.value`, `.dim`, `.repeats`, `.offset`, `.dim1`, `.dim2`, `.size`,
`.step`, `.start`, `.stop`), so the Rust side reads the case list from
the file. Checked by crates/baracuda-kernels/tests/golden_shape.rs."""

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
REPEATS = [((3,), (4,)), ((2, 3), (2, 3)), ((2, 3, 4), (1, 2, 1)), ((2, 3), (1, 1))]
# (shape, repeats: an int or a per-index list, dim)
INTERLEAVES = [((5,), 3, 0), ((2, 3), 2, -1), ((3, 4), (2, 0, 1), 0), ((2, 3, 4), (1, 3, 0, 2), 2),
               ((2, 3), (2,), 1)]
DIAGONALS = [((4, 4), 0, 0, 1), ((3, 5), 2, 0, 1), ((3, 5), -1, 1, 0), ((2, 3, 4), 1, -1, 0),
             ((2, 3, 4, 5), -2, 1, 3), ((3, 3), 5, 0, 1)]
EMBEDS = [((3,), 0, -2, -1), ((2, 3), 1, 0, 2), ((2, 3), -2, 2, 0), ((2, 3, 2), 0, 1, 3)]
DIAGS = [((4,), 0), ((4,), 2), ((4,), -1), ((3, 5), 0), ((3, 5), 2), ((5, 3), -1)]
UNFOLDS = [((7,), 0, 3, 2), ((2, 9), 1, 3, 1), ((5, 4), 0, 2, 3), ((2, 8, 3), -2, 4, 4), ((6,), 0, 6, 1)]
# (shape, dim, start, stop, step); stop None runs to the end
SLICES = [((7,), 0, 1, 6, 2), ((3, 8), 1, -5, None, 2), ((4, 5), 0, -100, 100, 3),
          ((2, 6, 3), 1, 4, 2, 1), ((3, 10), -1, 2, -1, 4)]


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
    for i, (shape, reps) in enumerate(REPEATS):
        x = r(*shape).requires_grad_()
        grad_case(f"repeat.{i}", [x], x.repeat(*reps), {"shape": shape, "repeats": reps})
    for i, (shape, reps, dim) in enumerate(INTERLEAVES):
        x = r(*shape).requires_grad_()
        if isinstance(reps, int):
            y = torch.repeat_interleave(x, reps, dim)
            counts = (reps,) * shape[dim]
        else:
            rt = torch.tensor(reps, dtype=torch.int64)
            y = torch.repeat_interleave(x, rt, dim, output_size=int(rt.sum()) if len(reps) > 1 else None)
            counts = reps if len(reps) > 1 else reps * shape[dim]
        grad_case(f"repeat_interleave.{i}", [x], y, {"shape": shape, "repeats": counts, "dim": (dim,)})
    for i, (shape, off, d1, d2) in enumerate(DIAGONALS):
        x = r(*shape).requires_grad_()
        grad_case(f"diagonal.{i}", [x], torch.diagonal(x, off, d1, d2),
                  {"shape": shape, "offset": (off,), "dim1": (d1,), "dim2": (d2,)})
    for i, (shape, off, d1, d2) in enumerate(EMBEDS):
        x = r(*shape).requires_grad_()
        grad_case(f"diag_embed.{i}", [x], torch.diag_embed(x, off, d1, d2),
                  {"shape": shape, "offset": (off,), "dim1": (d1,), "dim2": (d2,)})
    for i, (shape, off) in enumerate(DIAGS):
        x = r(*shape).requires_grad_()
        grad_case(f"diag.{i}", [x], torch.diag(x, off), {"shape": shape, "offset": (off,)})
    for i, (shape, dim, size, step) in enumerate(UNFOLDS):
        x = r(*shape).requires_grad_()
        grad_case(f"unfold.{i}", [x], x.unfold(dim, size, step),
                  {"shape": shape, "dim": (dim,), "size": (size,), "step": (step,)})
    for i, (shape, dim, start, stop, step) in enumerate(SLICES):
        x = r(*shape).requires_grad_()
        index = [slice(None)] * len(shape)
        index[dim] = slice(start, stop, step)
        stop = 2 ** 62 if stop is None else stop
        grad_case(f"slice.{i}", [x], x[tuple(index)],
                  {"shape": shape, "dim": (dim,), "start": (start,), "stop": (stop,), "step": (step,)})
    return out
