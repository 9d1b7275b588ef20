// gemm_epilogue.cu: elementwise work around cuBLASLt matmuls, for what
// cuBLASLt's fused epilogues do not cover.
//
// bias_act   z = d[i,j] + bias[j]; aux[i,j] = z (optional); d[i,j] = act(z)
//            (act: 0 identity, 1 relu, 2 gelu_erf, 3 gelu_tanh), over every
//            entry of a strided batch
// dact       dz[i,j] = dy[i,j] * act'(z[i,j])          (row-major, ld given)
// col_sum    out[j] = sum_i x[i,j] of a row-major x, f32/f64 accumulation,
//            in two deterministic passes (col_sum_part, col_sum_fin below)
// scale_i32  out[i,j] = alpha * acc[i,j]               (int GEMM to f32/bf16)
// amax       out = max |d[i,j]| (atomicMax on the bits of a non-negative
//            float, so the result is order-independent)
// skinny_N   the whole linear forward for N <= 4 rows of X (decode), where
//            a tensor-core tile would waste its M dimension: see below
//
// Grid-stride loops over the m*n logical elements with 64-bit indices
// (m*n can pass 2^31). Memory bound: ~2-3 passes over D, judged by GB/s.
// Specialised by BARACUDA_DTYPE (common/dtype.cuh), the type of D.
#include "common/dtype.cuh"

typedef ACC Acc;

__device__ __forceinline__ Acc load(const T* p, long long i) { return to_acc(p[i]); }

__device__ __forceinline__ void store(T* p, long long i, Acc v) { p[i] = from_acc(v); }

__device__ __forceinline__ Acc act_fw(int act, Acc z) {
    const Acc k0 = (Acc)0.7978845608028654;   // sqrt(2/pi)
    const Acc k1 = (Acc)0.044715;
    switch (act) {
        case 1: return z > (Acc)0 ? z : (Acc)0;
        case 2: return (Acc)0.5 * z * ((Acc)1 + erf(z * (Acc)0.7071067811865476));
        case 3: return (Acc)0.5 * z * ((Acc)1 + tanh(k0 * (z + k1 * z * z * z)));
        default: return z;
    }
}

__device__ __forceinline__ Acc act_bw(int act, Acc z) {
    const Acc k0 = (Acc)0.7978845608028654;
    const Acc k1 = (Acc)0.044715;
    switch (act) {
        case 1: return z > (Acc)0 ? (Acc)1 : (Acc)0;
        case 2: {
            Acc cdf = (Acc)0.5 * ((Acc)1 + erf(z * (Acc)0.7071067811865476));
            Acc pdf = exp((Acc)-0.5 * z * z) * (Acc)0.3989422804014327;
            return cdf + z * pdf;
        }
        case 3: {
            Acc u = k0 * (z + k1 * z * z * z);
            Acc t = tanh(u);
            Acc du = k0 * ((Acc)1 + (Acc)3 * k1 * z * z);
            return (Acc)0.5 * ((Acc)1 + t) + (Acc)0.5 * z * ((Acc)1 - t * t) * du;
        }
        default: return (Acc)1;
    }
}

// Offset of logical element `idx` (row-major enumeration i*n + j) in a
// matrix with leading dimension ld stored row- or column-major.
__device__ __forceinline__ long long offset(long long i, long long j, long long ld, int row_major) {
    return row_major ? i * ld + j : j * ld + i;
}

