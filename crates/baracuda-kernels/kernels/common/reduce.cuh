// reduce.cuh: building blocks of deterministic reductions, for any state
// type S (a trivially copyable struct of accumulators) and merge functor
// `S merge(S lo, S hi)`, where `lo` holds the earlier part of the reduced
// range.
//
//   map_words      a state moved word by word (warp shuffles).
//   group_reduce   `group` consecutive threads (a power of two, up to the
//                  block) merge their states: xor butterflies in the warp,
//                  then one state per warp through shared memory. The
//                  result is exact in lane order: every merge takes the
//                  lower lanes' state as `lo`, so the bits depend only on
//                  the inputs and the group size, never on scheduling.
//   group_allreduce the same total in every thread of the group, one
//                  barrier.
//   welford_*      running (count, mean, M2) and Chan's merge of two runs:
//                  variance without the cancellation of sum(x^2) - n mean^2;
//                  an infinity makes the mean what sum / n is, M2 NaN.
//   lse_*          online log-sum-exp (max, sum exp(x - max)), merged by
//                  rescaling to the larger max; -inf maxima are handled so
//                  that exp(-inf - -inf) never appears.
//   strided_offset the offset of a linear index over up to 8 strided dims
//                  (innermost last), 64-bit; no division for the
//                  outermost dim (a row index over one dim has none).
//   strided_offsets the same for K operands at once (elementwise
//                  backward passes).
//   fold_ahead     a thread's strided loop over indices that issues U
//                  loads before folding them, in index order.
//
// Softmax, norms, losses and attention use the same pieces. No element
// type here: includers supply u32, u64 and i64 (dtype.cuh does).
#pragma once

#define REDUCE_MAX_RANK 8

// +inf as a float (widens exactly to double).
__device__ __forceinline__ float reduce_inf() { return __int_as_float(0x7f800000); }
// A quiet NaN as a float (widens to a NaN double).
__device__ __forceinline__ float reduce_nan() { return __int_as_float(0x7fc00000); }

// `f` applied to each 32-bit word of `v`: how a state of any type moves
// through warp shuffles.
template <typename S, typename F>
__device__ __forceinline__ S map_words(const S& v, F f) {
    static_assert(sizeof(S) % 4 == 0, "state is whole 32-bit words");
    constexpr int W = sizeof(S) / 4;
    unsigned w[W];
    memcpy(w, &v, sizeof(S));
#pragma unroll
    for (int i = 0; i < W; ++i) w[i] = f(w[i]);
    S r;
    memcpy(&r, w, sizeof(S));
    return r;
}

// `v` of lane `lane ^ off` in the warp.
template <typename S>
__device__ __forceinline__ S shfl_xor_state(const S& v, int off) {
    return map_words(v, [off](unsigned w) { return __shfl_xor_sync(0xffffffffu, w, off); });
}

// Xor butterflies over the aligned runs of `width` lanes (a power of two,
// up to 32): every lane ends with its run's total, each merge taking the
// lower lanes' state as `lo`, so all lanes of a run hold the same bits.
template <typename S, typename F>
__device__ __forceinline__ S butterfly(S v, u32 width, F merge) {
    const u32 lane = threadIdx.x & 31u;
    for (u32 off = width >> 1; off > 0; off >>= 1) {
        const S o = shfl_xor_state(v, (int)off);
        v = (lane & off) ? merge(o, v) : merge(v, o);
    }
    return v;
}

// Merge the states of `group` consecutive threads (group a power of two,
// blockDim.x a multiple of it, every thread of the block calling). The
// group's first thread returns the total; `smem` holds blockDim.x / 32
// states. Contains __syncthreads() when group > 32.
template <typename S, typename F>
__device__ __forceinline__ S group_reduce(S v, u32 group, F merge, S* smem) {
    const u32 lane = threadIdx.x & 31u;
    v = butterfly(v, group < 32u ? group : 32u, merge);
    if (group <= 32u) return v;
    const u32 warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    const u32 warps = group >> 5;           // warps per group (<= 32)
    const u32 first = warp & ~(warps - 1);  // the group's first warp
    if (warp == first) {
        v = butterfly(smem[first + (lane < warps ? lane : 0)], warps, merge);
    }
    return v;
}

// group_reduce with the total in every thread of the group, one
// __syncthreads() when group > 32: each warp's butterfly total goes to
// `smem[warp]`, then every warp of the group merges its group's entries
// with the same butterflies (so all of them hold the same bits). `smem`
// holds blockDim.x / 32 states; callers alternate between two such arrays
// on consecutive calls (the barrier of one call orders the reads of the
// previous call's array before the writes of the next).
template <typename S, typename F>
__device__ __forceinline__ S group_allreduce(S v, u32 group, F merge, S* smem) {
    const u32 lane = threadIdx.x & 31u;
    v = butterfly(v, group < 32u ? group : 32u, merge);
    if (group <= 32u) return v;
    const u32 warp = threadIdx.x >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    const u32 warps = group >> 5;           // warps per group (<= 32)
    const u32 first = warp & ~(warps - 1);  // the group's first warp
    return butterfly(smem[first + (lane & (warps - 1))], warps, merge);
}

