// softmax.cu: softmax, log_softmax and softmin along one dim of a strided
// tensor, forward and backward, deterministic (no atomics).
//
// A row is the elements along the softmax dim at one position of the other
// dims ("outer" dims, innermost last). With z = x (softmin: z = -x),
// m = max z (NaN wins), s = sum exp(z - m):
//   op            FW y                      BW dx (from y and dy)
//   softmax       exp(z - m) / s            y (dy - sum(dy y))
//   softmin       exp(z - m) / s            -y (dy - sum(dy y))
//   log_softmax   (z - m) - log s           dy - exp(y) sum(dy)
// A row of -inf gives m = -inf and NaN everywhere, a +inf or a NaN NaN
// everywhere, as PyTorch.
//
// Masks (softmax and log_softmax; BARACUDA_MASK, read in the same pass as x,
// any strides, 0 = broadcast):
//   keep (bool bytes)  z = keep ? x : -inf    (masked_fill(x, ~keep, -inf))
//                      BW dx = keep ? dx : 0  (masked_fill's backward)
//   add (T)            z = round_T(x + mask)  (PyTorch's x + mask in T)
//                      BW unchanged (the gradient of x + mask is dz)
// A row with nothing kept is all -inf: NaN forward, as the composite; its
// dx is 0 (every element masked).
//
// Output dtype Y: T, or f32 for f16/bf16 input (BARACUDA_OUT_F32, PyTorch's
// softmax(x, dim, dtype=torch.float32)): FW reads T and writes Y, BW reads
// y and dy in Y and writes dx in T.
//
// Work split (the host picks the kernel, softmax/softmax.rs):
//   softmax_*_row  `group` threads (a power of two, 32..1024) per row,
//                  blockDim.x / group rows per block, a grid-stride loop
//                  over rows. A thread owns chunks of VEC elements
//                  (16-byte loads when the dim is contiguous in every
//                  operand and the row is aligned). Two passes: FW one
//                  online pass (running max, sum rescaled when the max
//                  grows: one exp per element) then y; BW sum(dy y) or
//                  sum(dy), then dx. The first pass keeps the leading
//                  `cache_chunks` chunks of each row in shared memory (as
//                  many as fit; all of them up to ~56K f32 elements) and
//                  the second reads them back, each thread its own chunks
//                  (no barrier); chunks past them are read again, mostly
//                  from L2.
//   softmax_*_col  one thread per row, consecutive threads on consecutive
//                  outer positions: coalesced when the softmax dim is not
//                  the contiguous one. FW online pass then y; BW sum then
//                  dx.
// Each thread folds its elements in index order and the group merges in
// lane order (common/reduce.cuh), so the bits depend only on the shape,
// strides and launch shape, never on scheduling.
// Traffic: FW reads x once (rows that fit in shared memory; the rest of
// longer rows twice) and writes y; BW likewise for y and dy, writes dx.
// Memory bound.
// 64-bit offsets throughout.
// Specialised by: BARACUDA_DTYPE (T, ACC); BARACUDA_OP (below);
// BARACUDA_OUT_F32 (Y); BARACUDA_MASK (MASK_*: an unmasked module holds no
// mask code, so its register kernels keep every register for the row).
#include "common/dtype.cuh"
#include "common/reduce.cuh"
#include "common/softmax_row.cuh"

#define SOFTMAX 0
#define LOG_SOFTMAX 1
#define SOFTMIN 2

#define MASK_NONE 0
#define MASK_KEEP 1
#define MASK_ADD 2

#ifndef BARACUDA_OP
#error "BARACUDA_OP must be defined"
#endif
#ifndef BARACUDA_MASK
#error "BARACUDA_MASK must be defined (MASK_NONE, MASK_KEEP or MASK_ADD)"
#endif
#ifndef BARACUDA_OUT_F32
#error "BARACUDA_OUT_F32 must be defined (0: y in T; 1: y in f32)"
#endif

#if BARACUDA_OUT_F32
typedef float Y;
__device__ __forceinline__ Y to_y(ACC v) { return v; }
__device__ __forceinline__ ACC y_acc(Y v) { return v; }
#else
typedef T Y;
__device__ __forceinline__ Y to_y(ACC v) { return from_acc(v); }
__device__ __forceinline__ ACC y_acc(Y v) { return to_acc(v); }
#endif

