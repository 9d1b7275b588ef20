// norm.cu: LayerNorm and RMSNorm over the last h elements of each row,
// forward and backward, deterministic (no atomics).
//
// FW  per row: LayerNorm  mean = sum x / h, var = sum (x - mean)^2 / h,
//                         xhat = (x - mean) rstd, rstd = 1 / sqrt(var + eps)
//              RMSNorm    xhat = x rstd, rstd = 1 / sqrt(sum x^2 / h + eps)
//              y = xhat w + b (w = 1 and b = 0 when absent); mean and rstd
//              saved in ACC (f32, f64 for f64).
//     Residual form (norm_fw_res_*): the row normalized is s = x + r, added
//              in ACC and rounded to T (as the unfused s = x + r; norm(s)
//              rounds it), and s is written besides y. x and r are read
//              once; s may be written over r or x (each thread writes only
//              the elements it read, after reading them).
// BW  g = dy w; a = sum g xhat / h; c = sum g / h (LayerNorm only)
//              dx = rstd (g - c - xhat a)
//     dw[j] = sum_rows dy xhat, db[j] = sum_rows dy.
//     With a ds (the residual form's gradient of s from elsewhere),
//              dx = rstd (g - c - xhat a) + ds; dx may be written over ds.
//
// Work split:
//   norm_fw_v<V>, norm_bw_v<V>  the row in registers: one block per row,
//            each thread V 16-byte vectors (x read once; the two-pass
//            statistics are exact in registers). Taken when h is a multiple
//            of VEC, every row start is 16-byte aligned and h / VEC <=
//            512 * 8.
//   norm_fw_res_v<V>, norm_fw_res_loop  the same, residual form.
//   norm_fw_loop, norm_bw_loop  any h and alignment: one block per row,
//            element loads, x re-read from global (L2) per pass.
//   The backward runs `blocks` blocks, block k taking rows k, k + blocks,
//   ...: each thread owns fixed columns and accumulates dw/db for them over
//   its block's rows (registers, or its block's workspace row in the loop
//   kernel), then writes partial[k][j]. norm_bw_params sums the partials
//   of each column in block order into dw and db.
// Block reductions are `group_allreduce` (common/reduce.cuh), one barrier
// each: fixed order, so results are bitwise reproducible for a given shape
// and launch.
// Traffic: FW reads x (and w, b: L2-resident) once and writes y; BW reads x
// and dy once and writes dx, plus blocks * h * 4 bytes of partials each
// for dw and db. Memory bound: judged by TB/s against the copy ceiling.
// Row offsets are 64-bit over up to 8 outer strided dims.
// Specialised by: BARACUDA_DTYPE (T, ACC); BARACUDA_NORM (0 LayerNorm,
// 1 RMSNorm).
#include "common/dtype.cuh"
#include "common/reduce.cuh"

#ifndef BARACUDA_NORM
#error "BARACUDA_NORM must be defined (0 LayerNorm, 1 RMSNorm)"
#endif
#define LAYER (BARACUDA_NORM == 0)

// Mirrors `NormParams` in src/norm/norm.rs.
struct NormParams {
    const T* x;       // BW: the normalized input (the residual form's s)
    const T* dy;      // BW
    const T* r;       // FW residual form: r; BW: ds (null: absent)
    T* s;             // FW residual form: s = x + r
    T* out;           // FW y, BW dx (null: not asked)
    const T* w;       // null: absent
    const T* b;       // FW, null: absent
    ACC* mean;        // LayerNorm: FW writes, BW reads (null in FW: not saved)
    ACC* rstd;
    T* dw;            // BW (null: not asked)
    T* db;
    ACC* partial;     // BW: [blocks][h] for dw, then [blocks][h] for db
    u64 rows;
    u64 h;
    double eps;
    u64 shape[REDUCE_MAX_RANK];  // outer dims, innermost last
    i64 sx[REDUCE_MAX_RANK];     // row strides of x, out, dy
    i64 so[REDUCE_MAX_RANK];
    i64 sdy[REDUCE_MAX_RANK];
    i64 sr[REDUCE_MAX_RANK];     // row strides of r (FW) or ds (BW)
    i64 ss[REDUCE_MAX_RANK];     // row strides of s
    u32 rank;
    u32 blocks;       // BW blocks (partial rows)
};

struct Two {
    ACC a, b;
};

// a * b rounded on its own, never fused into a following add or subtract:
// the backward's g = dy w then enters g - mean(g) exactly as it entered
// mean(g), so a row whose g are all equal (one element) gives dx = 0.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

