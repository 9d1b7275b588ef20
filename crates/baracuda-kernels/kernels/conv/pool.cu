// pool.cu: generic N-d pooling (spatial rank 1..3, padded to 3 with unit
// axes), forward and backward, channels-first or channels-last.
//
// Windows, per spatial axis (o = output index, i = input index):
//   window modes   taps start + j*dl, j < k, start = o*s - p; clipped to
//                  [0, in); the padded extent ends at in + pe (end padding)
//   adaptive modes start = floor(o*in/out), end = ceil((o+1)*in/out)
// FW  max      y = max over window (NaN wins, as in PyTorch); idx = flat
//              spatial input index of the max (first one on ties)
//     avg      y = sum over window / divisor, divisor = divisor_override,
//              else the window clipped to [-p, in+p) (count_include_pad),
//              else the number of in-bounds elements
//     lp       y = (sum x^p / pool * k_prod)^(1/p), pool as avg with
//              count_include_pad (PyTorch's avg_pool(x^p) * k_prod form)
// BW  gather: one thread per input element sums over the outputs whose
//     window holds it (no atomics, so deterministic):
//     max      dx = sum dy[o] where idx[o] == i
//     avg      dx = sum dy[o] / divisor(o)
//     lp       dx = sum dy[o] * (k_prod/pool(o)) * x^(p-1) * y[o]^(1-p)
//
// Generic kernels (pool_fw, pool_bw): one thread per output (FW) / input
// (BW) element, grid-stride, in physical memory order so channels-last is
// coalesced over channels; 64-bit indices; every mode and layout.
//
// Fast paths, picked by the host when every element count fits in 31 bits:
//   pool_{fw,bw}_cl_v{1,N}  max / avg windows, channels-last: one thread per
//       (n, spatial, V channels), 32-bit index math, V-wide (16-byte) loads
//       and stores when channels % V == 0 and the pointers are 16-byte
//       aligned (V = 16 / sizeof(T)); dilation 1 only. The backward is still a gather
//       (deterministic): the outputs whose window holds input i along an
//       axis are exactly o in [ceil((i+p-k+1)/s), min((i+p)/s, out-1)], so
//       no membership re-check; max adds dy[o] where idx[o] == i.
//   pool_fw_global_avg_v{1,N}  global average (adaptive avg to 1x1(x1), or
//       an avg window covering the whole input with no padding and no
//       divisor override): y[n, c] = (sum_sp x[n, c, sp]) / prod(in), sums
//       in f32 (f64 for f64), one division, rounded once on the store.
//       Channels-last: a block of (32, 8) threads owns 32 channel-vectors
//       of one sample (tx = vector, coalesced across the warp; blocks fold
//       (n, channel block) into blockIdx.x, grid-stride); ty strides the
//       spatial positions, then a fixed-order shared-memory tree over ty
//       (8 -> 4 -> 2 -> 1) combines the partial sums, so the result does
//       not depend on the grid. vN needs channels % V == 0 and aligned x, y.
//       Channels-first: a warp per (n, c) plane reads the contiguous plane
//       (V-wide when prod(in) % V == 0 and x is aligned), lane partials are
//       combined by a fixed __shfl_down tree, lane 0 stores.
//       E.g. [64, 2048, 7, 7] bf16 channels-last: 512 blocks of 256 threads,
//       each thread ~6 16-byte loads (vs 49 dependent loads per thread on
//       16384 threads in pool_fw_cl); reads 12.8 MB, writes 256 KB.
//   pool_bw_global_avg_v{1,N}  global average (same cases as the forward):
//       dx = dy / prod(in), a pure broadcast, V-wide stores.
// Traffic ~ (in + out) * b bytes (+ 8 bytes per index): memory bound
// except for large windows. E.g. MaxPool 3x3 s2 on [64,64,112,112] bf16:
// FW reads 103 MB, writes 26 MB + 103 MB of i64 indices; BW reads 26 MB dy
// + 103 MB indices (each output is read by ~2.25 inputs, mostly from L2)
// and writes 103 MB dx.
// Specialised by: BARACUDA_DTYPE (common/dtype.cuh).
#include "common/dtype.cuh"

#define MODE_MAX 0
#define MODE_AVG 1
#define MODE_LP 2
#define MODE_ADAPTIVE_AVG 3
#define MODE_ADAPTIVE_MAX 4

