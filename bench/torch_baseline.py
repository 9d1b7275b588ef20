"""Time every case of bench/cases/<family>.json (the case list
baracuda-bench reads too) with PyTorch, built by bench/torch_cases/<family>.py,
the way baracuda-bench times its own: warm-up, then CUDA events around
replays of a CUDA graph of the calls, median of many replays. Prints one
JSON line per case and pass: {"op", "pass", "dtype", "shape", "ms"} and
"gbps" or "tflops" from the case's work, as baracuda-bench does (and the
GEMM ceiling's "tflops"); for a case whose family also yields the
torch.compile of its function, "compile_ms" too. Usage: python3 bench/torch_baseline.py
[family ...]; with `--libs`, print only the cuBLASLt and cuDNN files
PyTorch loads, one full path per line; with `--list [family ...]`, print
the case rows (name, pass, dtype, shape, work) without importing torch,
after checking the case list. With BARACUDA_BENCH_ONLY set
(comma-separated substrings), only the cases whose name contains one of
them run, as in baracuda-bench; ceilings always run."""
import json
import os
import sys
import time

from torch_cases import caselist

WARMUP = 10
ITERS = 50
MIN_ITERS = 10
TIMED_MS = 30.0
# Idle seconds before each case (BARACUDA_BENCH_COOL_MS overrides) and a
# timed window of about TIMED_MS, as in harness.rs: every case on both
# sides starts from the same power state and is timed in one.
COOL_S = float(os.environ.get("BARACUDA_BENCH_COOL_MS", "250")) / 1000.0


def _time_calls(torch, fn, n):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(max(n, 5))]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in ev)
    return ms[len(ms) // 2]


MAX_SETS = 32


def rotation(torch, bytes_per_call):
    """Buffer sets a case rotates through (harness.rs rotation): enough to
    cover three times the L2 size, at most MAX_SETS, 1 for operands beyond
    that, so that a call does not find its operands in L2."""
    l2 = max(torch.cuda.get_device_properties(0).L2_cache_size, 1)
    return max(1, min(MAX_SETS, -(-3 * l2 // max(int(bytes_per_call), 1))))


def time_ms(torch, fn):
    """Device ms of one call, as baracuda-bench measures it (harness.rs
    time_ms / time_rotating_ms): warm-up, then k calls (about 1 ms of work,
    1..20, rounded up to whole rounds of the buffer sets) captured in a
    CUDA graph, median of about TIMED_MS of replays (MIN_ITERS..ITERS) over
    k. `fn` is one callable, or a list of them, one per buffer set, called
    in turn. Falls back to timing calls one by one when fn cannot be
    captured. Idles COOL_S first."""
    fns = list(fn) if isinstance(fn, (list, tuple)) else [fn]
    turn = [0]

    def fn():
        f = fns[turn[0]]
        turn[0] = (turn[0] + 1) % len(fns)
        return f()

    torch.cuda.synchronize()
    time.sleep(COOL_S)
    for _ in range(max(WARMUP, len(fns))):
        fn()
    eager = _time_calls(torch, fn, 1)
    k = int(min(20, max(1, round(1.0 / max(eager, 1e-3)))))
    k = -(-k // len(fns)) * len(fns)
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(k):
                fn()
        graph.replay()
        iters = int(min(ITERS, max(MIN_ITERS, round(TIMED_MS / max(eager * k, 1e-3)))))
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for a, b in ev:
            a.record()
            graph.replay()
            b.record()
        torch.cuda.synchronize()
        ms = sorted(a.elapsed_time(b) for a, b in ev)
        del graph
        return ms[len(ms) // 2] / k
    except Exception as e:  # not capturable: time calls one by one
        print(f"time_ms: graph capture failed ({e}); timing calls one by one", file=sys.stderr)
        torch.cuda.synchronize()
        return _time_calls(torch, fn, ITERS)


def result(row, ms):
    """The result line of case row timed at ms, as baracuda-bench prints it."""
    out = {"op": row["name"], "pass": row["pass"], "dtype": row["dtype"], "shape": row["shape"], "ms": round(ms, 5)}
    if "bytes" in row:
        out["gbps"] = round(row["bytes"] / (ms * 1e-3) / 1e9, 1)
    if "flops" in row:
        out["tflops"] = round(row["flops"] / (ms * 1e-3) / 1e12, 2)
    return out


def gemm_ceiling(torch):
    n = 8192
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    ms = time_ms(torch, lambda: a @ b)
    return dict(op="ceiling_gemm_bf16", **{"pass": "fw"}, dtype="bf16", shape=f"[{n}, {n}, {n}]", ms=round(ms, 5),
                tflops=round(2 * n ** 3 / (ms * 1e-3) / 1e12, 2))


def loaded_libs():
    """Paths of the cuBLASLt and cuDNN files this process has mapped."""
    found = {}
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 6:
                continue
            name = os.path.basename(parts[5])
            for key in ("libcublasLt.so", "libcudnn.so"):
                if name.startswith(key):
                    found.setdefault(key, parts[5])
    return found


def touch_libs(torch):
    """Run one matmul and one convolution so both libraries are loaded."""
    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    a @ a
    x = torch.randn(1, 8, 8, 8, device="cuda")
    torch.nn.functional.conv2d(x, torch.randn(8, 8, 3, 3, device="cuda"))
    torch.cuda.synchronize()


def main():
    args = sys.argv[1:]
    if args[:1] == ["--list"]:
        caselist.print_rows(args[1:])
        return
    import torch
    if args == ["--libs"]:
        touch_libs(torch)
        for path in loaded_libs().values():
            print(path)
        return
    try:
        families = caselist.families(args)
    except caselist.CaseError as e:
        sys.exit(f"case list: {e}")
    only = [p for p in os.environ.get("BARACUDA_BENCH_ONLY", "").split(",") if p]
    touch_libs(torch)
    print(f"torch_baseline: torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"files {loaded_libs()}", file=sys.stderr)
    print(json.dumps(gemm_ceiling(torch)), flush=True)
    for family, module, settings, cases in families:
        for row, fn, *compiled in module.cases(torch, settings, caselist.selected(cases, only)):
            try:
                ms = time_ms(torch, fn)
            except Exception as e:  # report and go on, as baracuda-bench does
                print(f"{family} {row['name']}: error: {e}", file=sys.stderr)
                continue
            line = result(row, ms)
            # A family may also yield torch.compile of the same function.
            for c in compiled:
                try:
                    line["compile_ms"] = round(time_ms(torch, c), 5)
                except Exception as e:
                    print(f"{family} {row['name']}: torch.compile: error: {e}", file=sys.stderr)
            print(json.dumps(line), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