// Sum of `v` over the block, returned to every thread, with one barrier
// (group_allreduce). Consecutive calls alternate between two shared arrays
// (`phase` flips on each call; every thread of the block makes the same
// calls), so the barrier of one call orders the previous call's reads
// before the next call's writes.
__device__ __forceinline__ ACC block_sum(ACC v, u32& phase) {
    __shared__ ACC smem[2][32];
    v = group_allreduce(v, blockDim.x, [](ACC l, ACC h) { return l + h; }, smem[phase]);
    phase ^= 1u;
    return v;
}

// Sums of both fields over the block, returned to every thread, as
// block_sum.
__device__ __forceinline__ Two block_sum2(Two v, u32& phase) {
    __shared__ Two smem[2][32];
    v = group_allreduce(v, blockDim.x, [](Two l, Two h) { return Two{l.a + h.a, l.b + h.b}; }, smem[phase]);
    phase ^= 1u;
    return v;
}

__device__ __forceinline__ i64 row_off(const NormParams& p, u64 row, const i64* s) {
    return p.rank == 0 ? 0 : strided_offset(row, p.rank, p.shape, s);
}

// The row's rstd from its sum of squares `sq` (of deviations from the mean
// for LayerNorm), saved with the mean by the block's first thread.
__device__ __forceinline__ ACC finish_row(const NormParams& p, u64 row, ACC mean, ACC sq, ACC inv_h,
                                          u32& phase) {
    const ACC rstd = ACC(1) / sqrt(block_sum(sq, phase) * inv_h + ACC(p.eps));
    if (threadIdx.x == 0) {
        if (p.mean) p.mean[row] = mean;
        if (p.rstd) p.rstd[row] = rstd;
    }
    return rstd;
}

// ---------------------------------------------------------------------------
// Row in registers
// ---------------------------------------------------------------------------

// The thread's V vectors of row `r` (zeros past h), as stored.
template <int V>
__device__ __forceinline__ void load_row_raw(const T* __restrict__ r, u64 h, T (&v)[V][VEC]) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const u64 c = threadIdx.x + (u64)j * blockDim.x;
        if (c * VEC < h) {
            load_vec(r, c, v[j]);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; ++e) v[j][e] = from_acc(ACC(0));
        }
    }
}

// The same widened to ACC.
template <int V>
__device__ __forceinline__ void load_row(const T* __restrict__ r, u64 h, ACC (&v)[V][VEC]) {
    T t[V][VEC];
    load_row_raw<V>(r, h, t);
#pragma unroll
    for (int j = 0; j < V; ++j)
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[j][e] = to_acc(t[j][e]);
}

// The row normalized by the forward, as stored: x, or with RES s = x + r
// rounded to T, which is written to s.
template <int V, bool RES>
__device__ __forceinline__ void fw_row(const NormParams& p, u64 row, T (&v)[V][VEC]) {
    const u64 h = p.h;
    load_row_raw<V>(p.x + row_off(p, row, p.sx), h, v);
    if (!RES) return;
    T r[V][VEC];
    load_row_raw<V>(p.r + row_off(p, row, p.sr), h, r);
    T* s = p.s + row_off(p, row, p.ss);
#pragma unroll
    for (int j = 0; j < V; ++j) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[j][e] = from_acc(to_acc(v[j][e]) + to_acc(r[j][e]));
        const u64 c = threadIdx.x + (u64)j * blockDim.x;
        if (c * VEC < h) store_vec(s, c, v[j]);
    }
}

template <int V, bool RES>
__device__ __forceinline__ void fw_regs(const NormParams& p) {
    const u64 h = p.h;
    const ACC inv_h = ACC(1) / ACC(h);
    u32 phase = 0;
    for (u64 row = blockIdx.x; row < p.rows; row += gridDim.x) {
        // the row as stored (half the registers of ACC for 16-bit types),
        // widened where used
        T v[V][VEC];
        fw_row<V, RES>(p, row, v);
        ACC s = 0;
#pragma unroll
        for (int j = 0; j < V; ++j)
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                const ACC a = to_acc(v[j][e]);
                s += LAYER ? a : a * a;
            }
        ACC mean = 0, sq = s;
        if (LAYER) {
            mean = block_sum(s, phase) * inv_h;
            sq = 0;
#pragma unroll
            for (int j = 0; j < V; ++j) {
                const bool in = (threadIdx.x + (u64)j * blockDim.x) * VEC < h;
#pragma unroll
                for (int e = 0; e < VEC; ++e) {
                    const ACC d = to_acc(v[j][e]) - mean;
                    sq += in ? d * d : ACC(0);
                }
            }
        }
        const ACC rstd = finish_row(p, row, mean, sq, inv_h, phase);
        T* out = p.out + row_off(p, row, p.so);
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const u64 c = threadIdx.x + (u64)j * blockDim.x;
            if (c * VEC >= h) continue;
            T w[VEC], b[VEC], t[VEC];
            if (p.w) load_vec(p.w, c, w);
            if (p.b) load_vec(p.b, c, b);
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                ACC y = (to_acc(v[j][e]) - mean) * rstd;
                if (p.w) y *= to_acc(w[e]);
                if (p.b) y += to_acc(b[e]);
                t[e] = from_acc(y);
            }
            store_vec(out, c, t);
        }
    }
}

