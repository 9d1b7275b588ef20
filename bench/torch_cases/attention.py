"""PyTorch baselines of the attention family, from
bench/cases/attention.json (which crates/baracuda-bench/src/attention.rs
reads too): NeoX rotary embedding of a contiguous [batch, seq, heads,
head_dim] tensor at the sequence index, as Hugging Face's
apply_rotary_pos_emb computes it (x * cos + rotate_half(x) * sin with
cos/sin tables [seq, head_dim] broadcast over batch and heads), forward,
and the backward (the rotation by -angle: dy * cos - rotate_half(dy) * sin),
each eager and under torch.compile; and the copy ceiling. Traffic: each
pass reads one tensor and writes one."""
from . import caselist
from .caselist import Op

FLOATS = ("bf16", "f16", "f32", "f64")
SETTINGS = {}
OPS = {
    "copy": Op(("fw",), FLOATS, {"shape": [int]}),
    "rope": Op(("fw", "bw"), FLOATS, {"shape": [int]}),
    "sdpa": Op(("fw", "bw"), ("bf16", "f16"), {"shape": [int], "causal": bool}),
}


def rows(case):
    shape, size = case["shape"], caselist.SIZE[case["dtype"]]
    if case["op"] == "sdpa":
        if len(shape) != 6:
            raise caselist.CaseError(f"sdpa case {case['name']!r}: shape {shape} is not [b, hq, hkv, sq, sk, d]")
        b, hq, hk, sq, sk, d = shape
        flops = 4 * b * hq * sq * sk * d
        if case["causal"]:
            flops //= 2
        shape_s = f"b{b} hq{hq} hkv{hk} sq{sq} sk{sk} d{d}" + (" causal" if case["causal"] else "")
        # the backward's five matmuls against the forward's two
        return [caselist.row(case, p, shape_s, flops=flops if p == "fw" else flops * 5 // 2)
                for p in case["passes"]]
    n = 1
    for e in shape:
        n *= e
    shape_s = f"[{', '.join(map(str, shape))}]"
    if case["op"] == "rope" and len(shape) != 4:
        raise caselist.CaseError(f"rope case {case['name']!r}: shape {shape} is not [b, s, h, d]")
    return [caselist.row(case, p, shape_s, bytes=2 * n * size, rotation_bytes=2 * n * size)
            for p in case["passes"]]


def cases(torch, settings, cases):
    from torch_baseline import rotation

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    for case in cases:
        by_pass = {r["pass"]: r for r in rows(case)}
        dtype = caselist.torch_dtype(torch, case["dtype"])
        if case["op"] == "sdpa":
            b, hq, hk, sq, sk, d = case["shape"]
            q = torch.rand(b, hq, sq, d, device=dev, generator=g).to(dtype) * 2 - 1
            k = torch.rand(b, hk, sk, d, device=dev, generator=g).to(dtype) * 2 - 1
            v = torch.rand(b, hk, sk, d, device=dev, generator=g).to(dtype) * 2 - 1
            F = torch.nn.functional
            causal = case["causal"]
            # PyTorch's own choice of backend (cuDNN, flash or efficient)
            f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hk)
            if "fw" in by_pass:
                yield by_pass["fw"], [f]
            if "bw" in by_pass:
                qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
                o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, enable_gqa=hq != hk)
                do = torch.rand_like(o) * 2 - 1
                yield by_pass["bw"], [lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)]
                del qg, kg, vg, o, do
            del q, k, v
            continue
        sets = rotation(torch, max(r["rotation_bytes"] for r in by_pass.values()))
        xs = [(torch.rand(case["shape"], device=dev, generator=g) * 4 - 2).to(dtype) for _ in range(sets)]
        if case["op"] == "copy":
            ys = [torch.empty_like(x) for x in xs]
            yield by_pass["fw"], [(lambda x=x, y=y: y.copy_(x)) for x, y in zip(xs, ys)]
            del ys
            del xs
            continue
        _, s, _, d = case["shape"]
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d))
        ang = torch.outer(torch.arange(s, device=dev, dtype=torch.float32), inv)
        emb = torch.cat((ang, ang), dim=-1)
        # [s, 1, d]: broadcast over batch and heads of [b, s, h, d]
        cos, sin = emb.cos().to(dtype)[:, None, :], emb.sin().to(dtype)[:, None, :]

        def rotate_half(x):
            x1, x2 = x[..., : d // 2], x[..., d // 2:]
            return torch.cat((-x2, x1), dim=-1)

        def fw(x):
            return x * cos + rotate_half(x) * sin

        def bw(dy):
            return dy * cos - rotate_half(dy) * sin

        for p, f in (("fw", fw), ("bw", bw)):
            if p in by_pass:
                compiled = torch.compile(f, dynamic=False)
                yield (by_pass[p], [(lambda x=x: f(x)) for x in xs], [(lambda x=x: compiled(x)) for x in xs])
        del xs