struct PoolParams {
    long long n_out;        // batch * channels * prod(out)
    long long n_in;         // batch * channels * prod(in)
    int batch, channels;
    int in[3], out[3], k[3], s[3], p[3], pe[3], dl[3];
    int mode;
    int channels_last;
    int count_include_pad;
    int divisor_override;   // 0: none
    float norm_p;           // lp only
    int has_indices;
};

static __device__ __forceinline__ bool adaptive(const PoolParams& P) {
    return P.mode == MODE_ADAPTIVE_AVG || P.mode == MODE_ADAPTIVE_MAX;
}

// Window of output o along axis a: [lo, hi) clipped to the input, plus the
// unclipped pooling extent used by count_include_pad.
static __device__ __forceinline__ void window(const PoolParams& P, int a, int o, int& lo, int& hi,
                                              int& padded) {
    if (adaptive(P)) {
        lo = (int)(((long long)o * P.in[a]) / P.out[a]);
        hi = (int)(((long long)(o + 1) * P.in[a] + P.out[a] - 1) / P.out[a]);
        padded = hi - lo;
        return;
    }
    const int dl = P.dl[a];
    int start = o * P.s[a] - P.p[a];
    int end = min(start + (P.k[a] - 1) * dl + 1, P.in[a] + P.pe[a]);
    padded = (end - start + dl - 1) / dl;
    lo = start >= 0 ? start : start + ((dl - 1 - start) / dl) * dl;  // first tap >= 0
    hi = min(end, P.in[a]);
}

// Taps of a clipped window [lo, hi) along axis a.
static __device__ __forceinline__ int taps(const PoolParams& P, int a, int lo, int hi) {
    return hi > lo ? (hi - lo + P.dl[a] - 1) / P.dl[a] : 0;
}

// The coordinates `at` of flat spatial index sp over extents ext, in the
// index type I of the caller: the channels-last paths index in 32 bits,
// whose divisions cost a fraction of 64-bit ones.
template <typename I>
static __device__ __forceinline__ void coords(I sp, const int ext[3], int at[3]) {
    at[0] = (int)(sp / ((I)ext[1] * ext[2]));
    at[1] = (int)((sp / ext[2]) % ext[1]);
    at[2] = (int)(sp % ext[2]);
}

// Decompose physical index i of a tensor with spatial extents ext into
// (n, c, flat spatial sp, its coordinates at).
static __device__ __forceinline__ void decompose(const PoolParams& P, long long i, const int ext[3],
                                                 long long& n, int& c, long long& sp, int at[3]) {
    const long long sp_n = (long long)ext[0] * ext[1] * ext[2];
    if (P.channels_last) {
        c = (int)(i % P.channels);
        long long t = i / P.channels;
        sp = t % sp_n;
        n = t / sp_n;
    } else {
        sp = i % sp_n;
        long long t = i / sp_n;
        c = (int)(t % P.channels);
        n = t / P.channels;
    }
    coords(sp, ext, at);
}

static __device__ __forceinline__ long long address(const PoolParams& P, long long n, int c,
                                                    long long sp, long long sp_n) {
    return P.channels_last ? (n * sp_n + sp) * P.channels + c
                           : (n * P.channels + c) * sp_n + sp;
}

static __device__ __forceinline__ ACC divisor(const PoolParams& P, const int lo[3], const int hi[3],
                                              const int padded[3]) {
    if (P.mode == MODE_AVG && P.divisor_override > 0) return (ACC)P.divisor_override;
    if (P.mode == MODE_LP || (P.mode == MODE_AVG && P.count_include_pad))
        return (ACC)padded[0] * (ACC)padded[1] * (ACC)padded[2];
    return (ACC)taps(P, 0, lo[0], hi[0]) * (ACC)taps(P, 1, lo[1], hi[1]) *
           (ACC)taps(P, 2, lo[2], hi[2]);
}

