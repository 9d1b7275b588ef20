// reduce_dims.cuh: the kernels of a reduction over any subset of dims of a
// strided tensor, for any fold (reduce.cu's ops, logical_reduce.cu's
// count), on the geometry and launches of reduce/layout.rs.
//
//   ReduceParams    layout.rs `ReduceParams`, field for field: kept dims
//                   outermost first (output o walks them row-major),
//                   reduced dims likewise, the last one the segment dim
//                   of the row kernel.
//   <prefix>_row    a group of `group` threads (power of two, up to the
//                   256-thread block) folds one output's segments of the
//                   innermost reduced dim, 16-byte loads when contiguous
//                   and aligned; short rows pack 256/group outputs per
//                   block, long ones split over gridDim.y blocks (over
//                   segments first, then within them).
//   <prefix>_col    the innermost input dim is kept: threads along it
//                   (coalesced, VEC columns each), blockDim.y threads over
//                   the reduced rows, merged in smem in row order.
//   <prefix>_combine one warp per output merges the states a split
//                   reduction wrote to the workspace, in split order.
// Every fold visits its elements in a fixed order, FOLD_AHEAD loads ahead
// (fold_ahead), so the bits depend only on the shape, strides and the
// launch shape the host derives from them and the SM count.
//
// A fold F (a struct of static members) gives:
//   X, S, Y         the stored element, the state, the output element
//   A               the element of the auxiliary operand `aux` (one per
//                   output, null unless the op has one): `const X` for an
//                   input the fold reads, `Y` for a second output it writes
//   init()          the state of no element (dead lanes, the combine)
//   init_at(aux, o) an output's first state; `aux` at offset o
//   push(s, x, q)   fold one element, push_vec(s, v, q) a Vec16 of them
//   merge(lo, hi)   two states, `lo` the earlier part of the range
//   put(y, yo, aux, ao, s, q) finish a state and store it at y[yo] (and,
//                   for a fold with a second output, at aux[ao])
// with q the op's OpArgs. REDUCE_DIMS_KERNELS(prefix, F) defines
// prefix_row, prefix_col and prefix_combine.
//
// Includers supply u32, u64 and i64 (dtype.cuh does).
#pragma once
#include "common/reduce.cuh"

// Loads each thread of a row or column fold issues before folding them.
#define FOLD_AHEAD 4

// Scalars of an op (layout.rs `OpArgs`): norm order, variance correction,
// elements reduced per output.
struct OpArgs {
    double p;
    double correction;
    u64 n_red;
};

template <typename X, typename Y, typename S, typename A>
struct ReduceParams {
    const X* x;
    Y* y;
    A* aux;          // the op's auxiliary operand per output, else null
    S* partial;      // split states [n_out][splits], when splits > 1
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

// The parameters of fold F's kernels.
template <typename F>
using ParamsOf = ReduceParams<typename F::X, typename F::Y, typename F::S, typename F::A>;

// One 16-byte vector of elements X, kept as loaded (four 32-bit words, so
// that vectors loaded ahead hold four registers each); v[k] is element k.
template <typename X>
struct Vec16 {
    static constexpr int N = 16 / (int)sizeof(X);
    uint4 raw;
    __device__ __forceinline__ X operator[](int k) const {
        X x;
        memcpy(&x, reinterpret_cast<const unsigned char*>(&raw) + k * sizeof(X), sizeof(X));
        return x;
    }
};

// Vector i of p (16-byte aligned).
template <typename X>
__device__ __forceinline__ Vec16<X> load16(const X* __restrict__ p, u64 i) {
    return Vec16<X>{reinterpret_cast<const uint4*>(p)[i]};
}

template <typename F>
struct FoldMerge {
    __device__ __forceinline__ typename F::S operator()(typename F::S l, typename F::S h) const {
        return F::merge(l, h);
    }
};

// Store the state of output o (offsets yo in y, ao in aux), or its split
// partial.
template <typename F>
__device__ __forceinline__ void emit(const ParamsOf<F>& p, u64 o, i64 yo, i64 ao, const typename F::S& s) {
    if (p.splits > 1) {
        p.partial[o * p.splits + blockIdx.y] = s;
    } else {
        F::put(p.y, yo, p.aux, ao, s, p.op);
    }
}

template <typename F>
__device__ __forceinline__ void row_body(const ParamsOf<F>& p) {
    typedef typename F::X X;
    typedef typename F::S S;
    constexpr int N = Vec16<X>::N;
    __shared__ S smem[32];
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
        S s = F::init();
        i64 yo = 0, ao = 0;
        if (live) {
            const i64 xo = strided_offset(o, p.nk, p.kshape, p.kx);
            yo = strided_offset(o, p.nk, p.kshape, p.ky);
            ao = strided_offset(o, p.nk, p.kshape, p.kaux);
            s = F::init_at(p.aux, ao);
            for (u64 seg = s0; seg < s1 && l0 < l1; ++seg) {
                const X* base = p.x + xo + strided_offset(seg, p.nr - 1, p.rshape, p.rx);
                u64 i = l0;
                if (p.vec) {
                    const u64 nv = (l1 - l0) / N;
                    const X* vb = base + l0;
                    fold_ahead<FOLD_AHEAD>(
                        t, nv, g, [&](u64 v) { return load16(vb, v); },
                        [&](u64, const Vec16<X>& e) { F::push_vec(s, e, p.op); });
                    i = l0 + nv * N;
                }
                fold_ahead<FOLD_AHEAD>(
                    i + t, l1, g, [&](u64 j) { return base[(i64)j * seg_stride]; },
                    [&](u64, X x) { F::push(s, x, p.op); });
            }
        }
        s = group_reduce(s, g, FoldMerge<F>(), smem);
        if (live && t == 0) emit<F>(p, o, yo, ao, s);
    }
}

