"""Goldens of the reduce family: f64 inputs, PyTorch's outputs and its
autograd gradients for every reduction over dims (0, 2) of a [4, 5, 6]
tensor: ties for amax/amin, zeros for prod, NaNs for nansum/nanmean, the
vector norm at several orders, var/std at several corrections, the
empty reductions; and max/min with indices over dim 1 (ties, and NaN)
with the values' gradient, and argmax/argmin over all dims; all, any and
count_nonzero over dims (0, 2), dim 1 and all dims of an input with zeros,
-0.0 and NaN, and over an empty dim; var_mean and std_mean over dims
(0, 2) at several corrections, with the gradient of both outputs and of
each alone, and over an empty dim; the trace of non-square matrices
with its gradient. Checked by crates/baracuda-kernels/tests/golden_reduce.rs."""

SHAPE = (4, 5, 6)
DIMS = (0, 2)
NORM_ORDERS = {"0": 0.0, "1": 1.0, "2": 2.0, "3": 3.0, "0.5": 0.5, "1.5": 1.5, "-1": -1.0,
               "inf": float("inf"), "-inf": float("-inf")}
CORRECTIONS = {"0": 0, "1": 1, "2.5": 2.5}
# The trace cases: key -> shape.
TRACES = {"4x6": (4, 6), "5x3": (5, 3), "1x1": (1, 1)}


