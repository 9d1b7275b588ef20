"""PyTorch baselines of the elementwise family (same names, shapes and
dtypes as crates/baracuda-bench/src/elementwise.rs): every unary and
binary op on 2^28 contiguous elements in bf16 and f32, two backward
passes, and the device-to-device copy ceiling.

Every case, the copy included, rotates over PLACEMENTS buffer sets: its
inputs are PLACEMENTS separate allocations of random values, and calls
rotate through them (each case's fn is a list of one callable per set,
which torch_baseline.time_ms calls in turn, as baracuda-bench's
time_rotating_ms does). The ops are called in their functional forms, as
models call them; outputs come from the caching allocator (inside the
timed CUDA graph, from the graph's pool). A run through the out= forms
measured several ops slower than the functional forms had in the run
before (H200, bf16 div 0.409 ms against 0.366, silu and sigmoid 6%), so
the baseline stays PyTorch as it is used. Why rotate: where the allocator
places a memory-bound kernel's buffers moves its time by more than the
0.1% the elementwise table is asked to resolve. On an H200 the bf16 add
of 2^28 elements on three separate allocations of a, b, y took 0.3798 /
0.3800 / 0.3779 ms with torch.add and 0.3698 / 0.3693 / 0.3691 ms with
ours (docs/perf-notes/experiments/binary_hints.cu measures the spread), so each
side's time is the average over PLACEMENTS placements rather than one
draw.

cases() is a generator, in elementwise.rs's order: an op's sets are made
when its cases come up and dropped when the next op's are, so no more than
two ops' sets are alive at once (the largest, f32 mul backward, is 5
tensors of 1 GiB per set, 15 GiB)."""

N = 1 << 28
SHAPE = f"[{N}]"
# Buffer sets per case (PLACEMENTS in elementwise.rs): separate allocations
# that calls rotate through, to average over DRAM placements (see above).
PLACEMENTS = 3


def cases():
    import torch
    F = torch.nn.functional
    aten = torch.ops.aten
    dev = "cuda"
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
    # backward passes as autograd runs them: the aten *_backward kernels
    unary_bw = {
        "gelu_tanh": lambda x, dy: aten.gelu_backward(dy, x, approximate="tanh"),
        "silu": lambda x, dy: aten.silu_backward(dy, x),
    }
    binary = {
        "add": torch.add,
        "sub": torch.sub,
        "mul": torch.mul,
        "div": torch.div,
        "maximum": torch.maximum,
        "minimum": torch.minimum,
    }
    dtypes = [(torch.bfloat16, "bf16"), (torch.float32, "f32")]
    g = torch.Generator(device=dev).manual_seed(0)

    def rand(lo, hi, dtype):
        """PLACEMENTS tensors of N uniform values in [lo, hi), each its own
        allocation."""
        return [(torch.rand(N, device=dev, generator=g) * (hi - lo) + lo).to(dtype) for _ in range(PLACEMENTS)]

    xs = rand(-4, 4, torch.float32)
    ys = [torch.empty_like(x) for x in xs]
    yield dict(op="ceiling_copy", dtype="f32", shape=SHAPE,
               fn=[(lambda x=x, y=y: y.copy_(x)) for x, y in zip(xs, ys)], bytes=2 * N * 4)
    del xs, ys
    for op, f in unary.items():
        for dtype, name in dtypes:
            size = torch.finfo(dtype).bits // 8
            xs = rand(-4, 4, dtype)
            yield dict(op=op, dtype=name, shape=SHAPE,
                       fn=[(lambda x=x, f=f: f(x)) for x in xs], bytes=2 * N * size)
            if op in unary_bw:
                bw = unary_bw[op]
                dys = rand(-1, 1, dtype)
                yield dict(op=op, pass_="bw", dtype=name, shape=SHAPE,
                           fn=[(lambda x=x, dy=dy, bw=bw: bw(x, dy)) for x, dy in zip(xs, dys)],
                           bytes=3 * N * size)
                del dys
            del xs
    for op, f in binary.items():
        for dtype, name in dtypes:
            size = torch.finfo(dtype).bits // 8
            as_, bs = rand(-2, 2, dtype), rand(0.5, 2, dtype)
            yield dict(op=op, dtype=name, shape=SHAPE,
                       fn=[(lambda a=a, b=b, f=f: f(a, b)) for a, b in zip(as_, bs)],
                       bytes=3 * N * size)
            if op == "mul":
                # mul backward: da = dy * b, db = dy * a (two kernels in autograd)
                dys = rand(-1, 1, dtype)
                yield dict(op="mul", pass_="bw", dtype=name, shape=SHAPE,
                           fn=[(lambda a=a, b=b, dy=dy: (dy * b, dy * a)) for a, b, dy in zip(as_, bs, dys)],
                           bytes=5 * N * size)
                del dys
            del as_, bs
