// reduce_back.cuh: the gradient of a broadcast input of a pointwise map,
// summed back to that input's shape (binary.cu, ternary.cu).
//
// A 2-D block (outputs x reduced stride), each thread summing its terms
// pairwise, then a shared-memory tree, and blockIdx.y per split of the
// reduced range; with one split it writes the gradient directly, else an
// ACC partial per split that `reduce_back_finalize` sums pairwise in split
// order. Every order is fixed by the plan, so the result is deterministic,
// and every term meets O(log n) roundings: |error| <= (2 log2(n) + 2
// PAIRWISE_RUN + 4) u sum|terms| for n terms (u the ACC unit roundoff),
// where a sequential sum allows (n - 1) u sum|terms|.
//
// The host side is src/elementwise/reduce_back.rs. Each input may have its
// own element type (the bool condition of `where`; the mixed-dtype binary
// ops), and the gradient its own (reduce_back_typed).
#pragma once

#define RB_MAX_INS 4

// Output index o runs over the kept axes (the input's own shape), r over
// the reduced axes (where the input has extent 1 and the output does not).
struct ReduceArgs {
    u64 n_out;                 // elements of the reduced gradient
    u64 n_red;                 // reduced elements per output
    u64 chunk;                 // reduced elements per split
    u32 rank_out, rank_red;    // axes of each index space
    u32 splits;                // gridDim.y
    u32 pad;
    u64 shape_out[MAX_RANK];
    u64 shape_red[MAX_RANK];
    i64 out_stride[RB_MAX_INS + 1][MAX_RANK];  // grad, then the inputs, along kept axes
    i64 red_stride[RB_MAX_INS][MAX_RANK];      // the inputs along reduced axes
    u64 in[RB_MAX_INS];                        // input addresses (the map's, dy among them)
    u64 grad;                                  // the gradient's address
    u64 partial;                               // ACC[splits][n_out] workspace when splits > 1
};

// Offsets along the kept axes (grad, then NOPS - 1 inputs) or the reduced
// axes (NOPS inputs). Member arrays are indexed with unrolled constants so
// the parameters stay in the constant bank.
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
// dynamic (the plan passes its size, reduce_back.rs `reduce_smem_bytes`), so
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
// bias) give TX = 256, TY = 1. DF maps the inputs at one element (input k
// of type TypeAt<k, INS>, pointwise.cuh's Types list) to the gradient's
// term there: `ACC operator()(const ACC (&in)[INS::N]) const`; the
// gradient is stored as TG.
template <typename INS, typename TG, typename DF>
__device__ __forceinline__ void reduce_back_typed(const ReduceArgs& p, DF df) {
    constexpr int NIN = INS::N;
    extern __shared__ __align__(16) unsigned char reduce_smem[];
    ACC* part = (ACC*)reduce_smem;  // [256], then the levels
    ACC* levels = part + 256;
    const u32 tx = threadIdx.x, ty = threadIdx.y, TX = blockDim.x, TY = blockDim.y;
    const u64 o = (u64)blockIdx.x * TX + tx;
    i64 ob[NIN + 1];
#pragma unroll
    for (int k = 0; k <= NIN; ++k) ob[k] = 0;
    ACC acc = ACC(0);
    if (o < p.n_out) {
        reduce_offsets<true, NIN + 1>(p, o, ob);
        const u64 r0 = (u64)blockIdx.y * p.chunk;
        const u64 r1 = min(r0 + p.chunk, p.n_red);
        acc = pairwise_sum(levels + ty * TX + tx, r0 + ty, r1, TY, [&](u64 r) {
            i64 rb[NIN];
            reduce_offsets<false, NIN>(p, r, rb);
            ACC v[NIN];
            Unroll<0, NIN>::run([&](auto kc) {
                constexpr int k = decltype(kc)::value;
                v[k] = acc_of(((const typename TypeAt<k, INS>::t*)p.in[k])[ob[k + 1] + rb[k]]);
            });
            return df(v);
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
        ((TG*)p.grad)[ob[0]] = acc_to<TG>(acc);
    } else {
        ((ACC*)p.partial)[(u64)blockIdx.y * p.n_out + o] = acc;
    }
}

// Types<C0, T, ..., T> of NIN types.
template <int NIN, typename L>
struct InputTypes;
template <int NIN, typename... Cs>
struct InputTypes<NIN, Types<Cs...>> {
    typedef typename InputTypes<NIN - 1, Types<Cs..., T>>::t t;
};
template <typename... Cs>
struct InputTypes<0, Types<Cs...>> {
    typedef Types<Cs...> t;
};

// reduce_back_typed with input 0 of type C0 (the bool condition of
// `where`), the other NIN - 1 inputs and the gradient of type T.
template <int NIN, typename C0, typename DF>
__device__ __forceinline__ void reduce_back(const ReduceArgs& p, DF df) {
    reduce_back_typed<typename InputTypes<NIN - 1, Types<C0>>::t, T>(p, df);
}

// Sum of each output's split partials, pairwise in split order, stored as
// TG.
template <typename TG>
__device__ __forceinline__ void reduce_back_finalize_typed(const ReduceArgs& p) {
    extern __shared__ __align__(16) unsigned char reduce_smem[];
    ACC* levels = (ACC*)reduce_smem;
    const u64 o = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= p.n_out) return;
    i64 ob[1];
    reduce_offsets<true, 1>(p, o, ob);
    const ACC* part = (const ACC*)p.partial;
    const ACC acc = pairwise_sum(levels + threadIdx.x, 0, p.splits, 1,
                                 [&](u64 s) { return part[s * p.n_out + o]; });
    ((TG*)p.grad)[ob[0]] = acc_to<TG>(acc);
}

// The gradient stored as T.
__device__ __forceinline__ void reduce_back_finalize(const ReduceArgs& p) {
    reduce_back_finalize_typed<T>(p);
}
