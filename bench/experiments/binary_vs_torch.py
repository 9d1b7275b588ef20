"""binary_vs_torch.py: our bf16 binary forward against PyTorch's on the same
buffers, in one process, interleaved.

The benchmark tables compare two processes whose allocators place their
buffers differently, and placement alone moves a memory-bound kernel of
2^28 bf16 elements by 0.2-0.5% (binary_hints.cu), the size of the gaps
left between our `add`/`sub`/`mul` and PyTorch's. Here both kernels read
and write the very same tensors: the library's `binary.cu`, compiled with
NVRTC and the plan's options (sm_90a, BARACUDA_DTYPE=3, TILE_UNROLL=1),
launched through the driver API on PyTorch's stream, next to `torch.add`,
`torch.mul` and `torch.div` with `out=`. Variants of ours:
  lib128 / lib256   binary_fw_contig_OP with 128 (the plan's) or 256 threads
  sm90              lib128 compiled for sm_90 instead of sm_90a
  ldplain / ldnc    the i32 shape with the loads written in PTX as
                    ld.global (PyTorch's LDG.E.128) / ld.global.nc (ours:
                    NVVM emits LDG.E.128.CONSTANT for load_vec)
  alpha128          a + alpha * b (PyTorch's add computes with alpha)
  i32_128           PyTorch's kernel shape: 32-bit indices, one 8-element
                    vector per thread, a + alpha * b
  fF_sS             that shape, a + b, the store held back by F dependent
                    FMAs per element and a __nanosleep(S) (our div, whose
                    division sits between load and store, ran faster than
                    our add)
  divwork           that shape computing a + b + 0 * (a / b): our div's
                    instructions, add's result
  occK              lib128 with dynamic shared memory capping residency at
                    K blocks per SM (16 without), which also shrinks L1
  occKc             the same cap inside the 32 KiB carveout the plain kernel
                    gets (PyTorch's add, 34 registers, ran 63% of the warp
                    slots active against our 85% in ncu)
Rounds visit every (placement, variant) in turn, 20 launches between CUDA
events each; the median per variant over rounds and placements is printed,
with its ratio to the PyTorch kernel of the same op.

Run on the GPU machine: python3 bench/experiments/binary_vs_torch.py
(--profile: only three launches each of PyTorch's add and ours, for ncu)
"""

import ctypes
import glob
import os
import statistics
import sys

import torch

KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../crates/baracuda-kernels/kernels")
CUDA_INCLUDE = "/usr/local/cuda/include"
N = 1 << 28
PLACEMENTS = 3
ROUNDS = 20
LAUNCHES = 20

