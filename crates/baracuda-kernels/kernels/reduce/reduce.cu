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
//   var_mean     Welford                    var, and b into aux     var's with the mean output, + dmean / n
//   std_mean     Welford                    std, and b into aux     std's with the mean output, + dmean / n
// (n = elements reduced, c = correction; var/std merge each 16-byte vector
// as a batch, so there is one division per vector; over no element var,
// std and the mean are NaN.)
// Integer inputs (i32, i64: BARACUDA_INTEGER) take sum, nansum (the sum)
// and prod, accumulated in i64 with two's complement wrap-around and
// written as i64 (PyTorch's promotion), and amax and amin, written in T;
// forward only (no statistic and no backward kernels): the other ops are
// float-only, as in PyTorch. Integer results are exact, and the same
// whatever the fold order (wrap-around sums and products are associative). The backward is elementwise over x once a
// statistic per output is known: #ties, the non-NaN count, the mean, or
// (#zeros, product of the non-zeros); the same reduction kernels compute
// it first (the STAT op of each op) into the workspace. var_mean and
// std_mean write the mean as a second output (the reduction's `aux`) and
// their backward (var_mean_bw) reads it, with dy and dmean each optional.
// trace's backward (the sum module's trace_bw) writes dy on the diagonal
// of a matrix and 0 elsewhere; its forward is the sum over the diagonal.
//
// Work split (the host merges and orders dims first, reduce/layout.rs):
// the row, column and combine kernels of common/reduce_dims.cuh, with the
// op's fold (`Fold<OP>` below):
//   reduce_row      groups of threads fold segments of the innermost
//                   reduced dim, 16-byte loads when contiguous and aligned.
//   reduce_col      the innermost input dim is kept: threads along it,
//                   merged over the reduced rows in smem in row order.
//   reduce_combine  a reduction split over gridDim.y blocks (too few
//                   outputs to fill the GPU) merges the blocks' states
//                   from the workspace in a fixed order.
// The fold order depends only on the shape, strides and the launch shape
// the host derives from them and the SM count, so results are bitwise
// reproducible run to run.
// Traffic: FW reads x once (n_out * n_red * b bytes) and writes y; memory
// bound, judged by GB/s against the copy ceiling. BW reads x, dy (and y,
// the statistic) and writes dx, plus one read of x for the statistic.
// 64-bit offsets throughout.
// Specialised by: BARACUDA_DTYPE (T, ACC; integers: sum, nansum, prod,
// amax, amin only); BARACUDA_OP (the op below).
#include "common/dtype.cuh"
#include "common/reduce_dims.cuh"

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
#define VAR_MEAN 16
#define STD_MEAN 17
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

#define IS_SUM_LIKE (BARACUDA_OP == SUM || BARACUDA_OP == NANSUM || BARACUDA_OP == PROD)
#if BARACUDA_INTEGER && !(IS_SUM_LIKE || BARACUDA_OP == AMAX || BARACUDA_OP == AMIN)
#error "integer dtypes take sum, nansum, prod, amax and amin only"
#endif

// The Welford ops, and those among them that take a square root.
#define IS_MOMENT(OP) ((OP) == VAR || (OP) == STD || (OP) == VAR_MEAN || (OP) == STD_MEAN)
#define IS_STD (BARACUDA_OP == STD || BARACUDA_OP == STD_MEAN)
// The ops that write the mean as a second output.
#define WRITES_MEAN(OP) ((OP) == VAR_MEAN || (OP) == STD_MEAN)

#if BARACUDA_INTEGER
#define STAT_OP STAT_NONE
#elif BARACUDA_OP == NANMEAN
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

__device__ __forceinline__ ACC nan_max(ACC a, ACC x) { return (x != x || x > a) ? x : a; }
__device__ __forceinline__ ACC nan_min(ACC a, ACC x) { return (x != x || x < a) ? x : a; }

template <int OP>
struct Op;

