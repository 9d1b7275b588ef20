// reduce.cu: reductions over any subset of dims of a strided tensor,
// forward and backward, deterministic (no atomics).
//
// FW  y[o] = finish( fold_{r in R(o)} x[o, r] )   over the reduced set R(o)
//   op           state (a, b, c)            y                       dx (BW)
//   sum          sum                        a                       dy
//   mean         sum                        a / n                   dy / n
//   nansum       sum of non-NaN             a                       isnan(x) ? 0 : dy
//   nanmean      sum, count of non-NaN      a / b                   isnan(x) ? 0 : dy / count
//   prod         product                    a                       dy prod_{others} (zeros handled)
//   amax, amin   max / min, NaN wins        a                       dy [x == y] / #ties
//   var          Welford (n, mean, M2)      M2 / max(n - c, 0)      2 dy (x - mean) / (n - c)
//   std          Welford                    sqrt(var)               var's with dy / (2 y), 0 where y = 0
//   logsumexp    (max, sum exp(x - max))    max + log(sum)          dy exp(x - y)
//   norm p=0     count of x != 0            a                       0
//   norm p=1     sum |x|                    a                       sgn(x) dy
//   norm p=2     sum x^2                    sqrt(a)                 dy x / y, 0 where y = 0
//   norm +-inf   max / min |x|, NaN wins    a                       sgn(x) dy [|x| == y] / #ties
//   norm p       sum |x|^p                  a^(1/p)                 PyTorch's three cases of p
// (n = elements reduced, c = correction; var/std merge each 16-byte vector
// as a batch, so there is one division per vector.) The backward is elementwise over
// x once a statistic per output is known: #ties, the non-NaN count, the
// mean, or (#zeros, product of the non-zeros); the same reduction kernels
// compute it first (the STAT op of each op) into the workspace.
//
// Work split (the host merges and orders dims first, reduce/layout.rs):
//   reduce_row      the reduced set is segments of seg_len elements
//                   (innermost reduced dim) times outer reduced dims; a
//                   group of `group` threads (power of two, up to the
//                   256-thread block) folds one output, 16-byte loads when
//                   segments are contiguous and aligned. Long rows take a
//                   block per output, short rows pack 256/group outputs
//                   per block.
//   reduce_col      the innermost input dim is kept: threads along it
//                   (coalesced, VEC columns each), blockDim.y threads over
//                   the reduced rows, merged in smem in row order.
//   reduce_combine  when an output's reduction is split over gridDim.y
//                   blocks (too few outputs to fill the GPU), each block
//                   writes its state to the workspace and one warp per
//                   output merges the splits in a fixed order.
// The fold order depends only on the shape, strides and the launch shape
// the host derives from them and the SM count, so results are bitwise
// reproducible run to run.
// Traffic: FW reads x once (n_out * n_red * b bytes) and writes y; memory
// bound, judged by GB/s against the copy ceiling. BW reads x, dy (and y,
// the statistic) and writes dx, plus one read of x for the statistic.
// 64-bit offsets throughout.
// Specialised by: BARACUDA_DTYPE (T, ACC); BARACUDA_OP (the op below).
#include "common/dtype.cuh"
#include "common/reduce.cuh"

// Op codes (preprocessor constants: they select code with #if).
#define SUM 0
#define MEAN 1
#define NANSUM 2
#define NANMEAN 3
#define PROD 4
#define AMAX 5
#define AMIN 6
#define VAR 7
#define STD 8
#define LOGSUMEXP 9
#define NORM0 10
#define NORM1 11
#define NORM2 12
#define NORM_INF 13
#define NORM_NEGINF 14
#define NORM_P 15
// Statistics of the backward.
#define STAT_COUNT_NOTNAN 100
#define STAT_ZEROS_PROD 101
#define STAT_TIES 102
#define STAT_ABS_TIES 103
#define STAT_MEAN 104
#define STAT_NONE 199

#ifndef BARACUDA_OP
#error "BARACUDA_OP must be defined"
#endif

