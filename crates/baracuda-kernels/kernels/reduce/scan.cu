// scan.cu: scans along one dim of a strided tensor, forward and backward,
// deterministic (no atomics).
//
// Positions p = 0..len-1 run in scan order (from the last index down when
// the scan is flipped: a reverse scan, or the backward of a forward one).
// "Exclusive" shifts: position p writes its inclusive prefix to p + 1 and
// position 0 writes the identity.
//   code  kernel           state                y / dx
//   0     cumsum           sum                  prefix; also cumsum's BW (dy scanned the other way)
//   1     cumprod          product              prefix
//   2     cummax           (value, index)       later wins ties, NaN wins
//   3     cummin           (value, index)       as cummax
//   4     logcumsumexp     (max, sum exp(x-max)) max + log(sum)
//   5     cumprod BW, R    affine (A, B)        R_q = B_q + A_q R_{q-1}: B = dy (exclusive:
//                                               dy one position earlier), A = x one position
//                                               earlier; R to the workspace
//   6     cumprod BW, dx   product              dx_p = (exclusive cumprod of x)_p * R_p
//   7     cummax/min BW    (sum, key, whole)    segmented sum of dy over runs of equal index;
//                                               dx_p = the run's sum where index_p == p, else 0
//   8     logcumsumexp BW  two online lse's     dx = exp(x + lse(log dy - y)) - exp(x + lse(log -dy - y))
//                                               over the dy > 0 and dy < 0 terms
// cumprod's gradient is dx_j = prod_{k<j} x_k * sum_{i>=j} dy_i prod_{j<k<=i} x_k: no
// division, so zeros in x need no special case.
//
// Work split: scan_block runs one 256-thread block per line (grid-stride
// over lines), tiles of 4 x 256 elements scanned by block_scan
// (common/scan.cuh) with the prefix of earlier tiles carried. Few long
// lines are cut into segments of seg_len positions instead, a block per
// (line, segment) in two passes: scan_part writes each segment's total to
// `part`, scan_seg folds the totals of the line's earlier segments (a
// block_scan over them: a fixed order, so bitwise reproducible) and scans
// its segment from that carry (x read twice); few strided lines run by
// threads are likewise cut, a thread per (line, segment), the earlier
// totals folded in order by the thread (scan_thread_part, _seg). scan_thread
// runs one thread per line, sequentially (consecutive threads take
// consecutive lines, so a scan along an outer dim reads coalesced rows;
// 8 positions loaded ahead of their combines).
// Traffic: FW reads x and writes y once; BW reads its inputs once and
// writes dx (cumprod: plus a workspace write and read). 64-bit offsets.
// Integer inputs (i32, i64: BARACUDA_INTEGER) take codes 0 to 3 only:
// cumsum and cumprod accumulate in i64 with two's complement wrap-around
// and write i64 (T_SUM, PyTorch's promotion), cummax and cummin write T;
// logcumsumexp and the backward codes are float-only (integer outputs have
// no gradient).
// Specialised by: BARACUDA_DTYPE (T, ACC); one module holds every code.
#include "common/dtype.cuh"
#include "common/reduce.cuh"
#include "common/scan.cuh"

#define SCAN_RANK 8
#define SCAN_THREADS 256
#define SCAN_ITEMS 4
#define SCAN_UNROLL 8

// Operand slots.
#define X 0
#define Y 1
#define DY 2
#define YFW 3
#define IDX 4
#define WS 5
#define SLOTS 6

// Offsets of one operand: strides over the line dims, then where position
// 0 lies and the signed step between positions.
struct Axis {
    i64 stride[SCAN_RANK];
    i64 start;
    i64 step;
};

struct ScanParams {
    const T* x;
    T* y;             // T_SUM* for cumsum and cumprod (Arith::out)
    const T* dy;
    const T* yfw;
    i64* idx;         // the forward's indices
    const i64* idx_in;  // the backward's
    ACC* ws;
    void* part;       // segmented scans: one state per (line, segment)
    Axis ax[SLOTS];
    u64 shape[SCAN_RANK];  // line dims, innermost last
    u64 len;
    u64 lines;
    u64 seg_len;      // segmented scans: positions per segment (a multiple of the tile)
    u64 segs;         // segments per line
    u32 rank;
    u32 exclusive;
    u32 flipped;
    u32 keep;         // integer cumsum / cumprod written as T (JAX's associative_scan), not i64
};

