// logical_reduce.cu: torch.all, torch.any and torch.count_nonzero over any
// subset of dims of a strided tensor, deterministic (no atomics; the
// state is an exact integer count).
//
// FW  c[o] = #{ r in R(o) : x[o, r] != 0 }     (NaN is nonzero, -0.0 zero)
//     all            y[o] = c[o] == n_red       (true over nothing)
//     any            y[o] = c[o] != 0           (false over nothing)
//     count_nonzero  y[o] = c[o]                (0 over nothing)
// all and any write one byte, 0 or 1 (bool, or u8 for u8 inputs as
// PyTorch); count_nonzero writes an i64.
//
// "Nonzero" is a bit test on the stored element: any bit set, except for
// floats the sign bit alone (-0.0 is zero; every NaN and every subnormal
// has a mantissa bit). So the kernel depends only on the element's width
// and on whether it is a float, not on its type: f16 and bf16 share a
// module, and so do i8, u8 and bool.
//
// Work split: the reduce family's (reduce/layout.rs merges and orders the
// dims, picks the kernel and the split; the parameters are reduce.cu's
// `ReduceParams`, field for field):
//   logical_row      a group of `group` threads (power of two, up to the
//                    256-thread block) counts one output's segments of the
//                    innermost reduced dim, 16-byte loads when contiguous
//                    and aligned; long rows split over gridDim.y blocks.
//   logical_col      the innermost input dim is kept: threads along it
//                    (coalesced, VEC columns each), blockDim.y threads over
//                    the reduced rows, summed in smem.
//   logical_combine  one warp per output adds the counts a split reduction
//                    wrote to the workspace (u64 per output and split).
// Traffic: reads x once (n_out * n_red * b bytes), writes n_out bytes (or
// i64s); a compare and an add per element, so memory bound: judge it by
// GB/s against the copy ceiling. 64-bit offsets throughout.
// Specialised by: LOGICAL_BYTES (element width 1, 2, 4, 8), LOGICAL_FLOAT
// (1: the sign bit alone is zero), LOGICAL_OP (0 all, 1 any, 2
// count_nonzero).
typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;
#include "common/reduce.cuh"

#if !defined(LOGICAL_BYTES) || !defined(LOGICAL_FLOAT) || !defined(LOGICAL_OP)
#error "LOGICAL_BYTES, LOGICAL_FLOAT and LOGICAL_OP must be defined"
#endif

// The stored element as an unsigned word of its width.
#if LOGICAL_BYTES == 1
typedef unsigned char W;
#elif LOGICAL_BYTES == 2
typedef unsigned short W;
#elif LOGICAL_BYTES == 4
typedef unsigned int W;
#elif LOGICAL_BYTES == 8
typedef unsigned long long W;
#else
#error "LOGICAL_BYTES must be 1, 2, 4 or 8"
#endif

// The bits that make an element nonzero.
#if LOGICAL_FLOAT
#define NONZERO_BITS ((W) ~((W)1 << (8 * LOGICAL_BYTES - 1)))
#else
#define NONZERO_BITS ((W) ~(W)0)
#endif

#if LOGICAL_OP == 2
typedef i64 O;
#elif LOGICAL_OP == 0 || LOGICAL_OP == 1
typedef unsigned char O;  // bool (u8 for u8 inputs): 0 or 1
#else
#error "LOGICAL_OP must be 0 (all), 1 (any) or 2 (count_nonzero)"
#endif

// Elements of W in one 16-byte vector.
#define LVEC (16 / LOGICAL_BYTES)

__device__ __forceinline__ u64 nonzero(W v) { return (v & NONZERO_BITS) != 0 ? 1ull : 0ull; }

// Scalars of reduce.cu's `OpArgs`; only the element count is read.
struct OpArgs {
    double p;
    double correction;
    u64 n_red;
};