struct SoftmaxParams {
    const void* x;     // FW: x (T); BW: y (Y)
    const void* g;     // BW: dy (Y); FW: null
    void* out;         // FW: y (Y); BW: dx (T)
    const void* mask;  // keep: bytes; add: T; null without a mask
    u64 rows;       // positions of the outer dims
    u64 n;          // extent of the softmax dim
    u64 cache_elems;  // shared-memory elements per row and array (cache_chunks * VEC)
    u32 rank;       // outer dims
    u32 group;      // row kernels: threads per row
    u32 vec;        // 1: the softmax dim has stride 1 in x, g and out
    u32 cache_chunks; // leading chunks of each row kept in shared memory
    u32 mvec;       // 1: the mask has stride 1 along the softmax dim
    u64 shape[REDUCE_MAX_RANK];
    i64 sx[REDUCE_MAX_RANK], sg[REDUCE_MAX_RANK], so[REDUCE_MAX_RANK], sm[REDUCE_MAX_RANK];
    i64 ax, ag, ao, am;  // strides along the softmax dim
};

// z of the forward.
__device__ __forceinline__ ACC fw_in(T v) {
#if BARACUDA_OP == SOFTMIN
    return -to_acc(v);
#else
    return to_acc(v);
#endif
}

// The per-row constant of the output: 1/s (softmax, softmin) or log s.
__device__ __forceinline__ ACC fw_coef(ACC s) {
#if BARACUDA_OP == LOG_SOFTMAX
    return log(s);
#else
    return ACC(1) / s;
#endif
}

__device__ __forceinline__ Y fw_out(ACC z, ACC m, ACC c) {
#if BARACUDA_OP == LOG_SOFTMAX
    return to_y((z - m) - c);
#else
    return to_y(sm_exp(z - m) * c);
#endif
}

// The backward's row sum term and output.
__device__ __forceinline__ ACC bw_term(ACC y, ACC dy) {
#if BARACUDA_OP == LOG_SOFTMAX
    return dy;
#else
    return dy * y;
#endif
}

__device__ __forceinline__ T bw_out(ACC y, ACC dy, ACC t) {
#if BARACUDA_OP == LOG_SOFTMAX
    return from_acc(dy - sm_exp(y) * t);
#elif BARACUDA_OP == SOFTMIN
    return from_acc(-(y * (dy - t)));
#else
    return from_acc(y * (dy - t));
#endif
}

__device__ __forceinline__ bool aligned16(const void* p) { return ((u64)p & 15u) == 0; }

// Bytes of a chunk of VEC elements of E, and the alignment its vector
// access needs (at most 16: wider chunks are several 16-byte accesses).
template <typename E>
__device__ __forceinline__ u64 chunk_align() {
    return VEC * sizeof(E) < 16 ? VEC * sizeof(E) : 16;
}
template <typename E>
__device__ __forceinline__ bool aligned_chunk(const E* p) { return ((u64)p & (chunk_align<E>() - 1)) == 0; }

// K elements of E at p (aligned to min(K * sizeof(E), 16) bytes) in the
// fewest accesses: one of 2, 4, 8 or 16 bytes, or several of 16.
template <typename E, int K>
__device__ __forceinline__ void load_k(const E* p, E (&v)[K]) {
    constexpr int B = K * (int)sizeof(E);
    static_assert(B == 2 || B == 4 || B == 8 || B % 16 == 0, "chunk size");
    if constexpr (B % 16 == 0) {
#pragma unroll
        for (int w = 0; w < B / 16; ++w) {
            const uint4 r = reinterpret_cast<const uint4*>(p)[w];
            memcpy(reinterpret_cast<unsigned char*>(&v[0]) + 16 * w, &r, 16);
        }
    } else if constexpr (B == 8) {
        const uint2 r = *reinterpret_cast<const uint2*>(p);
        memcpy(&v[0], &r, 8);
    } else if constexpr (B == 4) {
        const unsigned r = *reinterpret_cast<const unsigned*>(p);
        memcpy(&v[0], &r, 4);
    } else {
        const unsigned short r = *reinterpret_cast<const unsigned short*>(p);
        memcpy(&v[0], &r, 2);
    }
}

template <typename E, int K>
__device__ __forceinline__ void store_k(E* p, const E (&v)[K]) {
    constexpr int B = K * (int)sizeof(E);
    static_assert(B % 16 == 0, "stored chunks are whole 16-byte vectors");
#pragma unroll
    for (int w = 0; w < B / 16; ++w) {
        uint4 r;
        memcpy(&r, reinterpret_cast<const unsigned char*>(&v[0]) + 16 * w, 16);
        reinterpret_cast<uint4*>(p)[w] = r;
    }
}