// Welford running moments: count n, mean, M2 = sum (x - mean)^2. An
// infinite element or mean takes the running sum's rule instead: the mean
// is that infinity (NaN when both signs meet, as sum / n is) and M2 NaN,
// where the update would turn an infinite mean into NaN.
template <typename A>
__device__ __forceinline__ bool welford_inf(A v) {
    return fabs(v) == A(reduce_inf());
}

template <typename A>
__device__ __forceinline__ void welford_push(A& n, A& mean, A& m2, A x) {
    n += A(1);
    if (welford_inf(mean) || welford_inf(x)) {
        mean += x;
        m2 = mean - mean;  // NaN: mean is infinite or NaN here
        return;
    }
    const A d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
}

// Chan et al.: the moments of run a followed by run b, into a.
template <typename A>
__device__ __forceinline__ void welford_merge(A& na, A& ma, A& m2a, A nb, A mb, A m2b) {
    const A n = na + nb;
    if (nb == A(0)) return;
    if (na == A(0)) {
        na = nb;
        ma = mb;
        m2a = m2b;
        return;
    }
    if (welford_inf(ma) || welford_inf(mb)) {
        na = n;
        ma += mb;
        m2a = ma - ma;  // NaN, as in welford_push
        return;
    }
    const A d = mb - ma;
    const A wb = nb / n;
    ma += d * wb;
    m2a += m2b + d * d * na * wb;
    na = n;
}

// Online log-sum-exp: max m and s = sum exp(x - m). Infinite maxima keep
// s = 1 so that +inf stays +inf and an all -inf run stays -inf.
template <typename A>
__device__ __forceinline__ void lse_push(A& m, A& s, A x) {
    if (x != x || m != m) {
        m = x != x ? x : m;
        return;
    }
    if (x > m) {
        s = (m == -A(reduce_inf()) || x == A(reduce_inf())) ? A(1) : s * exp(m - x) + A(1);
        m = x;
    } else if (x != -A(reduce_inf()) && m != A(reduce_inf())) {
        s += exp(x - m);
    }
}

template <typename A>
__device__ __forceinline__ void lse_merge(A& m, A& s, A mb, A sb) {
    if (mb != mb || m != m) {
        m = m != m ? m : mb;
        return;
    }
    if (mb == -A(reduce_inf())) return;
    if (m == -A(reduce_inf())) {
        m = mb;
        s = sb;
        return;
    }
    if (mb > m) {
        s = (mb == A(reduce_inf())) ? sb : s * exp(m - mb) + sb;
        m = mb;
    } else if (m != A(reduce_inf())) {
        s += sb * exp(mb - m);
    }
}

template <typename A>
__device__ __forceinline__ A lse_value(A m, A s) {
    if (m != m || m == A(reduce_inf()) || m == -A(reduce_inf())) return m;
    return m + log(s);
}

// Offset of linear index `i` (< the product of the dims) over `rank` dims
// of `shape` (innermost last) with element strides `stride`. The
// outermost dim takes what is left of `i` without a division.
template <typename I>
__device__ __forceinline__ i64 strided_offset(I i, u32 rank, const u64* shape, const i64* stride) {
    i64 off = 0;
#pragma unroll
    for (int d = REDUCE_MAX_RANK - 1; d >= 1; --d) {
        if (d < (int)rank) {
            const I e = (I)shape[d];
            off += (i64)(i % e) * stride[d];
            i /= e;
        }
    }
    if (rank > 0) off += (i64)i * stride[0];
    return off;
}

// Offsets of linear index `i` over `rank` dims of `shape` in each of K
// operands, operand k with element strides `stride[k]`.
template <int K, typename I>
__device__ __forceinline__ void strided_offsets(I i, u32 rank, const u64* shape,
                                                const i64 (*stride)[REDUCE_MAX_RANK], i64 (&off)[K]) {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] = 0;
#pragma unroll
    for (int d = REDUCE_MAX_RANK - 1; d >= 1; --d) {
        if (d < (int)rank) {
            const I e = (I)shape[d];
            const i64 c = (i64)(i % e);
            i /= e;
#pragma unroll
            for (int k = 0; k < K; ++k) off[k] += c * stride[k][d];
        }
    }
    if (rank > 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) off[k] += (i64)i * stride[k][0];
    }
}

// Fold the values at i = first, first + step, ... (< end) in order:
// `load(i)` for U indices at a time, all issued before the first of them
// is folded (`fold(i, value)`), so that each thread keeps U loads in
// flight where a plain loop waits for each load before the next one.
// The folds and their order are those of the plain loop.
template <int U, typename L, typename F>
__device__ __forceinline__ void fold_ahead(u64 first, u64 end, u64 step, L load, F fold) {
    for (u64 i = first; i < end; i += U * step) {
        decltype(load(i)) e[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (i + u * step < end) e[u] = load(i + u * step);
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (i + u * step < end) fold(i + u * step, e[u]);
    }
}