// Sum-like ops: a += f(x) (wrapping for integers: acc_add).
#define SUM_OP(CODE, F, FIN)                                                              \
    template <>                                                                           \
    struct Op<CODE> {                                                                     \
        static __device__ __forceinline__ St init(ACC) { return St{ACC(0), ACC(0), ACC(0)}; } \
        static __device__ __forceinline__ void push(St& s, ACC x, const OpArgs& q) { s.a = acc_add(s.a, F); } \
        static __device__ __forceinline__ St merge(St l, St h) {                          \
            l.a = acc_add(l.a, h.a);                                                      \
            return l;                                                                     \
        }                                                                                 \
        static __device__ __forceinline__ ACC finish(const St& s, const OpArgs& q) { return FIN; } \
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

// The ops of every dtype.
SUM_OP(SUM, x, s.a)
SUM_OP(NANSUM, (x != x ? ACC(0) : x), s.a)
PICK_OP(AMAX, nan_max, x, acc_lowest())
PICK_OP(AMIN, nan_min, x, acc_highest())

template <>
struct Op<PROD> {
    static __device__ __forceinline__ St init(ACC) { return St{ACC(1), ACC(0), ACC(0)}; }
    static __device__ __forceinline__ void push(St& s, ACC x, const OpArgs&) { s.a = acc_mul(s.a, x); }
    static __device__ __forceinline__ St merge(St l, St h) {
        l.a = acc_mul(l.a, h.a);
        return l;
    }
    static __device__ __forceinline__ ACC finish(const St& s, const OpArgs&) { return s.a; }
};

// The float-only ops and the backward statistics.
#if !BARACUDA_INTEGER
__device__ __forceinline__ ACC sgn(ACC x) { return ACC(x > ACC(0)) - ACC(x < ACC(0)); }

SUM_OP(MEAN, x, s.a / ACC(q.n_red))
SUM_OP(NORM0, ACC(x != ACC(0)), s.a)
SUM_OP(NORM1, fabs(x), s.a)
SUM_OP(NORM2, x * x, sqrt(s.a))
SUM_OP(NORM_P, m_pow(fabs(x), ACC(q.p)), m_pow(s.a, ACC(1) / ACC(q.p)))
SUM_OP(STAT_MEAN, x, s.a / ACC(q.n_red))

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

PICK_OP(NORM_INF, nan_max, fabs(x), ACC(0))
PICK_OP(NORM_NEGINF, nan_min, fabs(x), ACC(reduce_inf()))

// var and std (also of var_mean and std_mean): Welford (a = count, b =
// mean, c = M2); the count divides by the exact element count n_red; NaN
// over no element, whatever the correction.
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
            return s.a == ACC(0) ? ACC(reduce_nan()) : FIN;                               \
        }                                                                                 \
    };

MOMENT_OP(VAR, var)
MOMENT_OP(STD, sqrt(var))
MOMENT_OP(VAR_MEAN, var)
MOMENT_OP(STD_MEAN, sqrt(var))
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
#endif  // !BARACUDA_INTEGER
#undef SUM_OP
#undef PICK_OP

// The forward output's element Y_T: T_SUM for sum, nansum and prod (i64
// for integer inputs), else T.
#if IS_SUM_LIKE
typedef T_SUM Y_T;
__device__ __forceinline__ Y_T to_y(ACC v) { return to_sum(v); }
#else
typedef T Y_T;
__device__ __forceinline__ Y_T to_y(ACC v) { return from_acc(v); }
#endif

__device__ __forceinline__ void put(Y_T* y, i64 off, ACC v) { y[off] = to_y(v); }
__device__ __forceinline__ void put(Stat2* y, i64 off, ACC v) { y[off] = Stat2{v, ACC(0)}; }
__device__ __forceinline__ void put(Stat2* y, i64 off, Stat2 v) { y[off] = v; }

