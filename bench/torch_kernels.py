"""Which CUDA kernels PyTorch runs for benchmark cases, and how long each
takes (torch.profiler, 20 calls after 5 warm-up calls).

    python3 bench/torch_kernels.py FAMILY SUBSTRING[,SUBSTRING...]

runs the cases of bench/cases/FAMILY.json whose name contains one of the
substrings (as BARACUDA_BENCH_ONLY does; built by bench/torch_cases/FAMILY.py)
and prints, per case and pass, every device activity with its count and
mean time: the library kernel PyTorch chose (a cuBLAS `nvjet_*` or cuDNN engine kernel name),
which is what to compare our autotuner's choice with (`ncu` on
baracuda-bench names ours)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from torch_cases import caselist  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    import torch
    from torch.profiler import ProfilerActivity, profile

    family, wanted = sys.argv[1], [w for w in sys.argv[2].split(",") if w]
    [(_, module, settings, cases)] = caselist.families([family])
    picked = [c for c in cases if any(w in c["name"] for w in wanted)]
    for row, fn in module.cases(torch, settings, picked):
        fns = fn if isinstance(fn, (list, tuple)) else [fn]
        for i in range(5):
            fns[i % len(fns)]()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(20):
                fns[i % len(fns)]()
            torch.cuda.synchronize()
        print(f"== {row['name']} {row['pass']} {row['dtype']} {row['shape']}")
        for e in prof.key_averages():
            if e.device_type.name != "CUDA":
                continue
            n = max(e.count, 1)
            print(f"  {e.count:4d} x {e.device_time_total / n / 1000:8.4f} ms  {e.key[:180]}")


if __name__ == "__main__":
    main()