#if BARACUDA_OP == NANMEAN
#define STAT_OP STAT_COUNT_NOTNAN
#elif BARACUDA_OP == PROD
#define STAT_OP STAT_ZEROS_PROD
#elif BARACUDA_OP == AMAX || BARACUDA_OP == AMIN
#define STAT_OP STAT_TIES
#elif BARACUDA_OP == NORM_INF || BARACUDA_OP == NORM_NEGINF
#define STAT_OP STAT_ABS_TIES
#elif BARACUDA_OP == VAR || BARACUDA_OP == STD
#define STAT_OP STAT_MEAN
#else
#define STAT_OP STAT_NONE
#endif

// The fold state; each op uses the fields it needs.
struct St {
    ACC a, b, c;
};
// A backward statistic per output.
struct Stat2 {
    ACC a, b;
};

// Scalars of the op: norm order, variance correction, elements reduced.
struct OpArgs {
    double p;
    double correction;
    u64 n_red;
};

__device__ __forceinline__ ACC nan_max(ACC a, ACC x) { return (x != x || x > a) ? x : a; }
__device__ __forceinline__ ACC nan_min(ACC a, ACC x) { return (x != x || x < a) ? x : a; }
__device__ __forceinline__ ACC sgn(ACC x) { return ACC(x > ACC(0)) - ACC(x < ACC(0)); }

template <int OP>
struct Op;

// Sum-like ops: a += f(x).
#define SUM_OP(CODE, F, FIN)                                                              \
    template <>                                                                           \
    struct Op<CODE> {                                                                     \
        static __device__ __forceinline__ St init(ACC) { return St{ACC(0), ACC(0), ACC(0)}; } \
        static __device__ __forceinline__ void push(St& s, ACC x, const OpArgs& q) { s.a += F; } \
        static __device__ __forceinline__ St merge(St l, St h) {                          \
            l.a += h.a;                                                                   \
            return l;                                                                     \
        }                                                                                 \
        static __device__ __forceinline__ ACC finish(const St& s, const OpArgs& q) { return FIN; } \
    };

SUM_OP(SUM, x, s.a)
SUM_OP(MEAN, x, s.a / ACC(q.n_red))
SUM_OP(NANSUM, (x != x ? ACC(0) : x), s.a)
SUM_OP(NORM0, ACC(x != ACC(0)), s.a)
SUM_OP(NORM1, fabs(x), s.a)
SUM_OP(NORM2, x * x, sqrt(s.a))
SUM_OP(NORM_P, m_pow(fabs(x), ACC(q.p)), m_pow(s.a, ACC(1) / ACC(q.p)))
SUM_OP(STAT_MEAN, x, s.a / ACC(q.n_red))
#undef SUM_OP

template <>
struct Op<NANMEAN> {
    static __device__ __forceinline__ St init(ACC) { return St{ACC(0), ACC(0), ACC(0)}; }
    static __device__ __forceinline__ void push(St& s, ACC x, const OpArgs&) {
        if (x == x) {
            s.a += x;
            s.b += ACC(1);
        }
    }
    static __device__ __forceinline__ St merge(St l, St h) {
        l.a += h.a;
        l.b += h.b;
        return l;
    }
    static __device__ __forceinline__ ACC finish(const St& s, const OpArgs&) { return s.a / s.b; }
};

template <>
struct Op<PROD> {
    static __device__ __forceinline__ St init(ACC) { return St{ACC(1), ACC(0), ACC(0)}; }
    static __device__ __forceinline__ void push(St& s, ACC x, const OpArgs&) { s.a *= x; }
    static __device__ __forceinline__ St merge(St l, St h) {
        l.a *= h.a;
        return l;
    }
    static __device__ __forceinline__ ACC finish(const St& s, const OpArgs&) { return s.a; }
};

// Max / min ops: a = pick(a, f(x)), NaN wins.
#define PICK_OP(CODE, PICK, F, INIT)                                                      \
    template <>                                                                           \
    struct Op<CODE> {                                                                     \
        static __device__ __forceinline__ St init(ACC) { return St{INIT, ACC(0), ACC(0)}; } \
        static __device__ __forceinline__ void push(St& s, ACC x, const OpArgs&) { s.a = PICK(s.a, F); } \
        static __device__ __forceinline__ St merge(St l, St h) {                          \
            l.a = PICK(l.a, h.a);                                                         \
            return l;                                                                     \
        }                                                                                 \
        static __device__ __forceinline__ ACC finish(const St& s, const OpArgs&) { return s.a; } \
    };

