// gumbel_softmax.cu: F.gumbel_softmax along one dim of a strided tensor,
// forward (soft or hard) and backward, and the Philox gumbels alone.
//
// FW  g    = given, or -log(E) with E = -log(u) stored in T, u uniform in
//            (0, 1] from Philox-4x32-10 (key = seed; counter = (idx / L,
//            offset), lane idx % L: L = 4, 2 for f64, idx the element's
//            row-major index), PyTorch's -empty_like().exponential_().log()
//            (its guard for u near 1 included)
//     z    = round_T(round_T(x + g) * (1 / tau))  ((logits + g) / tau in T;
//            PyTorch divides by a scalar as a product with its reciprocal)
//     soft = softmax(z), rounded to T
//     hard: k = the first argmax of soft (NaN wins, as torch.max),
//           y = round_T(round_T(onehot_k - soft) + soft)  (y_hard - y_soft.detach() + y_soft)
//     else: y = soft
// BW  dx   = round_T(round_T(soft (dy - sum(dy soft))) * (1 / tau)): the
//            straight-through gradient goes through soft in both modes.
// Special values as softmax: a row holding NaN or +inf, or only -inf, is
// NaN throughout (a hard row of NaN too).
//
// One group of `group` threads (a power of two, 32..1024) per row, element
// i at thread i % group (coalesced along a contiguous dim), a grid-stride
// loop over rows. FW three passes over the row (max and sum; soft and the
// argmax; hard y from the soft just written, by the thread that wrote it),
// BW two; the noise is recomputed, not stored. Rows come back from L2;
// memory bound up to L2 size. Deterministic: fixed-order folds and merges.
// 64-bit offsets.
// Specialised by: BARACUDA_DTYPE (T, ACC).
#include "common/dtype.cuh"
#include "common/reduce.cuh"
#include "common/softmax_row.cuh"

struct GumbelParams {
    const T* x;     // FW: logits; BW: soft
    const T* g;     // FW: given gumbels (null with Philox); BW: dy
    T* out;         // FW: y; BW: dx; gumbel_noise: the gumbels
    T* soft;        // FW hard: the soft sample; else null
    u64 rows;       // positions of the outer dims (gumbel_noise: elements)
    u64 n;          // extent of the dim
    u64 seed, offset;
    double tau;
    u32 rank;       // outer dims (gumbel_noise: every dim)
    u32 group;      // threads per row
    u32 hard;       // FW: 1 for the hard sample
    u32 philox;     // FW: 1 for Philox noise
    u64 shape[REDUCE_MAX_RANK];
    i64 sx[REDUCE_MAX_RANK], sg[REDUCE_MAX_RANK], so[REDUCE_MAX_RANK], ss[REDUCE_MAX_RANK];
    i64 sl[REDUCE_MAX_RANK];  // row-major strides of the outer dims (Philox counters)
    i64 ax, ag, ao, as, al;   // strides along the dim (al: row-major)
};

// Philox-4x32-10 (Salmon et al. 2011, Random123's constants).
__device__ __forceinline__ uint4 philox4x32_10(u64 ctr, u64 offset, u64 seed) {
    u32 c0 = (u32)ctr, c1 = (u32)(ctr >> 32), c2 = (u32)offset, c3 = (u32)(offset >> 32);
    u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        const u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return make_uint4(c0, c1, c2, c3);
}

// Half of T's machine epsilon: PyTorch's exponential_ takes log(u) as
// -eps/2 for u >= 1 - eps/2 (so E is never 0 in T).
#if BARACUDA_DTYPE == 0
#define EPS_HALF 0x1p-24f
#elif BARACUDA_DTYPE == 1
#define EPS_HALF 0x1p-53
#elif BARACUDA_DTYPE == 2
#define EPS_HALF 0x1p-11f
#else
#define EPS_HALF 0x1p-8f
#endif

// The gumbel of element idx (row-major): u in (0, 1] as curand_uniform
// makes it (f64: 53 bits of two words), E = -log u stored in T, then
// -log E in T.
__device__ __forceinline__ ACC philox_gumbel(u64 idx, u64 offset, u64 seed) {
#if BARACUDA_DTYPE == 1
    const uint4 r = philox4x32_10(idx >> 1, offset, seed);
    const u32 hi = (idx & 1) ? r.z : r.x, lo = (idx & 1) ? r.w : r.y;
    const u64 bits = (((u64)hi << 32) | lo) >> 11;
    const ACC u = (double)bits * 0x1p-53 + 0x1p-54;
#else
    const uint4 r = philox4x32_10(idx >> 2, offset, seed);
    const u32 k = (u32)(idx & 3);
    const u32 w = k == 0 ? r.x : k == 1 ? r.y : k == 2 ? r.z : r.w;
    const ACC u = (float)w * 0x1p-32f + 0x1p-33f;
#endif
    const ACC lg = u >= ACC(1) - ACC(EPS_HALF) ? -ACC(EPS_HALF) : log(u);
    const T e = from_acc(-lg);
    return -to_acc(from_acc(log(to_acc(e))));
}

// (value, index) of the first maximum, NaN winning (torch.max).
struct ArgMax {
    ACC v;
    u64 i;
};

