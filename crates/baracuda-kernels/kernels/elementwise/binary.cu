// binary.cu: pointwise binary ops with broadcasting, forward and backward.
//
// FW  out[i] = f(a[i], b[i])            (a, b broadcast views of out's shape)
// BW  da = reduce_to(a.shape, dy * df/da),  db = reduce_to(b.shape, dy * df/db)
//
//   op        f             df/da                         df/db
//   add       a + b         1                             1
//   sub       a - b         1                             -1
//   mul       a * b         b                             a
//   div       a / b         1 / b                         -a / b^2
//   maximum   max, NaN wins a>b: 1, a==b: 1/2, a<b: 0      mirrored
//   minimum   min, NaN wins a<b: 1, a==b: 1/2, a>b: 0      mirrored
//   (maximum/minimum gradients follow PyTorch: ties split dy in half, and
//    a NaN operand passes dy to both sides)
//
// The other ops are PyTorch's functions of the same name (BinaryOp in
// src/elementwise/binary.rs documents each): forward and backward follow
// PyTorch's CUDA kernels and derivatives.yaml for NaN, the infinities,
// zeros and kinks, each op's BinaryMath specialisation below, in ACC (f32
// for f16, bf16 and f32; f64 for f64) with the CUDA math library's IEEE
// functions.
//
// Kernels:
// - contiguous FW/BW: pointwise.cuh (one 16-byte vector per input per
//   thread, one pass of the grid, scalar tail);
// - strided FW/BW (no reduction): strided.cuh (rank-8 offsets, u32/u64
//   linear index);
// - reduce (BW of a broadcast operand): a 2-D block (outputs x reduced
//   stride), each thread summing its terms pairwise, then a shared-memory
//   tree, and blockIdx.y per split of the reduced range; with one split it
//   writes the gradient directly, else an ACC partial per split that
//   `finalize` sums pairwise in split order. Every order is fixed by the
//   plan, so the result is deterministic, and every term meets O(log n)
//   roundings: |error| <= (2 log2(n) + 2 PAIRWISE_RUN + 4) u sum|terms|
//   for n terms (u the ACC unit roundoff), where a sequential sum allows
//   (n - 1) u sum|terms|.
// Traffic (n elems, b bytes): FW 3nb, BW 5nb (less when broadcast).
// Specialised by: BARACUDA_DTYPE; BARACUDA_OP (the op's index) limits the
// module to one op's kernels, so a plan compiles only what it runs.
#include "common/dtype.cuh"
#include "common/strided.cuh"
#include "common/pointwise.cuh"

// BinaryOp::ALL's order.
enum {
    ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, ATAN2, HYPOT, COPYSIGN, POW, FMOD, REMAINDER, XLOGY,
    LOGADDEXP, LOGADDEXP2, FMAX, FMIN
};

// f(a, b), and da = dy df/da, db = dy df/db, one specialisation per op.
template <int OP>
struct BinaryMath;

template <>
struct BinaryMath<ADD> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return a + b; }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC dy) { return dy; }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC dy) { return dy; }
};

template <>
struct BinaryMath<SUB> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return a - b; }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC dy) { return dy; }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC dy) { return -dy; }
};

template <>
struct BinaryMath<MUL> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return a * b; }
    static __device__ __forceinline__ ACC da(ACC, ACC b, ACC dy) { return dy * b; }
    static __device__ __forceinline__ ACC db(ACC a, ACC, ACC dy) { return dy * a; }
};

template <>
struct BinaryMath<DIV> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return a / b; }
    static __device__ __forceinline__ ACC da(ACC, ACC b, ACC dy) { return dy / b; }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return -dy * a / (b * b); }
};

// maximum (MAX) or minimum: a NaN operand wins; ties split dy in half, a
// NaN operand passes dy to both sides.
template <bool MAX>
struct MaxMin {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        if (m_isnan(a)) return a;
        if (m_isnan(b)) return b;
        return (MAX ? a > b : a < b) ? a : b;
    }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        if (a == b) return dy * ACC(0.5);
        return (MAX ? a < b : a > b) ? ACC(0) : dy;
    }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) {
        if (a == b) return dy * ACC(0.5);
        return (MAX ? a > b : a < b) ? ACC(0) : dy;
    }
};
template <>
struct BinaryMath<MAXIMUM> : MaxMin<true> {};
template <>
struct BinaryMath<MINIMUM> : MaxMin<false> {};

