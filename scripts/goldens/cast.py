"""Goldens of CastPlan: values with special cases (NaN, +-inf, -0, huge,
tiny and subnormal, ties of each rounding, the integer limits) cast from
each of f32 f64 f16 bf16 fp8 e4m3/e5m2 i8 u8 i16 i32 i64 bool to each of
them with `x.to(dtype)`, on CUDA when there is a GPU (the casts CastPlan
matches), stored as f64. Casts to fp8 also store the saturating form
(`clamp` to the largest finite value, then `.to`) and the scaled form
(`(x.to(acc) * 3.5).to(fp8)`, acc f32, or f64 for f64 x). Checked by
crates/baracuda-kernels/tests/golden_cast.rs."""

KINDS = ("f32", "f64", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "i8", "u8", "i16", "i32", "i64", "bool")
SCALE = 3.5


def dtypes(torch):
    return {
        "f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
        "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2, "i8": torch.int8,
        "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
        "bool": torch.bool,
    }


def specials():
    p = lambda e: 2.0 ** e
    v = [0.0, -0.0, float("nan"), float("inf"), 1e300, 1e-300, 3.4028234663852886e38,
         p(-24), p(-25), 1.5 * p(-25), p(-133), p(-9), p(-10), 3 * p(-10), p(-16), p(-17),
         1 + p(-11), 1 + 3 * p(-11), 1 + p(-8), 1 + 3 * p(-8), 1 + p(-11) + p(-40), 1.0625, 1.1875,
         448.0, 464.0, 465.0, 480.0, 57344.0, 61439.0, 61440.0, 65504.0, 65519.0, 65520.0,
         2.5, 1.5, 0.5, 0.7, 2.7, 127.0, 128.0, 129.0, 255.0, 256.5, 300.0, 32767.0, 32769.0,
         2147483647.0, 2147483649.0, 16777217.0, 16842753.0, p(53), p(62), p(63), 1e10]
    return v + [-x for x in v]


def source(torch, kind, dt):
    """The inputs as a tensor of `kind`: specials and random values for
    floats; integers in range (and the limits) for integer kinds."""
    g = torch.Generator().manual_seed(4242)
    if kind in ("f32", "f64", "f16", "bf16", "fp8_e4m3", "fp8_e5m2"):
        r = (torch.rand(200, generator=g, dtype=torch.float64) * 2 - 1) * \
            10.0 ** torch.randint(-6, 7, (200,), generator=g).double()
        x = torch.cat([torch.tensor(specials(), dtype=torch.float64), r])
        return x.to(dt)
    if kind == "bool":
        return torch.tensor([0, 1, 1, 0], dtype=torch.bool)
    info = torch.iinfo(dt)
    lo, hi = max(info.min, -2 ** 53), min(info.max, 2 ** 53)
    r = torch.randint(lo, hi, (200,), generator=g, dtype=torch.int64)
    edge = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 300, 16842753, 16777217, 70000]
    edge = [e for e in edge if info.min <= e <= info.max and abs(e) <= 2 ** 53]
    return torch.cat([torch.tensor(edge, dtype=torch.int64), r]).to(dt)


def make(torch):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dt = dtypes(torch)
    fmax = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}
    out = {}
    for f in KINDS:
        x = source(torch, f, dt[f]).to(dev)
        for t in KINDS:
            k = f"{f}.{t}"
            out[f"{k}.x"] = x.to(torch.float64)
            out[f"{k}.y"] = x.to(dt[t]).to(torch.float64)
            if t in fmax:
                acc = torch.float64 if f == "f64" else torch.float32
                xa = x.to(acc)
                out[f"{k}.sat.y"] = xa.clamp(-fmax[t], fmax[t]).to(dt[t]).to(torch.float64)
                out[f"{k}.scaled.y"] = (xa * SCALE).to(dt[t]).to(torch.float64)
    return out