__device__ __forceinline__ ArgMax argmax_merge(ArgMax l, ArgMax h) {
    const bool ln = l.v != l.v, hn = h.v != h.v;
    if (ln || hn) {
        if (ln && hn) return l.i <= h.i ? l : h;
        return ln ? l : h;
    }
    if (h.v > l.v || (h.v == l.v && h.i < l.i)) return h;
    return l;
}

__device__ __forceinline__ i64 row_offset(const GumbelParams& p, u64 row, bool live, const i64* s) {
    return live ? strided_offset(row, p.rank, p.shape, s) : 0;
}

extern "C" __global__ void __launch_bounds__(1024) gumbel_softmax_fw(const GumbelParams p) {
    __shared__ Pair red[32], bc[32];
    __shared__ ArgMax ared[32], abc[32];
    const u32 G = p.group, rpb = blockDim.x / G, t = threadIdx.x % G, rib = threadIdx.x / G;
    const ACC inv_tau = ACC(1) / ACC(p.tau);
    for (u64 base = (u64)blockIdx.x * rpb; base < p.rows; base += (u64)gridDim.x * rpb) {
        const u64 row = base + rib;
        const bool live = row < p.rows;
        const T* x = p.x + row_offset(p, row, live, p.sx);
        const T* g = p.philox ? p.g : p.g + row_offset(p, row, live, p.sg);
        T* y = p.out + row_offset(p, row, live, p.so);
        T* soft = p.hard ? p.soft + row_offset(p, row, live, p.ss) : y;
        const i64 as = p.hard ? p.as : p.ao;
        const u64 first = p.philox ? (u64)row_offset(p, row, live, p.sl) : 0;
        auto z_of = [&](u64 i) -> ACC {
            const ACC gi = p.philox ? philox_gumbel(first + i * (u64)p.al, p.offset, p.seed)
                                    : to_acc(g[(i64)i * p.ag]);
            return to_acc(from_acc(to_acc(from_acc(to_acc(x[(i64)i * p.ax]) + gi)) * inv_tau));
        };
        Pair st{-acc_inf(), ACC(0)};
        for (u64 i = t; live && i < p.n; i += G) online_push(st, z_of(i));
        st = group_all(st, G, [](Pair l, Pair h) { return online_merge(l, h); }, red, bc);
        const ACC coef = ACC(1) / st.b;
        ArgMax am{-acc_inf(), ~0ull};
        for (u64 i = t; live && i < p.n; i += G) {
            const T s = from_acc(sm_exp(z_of(i) - st.a) * coef);
            soft[(i64)i * as] = s;
            am = argmax_merge(am, ArgMax{to_acc(s), i});
        }
        if (!p.hard) continue;  // uniform across the grid: no barrier is skipped by part of a block
        am = group_all(am, G, [](ArgMax l, ArgMax h) { return argmax_merge(l, h); }, ared, abc);
        for (u64 i = t; live && i < p.n; i += G) {
            const ACC s = to_acc(soft[(i64)i * as]);
            const ACC h = i == am.i ? ACC(1) : ACC(0);
            y[(i64)i * p.ao] = from_acc(to_acc(from_acc(h - s)) + s);
        }
    }
}

extern "C" __global__ void __launch_bounds__(1024) gumbel_softmax_bw(const GumbelParams p) {
    __shared__ Pair red[32], bc[32];
    const u32 G = p.group, rpb = blockDim.x / G, t = threadIdx.x % G, rib = threadIdx.x / G;
    const ACC inv_tau = ACC(1) / ACC(p.tau);
    for (u64 base = (u64)blockIdx.x * rpb; base < p.rows; base += (u64)gridDim.x * rpb) {
        const u64 row = base + rib;
        const bool live = row < p.rows;
        const T* soft = p.x + row_offset(p, row, live, p.sx);
        const T* dy = p.g + row_offset(p, row, live, p.sg);
        T* dx = p.out + row_offset(p, row, live, p.so);
        Pair st{ACC(0), ACC(0)};
        for (u64 i = t; live && i < p.n; i += G)
            st.a += to_acc(dy[(i64)i * p.ag]) * to_acc(soft[(i64)i * p.ax]);
        const ACC tot =
            group_all(st, G, [](Pair l, Pair h) { return Pair{l.a + h.a, ACC(0)}; }, red, bc).a;
        for (u64 i = t; live && i < p.n; i += G) {
            const ACC s = to_acc(soft[(i64)i * p.ax]);
            const T d = from_acc(s * (to_acc(dy[(i64)i * p.ag]) - tot));
            dx[(i64)i * p.ao] = from_acc(to_acc(d) * inv_tau);
        }
    }
}

// The gumbels the Philox forward draws, element idx (row-major over every
// dim) written at its strided offset: what a caller reproduces a run with.
extern "C" __global__ void __launch_bounds__(256) gumbel_noise(const GumbelParams p) {
    for (u64 idx = (u64)blockIdx.x * blockDim.x + threadIdx.x; idx < p.rows;
         idx += (u64)gridDim.x * blockDim.x) {
        p.out[strided_offset(idx, p.rank, p.shape, p.so)] = from_acc(philox_gumbel(idx, p.offset, p.seed));
    }
}