// atan2(a, b): da = dy b / (a^2 + b^2), db = -dy a / (a^2 + b^2) (NaN at
// the origin, as PyTorch's).
template <>
struct BinaryMath<ATAN2> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return atan2(a, b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        return dy * b * (ACC(1) / (a * a + b * b));
    }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) {
        return dy * -a * (ACC(1) / (a * a + b * b));
    }
};

// hypot(a, b): da = dy a / hypot, db = dy b / hypot (NaN at the origin).
template <>
struct BinaryMath<HYPOT> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return hypot(a, b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) { return dy * (a / hypot(a, b)); }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return dy * (b / hypot(a, b)); }
};

// copysign(a, b): da = dy copysign(a, b) / a, 0 where a == 0; db = 0.
template <>
struct BinaryMath<COPYSIGN> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return copysign(a, b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        return dy * (a == ACC(0) ? ACC(0) : copysign(a, b) / a);
    }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC) { return ACC(0); }
};

// pow(a, b): da = dy b a^(b-1), 0 (dy not read) where b == 0;
// db = dy a^b log(a), with 0 in place of a^b log(a) where a == 0 and b >= 0.
template <>
struct BinaryMath<POW> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return m_pow(a, b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        return b == ACC(0) ? ACC(0) : dy * (b * m_pow(a, b - ACC(1)));
    }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) {
        return dy * (a == ACC(0) && b >= ACC(0) ? ACC(0) : m_pow(a, b) * log(a));
    }
};

// fmod(a, b) (the sign of a): da = dy, db = -dy trunc(a / b).
template <>
struct BinaryMath<FMOD> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return fmod(a, b); }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC dy) { return dy; }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return -dy * trunc(a / b); }
};

// a / b rounded toward -inf as PyTorch's div(rounding_mode="floor"): from
// fmod, exact where a / b is near an integer.
__device__ __forceinline__ ACC div_floor(ACC a, ACC b) {
    if (b == ACC(0)) return a / b;
    const ACC mod = fmod(a, b);
    ACC div = (a - mod) / b;
    if (mod != ACC(0) && ((b < ACC(0)) != (mod < ACC(0)))) div -= ACC(1);
    if (div == ACC(0)) return copysign(ACC(0), a / b);
    ACC fl = floor(div);
    if (div - fl > ACC(0.5)) fl += ACC(1);
    return fl;
}

// remainder(a, b) (Python's %, the sign of b): da = dy, db = -dy floor(a / b).
template <>
struct BinaryMath<REMAINDER> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        ACC r = fmod(a, b);
        if (r != ACC(0) && ((b < ACC(0)) != (r < ACC(0)))) r += b;
        return r;
    }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC dy) { return dy; }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return -dy * div_floor(a, b); }
};

// xlogy(a, b) = a log(b), 0 where a == 0 unless b is NaN:
// da = xlogy(dy, b), 0 where a == 0 and b <= 0 (PyTorch's rule),
// db = dy a / b.
template <>
struct BinaryMath<XLOGY> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        if (m_isnan(b)) return b;
        return a == ACC(0) ? ACC(0) : a * log(b);
    }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        if (m_isnan(b)) return b;
        return (a == ACC(0) && b <= ACC(0)) || dy == ACC(0) ? ACC(0) : dy * log(b);
    }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return dy * a / b; }
};

// logaddexp(a, b) = log(e^a + e^b) as max + log1p(e^-|a-b|) (a where both
// are the same infinity): da = dy / (1 + e^(b-a)), db = dy / (1 + e^(a-b)).
template <>
struct BinaryMath<LOGADDEXP> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        if (isinf(a) && a == b) return a;
        return fmax(a, b) + log1p(exp(-fabs(a - b)));
    }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) { return dy / (ACC(1) + exp(b - a)); }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return dy / (ACC(1) + exp(a - b)); }
};