extern "C" __global__ void pool_fw(PoolParams P, const T* __restrict__ x, T* __restrict__ y,
                                   long long* __restrict__ idx) {
    const long long in_sp = (long long)P.in[0] * P.in[1] * P.in[2];
    const ACC k_prod = (ACC)P.k[0] * (ACC)P.k[1] * (ACC)P.k[2];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < P.n_out;
         i += (long long)gridDim.x * blockDim.x) {
        long long n, osp;
        int c, o[3];
        decompose(P, i, P.out, n, c, osp, o);
        int lo[3], hi[3], padded[3];
        for (int a = 0; a < 3; ++a) window(P, a, o[a], lo[a], hi[a], padded[a]);
        const T* xp = x + (P.channels_last ? n * in_sp * P.channels + c : (n * P.channels + c) * in_sp);
        const long long step = P.channels_last ? P.channels : 1;
        if (P.mode == MODE_MAX || P.mode == MODE_ADAPTIVE_MAX) {
            ACC m = (ACC)__int_as_float(0xff800000);  // -inf
            long long arg = (long long)lo[0] * P.in[1] * P.in[2] + (long long)lo[1] * P.in[2] + lo[2];
            for (int d = lo[0]; d < hi[0]; d += P.dl[0])
                for (int h = lo[1]; h < hi[1]; h += P.dl[1])
                    for (int w = lo[2]; w < hi[2]; w += P.dl[2]) {
                        long long sp = ((long long)d * P.in[1] + h) * P.in[2] + w;
                        ACC v = to_acc(xp[sp * step]);
                        if (v > m || v != v) {
                            m = v;
                            arg = sp;
                        }
                    }
            y[i] = from_acc(m);
            if (P.has_indices) idx[i] = arg;
        } else {
            ACC sum = (ACC)0;
            ACC pw = (ACC)P.norm_p;
            for (int d = lo[0]; d < hi[0]; d += P.dl[0])
                for (int h = lo[1]; h < hi[1]; h += P.dl[1])
                    for (int w = lo[2]; w < hi[2]; w += P.dl[2]) {
                        long long sp = ((long long)d * P.in[1] + h) * P.in[2] + w;
                        ACC v = to_acc(xp[sp * step]);
                        sum += P.mode == MODE_LP ? m_pow(v, pw) : v;
                    }
            ACC div = divisor(P, lo, hi, padded);
            ACC r = sum / div;
            if (P.mode == MODE_LP) r = m_pow(r * k_prod, (ACC)1 / pw);
            y[i] = from_acc(r);
        }
    }
}

extern "C" __global__ void pool_bw(PoolParams P, const T* __restrict__ dy,
                                   const long long* __restrict__ idx, const T* __restrict__ x,
                                   const T* __restrict__ y, T* __restrict__ dx) {
    const long long out_sp = (long long)P.out[0] * P.out[1] * P.out[2];
    const ACC k_prod = (ACC)P.k[0] * (ACC)P.k[1] * (ACC)P.k[2];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < P.n_in;
         i += (long long)gridDim.x * blockDim.x) {
        long long n, isp;
        int c, ii[3];
        decompose(P, i, P.in, n, c, isp, ii);
        // Candidate output ranges per axis; membership is re-checked below.
        int olo[3], ohi[3];
        for (int a = 0; a < 3; ++a) {
            if (adaptive(P)) {
                olo[a] = max(0, (int)(((long long)ii[a] * P.out[a]) / P.in[a]) - 1);
                ohi[a] = min(P.out[a] - 1, (int)(((long long)(ii[a] + 1) * P.out[a]) / P.in[a]) + 1);
            } else {
                int t = ii[a] + P.p[a];
                int span = (P.k[a] - 1) * P.dl[a] + 1;
                olo[a] = t < span ? 0 : (t - span) / P.s[a] + 1;
                ohi[a] = min(t / P.s[a], P.out[a] - 1);
            }
        }
        ACC xv = (P.mode == MODE_LP) ? to_acc(x[i]) : (ACC)0;
        ACC pw = (ACC)P.norm_p;
        ACC acc = (ACC)0;
        for (int od = olo[0]; od <= ohi[0]; ++od)
            for (int oh = olo[1]; oh <= ohi[1]; ++oh)
                for (int ow = olo[2]; ow <= ohi[2]; ++ow) {
                    int o[3] = {od, oh, ow};
                    int lo[3], hi[3], padded[3];
                    bool inside = true;
                    for (int a = 0; a < 3; ++a) {
                        window(P, a, o[a], lo[a], hi[a], padded[a]);
                        inside = inside && ii[a] >= lo[a] && ii[a] < hi[a] &&
                                 (ii[a] - lo[a]) % P.dl[a] == 0;
                    }
                    if (!inside) continue;
                    long long osp = ((long long)od * P.out[1] + oh) * P.out[2] + ow;
                    long long oa = address(P, n, c, osp, out_sp);
                    ACC g = to_acc(dy[oa]);
                    if (P.mode == MODE_MAX || P.mode == MODE_ADAPTIVE_MAX) {
                        if (idx[oa] == isp) acc += g;
                    } else if (P.mode == MODE_LP) {
                        ACC yv = to_acc(y[oa]);
                        ACC scale = k_prod / divisor(P, lo, hi, padded);
                        acc += g * scale * m_pow(xv, pw - (ACC)1) * m_pow(yv, (ACC)1 - pw);
                    } else {
                        acc += g / divisor(P, lo, hi, padded);
                    }
                }
        dx[i] = from_acc(acc);
    }
}

