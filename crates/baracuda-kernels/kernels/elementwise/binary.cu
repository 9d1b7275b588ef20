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

enum { ADD = 0, SUB = 1, MUL = 2, DIV = 3, MAXIMUM = 4, MINIMUM = 5 };

template <int OP>
__device__ __forceinline__ ACC binary_f(ACC a, ACC b) {
    if (OP == ADD) return a + b;
    if (OP == SUB) return a - b;
    if (OP == MUL) return a * b;
    if (OP == DIV) return a / b;
    if (m_isnan(a)) return a;
    if (m_isnan(b)) return b;
    if (OP == MAXIMUM) return a > b ? a : b;
    return a < b ? a : b;  // MINIMUM
}

// Gradient with respect to a (WHICH = 0) or b (WHICH = 1).
template <int OP, int WHICH>
__device__ __forceinline__ ACC binary_df(ACC a, ACC b, ACC dy) {
    if (OP == ADD) return dy;
    if (OP == SUB) return WHICH == 0 ? dy : -dy;
    if (OP == MUL) return WHICH == 0 ? dy * b : dy * a;
    if (OP == DIV) return WHICH == 0 ? dy / b : -dy * a / (b * b);
    if (a == b) return dy * ACC(0.5);
    // MAXIMUM: a loses when a < b; b loses when a > b. MINIMUM mirrored.
    const bool loses = (OP == MAXIMUM) == (WHICH == 0) ? (a < b) : (a > b);
    return loses ? ACC(0) : dy;
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