// Chunk `c` of a row: `cnt` elements from index i = c * VEC into v, from
// operand p with stride st (vector loads when `vec`).
template <typename E>
__device__ __forceinline__ void load_chunk(const E* p, i64 st, u64 i, int cnt, bool vec, E (&v)[VEC]) {
    if (vec && cnt == VEC) {
        load_k<E, VEC>(p + i, v);
        return;
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k)
        if (k < cnt) v[k] = p[(i64)(i + k) * st];
}

template <typename E>
__device__ __forceinline__ void store_chunk(E* p, i64 st, u64 i, int cnt, bool vec, const E (&v)[VEC]) {
    if (vec && cnt == VEC) {
        store_k<E, VEC>(p + i, v);
        return;
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k)
        if (k < cnt) p[(i64)(i + k) * st] = v[k];
}

// The mask of a row: its base, and whether its chunks load as vectors.
struct MaskRow {
    const unsigned char* keep;
    const T* add;
    bool vec;
};

__device__ __forceinline__ MaskRow mask_row(const SoftmaxParams& p, u64 row, bool live) {
    MaskRow m{nullptr, nullptr, false};
    if constexpr (BARACUDA_MASK == MASK_NONE) return m;
    const i64 off = live ? strided_offset(row, p.rank, p.shape, p.sm) : 0;
    if constexpr (BARACUDA_MASK == MASK_KEEP) {
        m.keep = static_cast<const unsigned char*>(p.mask) + off;
        m.vec = p.mvec && aligned_chunk(m.keep);
    } else {
        m.add = static_cast<const T*>(p.mask) + off;
        m.vec = p.mvec && aligned_chunk(m.add);
    }
    return m;
}

// The mask applied to z of the chunk at index i (cnt elements): -inf
// where not kept, or x + mask rounded to T (PyTorch adds in T).
__device__ __forceinline__ void mask_z(const SoftmaxParams& p, const MaskRow& m, u64 i, int cnt, ACC (&z)[VEC]) {
    if constexpr (BARACUDA_MASK == MASK_KEEP) {
        unsigned char k8[VEC];
        load_chunk(m.keep, p.am, i, cnt, m.vec, k8);
#pragma unroll
        for (int k = 0; k < VEC; ++k)
            if (k < cnt && !k8[k]) z[k] = -acc_inf();
    } else if constexpr (BARACUDA_MASK == MASK_ADD) {
        T a[VEC];
        load_chunk(m.add, p.am, i, cnt, m.vec, a);
#pragma unroll
        for (int k = 0; k < VEC; ++k)
            if (k < cnt) z[k] = to_acc(from_acc(z[k] + to_acc(a[k])));
    }
}

// The keep flags of the backward's chunk at index i: all kept but under a
// keep mask.
__device__ __forceinline__ void mask_keep(const SoftmaxParams& p, const MaskRow& m, u64 i, int cnt, bool (&keep)[VEC]) {
    unsigned char k8[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) k8[k] = 1;
    if constexpr (BARACUDA_MASK == MASK_KEEP) load_chunk(m.keep, p.am, i, cnt, m.vec, k8);
#pragma unroll
    for (int k = 0; k < VEC; ++k) keep[k] = k8[k] != 0;
}

// z of a chunk of x: fw_in of each loaded element, then the mask.
__device__ __forceinline__ void chunk_z(const SoftmaxParams& p, const MaskRow& m, u64 i, int cnt, const T (&v)[VEC], ACC (&z)[VEC]) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) z[k] = k < cnt ? fw_in(v[k]) : -acc_inf();
    mask_z(p, m, i, cnt, z);
}

__device__ __forceinline__ int chunk_len(u64 n, u64 i) { return n - i < (u64)VEC ? (int)(n - i) : VEC; }

// ---------------------------------------------------------------------------
// Rows in registers: each of the `group` threads of a row holds V chunks
// (chunk c = t + j * group), all loaded before any arithmetic, so a thread
// has V loads in flight. FW: max over the group, exp(z - max) kept in
// registers, sum over the group, y; one read of x (and the mask), one exp
// per element. BW: sum(dy y) (log_softmax: sum(dy)) over the group, dx;
// one read of y and dy. Two reductions (FW) or one (BW), one barrier each.
// ---------------------------------------------------------------------------