// ---------------------------------------------------------------------------
// Fast paths (32-bit index math; see the header).
// ---------------------------------------------------------------------------

#define VEC_MAX (16 / (int)sizeof(T))

template <int V>
struct alignas(sizeof(T) * V) Pack {
    T v[V];
};

// Where item t of a channels-last fast path sits: channel vector ci of
// cv, row r = n * prod(ext) + sp over the spatial extents `ext`, and sp's
// coordinates.
struct ClItem {
    int ci, r, sp, n;
    int at[3];
};

static __device__ __forceinline__ ClItem cl_item(int t, int cv, const int ext[3]) {
    ClItem it;
    const int sp_count = ext[0] * ext[1] * ext[2];
    it.ci = t % cv;
    it.r = t / cv;
    it.sp = it.r % sp_count;
    it.n = it.r / sp_count;
    coords(it.sp, ext, it.at);
    return it;
}

template <int V>
static __device__ __forceinline__ void pool_fw_cl(const PoolParams& P, const T* __restrict__ x,
                                                  T* __restrict__ y, long long* __restrict__ idx) {
    const int C = P.channels;
    const int in_sp = P.in[0] * P.in[1] * P.in[2];
    const int total = P.batch * (P.out[0] * P.out[1] * P.out[2]) * (C / V);
    const bool is_max = P.mode == MODE_MAX;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
        const ClItem it = cl_item(t, C / V, P.out);
        const int ci = it.ci, r = it.r, n = it.n;
        const int* o = it.at;
        int lo[3], hi[3], padded[3];
        for (int a = 0; a < 3; ++a) window(P, a, o[a], lo[a], hi[a], padded[a]);
        const T* xp = x + n * in_sp * C + ci * V;
        const int yo = r * C + ci * V;
        ACC acc[V];
        int arg[V];
        const int first = (lo[0] * P.in[1] + lo[1]) * P.in[2] + lo[2];
        for (int k = 0; k < V; ++k) {
            acc[k] = is_max ? (ACC)__int_as_float(0xff800000) : (ACC)0;
            arg[k] = first;
        }
        for (int d = lo[0]; d < hi[0]; ++d)
            for (int h = lo[1]; h < hi[1]; ++h)
                for (int w = lo[2]; w < hi[2]; ++w) {
                    const int sp = (d * P.in[1] + h) * P.in[2] + w;
                    const Pack<V> pk = *reinterpret_cast<const Pack<V>*>(xp + sp * C);
#pragma unroll
                    for (int k = 0; k < V; ++k) {
                        const ACC v = to_acc(pk.v[k]);
                        if (is_max) {
                            if (v > acc[k] || v != v) {
                                acc[k] = v;
                                arg[k] = sp;
                            }
                        } else {
                            acc[k] += v;
                        }
                    }
                }
        Pack<V> out;
        const ACC div = is_max ? (ACC)1 : divisor(P, lo, hi, padded);
#pragma unroll
        for (int k = 0; k < V; ++k) out.v[k] = from_acc(is_max ? acc[k] : acc[k] / div);
        *reinterpret_cast<Pack<V>*>(y + yo) = out;
        if (is_max && P.has_indices) {
#pragma unroll
            for (int k = 0; k < V; ++k) idx[yo + k] = arg[k];
        }
    }
}