// logaddexp2(a, b) = log2(2^a + 2^b) as max + log1p(2^-|a-b|) / ln 2:
// da = dy / (1 + 2^(b-a)), db = dy / (1 + 2^(a-b)).
template <>
struct BinaryMath<LOGADDEXP2> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        if (isinf(a) && a == b) return a;
        return fmax(a, b) + log1p(exp2(-fabs(a - b))) * ACC(1.4426950408889634);
    }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) { return dy / (ACC(1) + exp2(b - a)); }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return dy / (ACC(1) + exp2(a - b)); }
};

// fmax / fmin: a NaN operand is ignored. The whole of dy goes to a where
// a >= b (fmin: a <= b) or b is NaN, else to b.
template <bool MAX>
struct FmaxFmin {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return MAX ? fmax(a, b) : fmin(a, b); }
    static __device__ __forceinline__ bool to_a(ACC a, ACC b) { return (MAX ? a >= b : a <= b) || m_isnan(b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) { return to_a(a, b) ? dy : ACC(0); }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return to_a(a, b) ? ACC(0) : dy; }
};
template <>
struct BinaryMath<FMAX> : FmaxFmin<true> {};
template <>
struct BinaryMath<FMIN> : FmaxFmin<false> {};

template <int OP>
__device__ __forceinline__ ACC binary_f(ACC a, ACC b) {
    return BinaryMath<OP>::f(a, b);
}

// Gradient with respect to a (WHICH = 0) or b (WHICH = 1).
template <int OP, int WHICH>
__device__ __forceinline__ ACC binary_df(ACC a, ACC b, ACC dy) {
    return WHICH == 0 ? BinaryMath<OP>::da(a, b, dy) : BinaryMath<OP>::db(a, b, dy);
}

template <int OP>
struct BinaryFw {
    __device__ __forceinline__ void operator()(const ACC (&a)[2], ACC (&r)[1]) const {
        r[0] = binary_f<OP>(a[0], a[1]);
    }
};

// Inputs a, b, dy; outputs da, db (either may be null: not stored).
template <int OP>
struct BinaryBw {
    __device__ __forceinline__ void operator()(const ACC (&a)[3], ACC (&r)[2]) const {
        r[0] = binary_df<OP, 0>(a[0], a[1], a[2]);
        r[1] = binary_df<OP, 1>(a[0], a[1], a[2]);
    }
};

// Reduction of a broadcast operand's gradient. Output index o runs over the
// kept axes (the operand's own shape), r over the reduced axes (where the
// operand has extent 1 and dy does not).
struct ReduceArgs {
    u64 n_out;                 // elements of the reduced gradient
    u64 n_red;                 // reduced elements per output
    u64 chunk;                 // reduced elements per split
    u32 rank_out, rank_red;    // axes of each index space
    u32 splits;                // gridDim.y
    u32 pad;
    u64 shape_out[MAX_RANK];
    u64 shape_red[MAX_RANK];
    i64 out_stride[4][MAX_RANK];  // a, b, dy, grad along kept axes
    i64 red_stride[3][MAX_RANK];  // a, b, dy along reduced axes
    u64 a, b, dy, grad;           // device addresses
    u64 partial;                  // ACC[splits][n_out] workspace when splits > 1
};

// Offsets along the kept axes (NOPS = 4: a, b, dy, grad) or the reduced
// axes (NOPS = 3: a, b, dy). Member arrays are indexed with unrolled
// constants so the parameters stay in the constant bank.
template <bool KEPT, int NOPS>
__device__ __forceinline__ void reduce_offsets(const ReduceArgs& p, u64 linear, i64 (&off)[NOPS]) {
#pragma unroll
    for (int k = 0; k < NOPS; ++k) off[k] = 0;
    const u32 rank = KEPT ? p.rank_out : p.rank_red;
#pragma unroll
    for (int d = MAX_RANK - 1; d >= 0; --d) {
        if (d < (int)rank) {
            const u64 ext = KEPT ? p.shape_out[d] : p.shape_red[d];
            const u64 c = linear % ext;
            linear /= ext;
#pragma unroll
            for (int k = 0; k < NOPS; ++k)
                off[k] += (i64)c * (KEPT ? p.out_stride[k][d] : p.red_stride[k][d]);
        }
    }
}