// The row's base offset of operand strides `s`, or 0 for a dead row.
__device__ __forceinline__ i64 row_offset(const SoftmaxParams& p, u64 row, bool live, const i64* s) {
    return live ? strided_offset(row, p.rank, p.shape, s) : 0;
}

template <int V>
__device__ __forceinline__ void fw_reg(const SoftmaxParams& p) {
    __shared__ ACC red[2][32];
    const u32 G = p.group, rpb = blockDim.x / G, t = threadIdx.x % G, rib = threadIdx.x / G;
    for (u64 base = (u64)blockIdx.x * rpb; base < p.rows; base += (u64)gridDim.x * rpb) {
        const u64 row = base + rib;
        const bool live = row < p.rows;
        const T* x = static_cast<const T*>(p.x) + row_offset(p, row, live, p.sx);
        Y* y = static_cast<Y*>(p.out) + row_offset(p, row, live, p.so);
        const MaskRow mr = mask_row(p, row, live);
        const bool vec = p.vec && aligned16(x) && aligned16(y);
        ACC z[V][VEC];
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const u64 i = (t + (u64)j * G) * VEC;
            const int cnt = live && i < p.n ? chunk_len(p.n, i) : 0;
            T v[VEC];
            if (cnt > 0) load_chunk(x, p.ax, i, cnt, vec, v);
            chunk_z(p, mr, i, cnt, v, z[j]);
        }
        ACC m = -acc_inf();
#pragma unroll
        for (int j = 0; j < V; ++j)
#pragma unroll
            for (int k = 0; k < VEC; ++k) m = nan_max(m, z[j][k]);
        m = group_allreduce(m, G, [](ACC l, ACC h) { return nan_max(l, h); }, red[0]);
        ACC s = ACC(0);
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const u64 i = (t + (u64)j * G) * VEC;
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                // padding (z = -inf) adds nothing, also when m is -inf
                const ACC e = sm_exp(z[j][k] - m);
                if (i + k < p.n) s += e;
#if BARACUDA_OP != LOG_SOFTMAX
                z[j][k] = e;
#endif
            }
        }
        s = group_allreduce(s, G, [](ACC l, ACC h) { return l + h; }, red[1]);
        const ACC c = fw_coef(s);
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const u64 i = (t + (u64)j * G) * VEC;
            if (!live || i >= p.n) continue;
            Y o[VEC];
#pragma unroll
            for (int k = 0; k < VEC; ++k)
#if BARACUDA_OP == LOG_SOFTMAX
                o[k] = to_y((z[j][k] - m) - c);
#else
                o[k] = to_y(z[j][k] * c);
#endif
            store_chunk(y, p.ao, i, chunk_len(p.n, i), vec, o);
        }
    }
}

template <int V>
__device__ __forceinline__ void bw_reg(const SoftmaxParams& p) {
    __shared__ ACC red[2][32];
    const u32 G = p.group, rpb = blockDim.x / G, t = threadIdx.x % G, rib = threadIdx.x / G;
    int phase = 0;
    for (u64 base = (u64)blockIdx.x * rpb; base < p.rows; base += (u64)gridDim.x * rpb) {
        const u64 row = base + rib;
        const bool live = row < p.rows;
        const Y* y = static_cast<const Y*>(p.x) + row_offset(p, row, live, p.sx);
        const Y* dy = static_cast<const Y*>(p.g) + row_offset(p, row, live, p.sg);
        T* dx = static_cast<T*>(p.out) + row_offset(p, row, live, p.so);
        const MaskRow mr = mask_row(p, row, live);
        const bool vec = p.vec && aligned16(y) && aligned16(dy) && aligned16(dx);
        Y vy[V][VEC], vg[V][VEC];
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const u64 i = (t + (u64)j * G) * VEC;
            const int cnt = live && i < p.n ? chunk_len(p.n, i) : 0;
            if (cnt > 0) {
                load_chunk(y, p.ax, i, cnt, vec, vy[j]);
                load_chunk(dy, p.ag, i, cnt, vec, vg[j]);
            }
        }
        ACC s = ACC(0);
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const u64 i = (t + (u64)j * G) * VEC;
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                if (live && i + k < p.n) s += bw_term(y_acc(vy[j][k]), y_acc(vg[j][k]));
        }
        // one reduction per row: alternate the arrays row by row
        const ACC tot = group_allreduce(s, G, [](ACC l, ACC h) { return l + h; }, red[phase]);
        phase ^= 1;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const u64 i = (t + (u64)j * G) * VEC;
            if (!live || i >= p.n) continue;
            const int cnt = chunk_len(p.n, i);
            bool keep[VEC];
            mask_keep(p, mr, i, cnt, keep);
            T o[VEC];
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                o[k] = keep[k] ? bw_out(y_acc(vy[j][k]), y_acc(vg[j][k]), tot) : from_acc(ACC(0));
            store_chunk(dx, p.ao, i, cnt, vec, o);
        }
    }
}