template <int V>
static __device__ __forceinline__ void pool_bw_cl(const PoolParams& P, const T* __restrict__ dy,
                                                  const long long* __restrict__ idx, T* __restrict__ dx) {
    const int C = P.channels;
    const int out_sp = P.out[0] * P.out[1] * P.out[2];
    const int total = P.batch * (P.in[0] * P.in[1] * P.in[2]) * (C / V);
    const bool is_max = P.mode == MODE_MAX;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
        const ClItem it = cl_item(t, C / V, P.in);
        const int ci = it.ci, r = it.r, isp = it.sp, n = it.n;
        const int* ii = it.at;
        int olo[3], ohi[3];
        for (int a = 0; a < 3; ++a) {
            const int q = ii[a] + P.p[a];
            olo[a] = q < P.k[a] ? 0 : (q - P.k[a]) / P.s[a] + 1;
            ohi[a] = min(q / P.s[a], P.out[a] - 1);
        }
        ACC acc[V];
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = (ACC)0;
        const int obase = n * out_sp;
        for (int od = olo[0]; od <= ohi[0]; ++od)
            for (int oh = olo[1]; oh <= ohi[1]; ++oh)
                for (int ow = olo[2]; ow <= ohi[2]; ++ow) {
                    const int osp = (od * P.out[1] + oh) * P.out[2] + ow;
                    const int oa = (obase + osp) * C + ci * V;
                    const Pack<V> g = *reinterpret_cast<const Pack<V>*>(dy + oa);
                    if (is_max) {
#pragma unroll
                        for (int k = 0; k < V; ++k)
                            if (idx[oa + k] == isp) acc[k] += to_acc(g.v[k]);
                    } else {
                        const int o[3] = {od, oh, ow};
                        int lo[3], hi[3], padded[3];
                        for (int a = 0; a < 3; ++a) window(P, a, o[a], lo[a], hi[a], padded[a]);
                        const ACC inv = (ACC)1 / divisor(P, lo, hi, padded);
#pragma unroll
                        for (int k = 0; k < V; ++k) acc[k] += to_acc(g.v[k]) * inv;
                    }
                }
        Pack<V> out;
#pragma unroll
        for (int k = 0; k < V; ++k) out.v[k] = from_acc(acc[k]);
        *reinterpret_cast<Pack<V>*>(dx + r * C + ci * V) = out;
    }
}

// dx = dy / prod(in): every input of a plane gets its plane's gradient.
// Channels-last with V > 1 needs channels % V == 0 (V channels of one
// position share n); channels-first with V > 1 needs prod(in) % V == 0
// (V positions share one plane).
template <int V>
static __device__ __forceinline__ void pool_bw_global_avg(const PoolParams& P, const T* __restrict__ dy,
                                                          T* __restrict__ dx) {
    const int C = P.channels;
    const int in_sp = P.in[0] * P.in[1] * P.in[2];
    const int total = (int)(P.n_in / V);
    const ACC inv = (ACC)1 / (ACC)in_sp;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
        const int e = t * V;
        Pack<V> out;
        if (P.channels_last) {
            const int c0 = e % C;
            const int n = e / (C * in_sp);
            const Pack<V> g = *reinterpret_cast<const Pack<V>*>(dy + n * C + c0);
#pragma unroll
            for (int k = 0; k < V; ++k) out.v[k] = from_acc(to_acc(g.v[k]) * inv);
        } else {
            const ACC g = to_acc(dy[e / in_sp]) * inv;
#pragma unroll
            for (int k = 0; k < V; ++k) out.v[k] = from_acc(g);
        }
        *reinterpret_cast<Pack<V>*>(dx + e) = out;
    }
}

// Block shape of the channels-last global-average forward: GA_TX
// channel-vectors by GA_TY spatial strides (the host launches (32, 8)).
#define GA_TX 32
#define GA_TY 8

