// arg_reduce.cu: max / min with indices (torch.max(x, dim)), argmax and
// argmin, over one dim or over all dims flattened, forward and backward,
// deterministic (no atomics).
//
// FW  i[o] = the first r in R(o) with x[o, r] = max_r x[o, r] (min for
//            argmin); a NaN counts as larger (smaller) than every number,
//            so a set holding NaN yields its first NaN, as PyTorch's.
//     v[o] = x[o, i[o]]                  (when values are asked)
//     r is the element's position in R(o) in logical row-major order.
// BW  dx[o, r] = r == i[o] ? dv[o] : 0   (PyTorch routes the gradient of
//            the values to the returned index only)
//
// The state is (value, index), with index -1 for "no element yet". Its
// merge keeps the larger value (NaN largest), and of equal values (or two
// NaNs) the smaller index: a total order, so the result does not depend
// on the order the states meet in, and the bits are fixed.
//
// Work split (host: reduce/arg_reduce.rs, kept dims merged and ordered by
// reduce/layout.rs; reduced dims kept in logical order so that the linear
// position in them is the index):
//   arg_row      a group of `group` threads (power of two, up to the
//                256-thread block) folds one output's range of the reduced
//                set; 16-byte loads when that set is one contiguous aligned
//                run. Long rows take a block per output and, when there
//                are too few outputs to fill the GPU, split over gridDim.y
//                blocks that write (value, index) states to the workspace.
//   arg_combine  one warp per output merges its split states.
//   arg_bw32/64  elementwise over x: dx = dv where the element's position
//                is the returned index, 0 elsewhere.
// Traffic: FW reads x once and writes n_out values and indices (memory
// bound; judge by GB/s against the copy ceiling); BW reads dv and the
// indices per element (broadcast, cached) and writes dx.
// Integer inputs (i32, i64) compare exactly in ACC = i64; the values keep
// T. Their backward kernels exist (a copy of dv) but the host refuses the
// backward of an integer plan, as PyTorch has no integer gradients.
// Specialised by: BARACUDA_DTYPE (T, ACC); BARACUDA_OP (0 max, 1 min).
#include "common/dtype.cuh"
#include "common/reduce_dims.cuh"

#ifndef BARACUDA_OP
#error "BARACUDA_OP must be defined (0 max, 1 min)"
#endif

// The running (value, index); index -1 holds no element.
struct ArgSt {
    ACC v;
    i64 i;
};

// `a` wins over `b` by value alone: larger (smaller for min), NaN first.
__device__ __forceinline__ bool beats(ACC a, ACC b) {
#if BARACUDA_OP == 0
    return (a != a && b == b) || a > b;
#else
    return (a != a && b == b) || a < b;
#endif
}

// The fold's state and merge (common/reduce_dims.cuh, the combine): the
// better value, the smaller index on ties.
struct ArgFold {
    typedef ArgSt S;
    static __device__ __forceinline__ ArgSt init() { return ArgSt{ACC(0), -1}; }
    static __device__ __forceinline__ ArgSt merge(ArgSt l, ArgSt h) {
        if (h.i < 0) return l;
        if (l.i < 0) return h;
        if (beats(h.v, l.v)) return h;
        if (beats(l.v, h.v)) return l;
        return h.i < l.i ? h : l;
    }
};

// Fold element x at index i, later than every index folded into s so far:
// it replaces the state only when strictly better (ties keep the first).
__device__ __forceinline__ void push(ArgSt& s, ACC x, i64 i) {
#if BARACUDA_OP == 0
    const bool take = s.i < 0 || (s.v == s.v && !(x <= s.v));
#else
    const bool take = s.i < 0 || (s.v == s.v && !(x >= s.v));
#endif
    if (take) {
        s.v = x;
        s.i = i;
    }
}

// Geometry and operands of one launch (reduce/arg_reduce.rs `ArgParams`,
// field for field). Kept dims outermost first; output o walks them
// row-major. Reduced dims in logical order; position r walks them
// row-major.
struct ArgParams {
    const T* x;
    T* values;       // null: indices only
    i64* indices;
    ArgSt* partial;  // [n_out][splits] when splits > 1
    u64 n_out;
    u32 nk, nr;
    u64 kshape[REDUCE_MAX_RANK];
    i64 kx[REDUCE_MAX_RANK];
    i64 kv[REDUCE_MAX_RANK];
    i64 ki[REDUCE_MAX_RANK];
    u64 rshape[REDUCE_MAX_RANK];
    i64 rx[REDUCE_MAX_RANK];
    u64 n_red;
    u64 chunk;       // positions per split (a multiple of 8 when split)
    u32 splits;      // gridDim.y
    u32 group;       // threads per output
    u32 vec;         // 1: one contiguous aligned run, 16-byte loads
    u32 pad;
};