// One line: each operand's offset of position 0.
struct Line {
    i64 o[SLOTS];
    const ScanParams* P;
    __device__ __forceinline__ i64 at(int slot, u64 p) const { return o[slot] + (i64)p * P->ax[slot].step; }
    // Index along the dim (memory order) of position p.
    __device__ __forceinline__ i64 orig(u64 p) const { return P->flipped ? (i64)(P->len - 1 - p) : (i64)p; }
};

__device__ __forceinline__ Line line_of(const ScanParams& P, u64 line) {
    Line L;
    L.P = &P;
#pragma unroll
    for (int s = 0; s < SLOTS; ++s) L.o[s] = P.ax[s].start;
#pragma unroll
    for (int d = SCAN_RANK - 1; d >= 0; --d) {
        if (d < (int)P.rank) {
            const u64 c = line % P.shape[d];
            line /= P.shape[d];
#pragma unroll
            for (int s = 0; s < SLOTS; ++s) L.o[s] += (i64)c * P.ax[s].stride[d];
        }
    }
    return L;
}

// Write `value(incl)` at p, or shifted to p + 1 with `empty` at 0.
template <typename F>
__device__ __forceinline__ void put(const Line& L, u64 p, F write, ACC value, ACC empty) {
    if (!L.P->exclusive) {
        write(p, value);
        return;
    }
    if (p == 0) write(0, empty);
    if (p + 1 < L.P->len) write(p + 1, value);
}

template <int OP>
struct Op;

// cumsum and cumprod: a plain accumulator (wrapping for integers), y of
// T_SUM.
template <int OP>
struct Arith {
    typedef ACC S;
    __device__ static S identity() { return OP == 0 ? ACC(0) : ACC(1); }
    __device__ static S combine(S a, S b) { return OP == 0 ? acc_add(a, b) : acc_mul(a, b); }
    __device__ static S load(const Line& L, u64 p) { return to_acc(L.P->x[L.at(X, p)]); }
    __device__ static T_SUM* out(const Line& L) { return reinterpret_cast<T_SUM*>(L.P->y); }
    __device__ static void store(const Line& L, u64 p, S v) {
        put(L, p, [&](u64 q, ACC w) {
            if (L.P->keep)
                L.P->y[L.at(Y, q)] = (T)to_sum(w);  // integers: the low bits, two's complement
            else
                out(L)[L.at(Y, q)] = to_sum(w);
        }, v, identity());
    }
};
template <> struct Op<0> : Arith<0> {};
template <> struct Op<1> : Arith<1> {};

// cummax / cummin: the later element wins ties, a NaN wins over numbers
// and a later NaN over an earlier one; index -1 is the identity. The
// indices are written when asked (idx not null).
struct ValIdx {
    ACC v;
    i64 i;
};
template <bool MAX>
struct Extreme {
    typedef ValIdx S;
    __device__ static S identity() {
        S s;
        s.v = MAX ? acc_lowest() : acc_highest();
        s.i = -1;
        return s;
    }
    __device__ static S combine(S a, S b) {
        if (b.i < 0) return a;
        if (a.i < 0) return b;
        const bool take = m_isnan(b.v) || (!m_isnan(a.v) && (MAX ? b.v >= a.v : b.v <= a.v));
        return take ? b : a;
    }
    __device__ static S load(const Line& L, u64 p) {
        S s;
        s.v = to_acc(L.P->x[L.at(X, p)]);
        s.i = L.orig(p);
        return s;
    }
    __device__ static void store(const Line& L, u64 p, S v) {
        L.P->y[L.at(Y, p)] = from_acc(v.v);
        if (L.P->idx) L.P->idx[L.at(IDX, p)] = v.i;  // values only: no indices asked
    }
};
template <> struct Op<2> : Extreme<true> {};
template <> struct Op<3> : Extreme<false> {};

#if !BARACUDA_INTEGER
__device__ __forceinline__ ACC acc_inf() { return ACC(reduce_inf()); }

// Online log-sum-exp (common/reduce.cuh's merge).
struct Lse {
    ACC m, s;
};
__device__ __forceinline__ Lse lse_combine(Lse a, Lse b) {
    lse_merge(a.m, a.s, b.m, b.s);
    return a;
}
__device__ __forceinline__ Lse lse_empty() {
    Lse e;
    e.m = -acc_inf();
    e.s = ACC(0);
    return e;
}

