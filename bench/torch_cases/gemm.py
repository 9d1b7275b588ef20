"""PyTorch baselines of the GEMM family (same names, shapes and dtypes as
crates/baracuda-bench/src/gemm.rs):

- square 8192^3: bf16 `a @ b`, f32 with TF32 off (IEEE) and on, fp8 e4m3
  -> bf16 through torch._scaled_mm (unit per-tensor scales, no fast
  accumulation: cuBLASLt's default, as ours), s8 -> s32 through
  torch._int_mm;
- the LLM prefill linear 8192 x 4096 -> 14336 bf16: F.linear, and the two
  backward matmuls exactly as autograd runs them for a row-major x and
  weight (aten mm_mat1_backward: dX = dY.mm(W); mm_mat2_backward with a
  column-major mat2 = W.t(): dW = dY.t().mm(X)), plus dW with a bias's
  db = dY.sum(0) (addmm's backward);
- decode: F.linear of one token (memory bound);
- attention-shaped bmm, batch 128: Q K^T and P V via torch.matmul;
- MoE: 64 experts with the fixed uneven token split of moe_tokens(),
  x_e @ W_e^T. The baseline is torch._grouped_mm (one grouped CUTLASS
  kernel, the stronger baseline) when this torch has it and it runs here;
  otherwise the Python loop of torch.mm over experts that PyTorch users
  write. Which one ran is printed to stderr.

cases() returns dicts (op, pass_, dtype, shape, fn); fn is a callable or
a list of them, one per buffer set (rotation()); bench/torch_baseline.py
times each with CUDA events like baracuda-bench."""
import sys

SQ = 8192
IN, OUT, TOKENS = 4096, 14336, 8192
EXPERTS, MOE_TOKENS = 64, 16384


