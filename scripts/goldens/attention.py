"""Goldens of the attention family: f64 Q, K, V, dO, and PyTorch's
scaled_dot_product_attention output and autograd gradients (math backend)
for: equal lengths; GQA (4 query heads on 2 KV heads) with sq != sk, a value
head dim unlike the query's and a custom scale; is_causal (top-left); a
bottom-right causal mask (causal_lower_right); a boolean mask broadcast
over batch and heads with a row that sees no key; an additive mask per
head with its gradient. Checked by
crates/baracuda-kernels/tests/golden_attention.rs."""

# name -> (batch, heads_q, heads_kv, sq, sk, d, dv, scale or None, kind)
CASES = {
    "plain": (2, 2, 2, 5, 5, 4, 4, None, "none"),
    "gqa": (2, 4, 2, 3, 5, 4, 3, 0.3, "none"),
    "causal_tl": (1, 2, 2, 3, 5, 4, 4, None, "causal"),
    "causal_br": (1, 2, 2, 3, 5, 4, 4, None, "lower_right"),
    "bool": (2, 2, 1, 3, 5, 4, 4, None, "bool"),
    "bias": (1, 2, 2, 3, 4, 4, 4, None, "bias"),
}


def make(torch):
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    g = torch.Generator().manual_seed(2030)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64) * 2 - 1
    out = {}
    for name, (b, hq, hk, sq, sk, d, dv, scale, kind) in CASES.items():
        q = r(b, hq, sq, d).requires_grad_()
        k = r(b, hk, sk, d).requires_grad_()
        v = r(b, hk, sk, dv).requires_grad_()
        do = r(b, hq, sq, dv)
        kw = {"scale": scale, "enable_gqa": hq != hk}
        grads = [q, k, v]
        if kind == "causal":
            kw["is_causal"] = True
        elif kind == "lower_right":
            kw["attn_mask"] = causal_lower_right(sq, sk)
        elif kind == "bool":
            mask = torch.rand(1, 1, sq, sk, generator=g) < 0.7
            mask[0, 0, 1, :] = False  # a row that sees no key
            mask[0, 0, 0, 0] = True
            kw["attn_mask"] = mask
            out[f"{name}.mask"] = mask.to(torch.float64)
        elif kind == "bias":
            bias = r(1, hq, sq, sk).requires_grad_()
            kw["attn_mask"] = bias
            grads.append(bias)
        with sdpa_kernel(SDPBackend.MATH):
            o = F.scaled_dot_product_attention(q, k, v, **kw)
        gs = torch.autograd.grad(o, grads, do)
        out.update({f"{name}.q": q, f"{name}.k": k, f"{name}.v": v, f"{name}.do": do,
                    f"{name}.o": o, f"{name}.dq": gs[0], f"{name}.dk": gs[1], f"{name}.dv": gs[2]})
        if kind == "bias":
            out[f"{name}.bias"] = bias
            out[f"{name}.dbias"] = gs[3]
    return out