template <>
struct Op<4> {
    typedef Lse S;
    __device__ static S identity() { return lse_empty(); }
    __device__ static S combine(S a, S b) { return lse_combine(a, b); }
    __device__ static S load(const Line& L, u64 p) {
        S s;
        s.m = to_acc(L.P->x[L.at(X, p)]);
        s.s = ACC(1);
        return s;
    }
    __device__ static void store(const Line& L, u64 p, S v) {
        put(L, p, [&](u64 q, ACC w) { L.P->y[L.at(Y, q)] = from_acc(w); }, lse_value(v.m, v.s), -acc_inf());
    }
};

// cumprod backward, pass 1: R_q = B_q + A_q R_{q-1} as the affine map
// (A, B); `combine(a, b)` applies b after a.
struct Affine {
    ACC a, b;
};
template <>
struct Op<5> {
    typedef Affine S;
    __device__ static S identity() {
        S s;
        s.a = ACC(1);
        s.b = ACC(0);
        return s;
    }
    __device__ static S combine(S e, S l) {
        S s;
        s.a = l.a * e.a;
        s.b = l.b + l.a * e.b;
        return s;
    }
    __device__ static S load(const Line& L, u64 q) {
        S s;
        s.a = q > 0 ? to_acc(L.P->x[L.at(X, q - 1)]) : ACC(0);
        if (L.P->exclusive) {
            s.b = q > 0 ? to_acc(L.P->dy[L.at(DY, q - 1)]) : ACC(0);
        } else {
            s.b = to_acc(L.P->dy[L.at(DY, q)]);
        }
        return s;
    }
    __device__ static void store(const Line& L, u64 q, S v) { L.P->ws[L.at(WS, q)] = v.b; }
};

// cumprod backward, pass 2: the exclusive product times R.
template <>
struct Op<6> {
    typedef ACC S;
    __device__ static S identity() { return ACC(1); }
    __device__ static S combine(S a, S b) { return a * b; }
    __device__ static S load(const Line& L, u64 p) { return to_acc(L.P->x[L.at(X, p)]); }
    __device__ static void store(const Line& L, u64 p, S v) {
        const ScanParams& P = *L.P;
        if (p == 0) P.y[L.at(Y, 0)] = from_acc(P.ws[L.at(WS, 0)]);
        if (p + 1 < P.len) P.y[L.at(Y, p + 1)] = from_acc(v * P.ws[L.at(WS, p + 1)]);
    }
};

// cummax / cummin backward: sums of dy over runs of equal index. `whole`:
// the span is one run; key -2 is the identity, on either side (a segment's
// total folded from it keeps `whole`, so a run crossing segments sums on).
struct Run {
    ACC sum;
    u32 whole;
    i64 key;
};
template <>
struct Op<7> {
    typedef Run S;
    __device__ static S identity() {
        S s;
        s.sum = ACC(0);
        s.whole = 1;
        s.key = -2;
        return s;
    }
    __device__ static S combine(S a, S b) {
        if (a.key == -2) return b;
        if (b.key == -2) return a;
        if (b.whole && a.key == b.key) {
            b.sum = a.sum + b.sum;
            b.whole = a.whole;
        } else {
            b.whole = 0;
        }
        return b;
    }
    __device__ static S load(const Line& L, u64 q) {
        S s;
        s.sum = to_acc(L.P->dy[L.at(DY, q)]);
        s.whole = 1;
        s.key = L.P->idx_in[L.at(IDX, q)];
        return s;
    }
    __device__ static void store(const Line& L, u64 q, S v) {
        L.P->y[L.at(Y, q)] = from_acc(v.key == L.orig(q) ? v.sum : ACC(0));
    }
};

// logcumsumexp backward: lse of log|dy| - y over the dy > 0 and dy < 0
// terms separately.
struct Lse2 {
    Lse pos, neg;
};
template <>
struct Op<8> {
    typedef Lse2 S;
    __device__ static S identity() {
        S s;
        s.pos = lse_empty();
        s.neg = lse_empty();
        return s;
    }
    __device__ static S combine(S a, S b) {
        S s;
        s.pos = lse_combine(a.pos, b.pos);
        s.neg = lse_combine(a.neg, b.neg);
        return s;
    }
    __device__ static S load(const Line& L, u64 q) {
        S s = identity();
        const ACC d = to_acc(L.P->dy[L.at(DY, q)]);
        const ACC w = log(fabs(d)) - to_acc(L.P->yfw[L.at(YFW, q)]);
        if (d > ACC(0)) {
            s.pos.m = w;
            s.pos.s = ACC(1);
        } else if (d < ACC(0)) {
            s.neg.m = w;
            s.neg.s = ACC(1);
        }
        return s;
    }
    __device__ static void store(const Line& L, u64 q, S v) {
        const ScanParams& P = *L.P;
        const ACC lp = lse_value(v.pos.m, v.pos.s);
        const ACC ln = lse_value(v.neg.m, v.neg.s);
        auto grad = [&](u64 at) {
            const ACC xv = to_acc(P.x[L.at(X, at)]);
            return m_exp(xv + lp) - m_exp(xv + ln);
        };
        if (!P.exclusive) {
            P.y[L.at(Y, q)] = from_acc(grad(q));
            return;
        }
        if (q == 0) P.y[L.at(Y, 0)] = from_acc(ACC(0));
        if (q + 1 < P.len) P.y[L.at(Y, q + 1)] = from_acc(grad(q + 1));
    }
};