// The value and index of output o.
__device__ __forceinline__ void store(const ArgParams& p, u64 o, const ArgSt& s) {
    if (p.values) p.values[strided_offset(o, p.nk, p.kshape, p.kv)] = from_acc(s.v);
    p.indices[strided_offset(o, p.nk, p.kshape, p.ki)] = s.i;
}

extern "C" __global__ void __launch_bounds__(256) arg_row(ArgParams p) {
    __shared__ ArgSt smem[32];
    const u32 g = p.group;
    const u32 per_block = blockDim.x / g;
    const u32 t = threadIdx.x % g;
    const u32 slot = threadIdx.x / g;
    const u64 l0 = (u64)blockIdx.y * p.chunk;
    const u64 l1 = min(p.n_red, l0 + p.chunk);
    for (u64 ob = blockIdx.x; ob * per_block < p.n_out; ob += gridDim.x) {
        const u64 o = ob * per_block + slot;
        const bool live = o < p.n_out;
        ArgSt s = ArgFold::init();
        if (live) {
            const T* base = p.x + strided_offset(o, p.nk, p.kshape, p.kx);
            const auto at = [&](u64 j, T x) { push(s, to_acc(x), (i64)j); };
            if (p.vec) {
                const u64 nv = (l1 - l0) / VEC;
                const T* vb = base + l0;
                fold_ahead<FOLD_AHEAD>(
                    t, nv, g, [&](u64 v) { return load16(vb, v); },
                    [&](u64 v, const Vec16<T>& e) {
                        const i64 i0 = (i64)(l0 + v * VEC);
#pragma unroll
                        for (int k = 0; k < VEC; ++k) push(s, to_acc(e[k]), i0 + k);
                    });
                fold_ahead<FOLD_AHEAD>(l0 + nv * VEC + t, l1, g, [&](u64 j) { return base[j]; }, at);
            } else if (p.nr == 1) {
                const i64 stride = p.rx[0];
                fold_ahead<FOLD_AHEAD>(l0 + t, l1, g, [&](u64 j) { return base[(i64)j * stride]; }, at);
            } else {
                fold_ahead<FOLD_AHEAD>(
                    l0 + t, l1, g, [&](u64 j) { return base[strided_offset(j, p.nr, p.rshape, p.rx)]; }, at);
            }
        }
        s = group_reduce(s, g, FoldMerge<ArgFold>(), smem);
        if (live && t == 0) {
            if (p.splits > 1) {
                p.partial[o * p.splits + blockIdx.y] = s;
            } else {
                store(p, o, s);
            }
        }
    }
}

// One warp per output merges its splits.
extern "C" __global__ void __launch_bounds__(256) arg_combine(ArgParams p) {
    combine_splits<ArgFold>(p, [&](u64 o, const ArgSt& s) { store(p, o, s); });
}

// ---------------------------------------------------------------------------
// Backward: dx = dv at the returned index, 0 elsewhere.
// ---------------------------------------------------------------------------

// Operands over x's dims (reduce/arg_reduce.rs `ArgBwParams`): strides of
// dx, dv and the indices (0 along reduced dims for the last two), and the
// step of the position r per dim (0 along kept dims).
struct ArgBwParams {
    T* dx;
    const T* dv;
    const i64* indices;
    u64 n;
    u32 rank, pad;
    u64 shape[REDUCE_MAX_RANK];
    i64 stride[4][REDUCE_MAX_RANK];
};

template <typename I>
__device__ __forceinline__ void bw_body(const ArgBwParams& p) {
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < (I)p.n; e += (I)gridDim.x * blockDim.x) {
        i64 off[4];
        strided_offsets<4>(e, p.rank, p.shape, p.stride, off);
        const bool hit = p.indices[off[2]] == off[3];
        p.dx[off[0]] = hit ? p.dv[off[1]] : from_acc(ACC(0));
    }
}

extern "C" __global__ void __launch_bounds__(256) arg_bw32(ArgBwParams p) { bw_body<u32>(p); }
extern "C" __global__ void __launch_bounds__(256) arg_bw64(ArgBwParams p) { bw_body<u64>(p); }