template <int V>
__device__ __forceinline__ void bw_regs(const NormParams& p) {
    const u64 h = p.h;
    const ACC inv_h = ACC(1) / ACC(h);
    ACC dw[V][VEC], db[V][VEC];
#pragma unroll
    for (int j = 0; j < V; ++j)
#pragma unroll
        for (int e = 0; e < VEC; ++e) dw[j][e] = db[j][e] = ACC(0);
    u32 phase = 0;
    for (u64 row = blockIdx.x; row < p.rows; row += p.blocks) {
        ACC x[V][VEC], g[V][VEC];
        load_row<V>(p.x + row_off(p, row, p.sx), h, x);
        load_row<V>(p.dy + row_off(p, row, p.sdy), h, g);
        const ACC mean = LAYER ? p.mean[row] : ACC(0);
        const ACC rstd = p.rstd[row];
        Two s{0, 0};
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const u64 c = threadIdx.x + (u64)j * blockDim.x;
            T w[VEC];
            if (p.w && c * VEC < h) load_vec(p.w, c, w);
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                const ACC xhat = (x[j][e] - mean) * rstd;
                const ACC dy = g[j][e];
                dw[j][e] += dy * xhat;
                if (LAYER) db[j][e] += dy;
                const ACC gg = (p.w && c * VEC < h) ? mul_rn(dy, to_acc(w[e])) : dy;
                x[j][e] = xhat;
                g[j][e] = gg;
                s.a += gg * xhat;
                s.b += gg;
            }
        }
        if (!p.out) continue;
        s = block_sum2(s, phase);
        const ACC a = s.a * inv_h, cm = LAYER ? s.b * inv_h : ACC(0);
        T* out = p.out + row_off(p, row, p.so);
        const T* ds = p.r ? p.r + row_off(p, row, p.sr) : nullptr;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const u64 c = threadIdx.x + (u64)j * blockDim.x;
            if (c * VEC >= h) continue;
            T t[VEC], d[VEC];
            if (ds) load_vec(ds, c, d);
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                const ACC v = rstd * (g[j][e] - cm - x[j][e] * a);
                t[e] = from_acc(ds ? v + to_acc(d[e]) : v);
            }
            store_vec(out, c, t);
        }
    }
    if (!p.partial) return;
    ACC* pw = p.partial + (u64)blockIdx.x * h;
    ACC* pb = p.partial + ((u64)p.blocks + blockIdx.x) * h;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const u64 c = threadIdx.x + (u64)j * blockDim.x;
        if (c * VEC >= h) continue;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            pw[c * VEC + e] = dw[j][e];
            if (LAYER && p.db) pb[c * VEC + e] = db[j][e];
        }
    }
}

#define REG_KERNELS(V)                                                                      \
    extern "C" __global__ void __launch_bounds__(512) norm_fw_v##V(const NormParams p) {   \
        fw_regs<V, false>(p);                                                               \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(512) norm_fw_res_v##V(const NormParams p) { \
        fw_regs<V, true>(p);                                                                \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(512) norm_bw_v##V(const NormParams p) {   \
        bw_regs<V>(p);                                                                      \
    }
REG_KERNELS(1)
REG_KERNELS(2)
REG_KERNELS(4)
REG_KERNELS(8)
#undef REG_KERNELS

// ---------------------------------------------------------------------------
// Any h and alignment
// ---------------------------------------------------------------------------

// The element-wise forward; with RES the first pass writes s = x + r and
// the later passes re-read s (the elements the same thread wrote).
template <bool RES>
__device__ __forceinline__ void fw_loop(const NormParams& p) {
    const u64 h = p.h;
    const ACC inv_h = ACC(1) / ACC(h);
    u32 phase = 0;
    for (u64 row = blockIdx.x; row < p.rows; row += gridDim.x) {
        const T* xin = p.x + row_off(p, row, p.sx);
        const T* r = RES ? p.r + row_off(p, row, p.sr) : nullptr;
        T* sum = RES ? p.s + row_off(p, row, p.ss) : nullptr;
        const T* x = RES ? sum : xin;
        ACC s = 0;
        for (u64 i = threadIdx.x; i < h; i += blockDim.x) {
            T t = xin[i];
            if (RES) {
                t = from_acc(to_acc(t) + to_acc(r[i]));
                sum[i] = t;
            }
            const ACC v = to_acc(t);
            s += LAYER ? v : v * v;
        }
        ACC mean = 0, sq = s;
        if (LAYER) {
            mean = block_sum(s, phase) * inv_h;
            sq = 0;
            for (u64 i = threadIdx.x; i < h; i += blockDim.x) {
                const ACC d = to_acc(x[i]) - mean;
                sq += d * d;
            }
        }
        const ACC rstd = finish_row(p, row, mean, sq, inv_h, phase);
        T* out = p.out + row_off(p, row, p.so);
        for (u64 i = threadIdx.x; i < h; i += blockDim.x) {
            ACC y = (to_acc(x[i]) - mean) * rstd;
            if (p.w) y *= to_acc(p.w[i]);
            if (p.b) y += to_acc(p.b[i]);
            out[i] = from_acc(y);
        }
    }
}