#endif  // !BARACUDA_INTEGER

// Positions [begin, end) of line L scanned from `carry` (stored when
// STORE); the carry past `end`. Every thread of the block calls.
template <int OP, bool STORE>
__device__ __forceinline__ typename Op<OP>::S scan_range(const Line& L, u64 begin, u64 end,
                                                         typename Op<OP>::S carry,
                                                         typename Op<OP>::S* smem) {
    typedef Op<OP> O;
    typedef typename O::S S;
    const u64 tile = (u64)SCAN_ITEMS * blockDim.x;
    for (u64 base = begin; base < end; base += tile) {
        S v[SCAN_ITEMS], total[SCAN_ITEMS];
#pragma unroll
        for (int k = 0; k < SCAN_ITEMS; ++k) {
            const u64 p = base + (u64)k * blockDim.x + threadIdx.x;
            v[k] = p < end ? O::load(L, p) : O::identity();
        }
        block_scan<S, SCAN_ITEMS>(v, total, [](S a, S b) { return O::combine(a, b); }, smem);
#pragma unroll
        for (int k = 0; k < SCAN_ITEMS; ++k) {
            const u64 p = base + (u64)k * blockDim.x + threadIdx.x;
            if (STORE && p < end) O::store(L, p, O::combine(carry, v[k]));
            carry = O::combine(carry, total[k]);
        }
    }
    return carry;
}

template <int OP>
__device__ __forceinline__ void scan_block(const ScanParams& P) {
    typedef Op<OP> O;
    __shared__ typename O::S smem[SCAN_ITEMS * 32];
    for (u64 line = blockIdx.x; line < P.lines; line += gridDim.x)
        scan_range<OP, true>(line_of(P, line), 0, P.len, O::identity(), smem);
}

// Segmented pass 1: each (line, segment)'s total to part.
template <int OP>
__device__ __forceinline__ void scan_part(const ScanParams& P) {
    typedef Op<OP> O;
    typedef typename O::S S;
    __shared__ S smem[SCAN_ITEMS * 32];
    S* part = static_cast<S*>(P.part);
    for (u64 u = blockIdx.x; u < P.lines * P.segs; u += gridDim.x) {
        const u64 line = u / P.segs, seg = u % P.segs;
        const u64 begin = seg * P.seg_len;
        const u64 end = begin + P.seg_len < P.len ? begin + P.seg_len : P.len;
        const S t = scan_range<OP, false>(line_of(P, line), begin, end, O::identity(), smem);
        if (threadIdx.x == 0) part[u] = t;
    }
}

// Segmented pass 2: the fold of the line's earlier segment totals, then
// the segment scanned from it.
template <int OP>
__device__ __forceinline__ void scan_seg(const ScanParams& P) {
    typedef Op<OP> O;
    typedef typename O::S S;
    __shared__ S smem[SCAN_ITEMS * 32];
    const S* part = static_cast<const S*>(P.part);
    const u64 tile = (u64)SCAN_ITEMS * blockDim.x;
    for (u64 u = blockIdx.x; u < P.lines * P.segs; u += gridDim.x) {
        const u64 line = u / P.segs, seg = u % P.segs;
        const S* earlier = part + line * P.segs;
        S carry = O::identity();
        for (u64 base = 0; base < seg; base += tile) {
            S v[SCAN_ITEMS], total[SCAN_ITEMS];
#pragma unroll
            for (int k = 0; k < SCAN_ITEMS; ++k) {
                const u64 q = base + (u64)k * blockDim.x + threadIdx.x;
                v[k] = q < seg ? earlier[q] : O::identity();
            }
            block_scan<S, SCAN_ITEMS>(v, total, [](S a, S b) { return O::combine(a, b); }, smem);
#pragma unroll
            for (int k = 0; k < SCAN_ITEMS; ++k) carry = O::combine(carry, total[k]);
        }
        const u64 begin = seg * P.seg_len;
        const u64 end = begin + P.seg_len < P.len ? begin + P.seg_len : P.len;
        scan_range<OP, true>(line_of(P, line), begin, end, carry, smem);
    }
}

