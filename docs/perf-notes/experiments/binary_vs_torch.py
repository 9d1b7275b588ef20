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
  persistK          K blocks of 128 threads per SM striding over the vectors
  unroll2           lib128 with two vectors per thread (TILE_UNROLL=2)
  regsR             lib128 with the cubin's register count patched to R:
                    the same code with the register allocation, and so the
                    residency, of a kernel that needs R registers
  occKc             the same cap inside the 32 KiB carveout the plain kernel
                    gets (PyTorch's add, 34 registers, ran 63% of the warp
                    slots active against our 85% in ncu)
With --nvcc (nvcc on the GPU machine), the same sources compiled by nvcc,
as PyTorch's kernels are, launched two ways:
  nvrt lib / nvrt i32   binary_fw_contig_add / add_i32 from a shared library
                        built by nvcc, launched with <<<>>> through the CUDA
                        runtime, as PyTorch launches its kernels
  nvdrv lib / nvdrv i32 the same kernels from an nvcc cubin, launched through
                        the driver like ours
and the SASS of both compilers' binary_fw_contig_add is written next to the
cubins (BVT_DIR, default /tmp/bvt).
With BVT_TORCH_CUBIN (an sm_90 cubin `cuobjdump -xelf` extracted from
libtorch_cuda.so), "tcubin add" is PyTorch's own kernel launched like ours.
--trace prints kernel durations and the gaps between back-to-back kernels
from torch.profiler's CUDA activity records instead of event timing.
Rounds visit every (placement, variant) in turn, 20 launches between CUDA
events each; the median per variant over rounds and placements is printed,
with its ratio to the PyTorch kernel of the same op.