// y[n, c] = sum_sp x[n, c, sp] / prod(in). See the header for the split.
// Channels-last with V > 1 needs channels % V == 0; channels-first with
// V > 1 needs prod(in) % V == 0 (V positions of one plane per load).
template <int V>
static __device__ __forceinline__ void pool_fw_global_avg(const PoolParams& P, const T* __restrict__ x,
                                                          T* __restrict__ y) {
    const int C = P.channels;
    const int in_sp = P.in[0] * P.in[1] * P.in[2];
    const ACC div = (ACC)in_sp;
    if (P.channels_last) {
        __shared__ ACC part[GA_TY][V][GA_TX];
        const int tx = threadIdx.x, ty = threadIdx.y;
        const int cv = C / V;
        const int cblocks = (cv + GA_TX - 1) / GA_TX;
        const int total = P.batch * cblocks;
        // b is block-uniform, so every thread reaches each __syncthreads.
        for (int b = blockIdx.x; b < total; b += gridDim.x) {
            const int n = b / cblocks;
            const int ci = (b % cblocks) * GA_TX + tx;
            const bool live = ci < cv;
            ACC acc[V];
#pragma unroll
            for (int k = 0; k < V; ++k) acc[k] = (ACC)0;
            if (live) {
                const T* xp = x + n * in_sp * C + ci * V;
                for (int sp = ty; sp < in_sp; sp += GA_TY) {
                    const Pack<V> pk = *reinterpret_cast<const Pack<V>*>(xp + sp * C);
#pragma unroll
                    for (int k = 0; k < V; ++k) acc[k] += to_acc(pk.v[k]);
                }
            }
#pragma unroll
            for (int k = 0; k < V; ++k) part[ty][k][tx] = acc[k];
            __syncthreads();
            // Fixed-order tree over ty; row ty is rewritten only by its own
            // thread, after the rows it read were final (sync above).
#pragma unroll
            for (int s = GA_TY / 2; s > 0; s >>= 1) {
                if (ty < s) {
#pragma unroll
                    for (int k = 0; k < V; ++k) {
                        acc[k] += part[ty + s][k][tx];
                        part[ty][k][tx] = acc[k];
                    }
                }
                __syncthreads();
            }
            // The sum sits in ty == 0's registers; every shared read of
            // this iteration happened before the last sync, so the next
            // iteration's writes cannot race with them.
            if (ty == 0 && live) {
                Pack<V> out;
#pragma unroll
                for (int k = 0; k < V; ++k) out.v[k] = from_acc(acc[k] / div);
                *reinterpret_cast<Pack<V>*>(y + n * C + ci * V) = out;
            }
        }
    } else {
        const int lane = threadIdx.x % 32;
        const int warps = (int)(gridDim.x * blockDim.x / 32);
        const int planes = P.batch * C;
        const int nv = in_sp / V;
        // plane is warp-uniform (blockDim.x is a multiple of 32), so the
        // full-mask shuffles see every lane.
        for (int plane = (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32); plane < planes;
             plane += warps) {
            const T* xp = x + plane * in_sp;
            ACC acc = (ACC)0;
            for (int i = lane; i < nv; i += 32) {
                const Pack<V> pk = *reinterpret_cast<const Pack<V>*>(xp + i * V);
#pragma unroll
                for (int k = 0; k < V; ++k) acc += to_acc(pk.v[k]);
            }
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
            if (lane == 0) y[plane] = from_acc(acc / div);
        }
    }
}

extern "C" __global__ void pool_fw_cl_v1(PoolParams P, const T* __restrict__ x, T* __restrict__ y,
                                         long long* __restrict__ idx) {
    pool_fw_cl<1>(P, x, y, idx);
}
extern "C" __global__ void pool_fw_cl_vn(PoolParams P, const T* __restrict__ x, T* __restrict__ y,
                                         long long* __restrict__ idx) {
    pool_fw_cl<VEC_MAX>(P, x, y, idx);
}
// Same signature as pool_bw; x and y (Lp only) are unused here.
extern "C" __global__ void pool_bw_cl_v1(PoolParams P, const T* __restrict__ dy,
                                         const long long* __restrict__ idx, const T* __restrict__ x,
                                         const T* __restrict__ y, T* __restrict__ dx) {
    pool_bw_cl<1>(P, dy, idx, dx);
}
// Same signature as pool_bw; x and y (Lp only) are unused here.
extern "C" __global__ void pool_bw_cl_vn(PoolParams P, const T* __restrict__ dy,
                                         const long long* __restrict__ idx, const T* __restrict__ x,
                                         const T* __restrict__ y, T* __restrict__ dx) {
    pool_bw_cl<VEC_MAX>(P, dy, idx, dx);
}
extern "C" __global__ void pool_bw_global_avg_v1(PoolParams P, const T* __restrict__ dy,
                                                 T* __restrict__ dx) {
    pool_bw_global_avg<1>(P, dy, dx);
}
extern "C" __global__ void pool_bw_global_avg_vn(PoolParams P, const T* __restrict__ dy,
                                                 T* __restrict__ dx) {
    pool_bw_global_avg<VEC_MAX>(P, dy, dx);
}
extern "C" __global__ void pool_fw_global_avg_v1(PoolParams P, const T* __restrict__ x,
                                                 T* __restrict__ y) {
    pool_fw_global_avg<1>(P, x, y);
}
extern "C" __global__ void pool_fw_global_avg_vn(PoolParams P, const T* __restrict__ x,
                                                 T* __restrict__ y) {
    pool_fw_global_avg<VEC_MAX>(P, x, y);
}