// Entry b of a strided batch of `batch` matrices starts b * stride_d
// elements into d (b * stride_bias into bias, 0 sharing one vector;
// b * stride_aux into aux). Blocks stride over entries along y and over
// each entry's m*n elements along x, so a single GEMM (batch 1) pays no
// extra division.
extern "C" __global__ void bias_act(T* d, long long ldd, int row_major, long long m, long long n,
                                    const T* bias, int act, T* aux, long long ld_aux,
                                    long long batch, long long stride_d, long long stride_bias,
                                    long long stride_aux) {
    long long total = m * n;
    for (long long b = blockIdx.y; b < batch; b += gridDim.y) {
        T* db = d + b * stride_d;
        const T* bb = bias ? bias + b * stride_bias : nullptr;
        T* ab = aux ? aux + b * stride_aux : nullptr;
        for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
             idx += (long long)gridDim.x * blockDim.x) {
            // Enumerate along the contiguous axis so neighbouring threads
            // touch neighbouring addresses.
            long long i, j;
            if (row_major) { i = idx / n; j = idx % n; } else { j = idx / m; i = idx % m; }
            long long o = offset(i, j, ldd, row_major);
            Acc z = load(db, o);
            if (bb) z += load(bb, j);
            if (ab) store(ab, offset(i, j, ld_aux, row_major), z);
            store(db, o, act_fw(act, z));
        }
    }
}

extern "C" __global__ void dact(const T* dy, long long ldy, const T* z, long long ldz, T* dz,
                                long long lddz, long long m, long long n, int act) {
    long long total = m * n;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        long long i = idx / n, j = idx % n;
        Acc g = load(dy, i * ldy + j) * act_bw(act, load(z, i * ldz + j));
        store(dz, i * lddz + j, g);
    }
}

// col_sum_part: block (32, 8), grid (column tiles, row chunks). Thread
// (tx, ty) sums V contiguous columns (one 16-byte load when V > 1) over rows
// r0 + ty, r0 + ty + 8, ... of its block's chunk; the block then adds its 8
// row lanes in lane order and writes one value per column: the final sum
// when there is one chunk, else an Acc partial part[chunk, col] that
// col_sum_fin adds in chunk order. The result depends only on the shape and
// the grid, never on timing. Traffic: rows * cols elements read once, plus
// 2 * chunks * cols partials (about 1% for a [8192, 14336] dY).

template <int V>
__device__ __forceinline__ void col_sum_part_impl(const T* __restrict__ x, long long rows,
                                                  long long cols, long long ld, long long chunk,
                                                  Acc* __restrict__ part, T* __restrict__ out) {
    __shared__ Acc sh[8][32 * VEC];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long c0 = (long long)blockIdx.x * 32 * V + tx * V;
    const long long r0 = (long long)blockIdx.y * chunk;
    const long long r1 = r0 + chunk < rows ? r0 + chunk : rows;
    Acc acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = (Acc)0;
    // With V > 1 the host guarantees cols % V == 0, so a vector that starts
    // in range ends in range.
    if (c0 < cols) {
#pragma unroll 4
        for (long long r = r0 + ty; r < r1; r += 8) {
            if (V == 1) {
                acc[0] += load(x, r * ld + c0);
            } else {
                union { uint4 u; T e[V]; } w;
                w.u = *reinterpret_cast<const uint4*>(x + r * ld + c0);
#pragma unroll
                for (int v = 0; v < V; ++v) acc[v] += load(w.e, v);
            }
        }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) sh[ty][tx * V + v] = acc[v];
    __syncthreads();
    for (int c = ty * 32 + tx; c < 32 * V; c += 256) {
        const long long col = (long long)blockIdx.x * 32 * V + c;
        if (col >= cols) continue;
        Acc s = (Acc)0;
#pragma unroll
        for (int y = 0; y < 8; ++y) s += sh[y][c];
        if (gridDim.y == 1) store(out, col, s);
        else part[(long long)blockIdx.y * cols + col] = s;
    }
}

extern "C" __global__ void __launch_bounds__(256) col_sum_part_vec(
    const T* x, long long rows, long long cols, long long ld, long long chunk, Acc* part, T* out) {
    col_sum_part_impl<VEC>(x, rows, cols, ld, chunk, part, out);
}

extern "C" __global__ void __launch_bounds__(256) col_sum_part_1(
    const T* x, long long rows, long long cols, long long ld, long long chunk, Acc* part, T* out) {
    col_sum_part_impl<1>(x, rows, cols, ld, chunk, part, out);
}