Run on the GPU machine: python3 docs/perf-notes/experiments/binary_vs_torch.py
(--profile: only three launches each of PyTorch's add and ours, for ncu)
"""

import ctypes
import glob
import os
import statistics
import struct
import sys

import torch

KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../crates/baracuda-kernels/kernels")
CUDA_INCLUDE = "/usr/local/cuda/include"
N = 1 << int(os.environ.get("BVT_LOG2N", "28"))
PLACEMENTS = 3
ROUNDS = 20
LAUNCHES = 20
SMS = torch.cuda.get_device_properties(0).multi_processor_count

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
// A grid of K blocks per SM striding over the vectors: residency set by the
// launch instead of by the registers.
extern "C" __global__ void __launch_bounds__(128) add_persist(const T* a, const T* b, T* out, u64 n) {
    const u64 nvec = n / VEC;
    for (u64 i = (u64)blockIdx.x * 128 + threadIdx.x; i < nvec; i += (u64)gridDim.x * 128) {
        T va[VEC], vb[VEC], vo[VEC];
        load_vec(a, i, va);
        load_vec(b, i, vb);
#pragma unroll
        for (int e = 0; e < VEC; ++e) vo[e] = from_acc(to_acc(va[e]) + to_acc(vb[e]));
        store_vec(out, i, vo);
    }
}
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


BVT_DIR = os.environ.get("BVT_DIR", "/tmp/bvt")
NVCC = "/usr/local/cuda/bin/nvcc"
RT_WRAPPERS = r"""
extern "C" int rt_lib_add(const T* a, const T* b, T* y, u64 n, void* stream, unsigned blocks, unsigned threads) {
    binary_fw_contig_add<<<blocks, threads, 0, (cudaStream_t)stream>>>(a, b, y, n);
    return (int)cudaGetLastError();
}
extern "C" int rt_i32_add(const T* a, const T* b, T* y, u64 n, void* stream, unsigned blocks, unsigned threads) {
    add_i32<<<blocks, threads, 0, (cudaStream_t)stream>>>(a, b, y, n, 1.0f);
    return (int)cudaGetLastError();
}
"""


def nvcc_build(binary_src):
    """The add kernels compiled by nvcc: a shared library whose host
    functions launch them through the runtime, and a cubin for the driver."""
    import subprocess
    os.makedirs(BVT_DIR, exist_ok=True)
    src = os.path.join(BVT_DIR, "rt.cu")
    with open(src, "w") as f:
        f.write(binary_src + EXTRA.replace('#include "common/dtype.cuh"', "")
                .replace('#include "common/strided.cuh"', "").replace('#include "common/pointwise.cuh"', "")
                + RT_WRAPPERS)
    flags = ["-O3", "-std=c++17", "-arch=sm_90a", f"-I{KERNELS}", "-DBARACUDA_DTYPE=3", "-DBARACUDA_OP=0",
             "-DTILE_UNROLL=1"]
    so, cubin = os.path.join(BVT_DIR, "rt.so"), os.path.join(BVT_DIR, "nvcc.cubin")
    subprocess.run([NVCC, *flags, "-shared", "-Xcompiler", "-fPIC", src, "-o", so], check=True)
    subprocess.run([NVCC, *flags, "-cubin", src, "-o", cubin], check=True)
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), open(cubin, "rb").read()), "cuModuleLoadData nvcc")
    rt = ctypes.CDLL(so)
    for name in ("rt_lib_add", "rt_i32_add"):
        getattr(rt, name).argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint,
                                                              ctypes.c_uint]
    return rt, module


def rt_launcher(fn, threads):
    def run(a, b, y):
        blocks = (N // 8 + threads - 1) // threads
        check(fn(a.data_ptr(), b.data_ptr(), y.data_ptr(), N, torch.cuda.current_stream().cuda_stream, blocks,
                 threads), "runtime launch")
    return run


def elf_sections(cubin):
    """{name: (offset, size, sh_info)} of an ELF64 cubin's sections."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][4]
    out = {}
    for h in heads:
        name = cubin[names + h[0]:cubin.index(b"\0", names + h[0])].decode()
        out[name] = (h[4], h[5], h[7])
    return out


def patch_regcount(cubin, kernel, regs):
    """The cubin with the kernel's EIATTR_REGCOUNT (attribute 0x2f of the
    global .nv.info: symbol index, registers) set to regs: the same code,
    with the register allocation (and so the occupancy) of a kernel that
    needs regs registers."""
    cubin = bytearray(cubin)
    secs = elf_sections(cubin)
    sym = secs[".text." + kernel][2] & 0xFFFFFF
    off, size, _ = secs[".nv.info"]
    i = off
    while i < off + size:
        fmt, attr = cubin[i], cubin[i + 1]
        if fmt == 4:
            n, = struct.unpack_from("<H", cubin, i + 2)
            if attr == 0x2F and struct.unpack_from("<I", cubin, i + 4)[0] == sym:
                struct.pack_into("<I", cubin, i + 8, regs)
                return bytes(cubin)
            i += 4 + n
        elif fmt == 3:
            i += 4
        elif fmt == 2:
            i += 3
        else:
            i += 2
    raise RuntimeError(f"no EIATTR_REGCOUNT for {kernel}")


def load_cubin(image):
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
    return module


def compile_cubin(source, defines, arch="sm_90a", save=None, raw=False):
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
    if save:
        os.makedirs(BVT_DIR, exist_ok=True)
        with open(os.path.join(BVT_DIR, save), "wb") as f:
            f.write(buf.raw)
    if raw:
        return buf.raw
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), buf), "cuModuleLoadData")
    return module


def function(module, name):
    f = ctypes.c_void_p()
    check(cuda.cuModuleGetFunction(ctypes.byref(f), module, name.encode()), f"cuModuleGetFunction {name}")
    return f


def launcher(f, threads, per_thread_vecs=1, alpha=None, tail=(), per_sm=0, carveout=0, smem_bytes=None, grid=None):
    # per_sm > 0: enough dynamic shared memory that at most per_sm blocks
    # fit on an SM (1 KiB reserved per block) in the whole 228 KiB, or,
    # with carveout, in the 32 KiB shared-memory carveout the plain kernel
    # runs with (the rest stays L1).
    pool = 32768 if carveout else 233472
    smem = pool // per_sm - 1024 - 16 if per_sm else 0
    if smem_bytes is not None:
        smem = smem_bytes
    blocks_per_sm = ctypes.c_int()
    check(cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(blocks_per_sm), f, threads, smem),
          "cuOccupancyMaxActiveBlocksPerMultiprocessor")
    if smem:
        print(f"{threads} threads, {smem} B dynamic shared memory: {blocks_per_sm.value} blocks per SM (occupancy API)")
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
        blocks = grid or (N // 8 + threads * per_thread_vecs - 1) // (threads * per_thread_vecs)
        check(cuda.cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, smem, stream, params, None), "cuLaunchKernel")
    return run