// reduce/layout.rs `ReduceParams`, field for field (the auxiliary input
// is unused, always null). Kept dims outermost first, output o walks them
// row-major; reduced dims likewise, the last one the segment dim of the
// row kernel.
struct LogicalParams {
    const W* x;
    O* y;
    const W* aux;
    u64* partial;    // split counts [n_out][splits], when splits > 1
    u64 n_out;
    u32 nk, nr;
    u64 kshape[REDUCE_MAX_RANK];
    i64 kx[REDUCE_MAX_RANK];
    i64 ky[REDUCE_MAX_RANK];
    i64 kaux[REDUCE_MAX_RANK];
    u64 rshape[REDUCE_MAX_RANK];
    i64 rx[REDUCE_MAX_RANK];
    u64 n_seg;       // row: segments per output; col: reduced rows per output
    u64 chunk;       // row: segment elements per split; col: rows per split
    u32 splits;      // gridDim.y
    u32 seg_splits;  // row: splits over segments (the rest split each segment)
    u32 group;       // row: threads per output
    u32 vec;         // 1: 16-byte loads
    OpArgs op;
};

struct Add {
    __device__ __forceinline__ u64 operator()(u64 l, u64 h) const { return l + h; }
};

__device__ __forceinline__ O finish(u64 c, u64 n_red) {
#if LOGICAL_OP == 0
    return (O)(c == n_red);
#elif LOGICAL_OP == 1
    return (O)(c != 0);
#else
    return (O)c;
#endif
}

// The nonzero elements of the 16-byte vector i of p.
__device__ __forceinline__ u64 count_vec(const W* __restrict__ p, u64 i) {
    const uint4 r = reinterpret_cast<const uint4*>(p)[i];
    W e[LVEC];
    memcpy(&e[0], &r, 16);
    u64 c = 0;
#pragma unroll
    for (int k = 0; k < LVEC; ++k) c += nonzero(e[k]);
    return c;
}

// The count of output o (offset yo), or its split partial.
__device__ __forceinline__ void emit(const LogicalParams& p, u64 o, i64 yo, u64 c) {
    if (p.splits > 1) {
        p.partial[o * p.splits + blockIdx.y] = c;
    } else {
        p.y[yo] = finish(c, p.op.n_red);
    }
}

extern "C" __global__ void __launch_bounds__(256) logical_row(LogicalParams p) {
    __shared__ u64 smem[32];
    const u32 g = p.group;
    const u32 per_block = blockDim.x / g;
    const u32 t = threadIdx.x % g;
    const u32 slot = threadIdx.x / g;
    const u32 l_splits = p.splits / p.seg_splits;
    const u32 so = blockIdx.y / l_splits, sl = blockIdx.y % l_splits;
    const u64 seg_len = p.rshape[p.nr - 1];
    const i64 seg_stride = p.rx[p.nr - 1];
    const u64 s0 = p.n_seg * so / p.seg_splits, s1 = p.n_seg * (so + 1) / p.seg_splits;
    const u64 l0 = (u64)sl * p.chunk;
    const u64 l1 = min(seg_len, l0 + p.chunk);
    for (u64 ob = blockIdx.x; ob * per_block < p.n_out; ob += gridDim.x) {
        const u64 o = ob * per_block + slot;
        const bool live = o < p.n_out;
        u64 c = 0;
        i64 yo = 0;
        if (live) {
            const i64 xo = strided_offset(o, p.nk, p.kshape, p.kx);
            yo = strided_offset(o, p.nk, p.kshape, p.ky);
            for (u64 seg = s0; seg < s1 && l0 < l1; ++seg) {
                const W* base = p.x + xo + strided_offset(seg, p.nr - 1, p.rshape, p.rx);
                u64 i = l0;
                if (p.vec) {
                    const u64 nv = (l1 - l0) / LVEC;
                    const W* vb = base + l0;
#pragma unroll 4
                    for (u64 v = t; v < nv; v += g) c += count_vec(vb, v);
                    i = l0 + nv * LVEC;
                }
                for (u64 j = i + t; j < l1; j += g) c += nonzero(base[(i64)j * seg_stride]);
            }
        }
        c = group_reduce(c, g, Add(), smem);
        if (live && t == 0) emit(p, o, yo, c);
    }
}