extern "C" __global__ void col_sum_fin(const Acc* __restrict__ part, long long chunks,
                                       long long cols, T* __restrict__ out) {
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < cols;
         j += (long long)gridDim.x * blockDim.x) {
        Acc s = (Acc)0;
        for (long long k = 0; k < chunks; ++k) s += part[k * cols + j];
        store(out, j, s);
    }
}

extern "C" __global__ void scale_i32(const int* acc, long long ld_acc, T* out, long long ld_out,
                                     int row_major, long long m, long long n, float alpha) {
    long long total = m * n;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        long long i, j;
        if (row_major) { i = idx / n; j = idx % n; } else { j = idx / m; i = idx % m; }
        store(out, offset(i, j, ld_out, row_major),
              (Acc)((double)alpha * (double)acc[offset(i, j, ld_acc, row_major)]));
    }
}

extern "C" __global__ void amax_init(unsigned int* out) { *out = 0u; }

extern "C" __global__ void amax(const T* d, long long ldd, int row_major, long long m, long long n,
                                unsigned int* out) {
    long long total = m * n;
    float best = 0.0f;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        long long i, j;
        if (row_major) { i = idx / n; j = idx % n; } else { j = idx / m; i = idx % m; }
        best = fmaxf(best, fabsf((float)load(d, offset(i, j, ldd, row_major))));
    }
    for (int s = 16; s > 0; s >>= 1) best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, s));
    // |x| >= 0, so the IEEE bit patterns order like the values.
    if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(best));
}

// skinny_TOK: Z[t, r] = sum_k X[t, k] W[r, k] (+ b[r]), aux[t, r] = Z (when
// given), Y[t, r] = act(Z), for t < TOK (1..4) rows of a row-major packed
// X [TOK, K], W [N, K], Y and aux [TOK, N]; K a multiple of VEC and X, W
// 16-byte aligned (the plan checks both).
//
// A group of SKINNY_SPLIT warps owns SKINNY_ROWS consecutive rows of W;
// warp g of the group sums the g-th of SKINNY_SPLIT contiguous slices of
// K (split-K inside the block: 4x the warps of one warp per row group, so
// the rows of a 14336-output layer give 1792 blocks of 256 threads, and
// each warp streams a quarter of a row). Lane l reads the slice's 16-byte
// vectors l, l + 32, l + 64, ... of each of its rows, SKINNY_UNROLL
// iterations at a time (every W load of those iterations is issued before
// any FMA: SKINNY_UNROLL * SKINNY_ROWS loads in flight per lane), and the
// matching vectors of X through the read-only cache (X is TOK * K elements,
// L1/L2-resident, read by every warp). Acc accumulation per (row, token) in
// a fixed lane order, a butterfly shuffle over the 32 lanes, then the
// group's first warp adds the SKINNY_SPLIT slice sums in slice order from
// shared memory: the sum's order depends only on K, so results are
// bit-stable run to run. Its lane t * SKINNY_ROWS + r writes (t, r).
// Groups past N (the last block of an N not a multiple of 8) read row
// N - 1 and store nothing; every warp reaches the block barrier.
//
// Traffic: N*K elements of W once, TOK*K of X per warp from cache, TOK*N
// outputs (and aux). Decode (TOK = 1, bf16 4096 -> 14336): 117 MB of W,
// so the kernel is judged by W bytes per second against HBM bandwidth.
// The shape (SKINNY_ROWS, SKINNY_SPLIT, SKINNY_UNROLL, SKINNY_WARPS) comes
// from the plan (epilogue.rs), which sizes the grid from the same numbers.
#if !defined(SKINNY_ROWS) || !defined(SKINNY_SPLIT) || !defined(SKINNY_UNROLL) || \
    !defined(SKINNY_WARPS)
#error "the skinny kernel's shape must be defined (epilogue.rs `spec`)"
#endif

__device__ __forceinline__ void dot_vec(Acc& acc, const uint4& w, const uint4& x) {
    T wv[VEC], xv[VEC];
    memcpy(wv, &w, 16);
    memcpy(xv, &x, 16);
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc += load(wv, e) * load(xv, e);
}

