"""PyTorch baselines of the GEMM family, from bench/cases/gemm.json (which
crates/baracuda-bench/src/gemm.rs reads too):

- matmul: `a @ b` (f32 with TF32 off, IEEE, unless the case allows it);
- scaled_mm: fp8 e4m3 -> bf16 through torch._scaled_mm (unit per-tensor
  scales, no fast accumulation: cuBLASLt's default, as ours);
- int_mm: s8 -> s32 through torch._int_mm;
- linear: F.linear, and the two backward matmuls exactly as autograd runs
  them for a row-major x and weight (aten mm_mat1_backward: dX = dY.mm(W);
  mm_mat2_backward with a column-major mat2 = W.t(): dW = dY.t().mm(X)),
  dW with a bias's db = dY.sum(0) (addmm's backward); a memory-bound one
  (decode) rotates x and W over buffer sets;
- bmm: torch.matmul of batched tensors;
- grouped_linear (MoE experts): x_e @ W_e^T over the case's token split.
  The baseline is torch._grouped_mm (one grouped CUTLASS kernel, the
  stronger baseline) when this torch has it and it runs here; otherwise
  the Python loop of torch.mm over experts that PyTorch users write. Which
  one ran is printed to stderr.

A matrix stored column-major is the transpose of a row-major tensor, as
PyTorch passes it (`rcr`: b is a row-major [n, k] transposed)."""
import sys

from . import caselist
from .caselist import Op

GEMM = {"m": int, "n": int, "k": int, "layout": str}
SETTINGS = {}
OPS = {
    "matmul": Op(("fw",), ("bf16", "f16", "f32", "f64"), GEMM, optional={"allow_tf32": False}),
    "scaled_mm": Op(("fw",), ("fp8_e4m3",), dict(GEMM, out_dtype=str)),
    "int_mm": Op(("fw",), ("i8",), dict(GEMM, out_dtype=str)),
    "linear": Op(("fw", "bw_data", "dw"), ("bf16", "f16", "f32"),
                 {"tokens": int, "in_features": int, "out_features": int, "epilogue": str},
                 optional={"memory_bound": False}),
    "bmm": Op(("fw",), ("bf16", "f16", "f32"), dict(GEMM, batch=int)),
    "grouped_linear": Op(("fw",), ("bf16", "f16", "f32"),
                         {"tokens_per_expert": [int], "in_features": int, "out_features": int}),
}
# What torch can run of the two-operand ops: (layout, out_dtype) pairs
# (None: any row-major-output layout, output in the input dtype).
TORCH_CALL = {"matmul": None, "bmm": None, "scaled_mm": ("rcr", "bf16"), "int_mm": ("rcr", "i32")}


def _check(case, ok, why):
    if not ok:
        raise caselist.CaseError(f"gemm case {case['name']!r}: {why}")


def rows(case):
    op = case["op"]
    if op in TORCH_CALL:
        m, n, k, layout = case["m"], case["n"], case["k"], case["layout"]
        _check(case, len(layout) == 3 and set(layout) <= {"r", "c"}, f"unknown layout {layout!r}")
        _check(case, layout[2] == "r", f"layout {layout!r}: torch writes row-major outputs")
        want = TORCH_CALL[op]
        _check(case, want is None or (layout, case["out_dtype"]) == want,
               f"{op} runs as {want}, not {(layout, case.get('out_dtype'))}")
        batch = case.get("batch")
        shape = f"m{m} n{n} k{k}" if batch is None else f"b{batch} m{m} n{n} k{k}"
        metric = dict(flops=2 * (batch or 1) * m * n * k)
    elif op == "linear":
        t, i, o = case["tokens"], case["in_features"], case["out_features"]
        _check(case, case["epilogue"] in ("identity", "bias"), f"unknown epilogue {case['epilogue']!r}")
        shape = f"x[{t}, {i}] w[{o}, {i}]"
        if case["memory_bound"]:
            _check(case, case["passes"] == ["fw"], "a memory-bound linear times fw only")
            bytes_ = (o * i + t * i + t * o) * caselist.SIZE[case["dtype"]]
            metric = dict(bytes=bytes_, rotation_bytes=bytes_)
        else:
            metric = dict(flops=2 * t * i * o)
    else:  # grouped_linear
        tokens, i, o = case["tokens_per_expert"], case["in_features"], case["out_features"]
        shape = f"e{len(tokens)} t{sum(tokens)} k{i} n{o}"
        metric = dict(flops=2 * sum(tokens) * o * i)
    return [caselist.row(case, p, shape, **metric) for p in case["passes"]]


def cases(torch, settings, cases):
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(7)
    for case in cases:
        by_pass = {r["pass"]: r for r in rows(case)}
        build = {"matmul": _matmul, "scaled_mm": _scaled_mm, "int_mm": _int_mm, "linear": _linear, "bmm": _bmm,
                 "grouped_linear": _grouped_linear}[case["op"]]
        for pass_, fn in build(torch, g, case, by_pass):
            if pass_ in by_pass:
                yield by_pass[pass_], fn


def _uni(torch, g, shape, lo, hi, dtype):
    return (torch.rand(shape, device="cuda", generator=g) * (hi - lo) + lo).to(dtype)