def moe_tokens():
    """Tokens per expert: weights 1 + (x >> 33) % 100 from a 64-bit LCG
    seeded with 2024, floors of 16384 * w / sum(w), remainder to the first
    experts (the same list as moe_tokens() in gemm.rs: 5 to 554 tokens)."""
    x, w = 2024, []
    for _ in range(EXPERTS):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2 ** 64
        w.append(1 + (x >> 33) % 100)
    total = sum(w)
    t = [MOE_TOKENS * v // total for v in w]
    for i in range(MOE_TOKENS - sum(t)):
        t[i] += 1
    return t


def cases():
    import torch
    F = torch.nn.functional
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(7)
    bf = torch.bfloat16

    def uni(shape, lo, hi, dtype=bf):
        return (torch.rand(shape, device=dev, generator=g) * (hi - lo) + lo).to(dtype)

    out = []
    sq = f"m{SQ} n{SQ} k{SQ}"

    a16, b16 = uni((SQ, SQ), -1, 1), uni((SQ, SQ), -1, 1)
    out.append(dict(op="gemm_bf16_8192", dtype="bf16", shape=sq, fn=lambda: a16 @ b16))

    a32, b32 = uni((SQ, SQ), -1, 1, torch.float32), uni((SQ, SQ), -1, 1, torch.float32)

    def f32(tf32):
        def fn():
            torch.backends.cuda.matmul.allow_tf32 = tf32
            return a32 @ b32
        return fn

    out.append(dict(op="gemm_f32_8192", dtype="f32", shape=sq, fn=f32(False)))
    out.append(dict(op="gemm_tf32_8192", dtype="f32", shape=sq, fn=f32(True)))

    # TN: a row-major [M, K], b column-major [K, N] (the transpose of a
    # row-major [N, K]), which _scaled_mm and _int_mm want.
    a8 = uni((SQ, SQ), -4, 4, torch.float32).to(torch.float8_e4m3fn)
    b8 = uni((SQ, SQ), -4, 4, torch.float32).to(torch.float8_e4m3fn).t()
    one_a = torch.ones((), device=dev, dtype=torch.float32)
    one_b = torch.ones((), device=dev, dtype=torch.float32)
    out.append(dict(op="gemm_fp8_e4m3_8192", dtype="fp8_e4m3", shape=sq,
                    fn=lambda: torch._scaled_mm(a8, b8, scale_a=one_a, scale_b=one_b, out_dtype=bf)))
    ai = torch.randint(-127, 128, (SQ, SQ), device=dev, dtype=torch.int8, generator=g)
    bi = torch.randint(-127, 128, (SQ, SQ), device=dev, dtype=torch.int8, generator=g).t()
    out.append(dict(op="gemm_int8_8192", dtype="i8", shape=sq, fn=lambda: torch._int_mm(ai, bi)))

    # Prefill linear and its backward.
    lin = f"x[{TOKENS}, {IN}] w[{OUT}, {IN}]"
    x, w, dy = uni((TOKENS, IN), -1, 1), uni((OUT, IN), -0.05, 0.05), uni((TOKENS, OUT), -1, 1)
    mm = torch.ops.aten.mm
    out.append(dict(op="linear_prefill_bf16", dtype="bf16", shape=lin, fn=lambda: F.linear(x, w)))
    out.append(dict(op="linear_prefill_bf16", pass_="bw_data", dtype="bf16", shape=lin, fn=lambda: mm(dy, w)))
    out.append(dict(op="linear_prefill_bf16", pass_="dw", dtype="bf16", shape=lin, fn=lambda: mm(dy.t(), x)))
    out.append(dict(op="linear_prefill_bias_bf16", pass_="dw", dtype="bf16", shape=lin,
                    fn=lambda: (mm(dy.t(), x), dy.sum(0))))

    # Decode: one token, W rotated over buffer sets as in gemm.rs.
    from torch_baseline import rotation
    sets = rotation(torch, (OUT * IN + IN + OUT) * 2)
    decode = [(uni((1, IN), -1, 1), w)] + [(uni((1, IN), -1, 1), uni((OUT, IN), -0.05, 0.05))
                                           for _ in range(sets - 1)]
    out.append(dict(op="linear_decode_bf16", dtype="bf16", shape=f"x[1, {IN}] w[{OUT}, {IN}]",
                    fn=[(lambda x1=x1, w1=w1: F.linear(x1, w1)) for x1, w1 in decode]))

    # Attention-shaped batched GEMMs.
    q, k = uni((128, 4096, 128), -1, 1), uni((128, 4096, 128), -1, 1)
    out.append(dict(op="bmm_attn_qk_bf16", dtype="bf16", shape="b128 m4096 n4096 k128",
                    fn=lambda: torch.matmul(q, k.transpose(-1, -2))))
    p, v = uni((128, 4096, 4096), -1, 1), uni((128, 4096, 128), -1, 1)
    out.append(dict(op="bmm_attn_pv_bf16", dtype="bf16", shape="b128 m4096 n128 k4096",
                    fn=lambda: torch.matmul(p, v)))

    # MoE experts.
    tokens = moe_tokens()
    xm = uni((MOE_TOKENS, IN), -1, 1)
    wm = uni((EXPERTS, OUT, IN), -0.05, 0.05)
    ym = torch.empty((MOE_TOKENS, OUT), device=dev, dtype=bf)
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
        offs = torch.tensor([t for _, t in bounds], device=dev, dtype=torch.int32)
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
                print(f"gemm moe: torch._grouped_mm differs from the loop (rel err {err:.3e}); "
                      "using the loop", file=sys.stderr)
            del ref, got
        except Exception as e:  # not on this torch/GPU: keep the loop
            print(f"gemm moe: torch._grouped_mm unavailable ({e}); using the loop", file=sys.stderr)
    print(f"gemm moe baseline: {which}", file=sys.stderr)
    out.append(dict(op="moe_grouped_bf16", dtype="bf16", shape=f"e{EXPERTS} t{MOE_TOKENS} k{IN} n{OUT}", fn=fn))
    return out