// Dynamic smem: blockDim.x * blockDim.y * (VEC when vec, else 1) states.
template <typename F>
__device__ __forceinline__ void col_body(const ParamsOf<F>& p) {
    typedef typename F::X X;
    typedef typename F::S S;
    constexpr int N = Vec16<X>::N;
    extern __shared__ __align__(16) unsigned char col_smem[];
    S* sm = reinterpret_cast<S*>(col_smem);
    const u32 cv = p.vec ? N : 1;
    const u32 nk = p.nk;
    const u64 inner = p.kshape[nk - 1];
    const i64 ky_in = p.ky[nk - 1], ka_in = p.kaux[nk - 1];
    const u64 cols_per_block = (u64)blockDim.x * cv;
    const u64 col_blocks = (inner + cols_per_block - 1) / cols_per_block;
    const u64 n_outer = p.n_out / inner;
    const u64 r0 = (u64)blockIdx.y * p.chunk;
    const u64 r1 = min(p.n_seg, r0 + p.chunk);
    const u32 width = blockDim.x * cv;  // states per smem row
    for (u64 b = blockIdx.x; b < n_outer * col_blocks; b += gridDim.x) {
        const u64 outer = b / col_blocks;
        const u64 c0 = (b % col_blocks) * cols_per_block + (u64)threadIdx.x * cv;
        // This thread's columns c0 .. c0 + cols - 1; a whole vector when full.
        const u32 cols = c0 < inner ? (u32)min((u64)cv, inner - c0) : 0u;
        const bool full = p.vec && cols == (u32)N;
        const i64 xo = strided_offset(outer, nk - 1, p.kshape, p.kx);
        const i64 yo = strided_offset(outer, nk - 1, p.kshape, p.ky);
        const i64 ao = strided_offset(outer, nk - 1, p.kshape, p.kaux);
        S s[N];
#pragma unroll
        for (int v = 0; v < N; ++v) s[v] = (u32)v < cols ? F::init_at(p.aux, ao + (i64)(c0 + v) * ka_in) : F::init();
        // x at reduced row r, this thread's first column.
        const auto at = [&](u64 r) { return p.x + xo + strided_offset(r, p.nr, p.rshape, p.rx) + c0; };
        if (full) {
            fold_ahead<FOLD_AHEAD>(
                r0 + threadIdx.y, r1, blockDim.y, [&](u64 r) { return load16(at(r), 0); },
                [&](u64, const Vec16<X>& e) {
#pragma unroll
                    for (int v = 0; v < N; ++v) F::push(s[v], e[v], p.op);
                });
        } else if (cv == 1) {
            if (cols == 1)
                fold_ahead<FOLD_AHEAD>(
                    r0 + threadIdx.y, r1, blockDim.y, [&](u64 r) { return *at(r); },
                    [&](u64, X x) { F::push(s[0], x, p.op); });
        } else {
            // The last columns of the inner dim, short of a vector.
            for (u64 r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
                const X* row = at(r);
#pragma unroll
                for (int v = 0; v < N; ++v)
                    if ((u32)v < cols) F::push(s[v], row[v], p.op);
            }
        }
        __syncthreads();
#pragma unroll
        for (int v = 0; v < N; ++v)
            if ((u32)v < cv) sm[threadIdx.y * width + threadIdx.x * cv + v] = s[v];
        __syncthreads();
        if (threadIdx.y == 0) {
#pragma unroll
            for (int v = 0; v < N; ++v) {
                if ((u32)v < cols) {
                    const u64 col = c0 + v;
                    S acc = sm[threadIdx.x * cv + v];
                    for (u32 k = 1; k < blockDim.y; ++k) acc = F::merge(acc, sm[k * width + threadIdx.x * cv + v]);
                    emit<F>(p, outer * inner + col, yo + (i64)col * ky_in, ao + (i64)col * ka_in, acc);
                }
            }
        }
    }
}

// One warp per output merges its splits: lane l takes splits l, l + 32,
// ... in order, then the warp merges lanes in order; lane 0 calls
// put(o, state). P holds n_out, splits and partial.
template <typename F, typename P, typename Put>
__device__ __forceinline__ void combine_splits(const P& p, Put put) {
    typedef typename F::S S;
    const u32 warps = blockDim.x >> 5;
    const u32 lane = threadIdx.x & 31u;
    for (u64 o = (u64)blockIdx.x * warps + (threadIdx.x >> 5); o < p.n_out; o += (u64)gridDim.x * warps) {
        S s = F::init();
        for (u32 k = lane; k < p.splits; k += 32) s = F::merge(s, p.partial[o * p.splits + k]);
        s = group_reduce(s, 32u, FoldMerge<F>(), (S*)nullptr);
        if (lane == 0) put(o, s);
    }
}

template <typename F>
__device__ __forceinline__ void combine_body(const ParamsOf<F>& p) {
    combine_splits<F>(p, [&](u64 o, const typename F::S& s) {
        const i64 yo = strided_offset(o, p.nk, p.kshape, p.ky);
        F::put(p.y, yo, p.aux, strided_offset(o, p.nk, p.kshape, p.kaux), s, p.op);
    });
}

#define REDUCE_DIMS_PARAMS(F) ParamsOf<F>
#define REDUCE_DIMS_KERNELS(PREFIX, F)                                                          \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_row(REDUCE_DIMS_PARAMS(F) p) {   \
        row_body<F>(p);                                                                         \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_col(REDUCE_DIMS_PARAMS(F) p) {   \
        col_body<F>(p);                                                                         \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_combine(REDUCE_DIMS_PARAMS(F) p) { \
        combine_body<F>(p);                                                                     \
    }