def _operands(case, make):
    """A [m, k] and B [k, n] of a two-operand case (batched for bmm), each
    stored in the case layout's order, from make(shape): a column-major
    operand is the transpose of a row-major tensor."""
    lead = (case["batch"],) if "batch" in case else ()

    def operand(rows, cols, order):
        if order == "r":
            return make(lead + (rows, cols))
        return make(lead + (cols, rows)).transpose(-1, -2)

    m, n, k, layout = case["m"], case["n"], case["k"], case["layout"]
    return operand(m, k, layout[0]), operand(k, n, layout[1])


def _uniform_operands(torch, g, case):
    dtype = caselist.torch_dtype(torch, case["dtype"])
    return _operands(case, lambda shape: _uni(torch, g, shape, -1, 1, dtype))


def _matmul(torch, g, case, by_pass):
    tf32 = case["allow_tf32"]
    a, b = _uniform_operands(torch, g, case)

    def fn():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return a @ b

    yield "fw", fn


def _scaled_mm(torch, g, case, by_pass):
    fp8, out = caselist.torch_dtype(torch, case["dtype"]), caselist.torch_dtype(torch, case["out_dtype"])
    a, b = _operands(case, lambda shape: _uni(torch, g, shape, -4, 4, torch.float32).to(fp8))
    one_a = torch.ones((), device="cuda", dtype=torch.float32)
    one_b = torch.ones((), device="cuda", dtype=torch.float32)
    yield "fw", lambda: torch._scaled_mm(a, b, scale_a=one_a, scale_b=one_b, out_dtype=out)


def _int_mm(torch, g, case, by_pass):
    a, b = _operands(case, lambda shape: torch.randint(-127, 128, shape, device="cuda", dtype=torch.int8,
                                                       generator=g))
    yield "fw", lambda: torch._int_mm(a, b)


def _bmm(torch, g, case, by_pass):
    a, b = _uniform_operands(torch, g, case)
    yield "fw", lambda: torch.matmul(a, b)


def _linear(torch, g, case, by_pass):
    F = torch.nn.functional
    mm = torch.ops.aten.mm
    t, i, o = case["tokens"], case["in_features"], case["out_features"]
    dtype = caselist.torch_dtype(torch, case["dtype"])
    bias = case["epilogue"] == "bias"
    if case["memory_bound"]:
        # Decode: x and W rotated over buffer sets, as in gemm.rs.
        from torch_baseline import rotation
        sets = rotation(torch, by_pass["fw"]["rotation_bytes"])
        xws = [(_uni(torch, g, (t, i), -1, 1, dtype), _uni(torch, g, (o, i), -0.05, 0.05, dtype))
               for _ in range(sets)]
        if bias:
            b = _uni(torch, g, (o,), -1, 1, dtype)
            yield "fw", [(lambda x1=x1, w1=w1: F.linear(x1, w1, b)) for x1, w1 in xws]
        else:
            yield "fw", [(lambda x1=x1, w1=w1: F.linear(x1, w1)) for x1, w1 in xws]
        return
    x, w, dy = _uni(torch, g, (t, i), -1, 1, dtype), _uni(torch, g, (o, i), -0.05, 0.05, dtype), \
        _uni(torch, g, (t, o), -1, 1, dtype)
    if bias:
        b = _uni(torch, g, (o,), -1, 1, dtype)
        yield "fw", lambda: F.linear(x, w, b)
    else:
        yield "fw", lambda: F.linear(x, w)
    yield "bw_data", lambda: mm(dy, w)
    if bias:
        yield "dw", lambda: (mm(dy.t(), x), dy.sum(0))
    else:
        yield "dw", lambda: mm(dy.t(), x)


def _grouped_linear(torch, g, case, by_pass):
    tokens, k, n = case["tokens_per_expert"], case["in_features"], case["out_features"]
    dtype = caselist.torch_dtype(torch, case["dtype"])
    xm = _uni(torch, g, (sum(tokens), k), -1, 1, dtype)
    wm = _uni(torch, g, (len(tokens), n, k), -0.05, 0.05, dtype)
    ym = torch.empty((sum(tokens), n), device="cuda", dtype=dtype)
    bounds = []
    start = 0
    for t in tokens:
        bounds.append((start, start + t))
        start += t

    def moe_loop():
        # What PyTorch users run without a grouped kernel: one mm per expert.
        for e, (s, t) in enumerate(bounds):
            torch.mm(xm[s:t], wm[e].t(), out=ym[s:t])
        return ym

    fn, which = moe_loop, "python loop of torch.mm"
    if hasattr(torch, "_grouped_mm"):
        offs = torch.tensor([t for _, t in bounds], device="cuda", dtype=torch.int32)
        wt = wm.transpose(-2, -1)  # [E, K, N], K contiguous: the Linear weight layout

        def grouped():
            return torch._grouped_mm(xm, wt, offs=offs)

        try:
            ref = moe_loop().clone()
            got = grouped()
            torch.cuda.synchronize()
            err = ((got.float() - ref.float()).norm() / ref.float().norm()).item()
            if err < 1e-2:
                fn, which = grouped, "torch._grouped_mm"
            else:
                print(f"gemm {case['name']}: torch._grouped_mm differs from the loop (rel err {err:.3e}); "
                      "using the loop", file=sys.stderr)
            del ref, got
        except Exception as e:  # not on this torch/GPU: keep the loop
            print(f"gemm {case['name']}: torch._grouped_mm unavailable ({e}); using the loop", file=sys.stderr)
    print(f"gemm {case['name']} baseline: {which}", file=sys.stderr)
    yield "fw", fn