// The forward output of op OP: Y_T for the forward op, Stat2 for the
// statistics.
template <int OP>
struct Out {
    typedef Y_T type;
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

// The auxiliary operand's element: the mean the op writes, or the forward
// output the ties statistics read.
template <int OP>
struct Aux {
    typedef const T type;
};
template <>
struct Aux<VAR_MEAN> {
    typedef T type;
};
template <>
struct Aux<STD_MEAN> {
    typedef T type;
};

// The fold of op OP over elements T (common/reduce_dims.cuh): the state
// St in ACC, the output T (Stat2 for the statistics), the auxiliary
// operand the forward output (read by the ties statistics) or the mean
// (written by var_mean and std_mean).
template <int OP>
struct Fold {
    typedef T X;
    typedef St S;
    typedef typename Out<OP>::type Y;
    typedef typename Aux<OP>::type A;
    static __device__ __forceinline__ St init() { return Op<OP>::init(ACC(0)); }
    static __device__ __forceinline__ St init_at(A* aux, i64 off) {
        return Op<OP>::init(NeedsAux<OP>::value ? to_acc(aux[off]) : ACC(0));
    }
    static __device__ __forceinline__ void push(St& s, T x, const OpArgs& q) { Op<OP>::push(s, to_acc(x), q); }
    // One 16-byte vector, in order. The Welford ops take the vector as
    // one batch: its mean and M2, merged by Chan's formula, one division
    // per vector instead of one per element.
    static __device__ __forceinline__ void push_vec(St& s, const Vec16<T>& v, const OpArgs& q) {
        if constexpr (IS_MOMENT(OP)) {
            ACC sum = ACC(0);
#pragma unroll
            for (int k = 0; k < VEC; ++k) sum += to_acc(v[k]);
            const ACC mb = sum * (ACC(1) / ACC(VEC));  // VEC is a power of two: exact
            ACC m2b = ACC(0);
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const ACC d = to_acc(v[k]) - mb;
                m2b += d * d;
            }
            welford_merge(s.a, s.b, s.c, ACC(VEC), mb, m2b);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) Op<OP>::push(s, to_acc(v[k]), q);
        }
    }
    static __device__ __forceinline__ St merge(St l, St h) { return Op<OP>::merge(l, h); }
    static __device__ __forceinline__ void put(Y* y, i64 yo, A* aux, i64 ao, const St& s, const OpArgs& q) {
        ::put(y, yo, Op<OP>::finish(s, q));
        if constexpr (WRITES_MEAN(OP)) aux[ao] = from_acc(s.a == ACC(0) ? ACC(reduce_nan()) : s.b);
    }
};

REDUCE_DIMS_KERNELS(reduce, Fold<BARACUDA_OP>)
#if STAT_OP != STAT_NONE
REDUCE_DIMS_KERNELS(stat, Fold<STAT_OP>)
#endif

// ---------------------------------------------------------------------------
// Backward: dx = grad(x, dy, y, stat) elementwise over x (the floats only:
// integer outputs have no gradient).
// ---------------------------------------------------------------------------
#if !BARACUDA_INTEGER

// f(off) at each of the p.n elements of an elementwise pass: off the
// offsets of its K operands over p.rank dims of p.shape with strides
// p.stride; a grid-stride loop with I indices.
template <int K, typename I, typename P, typename F>
__device__ __forceinline__ void for_each_element(const P& p, F f) {
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)p.n; i += (I)gridDim.x * blockDim.x) {
        i64 off[K];
        strided_offsets<K>(i, p.rank, p.shape, p.stride, off);
        f(off);
    }
}

// var's gradient at x (std's with IS_STD) from the output gradient g, the
// output y and the mean: 2 g (x - mean) / (n - c), g / (2 y) for std (0
// where y = 0).
__device__ __forceinline__ ACC moment_grad(ACC x, ACC g, ACC y, ACC mean, const OpArgs& q) {
#if IS_STD
    g = y == ACC(0) ? ACC(0) : g / (ACC(2) * y);
#endif
    return (ACC(2) / ACC((double)q.n_red - q.correction)) * g * (x - mean);
}

