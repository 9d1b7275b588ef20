"""Goldens of RangePlan and EyePlan: torch.arange, linspace, logspace and
eye on CUDA (the kernels RangePlan matches) for each dtype they take,
stored as f64 with their parameters. Checked by
crates/baracuda-kernels/tests/golden_range.rs."""

import math

FLOATS = ("f32", "f64", "f16", "bf16")
INTS = ("i8", "u8", "i16", "i32", "i64")

ARANGE_F = [(0.0, 10.0, 1.0), (-3.5, 7.25, 0.75), (1.0, 0.0, -0.1), (1e6, 1e6 + 3000.0, 0.37),
            (0.0, 2000.5, 1.0)]
ARANGE_I = [(0.0, 10.0, 1.0), (-100.0, 100.0, 3.0), (50.0, -50.0, -7.0), (0.0, 300.0, 1.0)]
LINSPACE_F = [(0.0, 1.0, 4), (-5.0, 5.0, 11), (3.0, 9.0, 1), (-3.3, 1000.7, 1001), (0.0, 1.0, 2049),
              (100.0, -100.0, 256)]
LINSPACE_I = [(-2.7, 9.9, 5), (0.0, 100.0, 300), (100.0, -100.0, 7), (3.0, 9.0, 1)]
# PyTorch rejects a negative float bound for uint8
LINSPACE_U8 = [(2.7, 9.9, 5), (0.0, 100.0, 300), (100.0, 0.0, 7), (3.0, 9.0, 1)]
LOGSPACE = [(0.0, 3.0, 4, 10.0), (-2.0, 2.0, 101, 2.0), (0.0, 1.0, 100, math.e), (2.0, 5.0, 1, 3.0)]
EYE = [(3, 5), (4, 4), (5, 2)]
EYE_KINDS = ("f32", "bf16", "i8", "bool")


def make(torch):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dt = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i8": torch.int8, "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32,
          "i64": torch.int64, "bool": torch.bool}
    out = {}

    def put(key, params, y):
        out[f"{key}.p"] = torch.tensor(params, dtype=torch.float64)
        out[f"{key}.y"] = y.to(torch.float64).cpu()

    for k in FLOATS + INTS:
        for i, (s, e, st) in enumerate(ARANGE_F if k in FLOATS else ARANGE_I):
            put(f"arange.{k}.{i}", [s, e, st], torch.arange(s, e, st, dtype=dt[k], device=dev))
        lin = LINSPACE_F if k in FLOATS else LINSPACE_U8 if k == "u8" else LINSPACE_I
        for i, (s, e, n) in enumerate(lin):
            put(f"linspace.{k}.{i}", [s, e, n], torch.linspace(s, e, n, dtype=dt[k], device=dev))
    for k in FLOATS:
        for i, (s, e, n, b) in enumerate(LOGSPACE):
            put(f"logspace.{k}.{i}", [s, e, n, b], torch.logspace(s, e, n, b, dtype=dt[k], device=dev))
    for k in EYE_KINDS:
        for i, (r, c) in enumerate(EYE):
            put(f"eye.{k}.{i}", [r, c], torch.eye(r, c, dtype=dt[k], device=dev))
    return out