// Cascade (pairwise) summation in ACC. Terms are added sequentially in
// runs of PAIRWISE_RUN; run sums merge like a binary counter (level l holds
// the sum of 2^l runs, `runs` has bit l set while it is occupied), and
// `total` adds the levels from the smallest up. A term meets at most
// PAIRWISE_RUN + 2 log2(runs) + 1 additions, so the rounding error grows
// with log2(n) where a sequential sum's grows with n. Past
// 2^PAIRWISE_LEVELS runs (2^19 terms) the top level accumulates
// sequentially.
//
// The levels live in shared memory, one column per thread (`level` points
// at this thread's column of a [PAIRWISE_LEVELS][256] array, so a warp's
// accesses to one level hit distinct banks): a merge touches two levels on
// average, and the kernel keeps about the registers, and so the occupancy,
// of a plain sequential sum (levels held in registers took the reduction
// from 40 to 80 registers per thread on sm_90a). The shared memory is
// dynamic (the plan passes its size, binary.rs `reduce_smem_bytes`), so
// the cubin carries no shared-memory section.
#define PAIRWISE_RUN 8
#define PAIRWISE_LEVELS 16
#define PAIRWISE_STRIDE 256
struct PairwiseSum {
    ACC* level;
    u32 runs = 0;

    __device__ __forceinline__ explicit PairwiseSum(ACC* column) : level(column) {}

    // Merge run sum s into the levels: carry through the full levels from
    // the bottom, store at the first empty one (or add into the top).
    __device__ __forceinline__ void push(ACC s) {
        u32 l = 0;
        while (((runs >> l) & 1u) && l < PAIRWISE_LEVELS - 1) {
            s = level[l * PAIRWISE_STRIDE] + s;
            ++l;
        }
        ACC& top = level[l * PAIRWISE_STRIDE];
        top = ((runs >> l) & 1u) ? top + s : s;
        const u32 all = (1u << PAIRWISE_LEVELS) - 1u;
        runs = runs == all ? 1u << (PAIRWISE_LEVELS - 1) : runs + 1u;
    }
    __device__ __forceinline__ ACC total() const {
        ACC s = ACC(0);
        for (u32 l = 0; (runs >> l) != 0u; ++l)
            if ((runs >> l) & 1u) s += level[l * PAIRWISE_STRIDE];
        return s;
    }
};

// Sum of term(i) for i = begin, begin + step, ... < end: runs of
// PAIRWISE_RUN consecutive terms summed in order, runs merged pairwise in
// this thread's level column.
template <typename F>
__device__ __forceinline__ ACC pairwise_sum(ACC* column, u64 begin, u64 end, u64 step, F term) {
    PairwiseSum sum(column);
    for (u64 i = begin; i < end;) {
        ACC run = ACC(0);
        for (int k = 0; k < PAIRWISE_RUN && i < end; ++k, i += step) run += term(i);
        sum.push(run);
    }
    return sum.total();
}