TORCH_ADD = "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_15CUDAFunctor_addIN3c108BFloat16EEESt5arrayIPcLm3EEEEviT0_T1_"


def torch_cubin_variants():
    """PyTorch's own bf16 add kernel, from the sm_90 cubin cuobjdump
    extracted out of libtorch_cuda.so (BVT_TORCH_CUBIN), launched through
    the driver like ours: (int n, CUDAFunctor_add {float alpha},
    std::array<char*, 3> {out, a, b})."""
    path = os.environ.get("BVT_TORCH_CUBIN")
    if not path:
        return {}
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), open(path, "rb").read()), "cuModuleLoadData torch")
    f = function(module, TORCH_ADD)
    layout = []
    for i in range(4):
        off, size = ctypes.c_size_t(), ctypes.c_size_t()
        if cuda.cuFuncGetParamInfo(f, i, ctypes.byref(off), ctypes.byref(size)) != 0:
            break
        layout.append((off.value, size.value))
    print("torch add kernel parameters (offset, size):", layout)
    if layout != [(0, 4), (4, 4), (8, 24)]:
        return {}

    def run(a, b, y):
        n, alpha = ctypes.c_int(N), ctypes.c_float(1.0)
        data = (ctypes.c_uint64 * 3)(y.data_ptr(), a.data_ptr(), b.data_ptr())
        params = (ctypes.c_void_p * 3)(ctypes.addressof(n), ctypes.addressof(alpha), ctypes.addressof(data))
        stream = torch.cuda.current_stream().cuda_stream
        check(cuda.cuLaunchKernel(f, N // 1024, 1, 1, 128, 1, 1, 0, stream, params, None), "cuLaunchKernel torch")
    return {"tcubin add": run}


def nvcc_variants(binary):
    if "--nvcc" not in sys.argv:
        return {}
    rt, module = nvcc_build(binary)
    return {
        "nvrt lib add": rt_launcher(rt.rt_lib_add, 128),
        "nvdrv lib add": launcher(function(module, "binary_fw_contig_add"), 128),
        "nvrt i32 add": rt_launcher(rt.rt_i32_add, 128),
        "nvdrv i32 add": launcher(function(module, "add_i32"), 128, alpha=1.0),
    }


def time_interleaved(variants, sets, rounds, launches, warmup_rounds):
    """{variant: [(placement, ms per launch)]}: each round visits every
    (placement, variant) in turn, one untimed launch and then `launches`
    between CUDA events; the first `warmup_rounds` rounds are not kept."""
    times = {name: [] for name in variants}
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(warmup_rounds + rounds):
        for p, (a, b, y) in enumerate(sets):
            for name, run in variants.items():
                run(a, b, y)
                start.record()
                for _ in range(launches):
                    run(a, b, y)
                stop.record()
                stop.synchronize()
                if r >= warmup_rounds:
                    times[name].append((p, start.elapsed_time(stop) / launches))
    return times


def trace(variants, sets):
    """Kernel durations and the gaps between back-to-back kernels, from the
    CUDA activity records torch.profiler collects (CUPTI), per variant."""
    import json
    names = [n for n in ("torch add", "lib128 add", "tcubin add", "regs34 add", "regs48 add", "torch div",
                         "lib128 div")
             if n in variants]
    spans = {n: [] for n in names}
    for r in range(4):
        for p, (a, b, y) in enumerate(sets):
            for name in names:
                run = variants[name]
                run(a, b, y)
                torch.cuda.synchronize()
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    for _ in range(LAUNCHES):
                        run(a, b, y)
                    torch.cuda.synchronize()
                path = os.path.join(BVT_DIR, "trace.json")
                os.makedirs(BVT_DIR, exist_ok=True)
                prof.export_chrome_trace(path)
                ev = sorted((e["ts"], e["dur"]) for e in json.load(open(path))["traceEvents"]
                            if e.get("cat") == "kernel")
                spans[name].append(ev)
    print(f"{'variant':14s} {'kernels':>7s} {'dur us':>9s} {'gap us':>7s} {'period us':>9s}")
    for name, runs in spans.items():
        durs = [d for ev in runs for _, d in ev[1:]]
        gaps = [ev[i + 1][0] - (ev[i][0] + ev[i][1]) for ev in runs for i in range(len(ev) - 1)]
        periods = [ev[i + 1][0] - ev[i][0] for ev in runs for i in range(len(ev) - 1)]
        print(f"{name:14s} {len(durs):7d} {statistics.median(durs):9.3f} {statistics.median(gaps):7.3f} "
              f"{statistics.median(periods):9.3f}")


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
    mods = {op: compile_cubin(binary, {"BARACUDA_DTYPE": 3, "BARACUDA_OP": i, "TILE_UNROLL": 1},
                              save=f"nvrtc_{op}.cubin")
            for op, i in (("add", 0), ("mul", 2), ("div", 3))}
    add_cubin = compile_cubin(binary, {"BARACUDA_DTYPE": 3, "BARACUDA_OP": 0, "TILE_UNROLL": 1}, raw=True)
    extra = compile_cubin(EXTRA, {"BARACUDA_DTYPE": 3, "TILE_UNROLL": 1})
    mods["add_u2"] = compile_cubin(binary, {"BARACUDA_DTYPE": 3, "BARACUDA_OP": 0, "TILE_UNROLL": 2},
                                   save="nvrtc_add_u2.cubin")
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
        # 2 KiB of dynamic shared memory (3 KiB with the reserved 1 KiB) in
        # a 32 KiB carveout: 10 blocks per SM, the residency of regs48
        "smem2k add": launcher(function(mods["add"], "binary_fw_contig_add"), 128, carveout=1, smem_bytes=2048),
        **nvcc_variants(binary),
        **torch_cubin_variants(),
        **{f"regs{r} add": launcher(function(load_cubin(patch_regcount(add_cubin, "binary_fw_contig_add", r)),
                                             "binary_fw_contig_add"), 128)
           for r in (34, 40, 48, 56, 64)},
        **{f"persist{k} add": launcher(function(extra, "add_persist"), 128, grid=k * SMS) for k in (9, 10, 11, 12, 16)},
        "unroll2 add": launcher(function(mods["add_u2"], "binary_fw_contig_add"), 128, per_thread_vecs=2),
        "torch mul": lambda a, b, y: torch.mul(a, b, out=y),
        "lib128 mul": launcher(function(mods["mul"], "binary_fw_contig_mul"), 128),
        "torch div": lambda a, b, y: torch.div(a, b, out=y),
        "lib128 div": launcher(function(mods["div"], "binary_fw_contig_div"), 128),
    }
    if "--profile" in sys.argv:
        # Under a profiler: three launches each of PyTorch's add and ours, or
        # of the variants named after --profile (comma-separated).
        at = sys.argv.index("--profile") + 1
        names = sys.argv[at].split(",") if at < len(sys.argv) else ["torch add", "lib128 add"]
        a, b, y = sets[0]
        for _ in range(3):
            for name in names:
                variants[name](a, b, y)
        torch.cuda.synchronize()
        return
    if "--trace" in sys.argv:
        trace(variants, sets)
        return
    # Correctness: every add variant equals torch.add bit for bit (one f32
    # add, one rounding), mul and div likewise.
    a, b, y = sets[0]
    for name, run in variants.items():
        run(a, b, y)
        op = name.split()[-1]
        want = {"add": torch.add, "mul": torch.mul, "div": torch.div}[op](a, b)
        bad = (y.view(torch.int16) != want.view(torch.int16)).sum().item()
        print(f"{name:14s} mismatches vs torch: {bad}")
    times = time_interleaved(variants, sets, ROUNDS, LAUNCHES, warmup_rounds=2)
    print(f"bf16, {N} elements, {PLACEMENTS} placements x {ROUNDS} rounds x {LAUNCHES} launches (H200)")
    print(f"{'variant':14s} " + " ".join(f"{'place ' + str(p):>9s}" for p in range(PLACEMENTS)) + "   median   GB/s  x torch")
    med = {}
    for name, ts in times.items():
        med[name] = statistics.median(t for _, t in ts)
    for name, ts in times.items():
        per = [statistics.median(t for q, t in ts if q == p) for p in range(PLACEMENTS)]
        ref = med["torch " + name.split()[-1]]
        gbps = 3 * 2 * N / (med[name] * 1e-3) / 1e9
        print(f"{name:14s} " + " ".join(f"{x:9.4f}" for x in per) + f" {med[name]:8.4f} {gbps:6.0f} {ref / med[name]:8.4f}")


if __name__ == "__main__":
    main()