PICK_OP(AMAX, nan_max, x, -ACC(reduce_inf()))
PICK_OP(AMIN, nan_min, x, ACC(reduce_inf()))
PICK_OP(NORM_INF, nan_max, fabs(x), ACC(0))
PICK_OP(NORM_NEGINF, nan_min, fabs(x), ACC(reduce_inf()))
#undef PICK_OP

// var and std: Welford (a = count, b = mean, c = M2); the count divides by
// the exact element count n_red.
#define MOMENT_OP(CODE, FIN)                                                              \
    template <>                                                                           \
    struct Op<CODE> {                                                                     \
        static __device__ __forceinline__ St init(ACC) { return St{ACC(0), ACC(0), ACC(0)}; } \
        static __device__ __forceinline__ void push(St& s, ACC x, const OpArgs&) {        \
            welford_push(s.a, s.b, s.c, x);                                               \
        }                                                                                 \
        static __device__ __forceinline__ St merge(St l, St h) {                          \
            welford_merge(l.a, l.b, l.c, h.a, h.b, h.c);                                  \
            return l;                                                                     \
        }                                                                                 \
        static __device__ __forceinline__ ACC finish(const St& s, const OpArgs& q) {      \
            const double dof = (double)q.n_red - q.correction;                            \
            const ACC var = s.c / ACC(dof > 0.0 ? dof : 0.0);                             \
            return FIN;                                                                   \
        }                                                                                 \
    };

MOMENT_OP(VAR, var)
MOMENT_OP(STD, sqrt(var))
#undef MOMENT_OP

template <>
struct Op<LOGSUMEXP> {
    static __device__ __forceinline__ St init(ACC) { return St{-ACC(reduce_inf()), ACC(0), ACC(0)}; }
    static __device__ __forceinline__ void push(St& s, ACC x, const OpArgs&) { lse_push(s.a, s.b, x); }
    static __device__ __forceinline__ St merge(St l, St h) {
        lse_merge(l.a, l.b, h.a, h.b);
        return l;
    }
    static __device__ __forceinline__ ACC finish(const St& s, const OpArgs&) { return lse_value(s.a, s.b); }
};

// Counting statistics: a += pred(x), with the target (the forward output)
// in c.
#define COUNT_OP(CODE, PRED)                                                              \
    template <>                                                                           \
    struct Op<CODE> {                                                                     \
        static __device__ __forceinline__ St init(ACC aux) { return St{ACC(0), ACC(0), aux}; } \
        static __device__ __forceinline__ void push(St& s, ACC x, const OpArgs&) { s.a += ACC(PRED); } \
        static __device__ __forceinline__ St merge(St l, St h) {                          \
            l.a += h.a;                                                                   \
            return l;                                                                     \
        }                                                                                 \
        static __device__ __forceinline__ Stat2 finish(const St& s, const OpArgs&) { return Stat2{s.a, ACC(0)}; } \
    };

COUNT_OP(STAT_COUNT_NOTNAN, x == x)
COUNT_OP(STAT_TIES, x == s.c)
COUNT_OP(STAT_ABS_TIES, fabs(x) == s.c)
#undef COUNT_OP

// (#zeros, product of the non-zeros).
template <>
struct Op<STAT_ZEROS_PROD> {
    static __device__ __forceinline__ St init(ACC) { return St{ACC(0), ACC(1), ACC(0)}; }
    static __device__ __forceinline__ void push(St& s, ACC x, const OpArgs&) {
        if (x == ACC(0)) {
            s.a += ACC(1);
        } else {
            s.b *= x;
        }
    }
    static __device__ __forceinline__ St merge(St l, St h) {
        l.a += h.a;
        l.b *= h.b;
        return l;
    }
    static __device__ __forceinline__ Stat2 finish(const St& s, const OpArgs&) { return Stat2{s.a, s.b}; }
};

