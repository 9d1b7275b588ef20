// shape.cu: data-movement ops by index map: flip, roll, tril/triu and pad
// (constant, reflect, replicate, circular), forward and backward; the
// group maps of repeat, repeat_interleave, diagonal, diag_embed, unfold and
// strided slices, forward and backward (below, at GroupArgs); and the
// piecewise copy of cat and stack.
//
// FW  y[o] = x[src(o)], or `fill` where src(o) falls outside x (pad
//     constant) or the triangle mask drops o (tril/triu write 0).
//     src is separable per dim (kind[d], shift[d]):
//       identity  s = o
//       flip      s = n-1-o
//       roll      s = o - shift (+ n when negative), shift in [0, n)
//       constant  s = o - before, outside when not in [0, n)
//       reflect   s = |o - before|, then 2(n-1) - s when s >= n
//       replicate s = clamp(o - before, 0, n-1)
//       circular  s = crop + (o - before) mod span: negative pads crop x
//                 first (to [crop, crop + span)), as PyTorch does, and the
//                 positive ones wrap around what is left
//     A flattened roll (`flat`) maps the row-major linear index instead.
// BW  flip, roll, tril/triu and pad constant are gathers of dy by the same
//     kernels (the host builds the inverse map). Reflect, replicate and
//     circular pad accumulate: dx[i] = sum of dy[o] over every o whose
//     src(o) = i, enumerated per padded dim (at most three points for
//     reflect and circular, a range for replicate), a gather in a fixed
//     order: deterministic, no atomics.
// Copy (cat, stack): up to CAT_PIECES2 (src, dst) pieces of at most two
//     dims, or CAT_PIECES of up to eight, per launch; blockIdx.y picks
//     the piece; each moves W-byte words (16 when the host finds both
//     sides contiguous and aligned along the innermost dim, down to one
//     element otherwise).
//
// One thread per output element (per VEC outputs in the vector path,
// which stores 16 bytes and loads 16 bytes when the VEC sources are
// consecutive and aligned: interior of pad, tril/triu, identity dims);
// rows of 32 or more run a warp per row, which does the outer dims' index
// math once per row (in vectors when the row takes them and is 32
// vectors or more; the pad backward likewise). Each thread issues the
// loads of several elements or vectors before its first store.
// 64-bit offsets; the linear index is u32 when the count fits.
// Traffic: FW ~2 x bytes(y); pad BW ~bytes(dy) + bytes(dx). Memory bound:
// judge it by GB/s against the copy ceiling.
// Specialised by: T (-DBARACUDA_DTYPE).
#include "common/dtype.cuh"

#define MAX_RANK 8

enum MapKind : u32 {
    K_IDENTITY = 0,
    K_FLIP = 1,
    K_ROLL = 2,
    K_CONSTANT = 3,
    K_REFLECT = 4,
    K_REPLICATE = 5,
    K_CIRCULAR = 6,
};

struct GatherArgs {
    u64 n;                  // elements of the output
    u32 rank;               // dims in use
    u32 tri;                // 0 none, 1 tril (keep j - i <= diagonal), 2 triu (keep >=)
    i64 diagonal;
    u32 flat;               // 1: roll of the row-major linear index by flat_shift
    u32 pad0;
    i64 flat_shift;         // in [0, n)
    double fill;            // value outside x (pad constant)
    u64 out_shape[MAX_RANK];
    u64 in_shape[MAX_RANK];
    i64 out_stride[MAX_RANK];
    i64 in_stride[MAX_RANK];
    u32 kind[MAX_RANK];
    i64 shift[MAX_RANK];    // roll: shift in [0, n); pad: elements before
    i64 crop[MAX_RANK];     // circular: first x coordinate kept
    i64 span[MAX_RANK];     // circular: x coordinates kept
    i64 run_lo[2], run_hi[2];  // output columns [lo, hi) of the last dim that read
    i64 run_off[2];            //   x column j + off (gather.rs `straight_runs`)
    u64 out;
    u64 in;
};

// Source coordinate of output coordinate o along a dim of x extent n; -1
// when outside x. For circular pads n is the span and the caller adds the
// crop.
__device__ __forceinline__ i64 src_coord(u32 kind, i64 o, i64 n, i64 shift) {
    switch (kind) {
    case K_FLIP: return n - 1 - o;
    case K_ROLL: {
        i64 s = o - shift;
        return s < 0 ? s + n : s;
    }
    case K_CONSTANT: {
        i64 s = o - shift;
        return (s < 0 || s >= n) ? -1 : s;
    }
    case K_REFLECT: {
        i64 s = o - shift;
        if (s < 0) s = -s;
        if (s >= n) s = 2 * (n - 1) - s;
        return s;
    }
    case K_REPLICATE: {
        i64 s = o - shift;
        return s < 0 ? 0 : (s >= n ? n - 1 : s);
    }
    case K_CIRCULAR: {
        i64 s = (o - shift) % n;
        return s < 0 ? s + n : s;
    }
    default: return o;
    }
}

// Source coordinate of output coordinate o along dim d.
__device__ __forceinline__ i64 src_of(const GatherArgs& p, int d, i64 o) {
    if (p.kind[d] == K_CIRCULAR) return p.crop[d] + src_coord(K_CIRCULAR, o, p.span[d], p.shift[d]);
    return src_coord(p.kind[d], o, (i64)p.in_shape[d], p.shift[d]);
}

// Output offset of linear output index `linear`, the offset in x of the
// source of every dim but the innermost (`base`; -1 when one of them falls
// outside x), and the last two output coordinates.
template <typename I>
__device__ __forceinline__ void gather_offsets(const GatherArgs& p, I linear, i64& oo, i64& base,
                                               i64& row, i64& col) {
    oo = 0;
    base = 0;
    row = 0;
    col = 0;
    bool outside = false;
#pragma unroll
    for (int d = MAX_RANK - 1; d >= 0; --d) {
        if (d < (int)p.rank) {
            const I ext = (I)p.out_shape[d];
            const i64 c = (i64)(linear % ext);
            linear /= ext;
            oo += c * p.out_stride[d];
            if (d == (int)p.rank - 1) {
                col = c;
            } else {
                if (d == (int)p.rank - 2) row = c;
                const i64 s = src_of(p, d, c);
                if (s < 0) outside = true;
                base += s * p.in_stride[d];
            }
        }
    }
    if (outside) base = -1;
}