#define SOFTMAX_REG(V)                                                                          \
    extern "C" __global__ void __launch_bounds__(1024) softmax_fw_reg##V(const SoftmaxParams p) { \
        fw_reg<V>(p);                                                                           \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(1024) softmax_bw_reg##V(const SoftmaxParams p) { \
        bw_reg<V>(p);                                                                           \
    }
SOFTMAX_REG(1)
SOFTMAX_REG(2)
SOFTMAX_REG(4)
SOFTMAX_REG(8)

// ---------------------------------------------------------------------------
// Rows past the registers: the leading chunks cached in shared memory (x
// forward; y and dy backward; the mask is read again, mostly from L2).
// ---------------------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(1024) softmax_fw_row(const SoftmaxParams p) {
    extern __shared__ __align__(16) unsigned char dyn[];
    __shared__ Pair red[32], bc[32];
    const u32 G = p.group, rpb = blockDim.x / G, t = threadIdx.x % G, rib = threadIdx.x / G;
    T* cache = reinterpret_cast<T*>(dyn) + (u64)rib * p.cache_elems;
    const u64 nch = (p.n + VEC - 1) / VEC;
    for (u64 base = (u64)blockIdx.x * rpb; base < p.rows; base += (u64)gridDim.x * rpb) {
        const u64 row = base + rib;
        const bool live = row < p.rows;
        const T* x = static_cast<const T*>(p.x) + row_offset(p, row, live, p.sx);
        Y* y = static_cast<Y*>(p.out) + row_offset(p, row, live, p.so);
        const MaskRow mr = mask_row(p, row, live);
        const bool vec = p.vec && aligned16(x) && aligned16(y);
        T v[VEC];
        ACC z[VEC];
        Pair st{-acc_inf(), ACC(0)};
        for (u64 c = t; live && c < nch; c += G) {
            const u64 i = c * VEC;
            const int cnt = chunk_len(p.n, i);
            load_chunk(x, p.ax, i, cnt, vec, v);
            if (c < p.cache_chunks) store_chunk(cache, 1, i, cnt, true, v);
            chunk_z(p, mr, i, cnt, v, z);
            online_push_chunk(st, z);
        }
        st = group_all(st, G, [](Pair l, Pair h) { return online_merge(l, h); }, red, bc);
        const ACC coef = fw_coef(st.b);
        // y from the cached chunks, and from a second read of x past them
        Y o[VEC];
        for (u64 c = t; live && c < nch; c += G) {
            const u64 i = c * VEC;
            const int cnt = chunk_len(p.n, i);
            const bool hit = c < p.cache_chunks;
            load_chunk(hit ? cache : x, hit ? 1 : p.ax, i, cnt, hit || vec, v);
            chunk_z(p, mr, i, cnt, v, z);
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                if (k < cnt) o[k] = fw_out(z[k], st.a, coef);
            store_chunk(y, p.ao, i, cnt, vec, o);
        }
    }
}