template <int TOK>
__device__ __forceinline__ void skinny_impl(const T* __restrict__ x, const T* __restrict__ w,
                                            const T* __restrict__ bias, T* __restrict__ y,
                                            T* __restrict__ aux, long long n, long long k, int act) {
    constexpr int GROUPS = SKINNY_WARPS / SKINNY_SPLIT;
    constexpr int OUTS = TOK * SKINNY_ROWS;  // (token, row) sums per group, <= 16 lanes
    __shared__ Acc part[SKINNY_WARPS][OUTS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int group = warp / SKINNY_SPLIT, slice = warp % SKINNY_SPLIT;
    const long long row0 = ((long long)blockIdx.x * GROUPS + group) * SKINNY_ROWS;
    const long long kv = k / VEC;
    const long long per = (kv + SKINNY_SPLIT - 1) / SKINNY_SPLIT;
    const long long j_lo = slice * per, j_hi = min(kv, j_lo + per);
    const uint4* wv = reinterpret_cast<const uint4*>(w);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    Acc acc[TOK][SKINNY_ROWS];
#pragma unroll
    for (int t = 0; t < TOK; ++t)
#pragma unroll
        for (int r = 0; r < SKINNY_ROWS; ++r) acc[t][r] = (Acc)0;
    long long rows[SKINNY_ROWS];
#pragma unroll
    for (int r = 0; r < SKINNY_ROWS; ++r) rows[r] = (row0 + r < n ? row0 + r : n - 1) * kv;
    for (long long j0 = j_lo + lane; j0 < j_hi; j0 += 32 * SKINNY_UNROLL) {
        uint4 wr[SKINNY_UNROLL][SKINNY_ROWS];
#pragma unroll
        for (int u = 0; u < SKINNY_UNROLL; ++u) {
            const long long j = j0 + 32 * u;
#pragma unroll
            for (int r = 0; r < SKINNY_ROWS; ++r)
                wr[u][r] = j < j_hi ? wv[rows[r] + j] : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < SKINNY_UNROLL; ++u) {
            const long long j = j0 + 32 * u;
            if (j < j_hi) {
#pragma unroll
                for (int t = 0; t < TOK; ++t) {
                    const uint4 xr = __ldg(xv + t * kv + j);
#pragma unroll
                    for (int r = 0; r < SKINNY_ROWS; ++r) dot_vec(acc[t][r], wr[u][r], xr);
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < TOK; ++t)
#pragma unroll
        for (int r = 0; r < SKINNY_ROWS; ++r) {
#pragma unroll
            for (int s = 16; s > 0; s >>= 1) acc[t][r] += __shfl_xor_sync(0xffffffffu, acc[t][r], s);
            if (lane == 0) part[warp][t * SKINNY_ROWS + r] = acc[t][r];
        }
    __syncthreads();
    if (slice == 0 && lane < OUTS) {
        const int t = lane / SKINNY_ROWS;
        const long long row = row0 + lane % SKINNY_ROWS;
        if (row < n) {
            Acc z = (Acc)0;
#pragma unroll
            for (int s = 0; s < SKINNY_SPLIT; ++s) z += part[warp + s][lane];
            if (bias) z += load(bias, row);
            if (aux) store(aux, t * n + row, z);
            store(y, t * n + row, act_fw(act, z));
        }
    }
}

#define SKINNY_KERNEL(TOK)                                                                        \
    extern "C" __global__ void __launch_bounds__(32 * SKINNY_WARPS)                               \
        skinny_##TOK(const T* x, const T* w, const T* bias, T* y, T* aux, long long n, long long k, \
                     int act) {                                                                   \
        skinny_impl<TOK>(x, w, bias, y, aux, n, k, act);                                          \
    }
SKINNY_KERNEL(1)
SKINNY_KERNEL(2)
SKINNY_KERNEL(3)
SKINNY_KERNEL(4)