// Block of TX x TY = 256 threads (TX a power of two): threadIdx.x picks the
// output, threadIdx.y strides through this split's share of the reduced
// range summing pairwise (PairwiseSum), then a fixed-order tree in shared
// memory adds the TY partials. Few outputs (a scalar b) give TX = 1,
// TY = 256: consecutive threads read consecutive reduced elements; many (a
// bias) give TX = 256, TY = 1.
template <int OP, int WHICH>
__device__ __forceinline__ void reduce_grad(const ReduceArgs& p) {
    extern __shared__ __align__(16) unsigned char reduce_smem[];
    ACC* part = (ACC*)reduce_smem;  // [256], then the levels
    ACC* levels = part + 256;
    const u32 tx = threadIdx.x, ty = threadIdx.y, TX = blockDim.x, TY = blockDim.y;
    const u64 o = (u64)blockIdx.x * TX + tx;
    i64 ob[4] = {0, 0, 0, 0};
    ACC acc = ACC(0);
    if (o < p.n_out) {
        reduce_offsets<true, 4>(p, o, ob);
        const T* a = (const T*)p.a + ob[0];
        const T* b = (const T*)p.b + ob[1];
        const T* dy = (const T*)p.dy + ob[2];
        const u64 r0 = (u64)blockIdx.y * p.chunk;
        const u64 r1 = min(r0 + p.chunk, p.n_red);
        acc = pairwise_sum(levels + ty * TX + tx, r0 + ty, r1, TY, [&](u64 r) {
            i64 rb[3];
            reduce_offsets<false, 3>(p, r, rb);
            return binary_df<OP, WHICH>(to_acc(a[rb[0]]), to_acc(b[rb[1]]), to_acc(dy[rb[2]]));
        });
    }
    part[ty * TX + tx] = acc;
    __syncthreads();
    for (u32 s = TY / 2; s > 0; s >>= 1) {
        if (ty < s) part[ty * TX + tx] += part[(ty + s) * TX + tx];
        __syncthreads();
    }
    if (ty != 0 || o >= p.n_out) return;
    acc = part[tx];
    if (p.splits == 1) {
        ((T*)p.grad)[ob[3]] = from_acc(acc);
    } else {
        ((ACC*)p.partial)[(u64)blockIdx.y * p.n_out + o] = acc;
    }
}

// Sum of each output's split partials, pairwise in split order.
extern "C" __global__ void __launch_bounds__(256) binary_bw_finalize(ReduceArgs p) {
    extern __shared__ __align__(16) unsigned char reduce_smem[];
    ACC* levels = (ACC*)reduce_smem;
    const u64 o = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= p.n_out) return;
    i64 ob[4];
    reduce_offsets<true, 4>(p, o, ob);
    const ACC* part = (const ACC*)p.partial;
    const ACC acc = pairwise_sum(levels + threadIdx.x, 0, p.splits, 1,
                                 [&](u64 s) { return part[s * p.n_out + o]; });
    ((T*)p.grad)[ob[3]] = from_acc(acc);
}

#define BINARY_KERNELS(NAME, OP)                                                                  \
    POINTWISE_KERNELS(binary_fw, NAME, BinaryFw<OP>, 2, 1, (const T* a, const T* b, T* out, u64 n), \
                      (a, b), (out))                                                              \
    POINTWISE_KERNELS(binary_bw, NAME, BinaryBw<OP>, 3, 2,                                        \
                      (const T* a, const T* b, const T* dy, T* da, T* db, u64 n), (a, b, dy),     \
                      (da, db))                                                                   \
    extern "C" __global__ void __launch_bounds__(256) binary_bw_reduce_a_##NAME(ReduceArgs p) {   \
        reduce_grad<OP, 0>(p);                                                                    \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(256) binary_bw_reduce_b_##NAME(ReduceArgs p) {   \
        reduce_grad<OP, 1>(p);                                                                    \
    }

#if !defined(BARACUDA_OP) || BARACUDA_OP == 0
BINARY_KERNELS(add, ADD)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 1
BINARY_KERNELS(sub, SUB)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 2
BINARY_KERNELS(mul, MUL)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 3
BINARY_KERNELS(div, DIV)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 4
BINARY_KERNELS(maximum, MAXIMUM)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 5
BINARY_KERNELS(minimum, MINIMUM)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 6
BINARY_KERNELS(atan2, ATAN2)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 7
BINARY_KERNELS(hypot, HYPOT)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 8
BINARY_KERNELS(copysign, COPYSIGN)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 9
BINARY_KERNELS(pow, POW)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 10
BINARY_KERNELS(fmod, FMOD)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 11
BINARY_KERNELS(remainder, REMAINDER)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 12
BINARY_KERNELS(xlogy, XLOGY)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 13
BINARY_KERNELS(logaddexp, LOGADDEXP)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 14
BINARY_KERNELS(logaddexp2, LOGADDEXP2)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 15
BINARY_KERNELS(fmax, FMAX)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 16
BINARY_KERNELS(fmin, FMIN)
#endif
