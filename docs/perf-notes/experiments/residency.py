"""residency.py: how many blocks per SM the contiguous elementwise kernels
should run, against PyTorch, on the same buffers.

binary_vs_torch.py found PyTorch's bf16 add 0.27% faster than ours with
the same instructions: its kernel takes 34 registers, so 12 blocks of 128
threads fit on an SM against our 16 (28 registers), and ours patched to
PyTorch's register count ran exactly as fast. Fewer loads in flight per SM
stream faster; shared memory cannot cap residency without taking L1, which
holds the loads in flight (the driver grows the carveout back to 64 KiB),
and a persistent grid of K blocks per SM striding over the tensor runs 7%
slower than one pass of short blocks.

Here each case is the library's kernel (NVRTC, the plan's options) with its
cubin's register count (EIATTR_REGCOUNT) raised to R, so that
65536 / (R * threads) blocks fit per SM; "lib" is the kernel as compiled.
Three placements, interleaved rounds of 20 launches between CUDA events,
median; PyTorch's op with out= on the same tensors.

Run on the GPU machine: python3 docs/perf-notes/experiments/residency.py
"""

import ctypes
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import binary_vs_torch as bvt  # noqa: E402

N = 1 << 28
PLACEMENTS = 3
ROUNDS = 12
LAUNCHES = 20

# (name, dtype, source, BARACUDA_OP, TILE_UNROLL, kernel, threads, inputs, torch op)
CASES = [
    ("add", torch.bfloat16, "binary", 0, 1, "binary_fw_contig_add", 128, 2, lambda a, b, y: torch.add(a, b, out=y)),
    ("mul", torch.bfloat16, "binary", 2, 1, "binary_fw_contig_mul", 128, 2, lambda a, b, y: torch.mul(a, b, out=y)),
    ("add", torch.float32, "binary", 0, 1, "binary_fw_contig_add", 256, 2, lambda a, b, y: torch.add(a, b, out=y)),
    ("relu", torch.bfloat16, "unary", 0, 1, "unary_fw_contig_relu", 256, 1, lambda a, b, y: torch.clamp_min(a, 0, out=y)),
    ("relu", torch.float32, "unary", 0, 1, "unary_fw_contig_relu", 256, 1, lambda a, b, y: torch.clamp_min(a, 0, out=y)),
    ("exp", torch.bfloat16, "unary", 6, 1, "unary_fw_contig_exp", 256, 1, lambda a, b, y: torch.exp(a, out=y)),
]
REGS = (40, 48, 56)
DTYPE_ID = {torch.float32: 0, torch.bfloat16: 3}


def launcher(f, threads, tile, inputs, elem_bytes):
    per_block = threads * tile * (16 // elem_bytes)

    def run(a, b, y):
        args = [ctypes.c_uint64(a.data_ptr())]
        if inputs == 2:
            args.append(ctypes.c_uint64(b.data_ptr()))
        args += [ctypes.c_uint64(y.data_ptr()), ctypes.c_uint64(N)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(x) for x in args])
        stream = torch.cuda.current_stream().cuda_stream
        blocks = (N + per_block - 1) // per_block
        bvt.check(bvt.cuda.cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, stream, params, None), "cuLaunchKernel")
    return run


def main():
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(11)
    sets = {}
    for dt in (torch.bfloat16, torch.float32):
        sets[dt] = []
        for _ in range(PLACEMENTS):
            a = (torch.rand(N, device=dev, generator=g) * 4 - 2).to(dt)
            b = (torch.rand(N, device=dev, generator=g) * 1.5 + 0.5).to(dt)
            sets[dt].append((a, b, torch.empty(N, device=dev, dtype=dt)))
    kernels = os.path.join(bvt.KERNELS, "elementwise")
    print(f"{N} elements, {PLACEMENTS} placements x {ROUNDS} rounds x {LAUNCHES} launches, median ms (H200)")
    print(f"{'case':12s} {'variant':8s} {'regs':>4s} {'blocks/SM':>9s} {'ms':>8s} {'x torch':>8s}")
    for name, dt, src, op, tile, kernel, threads, inputs, torch_op in CASES:
        source = open(os.path.join(kernels, src + ".cu")).read()
        cubin = bvt.compile_cubin(source, {"BARACUDA_DTYPE": DTYPE_ID[dt], "BARACUDA_OP": op, "TILE_UNROLL": tile},
                                  raw=True)
        elem = torch.tensor([], dtype=dt).element_size()
        variants = {"torch": (torch_op, 0, 0)}
        for regs in (None,) + REGS:
            image = cubin if regs is None else bvt.patch_regcount(cubin, kernel, regs)
            f = bvt.function(bvt.load_cubin(image), kernel)
            got, blocks = ctypes.c_int(), ctypes.c_int()
            bvt.check(bvt.cuda.cuFuncGetAttribute(ctypes.byref(got), 4, f), "cuFuncGetAttribute")
            bvt.check(bvt.cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(blocks), f, threads, 0), "occupancy")
            variants["lib" if regs is None else f"r{regs}"] = (launcher(f, threads, tile, inputs, elem), got.value,
                                                                blocks.value)
        # Correctness: every variant equals PyTorch bit for bit.
        a, b, y = sets[dt][0]
        want = torch.empty_like(y)
        torch_op(a, b, want)
        for v, (run, _, _) in variants.items():
            y.fill_(float("nan"))
            run(a, b, y)
            bad = (y.view(torch.int8) != want.view(torch.int8)).sum().item()
            if bad:
                print(f"{name} {dt} {v}: {bad} bytes differ from PyTorch")
        runs = {v: run for v, (run, _, _) in variants.items()}
        times = bvt.time_interleaved(runs, sets[dt], ROUNDS, LAUNCHES, warmup_rounds=1)
        ref = statistics.median(t for _, t in times["torch"])
        label = f"{name} {str(dt).replace('torch.', '')}"
        for v, (_, regs, blocks) in variants.items():
            ms = statistics.median(t for _, t in times[v])
            print(f"{label:12s} {v:8s} {regs or '':>4} {blocks or '':>9} {ms:8.4f} {ref / ms:8.4f}")


if __name__ == "__main__":
    main()