__device__ __forceinline__ void put(T* y, i64 off, ACC v) { y[off] = from_acc(v); }
__device__ __forceinline__ void put(Stat2* y, i64 off, ACC v) { y[off] = Stat2{v, ACC(0)}; }
__device__ __forceinline__ void put(Stat2* y, i64 off, Stat2 v) { y[off] = v; }

// The forward output of op OP: T for the forward ops, Stat2 for the
// statistics.
template <int OP>
struct Out {
    typedef T type;
};
#define STAT_OUT(CODE)         \
    template <>                \
    struct Out<CODE> {         \
        typedef Stat2 type;    \
    };
STAT_OUT(STAT_COUNT_NOTNAN)
STAT_OUT(STAT_ZEROS_PROD)
STAT_OUT(STAT_TIES)
STAT_OUT(STAT_ABS_TIES)
STAT_OUT(STAT_MEAN)
#undef STAT_OUT

// The ops whose state starts from the forward output (ties).
template <int OP>
struct NeedsAux {
    static constexpr bool value = OP == STAT_TIES || OP == STAT_ABS_TIES;
};

// Geometry and operands of one reduction launch (reduce/layout.rs
// `ReduceParams`, field for field). Kept dims are ordered outermost first;
// output index o walks them row-major. Reduced dims likewise; in
// reduce_row the last one is the segment dim.
template <typename O>
struct ReduceParams {
    const T* x;
    O* y;
    const T* aux;    // the forward output (ties statistics), else null
    St* partial;     // split states [n_out][splits], when splits > 1
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

template <int OP, typename O>
__device__ __forceinline__ ACC load_aux(const ReduceParams<O>& p, i64 off) {
    if (NeedsAux<OP>::value) return to_acc(p.aux[off]);
    return ACC(0);
}

template <int OP>
struct Merge {
    __device__ __forceinline__ St operator()(St l, St h) const { return Op<OP>::merge(l, h); }
};

// Fold one 16-byte vector of one output's elements, in order. var and
// std take the vector as one batch: its mean and M2, merged by Chan's
// formula, one division per vector instead of one per element.
template <int OP>
__device__ __forceinline__ void push_vec(St& s, const T (&e)[VEC], const OpArgs& q) {
    if constexpr (OP == VAR || OP == STD) {
        ACC sum = ACC(0);
#pragma unroll
        for (int k = 0; k < VEC; ++k) sum += to_acc(e[k]);
        const ACC mb = sum * (ACC(1) / ACC(VEC));  // VEC is a power of two: exact
        ACC m2b = ACC(0);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const ACC d = to_acc(e[k]) - mb;
            m2b += d * d;
        }
        welford_merge(s.a, s.b, s.c, ACC(VEC), mb, m2b);
    } else {
#pragma unroll
        for (int k = 0; k < VEC; ++k) Op<OP>::push(s, to_acc(e[k]), q);
    }
}

// Store the finished state of output o (offset yo), or its split partial.
template <int OP, typename O>
__device__ __forceinline__ void emit(const ReduceParams<O>& p, u64 o, i64 yo, const St& s) {
    if (p.splits > 1) {
        p.partial[o * p.splits + blockIdx.y] = s;
    } else {
        put(p.y, yo, Op<OP>::finish(s, p.op));
    }
}

template <int OP, typename O>
__device__ __forceinline__ void row_body(const ReduceParams<O>& p) {
    __shared__ St smem[32];
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
    const Merge<OP> merge;
    for (u64 ob = blockIdx.x; ob * per_block < p.n_out; ob += gridDim.x) {
        const u64 o = ob * per_block + slot;
        const bool live = o < p.n_out;
        St s = Op<OP>::init(ACC(0));
        i64 yo = 0;
        if (live) {
            const i64 xo = strided_offset(o, p.nk, p.kshape, p.kx);
            yo = strided_offset(o, p.nk, p.kshape, p.ky);
            s = Op<OP>::init(load_aux<OP>(p, strided_offset(o, p.nk, p.kshape, p.kaux)));
            for (u64 seg = s0; seg < s1 && l0 < l1; ++seg) {
                const T* base = p.x + xo + strided_offset(seg, p.nr - 1, p.rshape, p.rx);
                u64 i = l0;
                if (p.vec) {
                    const u64 nv = (l1 - l0) / VEC;
                    const T* vb = base + l0;
                    // Unrolled so that several loads are in flight per
                    // thread ahead of the dependent folds.
#pragma unroll 4
                    for (u64 v = t; v < nv; v += g) {
                        T e[VEC];
                        load_vec(vb, v, e);
                        push_vec<OP>(s, e, p.op);
                    }
                    i = l0 + nv * VEC;
                }
                for (u64 j = i + t; j < l1; j += g) Op<OP>::push(s, to_acc(base[(i64)j * seg_stride]), p.op);
            }
        }
        s = group_reduce(s, g, merge, smem);
        if (live && t == 0) emit<OP>(p, o, yo, s);
    }
}

