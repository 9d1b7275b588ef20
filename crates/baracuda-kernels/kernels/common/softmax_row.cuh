// softmax_row.cuh: the pieces of a softmax over a row held by a group of
// threads, shared by the softmax family's kernels (softmax.cu,
// gumbel_softmax.cu): the online (max, sum) state with PyTorch's special
// values, and a group merge that leaves the total in every thread.
// Includers supply T and ACC (dtype.cuh) and the group reductions
// (reduce.cuh).
#pragma once

// Two accumulators: (max, sum) forward, (sum, unused) backward.
struct Pair {
    ACC a, b;
};

__device__ __forceinline__ ACC acc_inf() { return ACC(reduce_inf()); }

// exp of the family: exp2(x log2 e) in f32 (the multiplier unit's exp2
// and one multiply, where expf's range reduction takes several more
// instructions: the long-row kernels are issue-bound on it); exp in f64.
// The arguments are z - max <= 0; rounding x log2 e adds |x| u relative,
// as rounding z - max itself does.
__device__ __forceinline__ float sm_exp(float x) { return exp2f(x * 1.4426950408889634f); }
__device__ __forceinline__ double sm_exp(double x) { return exp(x); }
__device__ __forceinline__ ACC nan_max(ACC a, ACC b) { return (b != b || b > a) ? b : a; }

// Online (max, sum): push z, one exp per element (the rescale runs only
// when the max grows). -inf adds nothing (an all -inf row keeps the sum 0);
// +inf and NaN make the sum NaN, so the row's outputs are NaN.
__device__ __forceinline__ void online_push(Pair& st, ACC z) {
    if (z != z) {
        st = Pair{z, z};
    } else if (st.a != st.a) {
        return;
    } else if (z > st.a) {
        st.b = z == acc_inf() ? z - z : st.b * sm_exp(st.a - z) + ACC(1);
        st.a = z;
    } else if (z != -acc_inf()) {
        st.b += sm_exp(z - st.a);
    }
}

__device__ __forceinline__ Pair online_merge(Pair l, Pair h) {
    const ACC m = nan_max(l.a, h.a);
    if (m == -acc_inf()) return l;
    const ACC sl = l.a == -acc_inf() ? ACC(0) : l.b * sm_exp(l.a - m);
    const ACC sh = h.a == -acc_inf() ? ACC(0) : h.b * sm_exp(h.a - m);
    return Pair{m, sl + sh};
}

// online_push of the K values of a chunk at once (padding -inf): their max
// (NaN wins), one exp each against it, and one merge into st, so the
// rescale and the special-value tests run once a chunk, not once a value.
// The same special values as online_push: a NaN makes the chunk's sum NaN,
// +inf makes it exp(inf - inf) = NaN, a chunk of -inf adds nothing.
template <int K>
__device__ __forceinline__ void online_push_chunk(Pair& st, const ACC (&z)[K]) {
    ACC m = z[0];
#pragma unroll
    for (int k = 1; k < K; ++k) m = nan_max(m, z[k]);
    if (m == -acc_inf()) return;
    ACC s = ACC(0);
#pragma unroll
    for (int k = 0; k < K; ++k) s += sm_exp(z[k] - m);
    st = online_merge(st, Pair{m, s});
}

// Merge the states of `group` threads and give the total to all of them
// (every thread of the block calls; `red` holds blockDim.x / 32 states,
// `bc` blockDim.x / group).
template <typename S, typename F>
__device__ __forceinline__ S group_all(S v, u32 group, F merge, S* red, S* bc) {
    v = group_reduce(v, group, merge, red);
    if (group <= 32u) return v;  // the butterflies leave the total in every lane
    if (threadIdx.x % group == 0) bc[threadIdx.x / group] = v;
    __syncthreads();
    return bc[threadIdx.x / group];
}