// Positions [begin, end) of line L scanned by one thread from `carry`
// (stored when STORE), SCAN_UNROLL loads in flight before their combines
// and stores; the carry past `end`.
template <int OP, bool STORE>
__device__ __forceinline__ typename Op<OP>::S thread_range(const Line& L, u64 begin, u64 end,
                                                           typename Op<OP>::S carry) {
    typedef Op<OP> O;
    typedef typename O::S S;
    for (u64 p0 = begin; p0 < end; p0 += SCAN_UNROLL) {
        S v[SCAN_UNROLL];
#pragma unroll
        for (int k = 0; k < SCAN_UNROLL; ++k) v[k] = p0 + k < end ? O::load(L, p0 + k) : O::identity();
#pragma unroll
        for (int k = 0; k < SCAN_UNROLL; ++k) {
            if (p0 + k < end) {
                carry = O::combine(carry, v[k]);
                if (STORE) O::store(L, p0 + k, carry);
            }
        }
    }
    return carry;
}

template <int OP>
__device__ __forceinline__ void scan_thread(const ScanParams& P) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 line = (u64)blockIdx.x * blockDim.x + threadIdx.x; line < P.lines; line += stride)
        thread_range<OP, true>(line_of(P, line), 0, P.len, Op<OP>::identity());
}

// Segmented thread passes: unit u = seg * lines + line (consecutive
// threads on consecutive lines of one segment), part[u] its total.
template <int OP>
__device__ __forceinline__ void scan_thread_part(const ScanParams& P) {
    typedef typename Op<OP>::S S;
    S* part = static_cast<S*>(P.part);
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 u = (u64)blockIdx.x * blockDim.x + threadIdx.x; u < P.lines * P.segs; u += stride) {
        const u64 seg = u / P.lines, line = u % P.lines;
        const u64 begin = seg * P.seg_len;
        const u64 end = begin + P.seg_len < P.len ? begin + P.seg_len : P.len;
        part[u] = thread_range<OP, false>(line_of(P, line), begin, end, Op<OP>::identity());
    }
}

// The fold of the line's earlier segment totals in order, then the
// segment scanned from it.
template <int OP>
__device__ __forceinline__ void scan_thread_seg(const ScanParams& P) {
    typedef Op<OP> O;
    typedef typename O::S S;
    const S* part = static_cast<const S*>(P.part);
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 u = (u64)blockIdx.x * blockDim.x + threadIdx.x; u < P.lines * P.segs; u += stride) {
        const u64 seg = u / P.lines, line = u % P.lines;
        S carry = O::identity();
        for (u64 j = 0; j < seg; ++j) carry = O::combine(carry, part[j * P.lines + line]);
        const u64 begin = seg * P.seg_len;
        const u64 end = begin + P.seg_len < P.len ? begin + P.seg_len : P.len;
        thread_range<OP, true>(line_of(P, line), begin, end, carry);
    }
}

#define SCAN_KERNEL(NAME, FN, CODE)                                                            \
    extern "C" __global__ void __launch_bounds__(SCAN_THREADS) scan_##NAME##_##CODE(const ScanParams P) { \
        FN<CODE>(P);                                                                             \
    }
#define SCAN_KERNELS(CODE)                          \
    SCAN_KERNEL(block, scan_block, CODE)            \
    SCAN_KERNEL(thread, scan_thread, CODE)          \
    SCAN_KERNEL(part, scan_part, CODE)              \
    SCAN_KERNEL(seg, scan_seg, CODE)                \
    SCAN_KERNEL(tpart, scan_thread_part, CODE)      \
    SCAN_KERNEL(tseg, scan_thread_seg, CODE)

SCAN_KERNELS(0)
SCAN_KERNELS(1)
SCAN_KERNELS(2)
SCAN_KERNELS(3)
#if !BARACUDA_INTEGER
SCAN_KERNELS(4)
SCAN_KERNELS(5)
SCAN_KERNELS(6)
SCAN_KERNELS(7)
SCAN_KERNELS(8)
#endif  // !BARACUDA_INTEGER
