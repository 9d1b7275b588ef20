"""The benchmark case list, bench/cases/<family>.json, read and checked
without torch (schema and formulas: bench/cases/README.md). baracuda-bench
reads the same files (built into its binary), so the two sides of a
comparison run the same cases; `bench/torch_baseline.py --list` prints the
rows derived here, and crates/baracuda-bench's tests compare them with its
own.

BARACUDA_BENCH_CASES=DIR reads DIR/<family>.json instead, on both sides.
"""
import importlib
import json
import os
import pathlib
import sys

CASES_ENV = "BARACUDA_BENCH_CASES"
CASES_DIR = pathlib.Path(__file__).resolve().parent.parent / "cases"

# Bytes per element of the dtypes a case may name.
SIZE = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8, "fp8_e4m3": 1, "i8": 1, "i32": 4, "i64": 8}
TORCH_DTYPE = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64",
               "fp8_e4m3": "float8_e4m3fn", "i8": "int8", "i32": "int32", "i64": "int64"}
COMMON = ("name", "op", "dtype", "passes")


class CaseError(ValueError):
    """A case file that does not check."""


class Op:
    """What a family's PyTorch side implements for one op: the passes it can
    time, in the order they run; the input dtypes; its parameters ({name:
    type}, a list [int] for a list of ints) and optional ones ({name:
    default})."""

    def __init__(self, passes, dtypes, params, optional=None):
        self.passes = tuple(passes)
        self.dtypes = tuple(dtypes)
        self.params = dict(params)
        self.optional = dict(optional or {})


def cases_dir():
    return pathlib.Path(os.environ.get(CASES_ENV) or CASES_DIR)


def torch_dtype(torch, name):
    return getattr(torch, TORCH_DTYPE[name])


def _is(value, kind):
    if isinstance(kind, list):
        return isinstance(value, list) and all(_is(v, kind[0]) for v in value)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return isinstance(value, kind)


def _kind_name(kind):
    if isinstance(kind, list):
        return f"a list of {_kind_name(kind[0])}"
    return "an int >= 0" if kind is int else f"a {kind.__name__}"


def _check_fields(where, got, required, optional):
    """Every required field present with its type, optional ones typed, and
    nothing else."""
    for key, kind in required.items():
        if key not in got:
            raise CaseError(f"{where}: missing field {key!r}")
    for key, value in got.items():
        kind = required.get(key, type(optional[key]) if key in optional else None)
        if kind is None:
            raise CaseError(f"{where}: unknown field {key!r}")
        if not _is(value, kind):
            raise CaseError(f"{where}: {key} = {value!r} is not {_kind_name(kind)}")


def _check_case(family, case, ops):
    if not isinstance(case, dict):
        raise CaseError(f"{family}: a case is not an object: {case!r}")
    where = f"{family} case {case.get('name')!r}"
    op = ops.get(case.get("op"))
    if op is None:
        raise CaseError(f"{where}: unknown op {case.get('op')!r} (takes {sorted(ops)})")
    required = dict(name=str, op=str, dtype=str, passes=[str], **op.params)
    _check_fields(where, case, required, dict(ceiling=False, **op.optional))
    if case["dtype"] not in op.dtypes:
        raise CaseError(f"{where}: dtype {case['dtype']!r} is not implemented (takes {op.dtypes})")
    passes = case["passes"]
    unknown = [p for p in passes if p not in op.passes]
    if unknown or not passes:
        raise CaseError(f"{where}: passes {passes} (takes {op.passes})")
    if [p for p in op.passes if p in passes] != passes:
        raise CaseError(f"{where}: passes {passes} not once each in the order {op.passes}")
    out = dict(ceiling=False, **op.optional)
    out.update(case)
    return out


def load(family, module):
    """(settings, cases) of family's case file, checked against module's
    SETTINGS and OPS; optional fields carry their defaults. CaseError names
    the first problem."""
    path = cases_dir() / f"{family}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CaseError(f"{path}: {e}") from e
    if not isinstance(data, dict) or data.get("family") != family:
        raise CaseError(f"{path}: not the {family} case file")
    settings = {k: v for k, v in data.items() if k not in ("family", "cases")}
    _check_fields(f"{family} settings", settings, module.SETTINGS, {})
    if not isinstance(data.get("cases"), list) or not data["cases"]:
        raise CaseError(f"{path}: no cases")
    return settings, [_check_case(family, c, module.OPS) for c in data["cases"]]


def row(case, pass_, shape, bytes=None, flops=None, rotation_bytes=None):
    """One result row of case: its key and the work its rate comes from."""
    r = {"name": case["name"], "pass": pass_, "dtype": case["dtype"], "shape": shape, "bytes": bytes,
         "flops": flops, "rotation_bytes": rotation_bytes}
    return {k: v for k, v in r.items() if v is not None}


def family_names():
    """The families with a case file, sorted."""
    return sorted(p.stem for p in cases_dir().glob("*.json"))


def families(wanted=()):
    """[(family, module, settings, cases)] of the wanted families (all when
    empty), each case file checked and its rows derived (which checks what
    the schema cannot); a family without a module here, or a wanted name
    without a case file, is a CaseError."""
    names = family_names()
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise CaseError(f"unknown families {unknown} (takes {names})")
    out = []
    for name in names:
        if wanted and name not in wanted:
            continue
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as e:
            raise CaseError(f"family {name!r} has no module in torch_cases ({e})") from e
        settings, cases = load(name, module)
        rows(module, cases)
        out.append((name, module, settings, cases))
    return out


def rows(module, cases):
    """Every row of cases, checked for repeated (name, pass, dtype)."""
    out, seen = [], set()
    for case in cases:
        for r in module.rows(case):
            key = (r["name"], r["pass"], r["dtype"])
            if key in seen:
                raise CaseError(f"two cases time {key}")
            seen.add(key)
            out.append(r)
    return out


def selected(cases, only):
    """The cases BARACUDA_BENCH_ONLY's substrings `only` name (all when
    empty); ceilings always, as in baracuda-bench."""
    return [c for c in cases if c["ceiling"] or not only or any(p in c["name"] for p in only)]


def print_rows(wanted=()):
    """Print every row of the wanted families (all when empty) as a JSON
    line, without importing torch; exit with the problem when the case list
    does not check."""
    try:
        for _, module, _, cases in families(wanted):
            for r in rows(module, cases):
                print(json.dumps(r))
    except CaseError as e:
        sys.exit(f"case list: {e}")
    if "torch" in sys.modules:
        sys.exit("case list: reading it imported torch")