#if WRITES_MEAN(BARACUDA_OP)
// var_mean and std_mean: dx = moment_grad(dy) + dmean / n, each term where
// its gradient is given (non-null), from the forward's y and mean.
// Operands (reduce/var_mean.rs `VarMeanBwParams`): dx, x, dy, y, mean,
// dmean with their strides over the collapsed dims of x (0 along reduced
// dims for the last four).
struct VarMeanBwParams {
    T* dx;
    const T* x;
    const T* dy;
    const T* y;
    const T* mean;
    const T* dmean;
    u64 n;
    u32 rank, pad;
    u64 shape[REDUCE_MAX_RANK];
    i64 stride[6][REDUCE_MAX_RANK];
    OpArgs op;
};

template <typename I>
__device__ __forceinline__ void var_mean_bw_body(const VarMeanBwParams& p) {
    for_each_element<6, I>(p, [&](const i64 (&off)[6]) {
        ACC d = ACC(0);
        if (p.dy) {
            const ACC y = p.y ? to_acc(p.y[off[3]]) : ACC(0);
            d = moment_grad(to_acc(p.x[off[1]]), to_acc(p.dy[off[2]]), y, to_acc(p.mean[off[4]]), p.op);
        }
        if (p.dmean) d += to_acc(p.dmean[off[5]]) / ACC(p.op.n_red);
        p.dx[off[0]] = from_acc(d);
    });
}

extern "C" __global__ void __launch_bounds__(256) var_mean_bw32(VarMeanBwParams p) { var_mean_bw_body<u32>(p); }
extern "C" __global__ void __launch_bounds__(256) var_mean_bw64(VarMeanBwParams p) { var_mean_bw_body<u64>(p); }
#else

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
#elif BARACUDA_OP == VAR || BARACUDA_OP == STD
    return moment_grad(x, g, y, st.a, q);
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
    for_each_element<5, I>(p, [&](const i64 (&off)[5]) {
        const ACC y = p.y ? to_acc(p.y[off[3]]) : ACC(0);
        const Stat2 st = p.stat ? p.stat[off[4]] : Stat2{ACC(0), ACC(0)};
        p.dx[off[0]] = from_acc(grad(to_acc(p.x[off[1]]), to_acc(p.dy[off[2]]), y, st, p.op));
    });
}

extern "C" __global__ void __launch_bounds__(256) reduce_bw32(BwParams p) { bw_body<u32>(p); }
extern "C" __global__ void __launch_bounds__(256) reduce_bw64(BwParams p) { bw_body<u64>(p); }
#endif

#if BARACUDA_OP == SUM
// trace's backward (reduce/trace.rs `TraceBwParams`): dx[r, c] = dy on the
// diagonal (r == c), 0 elsewhere, over a rows x cols view with element
// strides s0, s1; every element written.
struct TraceBwParams {
    T* dx;
    const T* dy;
    u64 rows, cols;
    i64 s0, s1;
};

template <typename I>
__device__ __forceinline__ void trace_bw_body(const TraceBwParams& p) {
    const T g = *p.dy;
    const T zero = from_acc(ACC(0));
    const I n = (I)(p.rows * p.cols);
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        const I r = i / (I)p.cols, c = i - r * (I)p.cols;
        p.dx[(i64)r * p.s0 + (i64)c * p.s1] = r == c ? g : zero;
    }
}

extern "C" __global__ void __launch_bounds__(256) trace_bw32(TraceBwParams p) { trace_bw_body<u32>(p); }
extern "C" __global__ void __launch_bounds__(256) trace_bw64(TraceBwParams p) { trace_bw_body<u64>(p); }
#endif
#endif  // !BARACUDA_INTEGER