def make(torch):
    g = torch.Generator().manual_seed(2027)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
    fns = {
        "sum": lambda x: x.sum(DIMS),
        "mean": lambda x: x.mean(DIMS),
        "nansum": lambda x: x.nansum(DIMS),
        "nanmean": lambda x: x.nanmean(DIMS),
        "prod": lambda x: x.prod(0).prod(1),
        "amax": lambda x: x.amax(DIMS),
        "amin": lambda x: x.amin(DIMS),
        "logsumexp": lambda x: x.logsumexp(DIMS),
    }
    for k, c in CORRECTIONS.items():
        fns[f"var.{k}"] = lambda x, c=c: x.var(DIMS, correction=c)
        fns[f"std.{k}"] = lambda x, c=c: x.std(DIMS, correction=c)
    for k, p in NORM_ORDERS.items():
        fns[f"norm.{k}"] = lambda x, p=p: torch.linalg.vector_norm(x, p, DIMS)
    out = {}
    for name, f in fns.items():
        x = r(*SHAPE) * 4 - 2
        if name.startswith("prod"):
            x = r(*SHAPE) * 0.5 + 0.75
            x[0, 0, 0] = 0.0  # output 0: one zero
            x[1, 1, 2] = 0.0  # output 1: two zeros
            x[3, 1, 4] = 0.0
        if name in ("amax", "amin") or name.startswith("norm.") and "inf" in name:
            x = torch.floor(x * 2) / 2  # ties
        if name.startswith("nan"):
            x[1, 0, 3] = float("nan")
            x[2, 2, 0] = float("nan")
        x.requires_grad_()
        y = f(x)
        dy = r(*y.shape) * 2 - 1
        (dx,) = torch.autograd.grad(y, (x,), dy, allow_unused=True, materialize_grads=True)
        out.update({f"{name}.x": x, f"{name}.dy": dy, f"{name}.y": y, f"{name}.dx": dx})
    # max / min with indices over dim 1: ties (the first index), and NaN
    # (the first NaN); the gradient of the values; argmax / argmin of all
    for op in ("max", "min"):
        for case in ("ties", "nan"):
            x = torch.floor((r(*SHAPE) * 4 - 2) * 2) / 2
            if case == "nan":
                x[0, 3, 0] = float("nan")
                x[0, 1, 0] = float("nan")
                x[2, 4, 5] = float("nan")
            x.requires_grad_()
            values, indices = getattr(torch, op)(x, 1)
            dv = r(*values.shape) * 2 - 1
            (dx,) = torch.autograd.grad(values, (x,), dv)
            k = f"{op}_indices.{case}"
            out.update({f"{k}.x": x, f"{k}.values": values, f"{k}.indices": indices.double(),
                        f"{k}.dv": dv, f"{k}.dx": dx})
            flat = getattr(torch, f"arg{op}")(x)
            out[f"arg{op}_all.{case}.x"] = x
            out[f"arg{op}_all.{case}.indices"] = flat.double().reshape(1)
    # empty reductions: [3, 0] over dim 1
    e = torch.zeros(3, 0, dtype=torch.float64)
    empty = {
        "sum": e.sum(1), "nansum": e.nansum(1), "prod": e.prod(1), "mean": e.mean(1),
        "nanmean": e.nanmean(1), "logsumexp": e.logsumexp(1), "var.1": e.var(1),
        "std.1": e.std(1), "norm.2": torch.linalg.vector_norm(e, 2, 1),
        "norm.0": torch.linalg.vector_norm(e, 0, 1), "norm.1": torch.linalg.vector_norm(e, 1, 1),
    }
    for name, y in empty.items():
        out[f"empty.{name}.y"] = y
    # all / any / count_nonzero: zeros (a third), -0.0 (zero) and NaN
    # (nonzero); one [4, 5, 6] input, three dim sets, and [3, 0] over dim 1
    x = torch.floor(r(*SHAPE) * 3)
    x[x == 1] = -0.0
    x[0, 2, 1] = float("nan")
    x[3, 0, 0] = float("nan")
    x[:, 4, :] = 2.0  # a slice without zeros: all true there
    out["logical.x"] = x
    logical = {
        "all": lambda x, d: torch.all(x, dim=d),
        "any": lambda x, d: torch.any(x, dim=d),
        "count_nonzero": lambda x, d: torch.count_nonzero(x, dim=d),
    }
    for op, f in logical.items():
        for key, d in (("02", (0, 2)), ("1", (1,)), ("all", (0, 1, 2))):
            out[f"logical.{op}.{key}.y"] = f(x, d).double().reshape(-1)
        out[f"logical.{op}.empty.y"] = f(e, (1,)).double()
    # var_mean / std_mean over dims (0, 2): the gradient of both outputs
    # (dx), of y alone (dx_y) and of the mean alone (dx_mean)
    for op in ("var", "std"):
        f = getattr(torch, f"{op}_mean")
        for k, c in CORRECTIONS.items():
            x = (r(*SHAPE) * 4 - 2).requires_grad_()
            y, mean = f(x, DIMS, correction=c)
            dy, dmean = r(*y.shape) * 2 - 1, r(*mean.shape) * 2 - 1
            (dx,) = torch.autograd.grad((y, mean), (x,), (dy, dmean), retain_graph=True)
            (dx_y,) = torch.autograd.grad(y, (x,), dy, retain_graph=True)
            (dx_mean,) = torch.autograd.grad(mean, (x,), dmean)
            key = f"{op}_mean.{k}"
            out.update({f"{key}.x": x, f"{key}.y": y, f"{key}.mean": mean, f"{key}.dy": dy,
                        f"{key}.dmean": dmean, f"{key}.dx": dx, f"{key}.dx_y": dx_y,
                        f"{key}.dx_mean": dx_mean})
        for k, c in (("1", 1), ("-1", -1)):
            y, mean = f(e, 1, correction=c)
            out[f"empty.{op}_mean.{k}.y"] = y
            out[f"empty.{op}_mean.{k}.mean"] = mean
    # trace of non-square matrices and its gradient
    for key, shape in TRACES.items():
        x = (r(*shape) * 4 - 2).requires_grad_()
        y = torch.trace(x)
        dy = r(()) * 2 - 1
        (dx,) = torch.autograd.grad(y, (x,), dy)
        out.update({f"trace.{key}.x": x, f"trace.{key}.y": y.reshape(1),
                    f"trace.{key}.dy": dy.reshape(1), f"trace.{key}.dx": dx})
    return out