// Offset in x of the source of linear output index `linear` under a
// flattened roll: the row-major source index, then its strides.
template <typename I>
__device__ __forceinline__ i64 flat_source(const GatherArgs& p, I linear) {
    I s = (I)(((u64)linear + p.n - (u64)p.flat_shift) % p.n);
    i64 io = 0;
#pragma unroll
    for (int d = MAX_RANK - 1; d >= 0; --d) {
        if (d < (int)p.rank) {
            const I ext = (I)p.in_shape[d];
            io += (i64)(s % ext) * p.in_stride[d];
            s /= ext;
        }
    }
    return io;
}

__device__ __forceinline__ bool tri_keeps(const GatherArgs& p, i64 row, i64 col) {
    if (p.tri == 1) return col - row <= p.diagonal;
    if (p.tri == 2) return col - row >= p.diagonal;
    return true;
}

// A warp's walk over consecutive output rows (every dim but the
// innermost; rank >= 2): the row's output offset, the x offset of the
// source of every dim above the row dim (`outer`; `outer_out` when one of
// them falls outside x) and the coordinate `c` along the row dim. A step
// to the next row moves along the row dim, and recomputes the rest only
// when that dim wraps: the divisions of a row's index run once per
// `out_shape[rank - 2]` rows, not once per row.
struct RowWalk {
    i64 oo, outer, c;
    bool outer_out;
};

template <typename I>
__device__ __forceinline__ RowWalk row_walk(const GatherArgs& p, I r) {
    RowWalk w;
    w.oo = 0;
    w.outer = 0;
    w.outer_out = false;
    const int rd = (int)p.rank - 2;
    const I ext = (I)p.out_shape[rd];
    w.c = (i64)(r % ext);
    r /= ext;
    w.oo = w.c * p.out_stride[rd];
#pragma unroll
    for (int d = MAX_RANK - 3; d >= 0; --d) {
        if (d < rd) {
            const I e = (I)p.out_shape[d];
            const i64 c = (i64)(r % e);
            r /= e;
            w.oo += c * p.out_stride[d];
            const i64 s = src_of(p, d, c);
            if (s < 0) w.outer_out = true;
            w.outer += s * p.in_stride[d];
        }
    }
    return w;
}

// The next row of `w`, row index r + 1.
template <typename I>
__device__ __forceinline__ void row_step(const GatherArgs& p, RowWalk& w, I r) {
    const int rd = (int)p.rank - 2;
    if (++w.c < (i64)p.out_shape[rd]) {
        w.oo += p.out_stride[rd];
    } else {
        w = row_walk<I>(p, r + 1);
    }
}

// The x offset of the source of row `w` but its innermost dim; -1 when
// outside x.
__device__ __forceinline__ i64 row_base(const GatherArgs& p, const RowWalk& w) {
    const int rd = (int)p.rank - 2;
    const i64 s = src_of(p, rd, w.c);
    return (w.outer_out || s < 0) ? -1 : w.outer + s * p.in_stride[rd];
}

// The rows [r0, r1) of warp `warp` of `warps` (consecutive rows each).
template <typename I>
__device__ __forceinline__ void warp_rows(I rows, I& r0, I& r1) {
    const I warps = (I)gridDim.x * (blockDim.x >> 5);
    const I warp = (I)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const I per = (rows + warps - 1) / warps;
    r0 = warp * per < rows ? warp * per : rows;
    r1 = r0 + per < rows ? r0 + per : rows;
}

// One output element per thread and grid-stride step.
template <typename I>
__device__ __forceinline__ void gather_scalar(const GatherArgs& p) {
    const T* __restrict__ x = (const T*)p.in;
    T* __restrict__ y = (T*)p.out;
    const T fill = from_acc((ACC)p.fill);
    const T zero = from_acc((ACC)0);
    const int last = (int)p.rank - 1;
    const I n = (I)p.n;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        i64 oo, base, row, col;
        gather_offsets<I>(p, i, oo, base, row, col);
        i64 io;
        if (p.flat) {
            io = flat_source<I>(p, i);
        } else {
            const i64 s = src_of(p, last, col);
            io = (base < 0 || s < 0) ? -1 : base + s * p.in_stride[last];
        }
        // the triangle's dropped elements are not read
        y[oo] = !tri_keeps(p, row, col) ? zero : (io < 0 ? fill : x[io]);
    }
}

// Elements each lane of a row warp keeps in flight (gather_rows), and
// vectors each thread of the vector kernels does (gather_vec,
// gather_vec_rows): all their loads are issued before the first store.
#define ROW_UNROLL 8
#define VEC_UNROLL 4

// One warp per output row (every dim but the innermost), its lanes across
// the row: the outer dims' index math runs once per row, not per element
// (a padded 230-wide bf16 row would otherwise spend ~4 divisions per
// 2-byte element and run compute bound), and on consecutive rows a warp
// walks (RowWalk) divides only when the row dim wraps; columns inside the
// map's straight run skip the per-column map. For rows of at least 32.
template <typename I>
__device__ __forceinline__ void gather_rows(const GatherArgs& p) {
    const T* __restrict__ x = (const T*)p.in;
    T* __restrict__ y = (T*)p.out;
    const T fill = from_acc((ACC)p.fill);
    const T zero = from_acc((ACC)0);
    const int last = (int)p.rank - 1;
    const i64 width = (i64)p.out_shape[last];
    const i64 ost = p.out_stride[last];
    const i64 ist = p.in_stride[last];
    const I rows = (I)(p.n / (u64)width);
    const int lane = threadIdx.x & 31;
    I r0, r1;
    warp_rows<I>(rows, r0, r1);
    RowWalk w = row_walk<I>(p, r0);
    for (I r = r0; r < r1; row_step<I>(p, w, r), ++r) {
        const i64 oo = w.oo, base = row_base(p, w), row = w.c;
        for (i64 j0 = lane; j0 < width; j0 += 32 * ROW_UNROLL) {
            T v[ROW_UNROLL];
#pragma unroll
            for (int u = 0; u < ROW_UNROLL; ++u) {
                const i64 j = j0 + 32 * u;
                if (j < width) {
                    const i64 s = (j >= p.run_lo[0] && j < p.run_hi[0])   ? j + p.run_off[0]
                                  : (j >= p.run_lo[1] && j < p.run_hi[1]) ? j + p.run_off[1]
                                                                          : src_of(p, last, j);
                    v[u] = !tri_keeps(p, row, j) ? zero
                                                 : ((base < 0 || s < 0) ? fill : x[base + s * ist]);
                }
            }
#pragma unroll
            for (int u = 0; u < ROW_UNROLL; ++u) {
                const i64 j = j0 + 32 * u;
                if (j < width) y[oo + j * ost] = v[u];
            }
        }
    }
}

