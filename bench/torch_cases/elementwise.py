"""PyTorch baselines of the elementwise family (same names, shapes and
dtypes as crates/baracuda-bench/src/elementwise.rs): every unary and
binary op on 2^28 contiguous elements in bf16 and f32, two backward
passes, and the device-to-device copy ceiling.

Every case, the copy included, rotates over PLACEMENTS buffer sets, each a
separate allocation of every operand: random inputs, and outputs made
here and written through the ops' out= forms (the same kernels), so that
outputs too sit in PLACEMENTS places rather than in the one block the
caching allocator would hand back on every call. Each case's fn is a list
of one callable per set, which torch_baseline.time_ms calls in turn, as
baracuda-bench's time_rotating_ms does. Why: where the allocator places a
memory-bound kernel's buffers moves its time by more than the 0.1% the
elementwise table is asked to resolve. On an H200 the bf16 add of 2^28
elements on three separate allocations of a, b, y took 0.3798 / 0.3800 /
0.3779 ms with torch.add and 0.3698 / 0.3693 / 0.3691 ms with ours
(bench/experiments/binary_hints.cu measures the spread), so each side's
time is the average over PLACEMENTS placements rather than one draw.

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
    nn = torch._C._nn
    aten = torch.ops.aten
    dev = "cuda"
    unary = {
        # torch.relu is at::clamp_min(x, 0), the same kernel, and has no
        # out= form.
        "relu": lambda x, y: torch.clamp_min(x, 0, out=y),
        "gelu_erf": lambda x, y: nn.gelu(x, out=y),
        "gelu_tanh": lambda x, y: nn.gelu(x, approximate="tanh", out=y),
        "silu": lambda x, y: nn.silu(x, out=y),
        "sigmoid": lambda x, y: torch.sigmoid(x, out=y),
        "tanh": lambda x, y: torch.tanh(x, out=y),
        "exp": lambda x, y: torch.exp(x, out=y),
        "neg": lambda x, y: torch.neg(x, out=y),
    }
    # backward passes as autograd runs them: the aten *_backward kernels
    unary_bw = {
        "gelu_tanh": lambda x, dy, dx: aten.gelu_backward.grad_input(dy, x, approximate="tanh", grad_input=dx),
        "silu": lambda x, dy, dx: aten.silu_backward.grad_input(dy, x, grad_input=dx),
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

    def empty(dtype):
        """PLACEMENTS output tensors of N elements, each its own allocation."""
        return [torch.empty(N, device=dev, dtype=dtype) for _ in range(PLACEMENTS)]

    xs, ys = rand(-4, 4, torch.float32), empty(torch.float32)
    yield dict(op="ceiling_copy", dtype="f32", shape=SHAPE,
               fn=[(lambda x=x, y=y: y.copy_(x)) for x, y in zip(xs, ys)], bytes=2 * N * 4)
    del xs, ys
    for op, f in unary.items():
        for dtype, name in dtypes:
            size = torch.finfo(dtype).bits // 8
            xs, ys = rand(-4, 4, dtype), empty(dtype)
            yield dict(op=op, dtype=name, shape=SHAPE,
                       fn=[(lambda x=x, y=y, f=f: f(x, y)) for x, y in zip(xs, ys)], bytes=2 * N * size)
            if op in unary_bw:
                bw = unary_bw[op]
                dys = rand(-1, 1, dtype)
                yield dict(op=op, pass_="bw", dtype=name, shape=SHAPE,
                           fn=[(lambda x=x, dy=dy, dx=dx, bw=bw: bw(x, dy, dx)) for x, dy, dx in zip(xs, dys, ys)],
                           bytes=3 * N * size)
                del dys
            del xs, ys
    for op, f in binary.items():
        for dtype, name in dtypes:
            size = torch.finfo(dtype).bits // 8
            as_, bs, ys = rand(-2, 2, dtype), rand(0.5, 2, dtype), empty(dtype)
            yield dict(op=op, dtype=name, shape=SHAPE,
                       fn=[(lambda a=a, b=b, y=y, f=f: f(a, b, out=y)) for a, b, y in zip(as_, bs, ys)],
                       bytes=3 * N * size)
            if op == "mul":
                # mul backward: da = dy * b, db = dy * a (two kernels in autograd)
                dys, dbs = rand(-1, 1, dtype), empty(dtype)
                yield dict(op="mul", pass_="bw", dtype=name, shape=SHAPE,
                           fn=[(lambda a=a, b=b, dy=dy, da=da, db=db: (torch.mul(dy, b, out=da),
                                                                       torch.mul(dy, a, out=db)))
                               for a, b, dy, da, db in zip(as_, bs, dys, ys, dbs)],
                           bytes=5 * N * size)
                del dys, dbs
            del as_, bs, ys