// Dynamic smem: blockDim.x * blockDim.y * (VEC when vec, else 1) counts
// (the host reserves reduce.cu's larger state per slot).
extern "C" __global__ void __launch_bounds__(256) logical_col(LogicalParams p) {
    extern __shared__ unsigned char col_smem[];
    u64* sm = reinterpret_cast<u64*>(col_smem);
    const u32 cv = p.vec ? LVEC : 1;
    const u32 nk = p.nk;
    const u64 inner = p.kshape[nk - 1];
    const i64 ky_in = p.ky[nk - 1];
    const u64 cols_per_block = (u64)blockDim.x * cv;
    const u64 col_blocks = (inner + cols_per_block - 1) / cols_per_block;
    const u64 n_outer = p.n_out / inner;
    const u64 r0 = (u64)blockIdx.y * p.chunk;
    const u64 r1 = min(p.n_seg, r0 + p.chunk);
    const u32 width = blockDim.x * cv;  // counts per smem row
    for (u64 b = blockIdx.x; b < n_outer * col_blocks; b += gridDim.x) {
        const u64 outer = b / col_blocks;
        const u64 c0 = (b % col_blocks) * cols_per_block + (u64)threadIdx.x * cv;
        const i64 xo = strided_offset(outer, nk - 1, p.kshape, p.kx);
        const i64 yo = strided_offset(outer, nk - 1, p.kshape, p.ky);
        u64 c[LVEC];
#pragma unroll
        for (int v = 0; v < LVEC; ++v) c[v] = 0;
#pragma unroll 4
        for (u64 r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
            const W* base = p.x + xo + strided_offset(r, p.nr, p.rshape, p.rx) + c0;
            if (p.vec && c0 + LVEC <= inner) {
                const uint4 raw = *reinterpret_cast<const uint4*>(base);
                W e[LVEC];
                memcpy(&e[0], &raw, 16);
#pragma unroll
                for (int v = 0; v < LVEC; ++v) c[v] += nonzero(e[v]);
            } else {
#pragma unroll
                for (int v = 0; v < LVEC; ++v)
                    if (v < (int)cv && c0 + v < inner) c[v] += nonzero(base[v]);
            }
        }
        __syncthreads();
#pragma unroll
        for (int v = 0; v < LVEC; ++v)
            if (v < (int)cv) sm[threadIdx.y * width + threadIdx.x * cv + v] = c[v];
        __syncthreads();
        if (threadIdx.y == 0) {
#pragma unroll
            for (int v = 0; v < LVEC; ++v) {
                const u64 col = c0 + v;
                if (v < (int)cv && col < inner) {
                    u64 acc = 0;
                    for (u32 k = 0; k < blockDim.y; ++k) acc += sm[k * width + threadIdx.x * cv + v];
                    emit(p, outer * inner + col, yo + (i64)col * ky_in, acc);
                }
            }
        }
    }
}

// One warp per output adds its splits.
extern "C" __global__ void __launch_bounds__(256) logical_combine(LogicalParams p) {
    const u32 warps = blockDim.x >> 5;
    const u32 lane = threadIdx.x & 31u;
    for (u64 o = (u64)blockIdx.x * warps + (threadIdx.x >> 5); o < p.n_out; o += (u64)gridDim.x * warps) {
        u64 c = 0;
        for (u32 k = lane; k < p.splits; k += 32) c += p.partial[o * p.splits + k];
        c = group_reduce(c, 32u, Add(), (u64*)nullptr);
        if (lane == 0) p.y[strided_offset(o, p.nk, p.kshape, p.ky)] = finish(c, p.op.n_red);
    }
}
