"""PyTorch baselines of the elementwise family (same names, shapes and
dtypes as crates/baracuda-bench/src/elementwise.rs): every unary and
binary op on 2^28 contiguous elements in bf16 and f32, two backward
passes, and the device-to-device copy ceiling."""

N = 1 << 28
SHAPE = f"[{N}]"


def cases():
    import torch
    F = torch.nn.functional
    dev = "cuda"
    out = []
    unary = {
        "relu": torch.relu,
        "gelu_erf": F.gelu,
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu,
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "exp": torch.exp,
        "neg": torch.neg,
    }
    binary = {
        "add": torch.add,
        "sub": torch.sub,
        "mul": torch.mul,
        "div": torch.div,
        "maximum": torch.maximum,
        "minimum": torch.minimum,
    }
    g = torch.Generator(device=dev).manual_seed(0)
    x32 = torch.rand(N, device=dev, generator=g) * 8 - 4
    y32 = torch.empty_like(x32)
    out.append(dict(op="ceiling_copy", dtype="f32", shape=SHAPE, fn=lambda: y32.copy_(x32), bytes=2 * N * 4))
    for dtype, name in [(torch.bfloat16, "bf16"), (torch.float32, "f32")]:
        size = torch.finfo(dtype).bits // 8
        x = (torch.rand(N, device=dev, generator=g) * 8 - 4).to(dtype)
        dy = (torch.rand(N, device=dev, generator=g) * 2 - 1).to(dtype)
        for op, f in unary.items():
            out.append(dict(op=op, dtype=name, shape=SHAPE, fn=(lambda f=f, x=x: f(x)), bytes=2 * N * size))
        # backward passes as autograd runs them: the aten *_backward kernels
        out.append(dict(op="gelu_tanh", pass_="bw", dtype=name, shape=SHAPE,
                        fn=(lambda x=x, dy=dy: torch.ops.aten.gelu_backward(dy, x, approximate="tanh")),
                        bytes=3 * N * size))
        out.append(dict(op="silu", pass_="bw", dtype=name, shape=SHAPE,
                        fn=(lambda x=x, dy=dy: torch.ops.aten.silu_backward(dy, x)), bytes=3 * N * size))
        a = (torch.rand(N, device=dev, generator=g) * 4 - 2).to(dtype)
        b = (torch.rand(N, device=dev, generator=g) * 1.5 + 0.5).to(dtype)
        for op, f in binary.items():
            out.append(dict(op=op, dtype=name, shape=SHAPE, fn=(lambda f=f, a=a, b=b: f(a, b)), bytes=3 * N * size))
        # mul backward: da = dy * b, db = dy * a (two kernels in autograd)
        out.append(dict(op="mul", pass_="bw", dtype=name, shape=SHAPE,
                        fn=(lambda a=a, b=b, dy=dy: (dy * b, dy * a)), bytes=5 * N * size))
    return out
