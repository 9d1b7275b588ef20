// logical_reduce.cu: torch.all, torch.any and torch.count_nonzero over any
// subset of dims of a strided tensor, deterministic (no atomics; the
// state is an exact integer count).
//
// FW  c[o] = #{ r in R(o) : x[o, r] != 0 }     (NaN is nonzero, -0.0 zero)
//     all            y[o] = c[o] == n_red       (true over nothing)
//     any            y[o] = c[o] != 0           (false over nothing)
//     count_nonzero  y[o] = c[o]                (0 over nothing)
// all and any write one byte, 0 or 1 (bool, or u8 for u8 inputs as
// PyTorch); count_nonzero writes an i64.
//
// "Nonzero" is a bit test on the stored element: any bit set, except for
// floats the sign bit alone (-0.0 is zero; every NaN and every subnormal
// has a mantissa bit). So the kernel depends only on the element's width
// and on whether it is a float, not on its type: f16 and bf16 share a
// module, and so do i8, u8 and bool.
//
// Work split: the reduce family's, with the count as the fold: the row,
// column and combine kernels of common/reduce_dims.cuh (logical_row,
// logical_col, logical_combine) on reduce/layout.rs's geometry and
// launches; a split reduction adds u64 counts from the workspace.
// Traffic: reads x once (n_out * n_red * b bytes), writes n_out bytes (or
// i64s); a compare and an add per element, so memory bound: judge it by
// GB/s against the copy ceiling. 64-bit offsets throughout.
// Specialised by: LOGICAL_BYTES (element width 1, 2, 4, 8), LOGICAL_FLOAT
// (1: the sign bit alone is zero), LOGICAL_OP (0 all, 1 any, 2
// count_nonzero).
typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;
#include "common/reduce_dims.cuh"

#if !defined(LOGICAL_BYTES) || !defined(LOGICAL_FLOAT) || !defined(LOGICAL_OP)
#error "LOGICAL_BYTES, LOGICAL_FLOAT and LOGICAL_OP must be defined"
#endif

// The stored element as an unsigned word of its width.
#if LOGICAL_BYTES == 1
typedef unsigned char W;
#elif LOGICAL_BYTES == 2
typedef unsigned short W;
#elif LOGICAL_BYTES == 4
typedef unsigned int W;
#elif LOGICAL_BYTES == 8
typedef unsigned long long W;
#else
#error "LOGICAL_BYTES must be 1, 2, 4 or 8"
#endif

// The bits that make an element nonzero.
#if LOGICAL_FLOAT
#define NONZERO_BITS ((W) ~((W)1 << (8 * LOGICAL_BYTES - 1)))
#else
#define NONZERO_BITS ((W) ~(W)0)
#endif

#if LOGICAL_OP == 2
typedef i64 O;
#elif LOGICAL_OP == 0 || LOGICAL_OP == 1
typedef unsigned char O;  // bool (u8 for u8 inputs): 0 or 1
#else
#error "LOGICAL_OP must be 0 (all), 1 (any) or 2 (count_nonzero)"
#endif

__device__ __forceinline__ u32 nonzero(W v) { return (v & NONZERO_BITS) != 0 ? 1u : 0u; }

// The count: y = c == n_red (all), c != 0 (any) or c (count_nonzero).
struct Count {
    typedef W X;
    typedef u64 S;
    typedef O Y;
    typedef const W A;  // no auxiliary operand (null)
    static __device__ __forceinline__ u64 init() { return 0; }
    static __device__ __forceinline__ u64 init_at(const W*, i64) { return 0; }
    static __device__ __forceinline__ void push(u64& c, W x, const OpArgs&) { c += nonzero(x); }
    static __device__ __forceinline__ void push_vec(u64& c, const Vec16<W>& v, const OpArgs&) {
        u32 n = 0;
#pragma unroll
        for (int k = 0; k < Vec16<W>::N; ++k) n += nonzero(v[k]);
        c += n;
    }
    static __device__ __forceinline__ u64 merge(u64 l, u64 h) { return l + h; }
    static __device__ __forceinline__ void put(O* y, i64 off, const W*, i64, u64 c, const OpArgs& q) {
#if LOGICAL_OP == 0
        y[off] = (O)(c == q.n_red);
#elif LOGICAL_OP == 1
        y[off] = (O)(c != 0);
#else
        y[off] = (O)c;
#endif
    }
};

REDUCE_DIMS_KERNELS(logical, Count)