// VEC consecutive outputs along the innermost dim, from column `col` of
// the row whose outer dims' source offset is `base` (-1 outside x): one
// 16-byte load when the sources are VEC consecutive elements of a
// contiguous innermost x dim at a 16-byte boundary (or, reversed, for a
// flip): each step of these maps along a dim is +1, -1 or a jump, so the
// ends differ by +-(VEC-1) only when every step is the same +-1. Element
// by element otherwise.
__device__ __forceinline__ void vec_source(const GatherArgs& p, const T* __restrict__ x, i64 base,
                                           i64 row, i64 col, T (&v)[VEC]) {
    const T fill = from_acc((ACC)p.fill);
    const T zero = from_acc((ACC)0);
    const int last = (int)p.rank - 1;
    const i64 in_st = p.in_stride[last];
    const i64 s0 = src_of(p, last, col);
    const i64 s1 = src_of(p, last, col + VEC - 1);
    // a vector the triangle drops whole is not read (j - i grows along
    // the row, so the ends decide)
    bool done = p.tri && !tri_keeps(p, row, col) && !tri_keeps(p, row, col + VEC - 1);
    if (done) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = zero;
    }
    if (!done && base >= 0 && s0 >= 0 && s1 >= 0 && in_st == 1) {
        if (s1 - s0 == VEC - 1 && ((u64)(x + base + s0) & 15) == 0) {
            load_vec(x + base + s0, 0, v);
            done = true;
        } else if (s0 - s1 == VEC - 1 && ((u64)(x + base + s1) & 15) == 0) {
            T r[VEC];
            load_vec(x + base + s1, 0, r);
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[k] = r[VEC - 1 - k];
            done = true;
        }
    }
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        if (!done && col >= p.run_lo[q] && col + VEC <= p.run_hi[q]) {
            // a straight run, not on the 16-byte grid
            const T* src = x + base + (col + p.run_off[q]) * in_st;
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[k] = base < 0 ? fill : src[k * in_st];
            done = true;
        }
    }
    if (!done) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const i64 s = src_of(p, last, col + k);
            v[k] = (base < 0 || s < 0) ? fill : x[base + s * in_st];
        }
    }
    if (p.tri) {
#pragma unroll
        for (int k = 0; k < VEC; ++k)
            if (!tri_keeps(p, row, col + k)) v[k] = zero;
    }
}

// VEC consecutive outputs along the innermost dim per thread and vector,
// stored as one 16-byte vector, VEC_UNROLL vectors (a block's width apart)
// per thread and step: the host checks that the innermost output dim is
// contiguous and a multiple of VEC long, that y and its other strides keep
// 16-byte alignment, and that the map is not a flattened roll.
template <typename I>
__device__ __forceinline__ void gather_vec(const GatherArgs& p) {
    const T* __restrict__ x = (const T*)p.in;
    T* __restrict__ y = (T*)p.out;
    const I groups = (I)(p.n / VEC);
    const I step = (I)gridDim.x * blockDim.x * VEC_UNROLL;
    for (I g0 = (I)blockIdx.x * blockDim.x * VEC_UNROLL + threadIdx.x; g0 < groups; g0 += step) {
        T v[VEC_UNROLL][VEC];
        i64 oo[VEC_UNROLL];
#pragma unroll
        for (int u = 0; u < VEC_UNROLL; ++u) {
            const I g = g0 + (I)(u * blockDim.x);
            if (g < groups) {
                i64 base, row, col;
                gather_offsets<I>(p, g * (I)VEC, oo[u], base, row, col);
                vec_source(p, x, base, row, col, v[u]);
            }
        }
#pragma unroll
        for (int u = 0; u < VEC_UNROLL; ++u)
            if (g0 + (I)(u * blockDim.x) < groups) store_vec(y + oo[u], 0, v[u]);
    }
}

// A warp per output row of `width` elements (a whole number of VEC, the
// innermost output dim contiguous), the warps taking rows in turn, so the
// rows in flight at once are neighbours in memory: `row(r, oo)` sets up
// row r once (oo: its output offset) and returns what `load(ctx, col, v)`
// needs to gather the VEC outputs from column col; the lanes take the
// row's vectors, VEC_UNROLL each in flight. For rows of at least 32
// vectors (512 bytes), long enough that the row's index math is small
// beside them.
template <typename I, typename Row, typename Load>
__device__ __forceinline__ void vec_rows(u64 n, i64 width, T* __restrict__ y, Row row, Load load) {
    const i64 groups = width / VEC;
    const I rows = (I)(n / (u64)width);
    const int lane = threadIdx.x & 31;
    const I warps = (I)gridDim.x * (blockDim.x >> 5);
    for (I r = (I)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        i64 oo;
        const auto ctx = row(r, oo);
        for (i64 g0 = lane; g0 < groups; g0 += 32 * VEC_UNROLL) {
            T v[VEC_UNROLL][VEC];
#pragma unroll
            for (int u = 0; u < VEC_UNROLL; ++u) {
                const i64 g = g0 + 32 * u;
                if (g < groups) load(ctx, g * VEC, v[u]);
            }
#pragma unroll
            for (int u = 0; u < VEC_UNROLL; ++u) {
                const i64 g = g0 + 32 * u;
                if (g < groups) store_vec(y + oo + g * VEC, 0, v[u]);
            }
        }
    }
}

// The source of a row of the gather: its outer dims' x offset (-1
// outside x) and its coordinate along the row dim.
struct GatherRow {
    i64 base, row;
};