template <int OP, typename O>
__device__ __forceinline__ void col_body(const ReduceParams<O>& p) {
    extern __shared__ unsigned char col_smem[];
    St* sm = reinterpret_cast<St*>(col_smem);
    const u32 cv = p.vec ? VEC : 1;
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
        const i64 xo = strided_offset(outer, nk - 1, p.kshape, p.kx);
        const i64 yo = strided_offset(outer, nk - 1, p.kshape, p.ky);
        const i64 ao = strided_offset(outer, nk - 1, p.kshape, p.kaux);
        St s[VEC];
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
            const bool in = v < (int)cv && c0 + v < inner;
            s[v] = Op<OP>::init(in ? load_aux<OP>(p, ao + (i64)(c0 + v) * ka_in) : ACC(0));
        }
#pragma unroll 4
        for (u64 r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
            const T* base = p.x + xo + strided_offset(r, p.nr, p.rshape, p.rx) + c0;
            if (p.vec && c0 + VEC <= inner) {
                T e[VEC];
                load_vec(base, 0, e);
#pragma unroll
                for (int v = 0; v < VEC; ++v) Op<OP>::push(s[v], to_acc(e[v]), p.op);
            } else {
#pragma unroll
                for (int v = 0; v < VEC; ++v)
                    if (v < (int)cv && c0 + v < inner) Op<OP>::push(s[v], to_acc(base[v]), p.op);
            }
        }
        __syncthreads();
#pragma unroll
        for (int v = 0; v < VEC; ++v)
            if (v < (int)cv) sm[threadIdx.y * width + threadIdx.x * cv + v] = s[v];
        __syncthreads();
        if (threadIdx.y == 0) {
#pragma unroll
            for (int v = 0; v < VEC; ++v) {
                const u64 col = c0 + v;
                if (v < (int)cv && col < inner) {
                    St acc = sm[threadIdx.x * cv + v];
                    for (u32 k = 1; k < blockDim.y; ++k)
                        acc = Op<OP>::merge(acc, sm[k * width + threadIdx.x * cv + v]);
                    emit<OP>(p, outer * inner + col, yo + (i64)col * ky_in, acc);
                }
            }
        }
    }
}

// One warp per output merges its splits: lane l takes splits l, l + 32,
// ... in order, then the warp merges lanes in order.
template <int OP, typename O>
__device__ __forceinline__ void combine_body(const ReduceParams<O>& p) {
    const u32 warps = blockDim.x >> 5;
    const u32 lane = threadIdx.x & 31u;
    const Merge<OP> merge;
    for (u64 o = (u64)blockIdx.x * warps + (threadIdx.x >> 5); o < p.n_out; o += (u64)gridDim.x * warps) {
        St s = Op<OP>::init(ACC(0));
        for (u32 k = lane; k < p.splits; k += 32) s = Op<OP>::merge(s, p.partial[o * p.splits + k]);
        s = group_reduce(s, 32u, merge, (St*)nullptr);
        if (lane == 0) put(p.y, strided_offset(o, p.nk, p.kshape, p.ky), Op<OP>::finish(s, p.op));
    }
}

#define REDUCE_KERNELS(PREFIX, OPC)                                                             \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_row(ReduceParams<Out<OPC>::type> p) { \
        row_body<OPC>(p);                                                                       \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_col(ReduceParams<Out<OPC>::type> p) { \
        col_body<OPC>(p);                                                                       \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) PREFIX##_combine(ReduceParams<Out<OPC>::type> p) { \
        combine_body<OPC>(p);                                                                   \
    }