EXTRA = r"""
#include "common/dtype.cuh"
#include "common/strided.cuh"
#include "common/pointwise.cuh"
struct AddAlpha {
    ACC alpha;
    __device__ __forceinline__ void operator()(const ACC (&a)[2], ACC (&r)[1]) const {
        r[0] = a[0] + alpha * a[1];
    }
};
extern "C" __global__ void __launch_bounds__(256) add_alpha(const T* a, const T* b, T* out, u64 n, float alpha) {
    const T* const in[2] = {a, b};
    T* const o[1] = {out};
    pointwise_contig<2, 1>(in, o, n, AddAlpha{alpha});
}
// 32-bit indices, 8 elements per thread, 128 threads: n a multiple of 1024.
extern "C" __global__ void __launch_bounds__(128) add_i32(const T* a, const T* b, T* out, u64 n, float alpha) {
    const int i = blockIdx.x * 128 + threadIdx.x;
    T va[8], vb[8], vo[8];
    *(uint4*)va = ((const uint4*)a)[i];
    *(uint4*)vb = ((const uint4*)b)[i];
#pragma unroll
    for (int e = 0; e < 8; ++e) vo[e] = from_acc(to_acc(va[e]) + alpha * to_acc(vb[e]));
    ((uint4*)out)[i] = *(uint4*)vo;
}
// The same shape (no alpha) holding the store back after the loads have
// landed: FMAS dependent multiply-adds by runtime 1 and 0 per element
// (about 4 cycles each), then __nanosleep(SLEEP).
template <int FMAS, int SLEEP>
__device__ __forceinline__ void add_delay(const T* a, const T* b, T* out, float one, float zero) {
    const int i = blockIdx.x * 128 + threadIdx.x;
    T va[8], vb[8], vo[8];
    *(uint4*)va = ((const uint4*)a)[i];
    *(uint4*)vb = ((const uint4*)b)[i];
    float s[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) s[e] = to_acc(va[e]) + to_acc(vb[e]);
#pragma unroll 1
    for (int k = 0; k < FMAS; ++k)
#pragma unroll
        for (int e = 0; e < 8; ++e) s[e] = fmaf(s[e], one, zero);
    if (SLEEP) __nanosleep(SLEEP);
#pragma unroll
    for (int e = 0; e < 8; ++e) vo[e] = from_acc(s[e]);
    ((uint4*)out)[i] = *(uint4*)vo;
}
#define DELAY(F, S) \
    extern "C" __global__ void __launch_bounds__(128) add_f##F##_s##S(const T* a, const T* b, T* out, u64 n, float one, float zero) { \
        add_delay<F, S>(a, b, out, one, zero); }
DELAY(0, 0)
DELAY(16, 0)
// The i32 shape with the loads spelled in PTX: plain ld.global (PyTorch's
// LDG.E.128) or ld.global.nc (LDG.E.128.CONSTANT, what a const __restrict__
// pointer gives).
template <bool NC>
__device__ __forceinline__ uint4 ld16(const void* p) {
    uint4 r;
    if (NC)
        asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    else
        asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
template <bool NC>
__device__ __forceinline__ void add_ld(const T* a, const T* b, T* out) {
    const int i = blockIdx.x * 128 + threadIdx.x;
    T va[8], vb[8], vo[8];
    *(uint4*)va = ld16<NC>((const uint4*)a + i);
    *(uint4*)vb = ld16<NC>((const uint4*)b + i);
#pragma unroll
    for (int e = 0; e < 8; ++e) vo[e] = from_acc(to_acc(va[e]) + to_acc(vb[e]));
    ((uint4*)out)[i] = *(uint4*)vo;
}
extern "C" __global__ void __launch_bounds__(128) add_ld_plain(const T* a, const T* b, T* out, u64 n) { add_ld<false>(a, b, out); }
extern "C" __global__ void __launch_bounds__(128) add_ld_nc(const T* a, const T* b, T* out, u64 n) { add_ld<true>(a, b, out); }
// a + b + zero * (a / b): our div's instructions, add's result.
extern "C" __global__ void __launch_bounds__(128) add_divwork(const T* a, const T* b, T* out, u64 n, float one, float zero) {
    const int i = blockIdx.x * 128 + threadIdx.x;
    T va[8], vb[8], vo[8];
    *(uint4*)va = ((const uint4*)a)[i];
    *(uint4*)vb = ((const uint4*)b)[i];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const float x = to_acc(va[e]), y = to_acc(vb[e]);
        vo[e] = from_acc(x + y + zero * (x / y));
    }
    ((uint4*)out)[i] = *(uint4*)vo;
}
"""


def lib(name):
    for pattern in (f"/usr/local/cuda/lib64/{name}.so*", f"/usr/local/cuda/targets/*/lib/{name}.so*"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return ctypes.CDLL(hits[0])
    return ctypes.CDLL(f"{name}.so")


nvrtc = lib("libnvrtc")
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed: {rc}")


def compile_cubin(source, defines, arch="sm_90a"):
    prog = ctypes.c_void_p()
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"k.cu", 0, None, None), "nvrtcCreateProgram")
    opts = [f"--gpu-architecture={arch}", "--std=c++17", "--device-as-default-execution-space",
            f"-I{KERNELS}", f"-I{CUDA_INCLUDE}"] + [f"-D{k}={v}" for k, v in defines.items()]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
    if rc != 0:
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(log.value.decode())
    size = ctypes.c_size_t()
    check(nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
    buf = ctypes.create_string_buffer(size.value)
    check(nvrtc.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), buf), "cuModuleLoadData")
    return module


def function(module, name):
    f = ctypes.c_void_p()
    check(cuda.cuModuleGetFunction(ctypes.byref(f), module, name.encode()), f"cuModuleGetFunction {name}")
    return f


def launcher(f, threads, per_thread_vecs=1, alpha=None, tail=(), per_sm=0, carveout=0):
    # per_sm > 0: enough dynamic shared memory that at most per_sm blocks
    # fit on an SM (1 KiB reserved per block) in the whole 228 KiB, or,
    # with carveout, in the 32 KiB shared-memory carveout the plain kernel
    # runs with (the rest stays L1).
    pool = 32768 if carveout else 233472
    smem = pool // per_sm - 1024 - 16 if per_sm else 0
    if carveout:
        check(cuda.cuFuncSetAttribute(f, 9, 14), "cuFuncSetAttribute carveout")  # 14% of 228 KiB: 32 KiB
    def run(a, b, y):
        stream = torch.cuda.current_stream().cuda_stream
        args = [ctypes.c_uint64(a.data_ptr()), ctypes.c_uint64(b.data_ptr()), ctypes.c_uint64(y.data_ptr()),
                ctypes.c_uint64(N)]
        if alpha is not None:
            args.append(ctypes.c_float(alpha))
        args += [ctypes.c_float(x) for x in tail]
        params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(x) for x in args])
        blocks = (N // 8 + threads * per_thread_vecs - 1) // (threads * per_thread_vecs)
        check(cuda.cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, smem, stream, params, None), "cuLaunchKernel")
    return run