// gather_vec with a warp per output row (vec_rows): the outer dims' index
// math once per row.
template <typename I>
__device__ __forceinline__ void gather_vec_rows(const GatherArgs& p) {
    const T* __restrict__ x = (const T*)p.in;
    const i64 width = (i64)p.out_shape[(int)p.rank - 1];
    vec_rows<I>(
        p.n, width, (T*)p.out,
        [&](I r, i64& oo) {
            GatherRow w;
            i64 col;
            gather_offsets<I>(p, r * (I)width, oo, w.base, w.row, col);
            return w;
        },
        [&](const GatherRow& w, i64 col, T(&v)[VEC]) { vec_source(p, x, w.base, w.row, col, v); });
}

// Output coordinates o of dy (extent m) whose source along a padded dim
// (x extent n, `before` elements before) is x coordinate i: up to three
// ranges [lo, hi] with step `step`.
struct Ranges {
    i64 lo[3], hi[3], step[3];
    int count;
};

__device__ __forceinline__ void add_point(Ranges& r, i64 o, i64 m) {
    if (o >= 0 && o < m) {
        r.lo[r.count] = o;
        r.hi[r.count] = o;
        r.step[r.count] = 1;
        ++r.count;
    }
}

__device__ __forceinline__ Ranges preimage(u32 kind, i64 i, i64 n, i64 m, i64 before, i64 crop,
                                           i64 span) {
    Ranges r;
    r.count = 0;
    switch (kind) {
    case K_REFLECT:
        add_point(r, i + before, m);
        if (i > 0) add_point(r, before - i, m);
        if (i < n - 1) add_point(r, before + 2 * (n - 1) - i, m);
        break;
    case K_REPLICATE: {
        i64 lo = i == 0 ? 0 : i + before;
        i64 hi = i == n - 1 ? m - 1 : i + before;
        lo = lo < 0 ? 0 : lo;
        hi = hi > m - 1 ? m - 1 : hi;
        if (lo <= hi) {
            r.lo[0] = lo;
            r.hi[0] = hi;
            r.step[0] = 1;
            r.count = 1;
        }
        break;
    }
    case K_CIRCULAR: {
        const i64 j = i - crop;
        if (j < 0 || j >= span) break;
        const i64 o = (j + before) % span;
        if (o < m) {
            r.lo[0] = o;
            r.hi[0] = m - 1;
            r.step[0] = span;
            r.count = 1;
        }
        break;
    }
    case K_CONSTANT: add_point(r, i + before, m); break;
    default: add_point(r, i, m); break;
    }
    return r;
}

// Where the pad backward's point `lin` of dx (over its first `dims` dims,
// the rest fixed at 0) reads dy: `oo` its dx offset, `io` the dy offset of
// its unpadded dims, and for the padded dims that end the first `dims`
// (the last K of the last three), each one's preimage ranges `pr` and dy
// stride `st`. Missing leading dims of a rank below 3 are one point at 0.
template <typename I, int K>
__device__ __forceinline__ void pad_bw_locate(const GatherArgs& p, I lin, int dims, Ranges (&pr)[K],
                                              i64 (&st)[K], i64& oo, i64& io) {
    const int r = (int)p.rank;
    I rem = lin;
    oo = 0;
    io = 0;
#pragma unroll
    for (int k = 0; k < K; ++k) st[k] = 0;
#pragma unroll
    for (int d = MAX_RANK - 1; d >= 0; --d) {
        if (d < dims) {
            const I ext = (I)p.out_shape[d];
            const i64 c = (i64)(rem % ext);
            rem /= ext;
            oo += c * p.out_stride[d];
            const int k = d - (r - 3);
            if (k >= 0) {
                pr[k] = preimage(p.kind[d], c, (i64)p.out_shape[d], (i64)p.in_shape[d], p.shift[d],
                                 p.crop[d], p.span[d]);
                st[k] = p.in_stride[d];
            } else {
                io += c * p.in_stride[d];
            }
        }
    }
    for (int k = 0; k < 3 - r && k < K; ++k) {
        pr[k].count = 1;
        pr[k].lo[0] = 0;
        pr[k].hi[0] = 0;
        pr[k].step[0] = 1;
    }
}

// The pad backward: out is dx (x's shape), in is dy; kind and shift as the
// forward's. The padded dims are the last `PADDED` (<= 3) dims; the sum
// over the product of their preimages runs in a fixed order.
template <typename I>
__device__ __forceinline__ void pad_bw(const GatherArgs& p) {
    const T* __restrict__ dy = (const T*)p.in;
    T* __restrict__ dx = (T*)p.out;
    const int r = (int)p.rank;
    const I n = (I)p.n;
    for (I lin = (I)blockIdx.x * blockDim.x + threadIdx.x; lin < n;
         lin += (I)gridDim.x * blockDim.x) {
        i64 oo, io;
        Ranges pr[3];
        i64 st[3];
        pad_bw_locate<I, 3>(p, lin, r, pr, st, oo, io);
        ACC acc = 0;
        for (int a = 0; a < pr[0].count; ++a)
            for (i64 o0 = pr[0].lo[a]; o0 <= pr[0].hi[a]; o0 += pr[0].step[a])
                for (int b = 0; b < pr[1].count; ++b)
                    for (i64 o1 = pr[1].lo[b]; o1 <= pr[1].hi[b]; o1 += pr[1].step[b])
                        for (int c = 0; c < pr[2].count; ++c)
                            for (i64 o2 = pr[2].lo[c]; o2 <= pr[2].hi[c]; o2 += pr[2].step[c])
                                acc += to_acc(dy[io + o0 * st[0] + o1 * st[1] + o2 * st[2]]);
        dx[oo] = from_acc(acc);
    }
}

// The one dy coordinate `o` whose source along a padded dim is x
// coordinate i (x extent n, dy extent m, `before` elements before), where
// exactly one is (the interior); false where none or several are.
__device__ __forceinline__ bool single_preimage(u32 kind, i64 i, i64 n, i64 m, i64 before, i64& o) {
    switch (kind) {
    case K_REFLECT: {
        o = i + before;
        const i64 mirror_lo = before - i, mirror_hi = before + 2 * (n - 1) - i;
        return o >= 0 && o < m && !(i > 0 && mirror_lo >= 0 && mirror_lo < m) &&
               !(i < n - 1 && mirror_hi >= 0 && mirror_hi < m);
    }
    case K_REPLICATE: {
        i64 lo = i == 0 ? 0 : i + before;
        i64 hi = i == n - 1 ? m - 1 : i + before;
        lo = lo < 0 ? 0 : lo;
        hi = hi > m - 1 ? m - 1 : hi;
        o = lo;
        return lo == hi;
    }
    case K_CONSTANT: o = i + before; return o >= 0 && o < m;
    case K_IDENTITY: o = i; return i < m;
    default: return false;
    }
}