REDUCE_KERNELS(reduce, BARACUDA_OP)
#if STAT_OP != STAT_NONE
REDUCE_KERNELS(stat, STAT_OP)
#endif

// ---------------------------------------------------------------------------
// Backward: dx = grad(x, dy, y, stat) elementwise over x.
// ---------------------------------------------------------------------------

// Operands of the backward (reduce/layout.rs `BwParams`): dx, x, dy, y,
// stat with their strides over the collapsed dims of x (stride 0 along
// reduced dims for dy, y, stat). y and stat may be null (unused by OP).
struct BwParams {
    T* dx;
    const T* x;
    const T* dy;
    const T* y;
    const Stat2* stat;
    u64 n;
    u32 rank, pad;
    u64 shape[REDUCE_MAX_RANK];
    i64 stride[5][REDUCE_MAX_RANK];
    OpArgs op;
};

__device__ __forceinline__ ACC grad(ACC x, ACC g, ACC y, Stat2 st, const OpArgs& q) {
#if BARACUDA_OP == SUM
    return g;
#elif BARACUDA_OP == MEAN
    return g / ACC(q.n_red);
#elif BARACUDA_OP == NANSUM
    return x != x ? ACC(0) : g;
#elif BARACUDA_OP == NANMEAN
    return x != x ? ACC(0) : g / st.a;
#elif BARACUDA_OP == PROD
    if (st.a == ACC(0)) return g * (st.b / x);
    if (st.a == ACC(1)) return x == ACC(0) ? g * st.b : ACC(0);
    return ACC(0);
#elif BARACUDA_OP == AMAX || BARACUDA_OP == AMIN
    return (g / st.a) * ACC(x == y);
#elif BARACUDA_OP == VAR
    return (ACC(2) / ACC((double)q.n_red - q.correction)) * g * (x - st.a);
#elif BARACUDA_OP == STD
    const ACC gv = y == ACC(0) ? ACC(0) : g / (ACC(2) * y);
    return (ACC(2) / ACC((double)q.n_red - q.correction)) * gv * (x - st.a);
#elif BARACUDA_OP == LOGSUMEXP
    return g * exp(x - y);
#elif BARACUDA_OP == NORM0
    return ACC(0);
#elif BARACUDA_OP == NORM1
    return sgn(x) * g;
#elif BARACUDA_OP == NORM2
    return y == ACC(0) ? ACC(0) : g * (x / y);
#elif BARACUDA_OP == NORM_INF || BARACUDA_OP == NORM_NEGINF
    return sgn(x) * ((g / st.a) * ACC(fabs(x) == y));
#elif BARACUDA_OP == NORM_P
    const ACC p = ACC(q.p);
    const ACC ax = fabs(x);
    if (p < ACC(1)) {
        const ACC sc = x == ACC(0) ? ACC(0) : sgn(x) * m_pow(ax, p - ACC(1));
        return sc * g * m_pow(y, ACC(1) - p);
    }
    const ACC sc = p < ACC(2) ? sgn(x) * m_pow(ax, p - ACC(1)) : x * m_pow(ax, p - ACC(2));
    const ACC sv = y == ACC(0) ? ACC(0) : g / m_pow(y, p - ACC(1));
    return sc * sv;
#else
#error "no backward for BARACUDA_OP"
#endif
}

template <typename I>
__device__ __forceinline__ void bw_body(const BwParams& p) {
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)p.n; i += (I)gridDim.x * blockDim.x) {
        i64 off[5];
        strided_offsets<5>(i, p.rank, p.shape, p.stride, off);
        const ACC y = p.y ? to_acc(p.y[off[3]]) : ACC(0);
        const Stat2 st = p.stat ? p.stat[off[4]] : Stat2{ACC(0), ACC(0)};
        p.dx[off[0]] = from_acc(grad(to_acc(p.x[off[1]]), to_acc(p.dy[off[2]]), y, st, p.op));
    }
}

extern "C" __global__ void __launch_bounds__(256) reduce_bw32(BwParams p) { bw_body<u32>(p); }
extern "C" __global__ void __launch_bounds__(256) reduce_bw64(BwParams p) { bw_body<u64>(p); }
