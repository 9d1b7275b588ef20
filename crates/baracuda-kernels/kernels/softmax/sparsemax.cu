// sparsemax.cu: sparsemax along one dim of a strided tensor, forward and
// backward (Martins & Astudillo 2016).
//
// FW  y = max(z - tau, 0) with tau the one threshold where sum y = 1.
//     tau lies in [max z - 1, max z): twenty bisection steps on
//     f(t) = sum max(z - t, 0) - 1 (decreasing) give a lower bound lo,
//     f(lo) >= 0; then Michelot's iteration from it, S = {z > tau},
//     tau = (sum_S z - 1) / |S|, which only raises tau and shrinks S and
//     stops, exact, when S stops shrinking (twenty steps leave lo
//     within 2^-20 of tau: a step or two of Michelot's; at most 128).
// BW  S = {y > 0}: dx = y > 0 ? dy - sum_S dy / |S| : 0.
// A row holding NaN or +inf, or only -inf, is NaN throughout (-inf
// elements are outside the support otherwise).
//
// One group of `group` threads (a power of two, 32..1024) per row, element
// i at thread i % group (coalesced along a contiguous dim); every step is a
// pass over the row (from L2) and a group reduction, so the forward reads a
// row about two dozen times: sparsemax is priced for correctness on any
// extent, not for bandwidth. Deterministic (fixed-order folds and merges).
// 64-bit offsets.
// Specialised by: BARACUDA_DTYPE (T, ACC).
#include "common/dtype.cuh"
#include "common/reduce.cuh"
#include "common/softmax_row.cuh"

struct SparsemaxParams {
    const T* x;     // FW: x; BW: y
    const T* g;     // BW: dy; FW: null
    T* out;         // FW: y; BW: dx
    u64 rows;       // positions of the outer dims
    u64 n;          // extent of the dim
    u32 rank;       // outer dims
    u32 group;      // threads per row
    u64 shape[REDUCE_MAX_RANK];
    i64 sx[REDUCE_MAX_RANK], sg[REDUCE_MAX_RANK], so[REDUCE_MAX_RANK];
    i64 ax, ag, ao;  // strides along the dim
};

__device__ __forceinline__ i64 row_offset(const SparsemaxParams& p, u64 row, bool live, const i64* s) {
    return live ? strided_offset(row, p.rank, p.shape, s) : 0;
}

#define BISECTIONS 20
#define MICHELOT_MAX 128

extern "C" __global__ void __launch_bounds__(1024) sparsemax_fw(const SparsemaxParams p) {
    __shared__ Pair red[32], bc[32];
    const u32 G = p.group, rpb = blockDim.x / G, t = threadIdx.x % G, rib = threadIdx.x / G;
    auto sum_merge = [](Pair l, Pair h) { return Pair{l.a + h.a, l.b + h.b}; };
    auto max_merge = [](Pair l, Pair h) { return Pair{nan_max(l.a, h.a), l.b + h.b}; };
    for (u64 base = (u64)blockIdx.x * rpb; base < p.rows; base += (u64)gridDim.x * rpb) {
        const u64 row = base + rib;
        const bool live = row < p.rows;
        const T* x = p.x + row_offset(p, row, live, p.sx);
        T* y = p.out + row_offset(p, row, live, p.so);
        // the maximum (NaN wins) and whether a +inf is there (b counts them)
        Pair mx{-acc_inf(), ACC(0)};
        for (u64 i = t; live && i < p.n; i += G) {
            const ACC z = to_acc(x[(i64)i * p.ax]);
            mx.a = nan_max(mx.a, z);
        }
        mx = group_all(mx, G, max_merge, red, bc);
        const ACC m = mx.a;
        const bool bad = m != m || m == acc_inf() || m == -acc_inf();
        // f(t) + 1 = sum max(z - t, 0); bad rows run the same (uniform)
        // steps on garbage and write NaN
        ACC lo = m - ACC(1), hi = m;
        for (int b = 0; b < BISECTIONS; ++b) {
            const ACC mid = lo + (hi - lo) * ACC(0.5);
            Pair s{ACC(0), ACC(0)};
            for (u64 i = t; live && i < p.n; i += G) {
                const ACC d = to_acc(x[(i64)i * p.ax]) - mid;
                if (d > ACC(0)) s.a += d;
            }
            s = group_all(s, G, sum_merge, red, bc);
            if (s.a >= ACC(1)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // Michelot from lo: (sum, count) over {z > tau}
        ACC tau = lo;
        ACC prev = ACC(p.n) + ACC(1);
        for (int it = 0; it < MICHELOT_MAX; ++it) {
            Pair s{ACC(0), ACC(0)};
            for (u64 i = t; live && i < p.n; i += G) {
                const ACC z = to_acc(x[(i64)i * p.ax]);
                if (z > tau) {
                    s.a += z;
                    s.b += ACC(1);
                }
            }
            s = group_all(s, G, sum_merge, red, bc);
            if (!(s.b < prev) || s.b == ACC(0)) break;  // S stopped shrinking
            prev = s.b;
            const ACC next = (s.a - ACC(1)) / s.b;
            tau = next > tau ? next : tau;
        }
        // the threshold of the final support
        Pair s{ACC(0), ACC(0)};
        for (u64 i = t; live && i < p.n; i += G) {
            const ACC z = to_acc(x[(i64)i * p.ax]);
            if (z > tau) {
                s.a += z;
                s.b += ACC(1);
            }
        }
        s = group_all(s, G, sum_merge, red, bc);
        const ACC th = (s.a - ACC(1)) / s.b;
        for (u64 i = t; live && i < p.n; i += G) {
            const ACC d = to_acc(x[(i64)i * p.ax]) - th;
            y[(i64)i * p.ao] = from_acc(bad ? acc_inf() - acc_inf() : d > ACC(0) ? d : ACC(0));
        }
    }
}

extern "C" __global__ void __launch_bounds__(1024) sparsemax_bw(const SparsemaxParams p) {
    __shared__ Pair red[32], bc[32];
    const u32 G = p.group, rpb = blockDim.x / G, t = threadIdx.x % G, rib = threadIdx.x / G;
    for (u64 base = (u64)blockIdx.x * rpb; base < p.rows; base += (u64)gridDim.x * rpb) {
        const u64 row = base + rib;
        const bool live = row < p.rows;
        const T* y = p.x + row_offset(p, row, live, p.sx);
        const T* dy = p.g + row_offset(p, row, live, p.sg);
        T* dx = p.out + row_offset(p, row, live, p.so);
        // (sum of dy, count) over the support; NaN y counts as support
        // (its row's dx is NaN)
        Pair s{ACC(0), ACC(0)};
        for (u64 i = t; live && i < p.n; i += G) {
            const ACC v = to_acc(y[(i64)i * p.ax]);
            if (!(v <= ACC(0))) {
                s.a += to_acc(dy[(i64)i * p.ag]);
                s.b += v != v ? v : ACC(1);
            }
        }
        s = group_all(s, G, [](Pair l, Pair h) { return Pair{l.a + h.a, l.b + h.b}; }, red, bc);
        const ACC mean = s.a / s.b;
        for (u64 i = t; live && i < p.n; i += G) {
            const ACC v = to_acc(y[(i64)i * p.ax]);
            dx[(i64)i * p.ao] = v <= ACC(0) ? from_acc(ACC(0)) : from_acc(to_acc(dy[(i64)i * p.ag]) - mean);
        }
    }
}