// The sum of dy over the preimages `pr` of a dx row's outer padded dims
// and `pl` of its last dim, in the fixed odometer order; `io` is the dy
// offset of the row's unpadded dims, `st` and `ist` the dy strides.
__device__ __forceinline__ ACC pad_sum_at(const T* __restrict__ dy, i64 io, const Ranges (&pr)[2],
                                          const i64 (&st)[2], const Ranges& pl, i64 ist) {
    ACC acc = 0;
    for (int a = 0; a < pr[0].count; ++a)
        for (i64 o0 = pr[0].lo[a]; o0 <= pr[0].hi[a]; o0 += pr[0].step[a])
            for (int b = 0; b < pr[1].count; ++b)
                for (i64 o1 = pr[1].lo[b]; o1 <= pr[1].hi[b]; o1 += pr[1].step[b]) {
                    const i64 at = io + o0 * st[0] + o1 * st[1];
                    for (int c = 0; c < pl.count; ++c)
                        for (i64 o2 = pl.lo[c]; o2 <= pl.hi[c]; o2 += pl.step[c])
                            acc += to_acc(dy[at + o2 * ist]);
                }
    return acc;
}

__device__ __forceinline__ bool one_point(const Ranges& r) {
    return r.count == 1 && r.lo[0] == r.hi[0];
}