extern "C" __global__ void __launch_bounds__(512) norm_fw_loop(const NormParams p) { fw_loop<false>(p); }
extern "C" __global__ void __launch_bounds__(512) norm_fw_res_loop(const NormParams p) { fw_loop<true>(p); }

extern "C" __global__ void __launch_bounds__(512) norm_bw_loop(const NormParams p) {
    const u64 h = p.h;
    const ACC inv_h = ACC(1) / ACC(h);
    ACC* pw = p.partial ? p.partial + (u64)blockIdx.x * h : nullptr;
    ACC* pb = (p.partial && p.db) ? p.partial + ((u64)p.blocks + blockIdx.x) * h : nullptr;
    // Each thread owns columns threadIdx.x + k blockDim.x of its block's
    // partial rows: only it reads and writes them.
    for (u64 i = threadIdx.x; pw && i < h; i += blockDim.x) {
        pw[i] = ACC(0);
        if (pb) pb[i] = ACC(0);
    }
    u32 phase = 0;
    for (u64 row = blockIdx.x; row < p.rows; row += p.blocks) {
        const T* x = p.x + row_off(p, row, p.sx);
        const T* dy = p.dy + row_off(p, row, p.sdy);
        const ACC mean = LAYER ? p.mean[row] : ACC(0);
        const ACC rstd = p.rstd[row];
        Two s{0, 0};
        for (u64 i = threadIdx.x; i < h; i += blockDim.x) {
            const ACC xhat = (to_acc(x[i]) - mean) * rstd;
            const ACC d = to_acc(dy[i]);
            if (pw) pw[i] += d * xhat;
            if (pb) pb[i] += d;
            const ACC gg = p.w ? mul_rn(d, to_acc(p.w[i])) : d;
            s.a += gg * xhat;
            s.b += gg;
        }
        if (!p.out) continue;
        s = block_sum2(s, phase);
        const ACC a = s.a * inv_h, cm = LAYER ? s.b * inv_h : ACC(0);
        T* out = p.out + row_off(p, row, p.so);
        const T* ds = p.r ? p.r + row_off(p, row, p.sr) : nullptr;
        for (u64 i = threadIdx.x; i < h; i += blockDim.x) {
            const ACC xhat = (to_acc(x[i]) - mean) * rstd;
            const ACC d = to_acc(dy[i]);
            const ACC gg = p.w ? mul_rn(d, to_acc(p.w[i])) : d;
            const ACC v = rstd * (gg - cm - xhat * a);
            out[i] = from_acc(ds ? v + to_acc(ds[i]) : v);
        }
    }
}

// dw[j] = sum_k partial[k][j] and db[j] likewise, k in block order: a
// (32 x 8) block per 32 columns, each of the 8 thread rows summing a
// contiguous range of k, then the 8 sums in order.
extern "C" __global__ void __launch_bounds__(256) norm_bw_params(const NormParams p) {
    __shared__ ACC part[2][8][32];
    const u64 h = p.h;
    const u64 j = (u64)blockIdx.x * 32 + threadIdx.x;
    const u32 per = (p.blocks + 7) / 8;
    const u32 k0 = threadIdx.y * per;
    const u32 k1 = min(k0 + per, p.blocks);
    ACC sw = 0, sb = 0;
    if (j < h) {
        for (u32 k = k0; k < k1; ++k) {
            sw += p.partial[(u64)k * h + j];
            if (p.db) sb += p.partial[((u64)p.blocks + k) * h + j];
        }
    }
    part[0][threadIdx.y][threadIdx.x] = sw;
    part[1][threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y != 0 || j >= h) return;
    sw = 0;
    sb = 0;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        sw += part[0][r][threadIdx.x];
        sb += part[1][r][threadIdx.x];
    }
    if (p.dw) p.dw[j] = from_acc(sw);
    if (p.db) p.db[j] = from_acc(sb);
}