def main():
    torch.cuda.init()
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(7)
    sets = []
    for _ in range(PLACEMENTS):
        a = (torch.rand(N, device=dev, generator=g) * 4 - 2).to(torch.bfloat16)
        b = (torch.rand(N, device=dev, generator=g) * 1.5 + 0.5).to(torch.bfloat16)
        sets.append((a, b, torch.empty(N, device=dev, dtype=torch.bfloat16)))
    torch.cuda.synchronize()
    binary = open(os.path.join(KERNELS, "elementwise/binary.cu")).read()
    mods = {op: compile_cubin(binary, {"BARACUDA_DTYPE": 3, "BARACUDA_OP": i, "TILE_UNROLL": 1})
            for op, i in (("add", 0), ("mul", 2), ("div", 3))}
    extra = compile_cubin(EXTRA, {"BARACUDA_DTYPE": 3, "TILE_UNROLL": 1})
    mods["add_sm90"] = compile_cubin(binary, {"BARACUDA_DTYPE": 3, "BARACUDA_OP": 0, "TILE_UNROLL": 1}, "sm_90")
    variants = {
        "torch add": lambda a, b, y: torch.add(a, b, out=y),
        "lib128 add": launcher(function(mods["add"], "binary_fw_contig_add"), 128),
        "lib256 add": launcher(function(mods["add"], "binary_fw_contig_add"), 256),
        "sm90 add": launcher(function(mods["add_sm90"], "binary_fw_contig_add"), 128),
        "ldplain add": launcher(function(extra, "add_ld_plain"), 128),
        "ldnc add": launcher(function(extra, "add_ld_nc"), 128),
        "alpha128 add": launcher(function(extra, "add_alpha"), 128, alpha=1.0),
        "i32_128 add": launcher(function(extra, "add_i32"), 128, alpha=1.0),
        **{f"f{fm}_s{sl} add": launcher(function(extra, f"add_f{fm}_s{sl}"), 128, tail=(1.0, 0.0))
           for fm, sl in ((0, 0), (16, 0))},
        "divwork add": launcher(function(extra, "add_divwork"), 128, tail=(1.0, 0.0)),
        **{f"occ{k}c add": launcher(function(mods["add"], "binary_fw_contig_add"), 128, per_sm=k, carveout=1)
           for k in (8, 12)},
        "torch mul": lambda a, b, y: torch.mul(a, b, out=y),
        "lib128 mul": launcher(function(mods["mul"], "binary_fw_contig_mul"), 128),
        "torch div": lambda a, b, y: torch.div(a, b, out=y),
        "lib128 div": launcher(function(mods["div"], "binary_fw_contig_div"), 128),
    }
    if "--profile" in sys.argv:
        # Under a profiler: PyTorch's add and ours, three launches each.
        a, b, y = sets[0]
        for _ in range(3):
            for name in ("torch add", "lib128 add"):
                variants[name](a, b, y)
        torch.cuda.synchronize()
        return
    # Correctness: every add variant equals torch.add bit for bit (one f32
    # add, one rounding), mul and div likewise.
    a, b, y = sets[0]
    for name, run in variants.items():
        run(a, b, y)
        op = name.split()[1]
        want = {"add": torch.add, "mul": torch.mul, "div": torch.div}[op](a, b)
        bad = (y.view(torch.int16) != want.view(torch.int16)).sum().item()
        print(f"{name:14s} mismatches vs torch: {bad}")
    times = {name: [] for name in variants}
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(ROUNDS + 2):
        for p, (a, b, y) in enumerate(sets):
            for name, run in variants.items():
                run(a, b, y)
                start.record()
                for _ in range(LAUNCHES):
                    run(a, b, y)
                stop.record()
                stop.synchronize()
                if r >= 2:
                    times[name].append((p, start.elapsed_time(stop) / LAUNCHES))
    print(f"bf16, {N} elements, {PLACEMENTS} placements x {ROUNDS} rounds x {LAUNCHES} launches (H200)")
    print(f"{'variant':14s} " + " ".join(f"{'place ' + str(p):>9s}" for p in range(PLACEMENTS)) + "   median   GB/s  x torch")
    med = {}
    for name, ts in times.items():
        med[name] = statistics.median(t for _, t in ts)
    for name, ts in times.items():
        per = [statistics.median(t for q, t in ts if q == p) for p in range(PLACEMENTS)]
        ref = med["torch " + name.split()[1]]
        gbps = 3 * 2 * N / (med[name] * 1e-3) / 1e9
        print(f"{name:14s} " + " ".join(f"{x:9.4f}" for x in per) + f" {med[name]:8.4f} {gbps:6.0f} {ref / med[name]:8.4f}")


if __name__ == "__main__":
    main()