// The pad backward by rows: one warp per dx row, the outer dims'
// preimages found once per row, its lanes across the row, ROW_UNROLL
// elements each. An element whose every preimage is one point (the
// interior: most of them) is one load, all of a lane's issued before any
// is used; the border sums in pad_sum_at after them. For rows of at
// least 32.
template <typename I>
__device__ __forceinline__ void pad_bw_rows(const GatherArgs& p) {
    const T* __restrict__ dy = (const T*)p.in;
    T* __restrict__ dx = (T*)p.out;
    const int r = (int)p.rank;
    const int last = r - 1;
    const i64 width = (i64)p.out_shape[last];
    const I rows = (I)(p.n / (u64)width);
    const int lane = threadIdx.x & 31;
    const i64 ist = p.in_stride[last];
    const i64 ost = p.out_stride[last];
    const u32 kl = p.kind[last];
    const i64 ml = (i64)p.in_shape[last], bl = p.shift[last];
    // consecutive rows per warp: a step along the row dim (rank - 2)
    // updates its preimage alone, the rest is found again when it wraps
    const int rd = r - 2;
    I r0, r1;
    warp_rows<I>(rows, r0, r1);
    i64 oo, io;
    Ranges pr[2];
    i64 st[2];
    pad_bw_locate<I, 2>(p, r0, r - 1, pr, st, oo, io);
    i64 c = (i64)(r0 % (I)p.out_shape[rd]);
    for (I row = r0; row < r1; ++row) {
        if (row > r0) {
            if (++c < (i64)p.out_shape[rd]) {
                oo += p.out_stride[rd];
                pr[1] = preimage(p.kind[rd], c, (i64)p.out_shape[rd], (i64)p.in_shape[rd], p.shift[rd],
                                 p.crop[rd], p.span[rd]);
            } else {
                pad_bw_locate<I, 2>(p, row, r - 1, pr, st, oo, io);
                c = 0;
            }
        }
        const bool simple = one_point(pr[0]) && one_point(pr[1]);
        const i64 at = io + pr[0].lo[0] * st[0] + pr[1].lo[0] * st[1];
        for (i64 j0 = lane; j0 < width; j0 += 32 * ROW_UNROLL) {
            ACC acc[ROW_UNROLL];
            u32 border = 0;
#pragma unroll
            for (int u = 0; u < ROW_UNROLL; ++u) {
                const i64 j = j0 + 32 * u;
                acc[u] = 0;
                i64 o;
                if (j < width) {
                    if (simple && single_preimage(kl, j, width, ml, bl, o))
                        acc[u] = to_acc(dy[at + o * ist]);
                    else
                        border |= 1u << u;
                }
            }
#pragma unroll
            for (int u = 0; u < ROW_UNROLL; ++u) {
                if (border >> u & 1) {
                    const i64 j = j0 + 32 * u;
                    const Ranges pl = preimage(kl, j, width, ml, bl, p.crop[last], p.span[last]);
                    acc[u] = pad_sum_at(dy, io, pr, st, pl, ist);
                }
            }
#pragma unroll
            for (int u = 0; u < ROW_UNROLL; ++u) {
                const i64 j = j0 + 32 * u;
                if (j < width) dx[oo + j * ost] = from_acc(acc[u]);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Group maps: repeat, repeat_interleave, diagonal, diag_embed, unfold and
// strided slices, forward and backward, in one kernel.
//
// out[o] = sum of in[base + f_0 + f_1 + ...] over every choice of one term
// f_g from each group's progression (first + k step, k < count); a group
// is one output dim (`kind[d]`, coordinate o = o_d), or two for G_DIAG
// (the dim and its `partner`, whose own kind is G_NONE). A group with no
// term (count 0) makes the element 0; one whose every group has one term
// is a copy (values move exactly); otherwise the terms are summed in ACC,
// in the odometer order of the groups' terms (deterministic, no atomics),
// and rounded once. `st` is the group's stride in `in` (the host folds
// the input's strides into it: repeat's x stride, diagonal's stride sum,
// unfold's step times the stride).
//   G_AFFINE  o                                       (copies, slices)
//   G_MOD     o mod a                                 (repeat)
//   G_DIV     o / a                                   (repeat_interleave)
//   G_SEARCH  the i < a with table[i] <= o < table[i+1] (per-index repeats)
//   G_EVERY   o + k a, k < b                          (repeat bw)
//   G_BLOCK   o a + k, k < a                          (repeat_interleave bw)
//   G_SPAN    table[o] + k, k < table[o+1] - table[o]  (per-index bw)
//   G_WINDOWS the windows w (step a, size b, c of them) that hold o: term
//             w st + (o - w a) st2                    (unfold bw)
//   G_UNSLICE (o - a) / b when exact and below c, else none (slice bw)
//   G_DIAG    o (a >= 0) or o' (the partner's coordinate) when o' - o = a,
//             else none                               (diag_embed fw,
//                                                      diagonal bw)
// ---------------------------------------------------------------------------

enum GroupKind : u32 {
    G_NONE = 0,
    G_AFFINE = 1,
    G_MOD = 2,
    G_DIV = 3,
    G_SEARCH = 4,
    G_EVERY = 5,
    G_BLOCK = 6,
    G_SPAN = 7,
    G_WINDOWS = 8,
    G_UNSLICE = 9,
    G_DIAG = 10,
};

struct GroupArgs {
    u64 n;                  // elements of the output
    u32 rank;               // output dims
    u32 pad0;
    i64 base;               // offset in `in` every element starts from
    u64 out_shape[MAX_RANK];
    i64 out_stride[MAX_RANK];
    u32 kind[MAX_RANK];
    u32 partner[MAX_RANK];  // G_DIAG: the other dim of the pair
    i64 st[MAX_RANK];
    i64 st2[MAX_RANK];      // G_WINDOWS: stride of the position in the window
    i64 a[MAX_RANK];
    i64 b[MAX_RANK];
    i64 c[MAX_RANK];
    u64 table;              // i64 starts of the per-index repeats (len a + 1)
    u64 out;
    u64 in;
};

// One group's progression of offsets in `in`: count 0 for none.
struct Prog {
    i64 first, step, count;
};

// The progression of the group at dim d, coordinate o (o2: the partner's
// coordinate, for G_DIAG). I: the index type, wide enough for o and a.
template <typename I>
__device__ __forceinline__ Prog group_prog(const GroupArgs& p, int d, i64 o, i64 o2) {
    const i64 st = p.st[d], a = p.a[d], b = p.b[d];
    const i64* __restrict__ table = (const i64*)p.table;
    Prog r = {0, 0, 1};
    switch (p.kind[d]) {
    case G_AFFINE: r.first = o * st; break;
    case G_MOD: r.first = (i64)((I)o % (I)a) * st; break;
    case G_DIV: r.first = (i64)((I)o / (I)a) * st; break;
    case G_SEARCH: {
        // the last start <= o (the repeats of the entries before o sum to
        // at most o; zero repeats share a start and are skipped)
        i64 lo = 0, hi = a;  // table[lo] <= o < table[hi]
        while (hi - lo > 1) {
            const i64 mid = lo + (hi - lo) / 2;
            if (table[mid] <= o) lo = mid; else hi = mid;
        }
        r.first = lo * st;
        break;
    }
    case G_EVERY: r.first = o * st; r.step = a * st; r.count = b; break;
    case G_BLOCK: r.first = o * a * st; r.step = st; r.count = a; break;
    case G_SPAN: {
        const i64 t0 = table[o];
        r.first = t0 * st;
        r.step = st;
        r.count = table[o + 1] - t0;
        break;
    }
    case G_WINDOWS: {
        // w a <= o < w a + b, 0 <= w < c
        const i64 v = o - b + 1;
        const i64 lo = v <= 0 ? 0 : (v + a - 1) / a;
        i64 hi = o / a;
        if (hi > p.c[d] - 1) hi = p.c[d] - 1;
        r.count = hi >= lo ? hi - lo + 1 : 0;
        r.first = lo * st + (o - lo * a) * p.st2[d];
        r.step = st - a * p.st2[d];
        break;
    }
    case G_UNSLICE: {
        const i64 v = o - a;
        if (v < 0 || v % b != 0 || v / b >= p.c[d]) r.count = 0;
        else r.first = (v / b) * st;
        break;
    }
    case G_DIAG:
        if (o2 - o != a) r.count = 0;
        else r.first = (a >= 0 ? o : o2) * st;
        break;
    default: break;
    }
    return r;
}

// The output coordinates of linear index `linear` over the first `dims`
// dims (the rest left 0) and the output offset.
template <typename I>
__device__ __forceinline__ void group_coords(const GroupArgs& p, I linear, int dims,
                                             i64 (&c)[MAX_RANK], i64& oo) {
    oo = 0;
#pragma unroll
    for (int d = MAX_RANK - 1; d >= 0; --d) {
        c[d] = 0;
        if (d < dims) {
            const I ext = (I)p.out_shape[d];
            c[d] = (i64)(linear % ext);
            linear /= ext;
            oo += c[d] * p.out_stride[d];
        }
    }
}

// The coordinate of dim `k` among `c` (unrolled: stays in registers).
__device__ __forceinline__ i64 coord_of(const i64 (&c)[MAX_RANK], u32 k) {
    i64 v = 0;
#pragma unroll
    for (int d = 0; d < MAX_RANK; ++d)
        if ((u32)d == k) v = c[d];
    return v;
}

// One output element per thread: the groups' progressions, then the copy
// or the sum over their product.
template <typename I>
__device__ __forceinline__ void group_gather(const GroupArgs& p) {
    const T* __restrict__ x = (const T*)p.in;
    T* __restrict__ y = (T*)p.out;
    const int rank = (int)p.rank;
    const I n = (I)p.n;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        i64 c[MAX_RANK];
        i64 oo;
        group_coords<I>(p, i, rank, c, oo);
        i64 off = p.base;
        bool none = false;
        // the progressions of more than one term: the first in registers
        // (s0, c0; most backwards have one), the rest (nr) in arrays
        i64 s0 = 0, c0 = 1;
        int nr = 0;
        i64 pstep[MAX_RANK], pcount[MAX_RANK];
#pragma unroll
        for (int d = 0; d < MAX_RANK; ++d) {
            if (d < rank && p.kind[d] != G_NONE) {
                const i64 o2 = p.kind[d] == G_DIAG ? coord_of(c, p.partner[d]) : 0;
                const Prog g = group_prog<I>(p, d, c[d], o2);
                if (g.count <= 0) none = true;
                off += g.first;
                if (g.count > 1) {
                    if (c0 == 1) {
                        s0 = g.step;
                        c0 = g.count;
                    } else {
                        pstep[nr] = g.step;
                        pcount[nr] = g.count;
                        ++nr;
                    }
                }
            }
        }
        if (none) {
            y[oo] = from_acc((ACC)0);
        } else if (c0 == 1) {
            y[oo] = x[off];
        } else {
            // the first progression outermost, then an odometer over the
            // rest, the last fastest; the sum starts from the first term
            ACC acc = to_acc(x[off]);
            i64 idx[MAX_RANK];
            for (i64 k0 = 0; k0 < c0; ++k0) {
                i64 o = off + k0 * s0;
                for (int g = 0; g < nr; ++g) idx[g] = 0;
                for (bool first = k0 == 0;; first = false) {
                    if (!first) acc += to_acc(x[o]);
                    int g = nr - 1;
                    for (; g >= 0; --g) {
                        if (++idx[g] < pcount[g]) {
                            o += pstep[g];
                            break;
                        }
                        o -= pstep[g] * (pcount[g] - 1);
                        idx[g] = 0;
                    }
                    if (g < 0) break;
                }
            }
            y[oo] = from_acc(acc);
        }
    }
}

// One warp per output row, for maps whose every group has at most one
// term and whose last dim is a group of its own (G_AFFINE, G_MOD, G_DIV,
// G_SEARCH): the outer groups' offset found once per row, the lanes across
// the row. For rows of at least 32.
template <typename I>
__device__ __forceinline__ void group_rows(const GroupArgs& p) {
    const T* __restrict__ x = (const T*)p.in;
    T* __restrict__ y = (T*)p.out;
    const int rank = (int)p.rank;
    const int last = rank - 1;
    const i64 width = (i64)p.out_shape[last];
    const i64 ost = p.out_stride[last];
    const I rows = (I)(p.n / (u64)width);
    const int lane = threadIdx.x & 31;
    const I warps = (I)gridDim.x * (blockDim.x >> 5);
    for (I r = (I)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        i64 c[MAX_RANK];
        i64 oo;
        group_coords<I>(p, r, last, c, oo);
        i64 off = p.base;
        bool none = false;
#pragma unroll
        for (int d = 0; d < MAX_RANK - 1; ++d) {
            if (d < last && p.kind[d] != G_NONE) {
                const i64 o2 = p.kind[d] == G_DIAG ? coord_of(c, p.partner[d]) : 0;
                const Prog g = group_prog<I>(p, d, c[d], o2);
                if (g.count <= 0) none = true;
                off += g.first;
            }
        }
        for (i64 j = lane; j < width; j += 32) {
            y[oo + j * ost] = none ? from_acc((ACC)0) : x[off + group_prog<I>(p, last, j, 0).first];
        }
    }
}

// VEC consecutive outputs along the innermost dim per thread, stored as
// one 16-byte vector, for maps whose outer groups have at most one term
// and whose innermost group is G_AFFINE or G_MOD (a copy) or G_EVERY (a
// sum of `count` terms, repeat's backward) with the innermost x stride 1
// (G_MOD: a a multiple of VEC, so no vector wraps), or G_WINDOWS (unfold's
// backward) with a unit window-position stride and step and size
// multiples of VEC: along each aligned vector every term's offset steps
// by 1 and the terms' count and step stay. The host checks those,
// that the innermost output dim is contiguous and a multiple of VEC long
// and that y and its other strides keep 16-byte alignment. Each term loads
// as one vector where it lies at a 16-byte boundary, element by element
// otherwise; sums run over the terms in order, as group_gather's do.
// The VEC outputs from column `col` of the innermost group, whose outer
// groups put its first term at `off` (`none`: one of them has no term).
template <typename I>
__device__ __forceinline__ void group_vec_at(const GroupArgs& p, const T* __restrict__ x, i64 off,
                                             bool none, i64 col, T (&v)[VEC]) {
    const Prog pr = group_prog<I>(p, (int)p.rank - 1, col, 0);
    off += pr.first;
    if (none || pr.count <= 0) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = from_acc((ACC)0);
    } else if (pr.count == 1) {
        if (((u64)(x + off) & 15) == 0) {
            load_vec(x + off, 0, v);
        } else {
#pragma unroll
            for (int k = 0; k < VEC; ++k) v[k] = x[off + k];
        }
    } else {
        ACC acc[VEC];
        const bool aligned = ((u64)(x + off) & 15) == 0 && ((pr.step * (i64)sizeof(T)) & 15) == 0;
        for (i64 t = 0; t < pr.count; ++t) {
            T w[VEC];
            const i64 at = off + t * pr.step;
            if (aligned) {
                load_vec(x + at, 0, w);
            } else {
#pragma unroll
                for (int k = 0; k < VEC; ++k) w[k] = x[at + k];
            }
#pragma unroll
            for (int k = 0; k < VEC; ++k) acc[k] = t == 0 ? to_acc(w[k]) : acc[k] + to_acc(w[k]);
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = from_acc(acc[k]);
    }
}

// The first term's offset of the groups of dims 0..dims-1 at coordinates
// c, and whether one of them has none.
template <typename I>
__device__ __forceinline__ i64 group_outer(const GroupArgs& p, const i64 (&c)[MAX_RANK], int dims,
                                           bool& none) {
    i64 off = p.base;
    none = false;
#pragma unroll
    for (int d = 0; d < MAX_RANK - 1; ++d) {
        if (d < dims && p.kind[d] != G_NONE) {
            const i64 o2 = p.kind[d] == G_DIAG ? coord_of(c, p.partner[d]) : 0;
            const Prog g = group_prog<I>(p, d, c[d], o2);
            if (g.count <= 0) none = true;
            off += g.first;
        }
    }
    return off;
}

// VEC consecutive outputs along the innermost dim per thread, stored as
// one 16-byte vector, for maps whose outer groups have at most one term
// and whose innermost group is G_AFFINE or G_MOD (a copy) or G_EVERY (a
// sum of `count` terms, repeat's backward) with the innermost x stride 1
// (G_MOD: a a multiple of VEC, so no vector wraps), or G_WINDOWS (unfold's
// backward) with a unit window-position stride and step and size
// multiples of VEC: along each aligned vector every term's offset steps
// by 1 and the terms' count and step stay. The host checks those,
// that the innermost output dim is contiguous and a multiple of VEC long
// and that y and its other strides keep 16-byte alignment. Each term loads
// as one vector where it lies at a 16-byte boundary, element by element
// otherwise; sums run over the terms in order, as group_gather's do.
template <typename I>
__device__ __forceinline__ void group_vec(const GroupArgs& p) {
    const T* __restrict__ x = (const T*)p.in;
    T* __restrict__ y = (T*)p.out;
    const int rank = (int)p.rank;
    const int last = rank - 1;
    const I groups = (I)(p.n / VEC);
    for (I g = (I)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
         g += (I)gridDim.x * blockDim.x) {
        i64 c[MAX_RANK];
        i64 oo;
        group_coords<I>(p, g * (I)VEC, rank, c, oo);
        bool none;
        const i64 off = group_outer<I>(p, c, last, none);
        T v[VEC];
        group_vec_at<I>(p, x, off, none, coord_of(c, (u32)last), v);
        store_vec(y + oo, 0, v);
    }
}

// The first term's offset of a row's outer groups, and whether one of
// them has none.
struct GroupRow {
    i64 off;
    bool none;
};

// group_vec with a warp per output row (vec_rows): the outer groups once
// per row. For copies (no sums) whose outer groups do not read the
// innermost coordinate (no diagonal partner there).
template <typename I>
__device__ __forceinline__ void group_vec_rows(const GroupArgs& p) {
    const T* __restrict__ x = (const T*)p.in;
    const int last = (int)p.rank - 1;
    vec_rows<I>(
        p.n, (i64)p.out_shape[last], (T*)p.out,
        [&](I r, i64& oo) {
            i64 c[MAX_RANK];
            group_coords<I>(p, r, last, c, oo);
            GroupRow w;
            w.off = group_outer<I>(p, c, last, w.none);
            return w;
        },
        [&](const GroupRow& w, i64 col, T(&v)[VEC]) { group_vec_at<I>(p, x, w.off, w.none, col, v); });
}

// Up to CAT_PIECES strided copies of one launch.
#define CAT_PIECES 8

struct CopyPiece {
    u64 src;
    u64 dst;
    u64 n;                  // words (CHUNK bytes each)
    u32 rank;
    u32 pad0;
    u64 shape[MAX_RANK];
    i64 src_stride[MAX_RANK]; // in words
    i64 dst_stride[MAX_RANK];
};

struct CopyArgs {
    u32 pieces;
    u32 pad0;
    CopyPiece piece[CAT_PIECES];
};

template <typename W, typename I>
__device__ __forceinline__ void copy_pieces(const CopyArgs& p) {
    const CopyPiece& c = p.piece[blockIdx.y];
    const W* __restrict__ src = (const W*)c.src;
    W* __restrict__ dst = (W*)c.dst;
    const I n = (I)c.n;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        I rem = i;
        i64 so = 0, d_o = 0;
#pragma unroll
        for (int d = MAX_RANK - 1; d >= 0; --d) {
            if (d < (int)c.rank) {
                const I ext = (I)c.shape[d];
                const i64 k = (i64)(rem % ext);
                rem /= ext;
                so += k * c.src_stride[d];
                d_o += k * c.dst_stride[d];
            }
        }
        dst[d_o] = src[so];
    }
}

// Up to CAT_PIECES2 copies of at most two dims (what most cat and stack
// pieces collapse to), in one launch: 32 inputs of a cat move in one.
#define CAT_PIECES2 36

struct CopyPiece2 {
    u64 src;
    u64 dst;
    u32 rows;
    u32 cols;               // words
    i64 src_stride[2];      // in words: rows, cols
    i64 dst_stride[2];
};

struct CopyArgs2 {
    u32 pieces;
    u32 pad0;
    CopyPiece2 piece[CAT_PIECES2];
};

template <typename W, typename I>
__device__ __forceinline__ void copy_pieces2(const CopyArgs2& p) {
    const CopyPiece2& c = p.piece[blockIdx.y];
    const W* __restrict__ src = (const W*)c.src;
    W* __restrict__ dst = (W*)c.dst;
    const I cols = (I)c.cols;
    const I n = (I)c.rows * cols;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        const I r = i / cols;
        const i64 k = (i64)(i - r * cols);
        dst[(i64)r * c.dst_stride[0] + k * c.dst_stride[1]] =
            src[(i64)r * c.src_stride[0] + k * c.src_stride[1]];
    }
}

#define GATHER_KERNELS(I, SUFFIX)                                                              \
    extern "C" __global__ void __launch_bounds__(256) shape_gather##SUFFIX(GatherArgs p) {     \
        gather_scalar<I>(p);                                                                   \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) shape_gather_vec##SUFFIX(GatherArgs p) { \
        gather_vec<I>(p);                                                                      \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) shape_gather_rows##SUFFIX(GatherArgs p) {\
        gather_rows<I>(p);                                                                     \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) shape_gather_vec_rows##SUFFIX(GatherArgs p) {\
        gather_vec_rows<I>(p);                                                                     \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256) shape_pad_bw##SUFFIX(GatherArgs p) {     \
        pad_bw<I>(p);                                                                          \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) shape_pad_bw_rows##SUFFIX(GatherArgs p) {\
        pad_bw_rows<I>(p);                                                                     \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) shape_group##SUFFIX(GroupArgs p) {       \
        group_gather<I>(p);                                                                    \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) shape_group_rows##SUFFIX(GroupArgs p) {  \
        group_rows<I>(p);                                                                      \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) shape_group_vec##SUFFIX(GroupArgs p) {   \
        group_vec<I>(p);                                                                       \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) shape_group_vec_rows##SUFFIX(GroupArgs p) {\
        group_vec_rows<I>(p);                                                                      \
    }
GATHER_KERNELS(u32, 32)
GATHER_KERNELS(u64, 64)

#define COPY_KERNELS(W, BYTES)                                                                  \
    extern "C" __global__ void __launch_bounds__(256) shape_copy##BYTES##_32(CopyArgs p) {     \
        copy_pieces<W, u32>(p);                                                                 \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) shape_copy##BYTES##_64(CopyArgs p) {     \
        copy_pieces<W, u64>(p);                                                                 \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) shape_copy2_##BYTES##_32(CopyArgs2 p) {  \
        copy_pieces2<W, u32>(p);                                                                \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) shape_copy2_##BYTES##_64(CopyArgs2 p) {  \
        copy_pieces2<W, u64>(p);                                                                \
    }
COPY_KERNELS(unsigned char, 1)
COPY_KERNELS(unsigned short, 2)
COPY_KERNELS(unsigned int, 4)
COPY_KERNELS(unsigned long long, 8)
COPY_KERNELS(uint4, 16)