extern "C" __global__ void __launch_bounds__(1024) softmax_bw_row(const SoftmaxParams p) {
    extern __shared__ __align__(16) unsigned char dyn[];
    __shared__ Pair red[32], bc[32];
    const u32 G = p.group, rpb = blockDim.x / G, t = threadIdx.x % G, rib = threadIdx.x / G;
    Y* cy = reinterpret_cast<Y*>(dyn) + (u64)rib * 2 * p.cache_elems;
    Y* cg = cy + p.cache_elems;
    const u64 nch = (p.n + VEC - 1) / VEC;
    auto sum_merge = [](Pair l, Pair h) { return Pair{l.a + h.a, ACC(0)}; };
    for (u64 base = (u64)blockIdx.x * rpb; base < p.rows; base += (u64)gridDim.x * rpb) {
        const u64 row = base + rib;
        const bool live = row < p.rows;
        const Y* y = static_cast<const Y*>(p.x) + row_offset(p, row, live, p.sx);
        const Y* dy = static_cast<const Y*>(p.g) + row_offset(p, row, live, p.sg);
        T* dx = static_cast<T*>(p.out) + row_offset(p, row, live, p.so);
        const MaskRow mr = mask_row(p, row, live);
        const bool vec = p.vec && aligned16(y) && aligned16(dy) && aligned16(dx);
        Y vy[VEC], vg[VEC];
        Pair st{ACC(0), ACC(0)};
        for (u64 c = t; live && c < nch; c += G) {
            const u64 i = c * VEC;
            const int cnt = chunk_len(p.n, i);
            load_chunk(y, p.ax, i, cnt, vec, vy);
            load_chunk(dy, p.ag, i, cnt, vec, vg);
            if (c < p.cache_chunks) {
                store_chunk(cy, 1, i, cnt, true, vy);
                store_chunk(cg, 1, i, cnt, true, vg);
            }
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                if (k < cnt) st.a += bw_term(y_acc(vy[k]), y_acc(vg[k]));
        }
        const ACC tot = group_all(st, G, sum_merge, red, bc).a;
        T o[VEC];
        bool keep[VEC];
        for (u64 c = t; live && c < nch; c += G) {
            const u64 i = c * VEC;
            const int cnt = chunk_len(p.n, i);
            const bool hit = c < p.cache_chunks;
            load_chunk(hit ? cy : y, hit ? 1 : p.ax, i, cnt, hit || vec, vy);
            load_chunk(hit ? cg : dy, hit ? 1 : p.ag, i, cnt, hit || vec, vg);
            mask_keep(p, mr, i, cnt, keep);
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                if (k < cnt) o[k] = keep[k] ? bw_out(y_acc(vy[k]), y_acc(vg[k]), tot) : from_acc(ACC(0));
            store_chunk(dx, p.ao, i, cnt, vec, o);
        }
    }
}

// The mask of element i of a row, one element at a time (column kernels).
__device__ __forceinline__ ACC col_z(const SoftmaxParams& p, const T* x, const MaskRow& m, u64 i) {
    ACC z = fw_in(x[(i64)i * p.ax]);
    if constexpr (BARACUDA_MASK == MASK_KEEP) {
        if (!m.keep[(i64)i * p.am]) z = -acc_inf();
    } else if constexpr (BARACUDA_MASK == MASK_ADD) {
        z = to_acc(from_acc(z + to_acc(m.add[(i64)i * p.am])));
    }
    return z;
}

extern "C" __global__ void __launch_bounds__(256) softmax_fw_col(const SoftmaxParams p) {
    for (u64 row = (u64)blockIdx.x * blockDim.x + threadIdx.x; row < p.rows;
         row += (u64)gridDim.x * blockDim.x) {
        const T* x = static_cast<const T*>(p.x) + strided_offset(row, p.rank, p.shape, p.sx);
        Y* y = static_cast<Y*>(p.out) + strided_offset(row, p.rank, p.shape, p.so);
        const MaskRow mr = mask_row(p, row, true);
        Pair st{-acc_inf(), ACC(0)};
        for (u64 i = 0; i < p.n; ++i) online_push(st, col_z(p, x, mr, i));
        const ACC coef = fw_coef(st.b);
        for (u64 i = 0; i < p.n; ++i) y[(i64)i * p.ao] = fw_out(col_z(p, x, mr, i), st.a, coef);
    }
}

extern "C" __global__ void __launch_bounds__(256) softmax_bw_col(const SoftmaxParams p) {
    for (u64 row = (u64)blockIdx.x * blockDim.x + threadIdx.x; row < p.rows;
         row += (u64)gridDim.x * blockDim.x) {
        const Y* y = static_cast<const Y*>(p.x) + strided_offset(row, p.rank, p.shape, p.sx);
        const Y* dy = static_cast<const Y*>(p.g) + strided_offset(row, p.rank, p.shape, p.sg);
        T* dx = static_cast<T*>(p.out) + strided_offset(row, p.rank, p.shape, p.so);
        const MaskRow mr = mask_row(p, row, true);
        ACC tot = ACC(0);
        for (u64 i = 0; i < p.n; ++i) tot += bw_term(y_acc(y[(i64)i * p.ax]), y_acc(dy[(i64)i * p.ag]));
        for (u64 i = 0; i < p.n; ++i) {
            const bool keep = BARACUDA_MASK != MASK_KEEP || mr.keep[(i64)i * p.am];
            dx[(i64)i * p.ao] =
                keep ? bw_out(y_acc(y[(i64)i * p.ax]), y_acc(dy[(i64)i * p.ag]), tot) : from_acc(ACC(0));
        }
    }
}
