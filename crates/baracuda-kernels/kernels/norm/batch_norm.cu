// batch_norm.cu: BatchNorm over x [N, C, spatial] (S = the product of the
// spatial dims, M = N S elements per channel), dense channels-first or
// channels-last, forward (training and eval) and backward, deterministic
// (no atomics).
//
// FW  training: mean, var (biased) per channel over its M elements;
//               running = (1 - momentum) running + momentum batch, the
//               variance unbiased (M / (M - 1)), when asked;
//     eval:     mean, var = the running statistics;
//     rstd = 1 / sqrt(var + eps), y = (x - mean) rstd w[c] + b[c]
//     (w = 1, b = 0 when absent).
// BW  per channel: B = sum dy, A = sum dy (x - mean);
//     dbias = B, dweight = A rstd;
//     training: dx = w rstd (dy - B / M - (x - mean) rstd^2 A / M);
//     eval:     dx = w rstd dy (the statistics are constants).
//
// Kernels, in launch order:
//   bn_partial_cl  channels-last (and channels-first with S = 1, the same
//                  memory): rows of C channels. Block (32 x 8), grid
//                  tiles x splits: a tile is 32 lanes of V adjacent
//                  channels (V = VEC with 16-byte loads, else 1); split k
//                  takes rows [k chunk, (k + 1) chunk), thread row y every
//                  8th of them, so a warp reads a row's 32 V channels at
//                  once (coalesced). The 8 thread rows merge in order
//                  through shared memory into ws partials [split][C].
//   bn_partial_cf  channels-first: a 256-thread block per (channel,
//                  split) over the channel's elements [k chunk, (k + 1)
//                  chunk) in (n, s) order (runs of S contiguous
//                  elements), merged with group_reduce.
//                  FW: per thread and channel, sums shifted by its first
//                  value (no division per element) turned into Welford
//                  (n, mean, M2), then Chan's merge; BW: the sums A and B.
//   bn_fw_stats    a warp per channel merges its splits in a fixed order
//                  (or reads the running statistics), updates the running
//                  statistics, saves mean and rstd, and writes the apply
//                  coefficients (mean, rstd w, b).
//   bn_bw_stats    a warp per channel sums its splits likewise: dweight,
//                  dbias, and the dx coefficients (mean, w rstd, B / M,
//                  A rstd^2 / M); dweight and dbias are zeros for M = 0.
//   bn_fw_apply / bn_bw_apply  channels-last: the partial kernels' grid,
//                  each thread keeping its V channels' coefficients in
//                  registers over its rows; channels-first: a thread per
//                  vector (or element) in memory order, a vector inside
//                  one channel run. 16-byte vectors where the host found
//                  every operand aligned.
// Traffic (E = N C S elements of b bytes): FW training reads x twice and
// writes y (3 E b), eval 2 E b; BW reads x and dy twice and writes dx
// (5 E b; 3 E b in eval without dweight); a few flops per element, so
// memory bound: judge by GB/s against the copy ceiling.
// Offsets 64-bit; counts in ACC (exact in f32 below 2^24 per split; the
// host bounds chunk).
// Specialised by: BARACUDA_DTYPE (T, ACC), BARACUDA_PARAM_F32 (P, the
// element type of weight, bias, running statistics, dweight, dbias: T, or
// f32 for the 16-bit T).
#include "common/dtype.cuh"
#include "common/reduce.cuh"

#if BARACUDA_PARAM_F32
#if BARACUDA_DTYPE != 2 && BARACUDA_DTYPE != 3
#error "f32 parameters are for the 16-bit element types"
#endif
typedef float P;
__device__ __forceinline__ ACC p_to_acc(P v) { return v; }
__device__ __forceinline__ P p_from_acc(ACC v) { return v; }
#else
typedef T P;
__device__ __forceinline__ ACC p_to_acc(P v) { return to_acc(v); }
__device__ __forceinline__ P p_from_acc(ACC v) { return from_acc(v); }
#endif

// Mirrors `BnParams` in src/norm/batch_norm.rs.
struct BnParams {
    const T* x;
    const T* dy;     // BW
    T* out;          // FW y, BW dx (null: not asked)
    const P* w;      // null: absent
    const P* b;      // null: absent
    P* run_mean;     // FW training: updated (null: not tracked); eval: read
    P* run_var;
    ACC* mean;       // FW writes (null: not saved), BW reads: [C]
    ACC* rstd;       // [C]
    ACC* coef;       // FW: mean, scale, shift [3 C]; BW: mean, k, mdy, proj [4 C]
    ACC* part;       // [2][C][splits] partials (a channel's splits adjacent)
    P* dw;           // BW (null: not asked)
    P* db;
    u64 m;           // elements per channel: N S
    u64 channels;
    u64 spatial;
    u64 chunk;       // elements of a channel per split (a multiple of VEC)
    u64 total;       // N C S
    double eps;
    double momentum;
    u32 splits;
    u32 channels_last;  // rows of C channels (channels-last, or S = 1)
    u32 training;
    u32 vec_red;     // the partial kernels load 16-byte vectors
    u32 vec_apply;   // the apply kernels load 16-byte vectors
    u32 small;       // total < 2^32: 32-bit index math in the apply kernels
};

// One thread's merged per-channel state: FW Welford (n, mean, M2); BW
// sums (unused, A, B).
struct St {
    ACC n, a, b;
};

__device__ __forceinline__ St st_merge_fw(St lo, St hi) {
    welford_merge(lo.n, lo.a, lo.b, hi.n, hi.a, hi.b);
    return lo;
}

__device__ __forceinline__ St st_merge_bw(St lo, St hi) { return St{lo.n + hi.n, lo.a + hi.a, lo.b + hi.b}; }

// What a thread accumulates per channel. FW: sums shifted by the thread's
// first value (s, q: three flops an element, no division), and the plain
// sum t for when a value is not finite; BW: A in s, B in q.
struct Run {
    ACC shift, s, q, t;
};

template <bool BW>
__device__ __forceinline__ void run_push(Run& r, bool first, ACC x, ACC dy, ACC mean) {
    if (BW) {
        r.s += dy * (x - mean);
        r.q += dy;
    } else {
        if (first) r.shift = x;
        const ACC d = x - r.shift;
        r.s += d;
        r.q += d * d;
        r.t += x;
    }
}

// A thread's run of `cnt` values as a merged state. A NaN or an infinity
// makes s or q non-finite: then the mean is sum / n, as PyTorch's (an
// infinity, NaN with both signs or a NaN), and M2 NaN, as welford_push.
template <bool BW>
__device__ __forceinline__ St run_state(const Run& r, u32 cnt) {
    if (BW) return St{0, r.s, r.q};
    if (cnt == 0) return St{0, 0, 0};
    const ACC n = ACC(cnt);
    const ACC inf = ACC(reduce_inf());
    if (fabs(r.s) < inf && fabs(r.q) < inf) {
        const ACC ds = r.s / n;
        const ACC m2 = r.q - r.s * ds;
        return St{n, r.shift + ds, m2 > ACC(0) ? m2 : ACC(0)};
    }
    return St{n, r.t / n, ACC(reduce_nan())};
}

// Split k's partial of channel c: FW (mean, M2), BW (A, B); a channel's
// splits adjacent, so the per-channel kernels read them coalesced.
__device__ __forceinline__ void put_partial(const BnParams& p, u64 k, u64 c, St s) {
    p.part[c * p.splits + k] = s.a;
    p.part[((u64)p.channels + c) * p.splits + k] = s.b;
}

// One load of the partial kernels: a vector (or element) of x and of dy.
struct Pair8 {
    T x[VEC], dy[VEC];
};

// Rows of C channels; V adjacent channels per thread, four rows' loads in
// flight.
template <bool BW, int V>
__device__ __forceinline__ void partial_cl(const BnParams& p, St* sm) {
    const u64 cv = p.channels / V;  // channel vectors (V divides C)
    const u64 tiles = (cv + 31) / 32;
    const u64 blocks = tiles * p.splits;
    for (u64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const u64 tile = blk % tiles, k = blk / tiles;
        const u64 vi = tile * 32 + threadIdx.x;
        const u64 c0 = vi * V;
        const u64 lo = k * p.chunk, hi = min(p.m, lo + p.chunk);
        Run s[V];
        ACC mean[V];
#pragma unroll
        for (int e = 0; e < V; ++e) {
            s[e] = Run{0, 0, 0, 0};
            mean[e] = 0;
        }
        u32 cnt = 0;
        if (vi < cv) {
            if (BW) {
#pragma unroll
                for (int e = 0; e < V; ++e) mean[e] = p.mean[c0 + e];
            }
            fold_ahead<4>(
                lo + threadIdx.y, hi, blockDim.y,
                [&](u64 r) {
                    const u64 off = r * p.channels + c0;
                    Pair8 v;
                    if (V == VEC) {
                        load_vec(p.x + off, 0, v.x);
                        if (BW) load_vec(p.dy + off, 0, v.dy);
                    } else {
                        v.x[0] = p.x[off];
                        if (BW) v.dy[0] = p.dy[off];
                    }
                    return v;
                },
                [&](u64, const Pair8& v) {
#pragma unroll
                    for (int e = 0; e < V; ++e)
                        run_push<BW>(s[e], cnt == 0, to_acc(v.x[e]), BW ? to_acc(v.dy[e]) : ACC(0), mean[e]);
                    ++cnt;
                });
        }
        // Merge the 8 thread rows in order: sm[row][lane][e].
#pragma unroll
        for (int e = 0; e < V; ++e) sm[(threadIdx.y * 32 + threadIdx.x) * V + e] = run_state<BW>(s[e], cnt);
        __syncthreads();
        if (threadIdx.y == 0 && vi < cv) {
#pragma unroll
            for (int e = 0; e < V; ++e) {
                St t = sm[threadIdx.x * V + e];
                for (u32 y = 1; y < blockDim.y; ++y) {
                    const St o = sm[(y * 32 + threadIdx.x) * V + e];
                    t = BW ? st_merge_bw(t, o) : st_merge_fw(t, o);
                }
                put_partial(p, k, c0 + e, t);
            }
        }
        __syncthreads();
    }
}

// Channel c's elements [k chunk, ...) in (n, s) order; V elements per load
// (V divides S and chunk).
template <bool BW, int V>
__device__ __forceinline__ void partial_cf(const BnParams& p, St* sm) {
    const u64 blocks = p.channels * p.splits;
    for (u64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const u64 c = blk % p.channels, k = blk / p.channels;
        const u64 lo = k * p.chunk, hi = min(p.m, lo + p.chunk);
        const ACC mean = BW ? p.mean[c] : ACC(0);
        Run run{0, 0, 0, 0};
        u32 cnt = 0;
        for (u64 i = lo + (u64)threadIdx.x * V; i < hi; i += (u64)blockDim.x * V) {
            const u64 n = i / p.spatial;
            const u64 off = (n * p.channels + c) * p.spatial + (i - n * p.spatial);
            T tx[VEC], td[VEC];
            if (V == VEC) {
                load_vec(p.x + off, 0, tx);
                if (BW) load_vec(p.dy + off, 0, td);
            } else {
                tx[0] = p.x[off];
                if (BW) td[0] = p.dy[off];
            }
#pragma unroll
            for (int e = 0; e < V; ++e) {
                run_push<BW>(run, cnt == 0, to_acc(tx[e]), BW ? to_acc(td[e]) : ACC(0), mean);
                ++cnt;
            }
        }
        St s = run_state<BW>(run, cnt);
        s = BW ? group_reduce(s, blockDim.x, st_merge_bw, sm) : group_reduce(s, blockDim.x, st_merge_fw, sm);
        if (threadIdx.x == 0) put_partial(p, k, c, s);
        __syncthreads();
    }
}

// Shared memory of the partial kernels: 8 x 32 lanes x VEC states (the
// channels-last merge; the channels-first group_reduce uses 8 of them).
#define BN_SMEM (8 * 32 * VEC)

extern "C" __global__ void __launch_bounds__(256) bn_fw_partial(const BnParams p) {
    __shared__ St sm[BN_SMEM];
    if (p.channels_last) {
        if (p.vec_red) partial_cl<false, VEC>(p, sm);
        else partial_cl<false, 1>(p, sm);
    } else {
        if (p.vec_red) partial_cf<false, VEC>(p, sm);
        else partial_cf<false, 1>(p, sm);
    }
}

extern "C" __global__ void __launch_bounds__(256) bn_bw_partial(const BnParams p) {
    __shared__ St sm[BN_SMEM];
    if (p.channels_last) {
        if (p.vec_red) partial_cl<true, VEC>(p, sm);
        else partial_cl<true, 1>(p, sm);
    } else {
        if (p.vec_red) partial_cf<true, VEC>(p, sm);
        else partial_cf<true, 1>(p, sm);
    }
}

// The per-channel kernels: a warp per channel (8 channels a block). Lane
// j folds splits j, j + 32, ... in order, four loads in flight, and the
// lanes merge by butterflies: a fixed order, so the bits depend only on
// the inputs and the split count.
#define BN_CHANNEL_LOOP(c)                                                                  \
    for (u64 c = (u64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; c < p.channels; \
         c += (u64)gridDim.x * (blockDim.x / 32))

extern "C" __global__ void __launch_bounds__(256) bn_fw_stats(const BnParams p) {
    const u32 lane = threadIdx.x & 31u;
    BN_CHANNEL_LOOP(c) {
        ACC mean, var;
        if (p.training) {
            // Split k holds min(chunk, M - k chunk) elements.
            St s{0, 0, 0};
            fold_ahead<4>(
                lane, p.splits, 32,
                [&](u64 k) {
                    return St{ACC(min(p.chunk, p.m - k * p.chunk)), p.part[c * p.splits + k],
                              p.part[((u64)p.channels + c) * p.splits + k]};
                },
                [&](u64, St o) { s = st_merge_fw(s, o); });
            s = butterfly(s, 32, st_merge_fw);
            mean = s.a;
            const ACC m2 = s.b;
            var = m2 / ACC(p.m);
            if (p.run_mean && lane == 0) {
                const ACC mo = ACC(p.momentum);
                const ACC unbiased = m2 / ACC(p.m - 1);
                p.run_mean[c] = p_from_acc((ACC(1) - mo) * p_to_acc(p.run_mean[c]) + mo * mean);
                p.run_var[c] = p_from_acc((ACC(1) - mo) * p_to_acc(p.run_var[c]) + mo * unbiased);
            }
        } else {
            mean = p_to_acc(p.run_mean[c]);
            var = p_to_acc(p.run_var[c]);
        }
        if (lane != 0) continue;
        const ACC rstd = ACC(1) / sqrt(var + ACC(p.eps));
        if (p.mean) {
            p.mean[c] = mean;
            p.rstd[c] = rstd;
        }
        p.coef[c] = mean;
        p.coef[p.channels + c] = p.w ? rstd * p_to_acc(p.w[c]) : rstd;
        p.coef[2 * p.channels + c] = p.b ? p_to_acc(p.b[c]) : ACC(0);
    }
}

extern "C" __global__ void __launch_bounds__(256) bn_bw_stats(const BnParams p) {
    const u32 lane = threadIdx.x & 31u;
    BN_CHANNEL_LOOP(c) {
        // part is null when no sum is needed (eval dx alone) or M = 0.
        St s{0, 0, 0};
        if (p.part) {
            fold_ahead<4>(
                lane, p.splits, 32,
                [&](u64 k) {
                    return St{0, p.part[c * p.splits + k], p.part[((u64)p.channels + c) * p.splits + k]};
                },
                [&](u64, St o) { s = st_merge_bw(s, o); });
            s = butterfly(s, 32, st_merge_bw);
        }
        if (lane != 0) continue;
        const ACC a = s.a, b = s.b;
        const ACC rstd = p.m ? p.rstd[c] : ACC(0);
        if (p.dw) p.dw[c] = p_from_acc(a * rstd);
        if (p.db) p.db[c] = p_from_acc(b);
        if (p.out && p.m) {
            const ACC k = p.w ? rstd * p_to_acc(p.w[c]) : rstd;
            const ACC inv_m = ACC(1) / ACC(p.m);
            p.coef[c] = p.mean[c];
            p.coef[p.channels + c] = k;
            p.coef[2 * p.channels + c] = b * inv_m;
            p.coef[3 * p.channels + c] = a * rstd * rstd * inv_m;
        }
    }
}

// The channel of element e (a multiple of V for a vector).
__device__ __forceinline__ u64 channel_of(const BnParams& p, u64 e) {
    if (p.channels_last) return p.small ? (u64)((u32)e % (u32)p.channels) : e % p.channels;
    const u64 line = p.small ? (u64)((u32)e / (u32)p.spatial) : e / p.spatial;
    return p.small ? (u64)((u32)line % (u32)p.channels) : line % p.channels;
}

template <int V>
__device__ __forceinline__ void fw_apply(const BnParams& p) {
    const u64 units = p.total / V;
    const ACC* cm = p.coef;
    const ACC* cs = p.coef + p.channels;
    const ACC* cb = p.coef + 2 * p.channels;
    for (u64 u = (u64)blockIdx.x * blockDim.x + threadIdx.x; u < units; u += (u64)gridDim.x * blockDim.x) {
        const u64 e0 = u * V;
        T t[VEC];
        if (V == VEC) load_vec(p.x, u, t);
        else t[0] = p.x[e0];
        // Channels-last: V adjacent channels; channels-first: V divides S,
        // so one channel.
        const u64 c0 = channel_of(p, e0);
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const u64 c = p.channels_last ? c0 + e : c0;
            t[e] = from_acc((to_acc(t[e]) - cm[c]) * cs[c] + cb[c]);
        }
        if (V == VEC) store_vec(p.out, u, t);
        else p.out[e0] = t[0];
    }
}

template <int V>
__device__ __forceinline__ void bw_apply(const BnParams& p) {
    const u64 units = p.total / V;
    const ACC* cm = p.coef;
    const ACC* ck = p.coef + p.channels;
    const ACC* cd = p.coef + 2 * p.channels;
    const ACC* cp = p.coef + 3 * p.channels;
    for (u64 u = (u64)blockIdx.x * blockDim.x + threadIdx.x; u < units; u += (u64)gridDim.x * blockDim.x) {
        const u64 e0 = u * V;
        T tx[VEC], td[VEC];
        if (V == VEC) {
            if (p.training) load_vec(p.x, u, tx);
            load_vec(p.dy, u, td);
        } else {
            if (p.training) tx[0] = p.x[e0];
            td[0] = p.dy[e0];
        }
        const u64 c0 = channel_of(p, e0);
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const u64 c = p.channels_last ? c0 + e : c0;
            const ACC d = to_acc(td[e]);
            // eval: x is not read (an infinite x does not reach dx)
            const ACC v = p.training ? ck[c] * (d - cd[c] - (to_acc(tx[e]) - cm[c]) * cp[c]) : ck[c] * d;
            td[e] = from_acc(v);
        }
        if (V == VEC) store_vec(p.out, u, td);
        else p.out[e0] = td[0];
    }
}

// Rows of C channels: the partial kernels' split (tiles x splits, block
// 32 x 8), each thread holding its V channels' coefficients in registers
// over its rows, so a 16-byte vector costs no coefficient load.
template <bool BW, int V>
__device__ __forceinline__ void apply_cl(const BnParams& p) {
    const u64 cv = p.channels / V;  // channel vectors (V divides C)
    const u64 tiles = (cv + 31) / 32;
    const u64 blocks = tiles * p.splits;
    for (u64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const u64 tile = blk % tiles, k = blk / tiles;
        const u64 vi = tile * 32 + threadIdx.x;
        if (vi >= cv) continue;  // no barrier in the apply kernels
        const u64 c0 = vi * V;
        ACC cm[V], ck[V], cd[V], cp[V];
#pragma unroll
        for (int e = 0; e < V; ++e) {
            cm[e] = p.coef[c0 + e];
            ck[e] = p.coef[p.channels + c0 + e];
            cd[e] = p.coef[2 * p.channels + c0 + e];
            cp[e] = BW ? p.coef[3 * p.channels + c0 + e] : ACC(0);
        }
        const u64 lo = k * p.chunk, hi = min(p.m, lo + p.chunk);
        const bool read_x = !BW || p.training;
        // four rows' loads issued before the first store (y may alias
        // nothing, but the compiler cannot know: a plain loop would wait
        // for each load after the previous row's store)
        fold_ahead<4>(
            lo + threadIdx.y, hi, blockDim.y,
            [&](u64 r) {
                const u64 off = r * p.channels + c0;
                Pair8 v;
                if (V == VEC) {
                    if (read_x) load_vec(p.x + off, 0, v.x);
                    if (BW) load_vec(p.dy + off, 0, v.dy);
                } else {
                    if (read_x) v.x[0] = p.x[off];
                    if (BW) v.dy[0] = p.dy[off];
                }
                return v;
            },
            [&](u64 r, Pair8 v) {
                const u64 off = r * p.channels + c0;
#pragma unroll
                for (int e = 0; e < V; ++e) {
                    if (BW) {
                        const ACC d = to_acc(v.dy[e]);
                        const ACC o =
                            p.training ? ck[e] * (d - cd[e] - (to_acc(v.x[e]) - cm[e]) * cp[e]) : ck[e] * d;
                        v.x[e] = from_acc(o);
                    } else {
                        // FW coefficients: mean, rstd w, b
                        v.x[e] = from_acc((to_acc(v.x[e]) - cm[e]) * ck[e] + cd[e]);
                    }
                }
                if (V == VEC) store_vec(p.out + off, 0, v.x);
                else p.out[off] = v.x[0];
            });
    }
}

extern "C" __global__ void __launch_bounds__(256) bn_fw_apply(const BnParams p) {
    if (p.channels_last) {
        if (p.vec_apply) apply_cl<false, VEC>(p);
        else apply_cl<false, 1>(p);
    } else {
        if (p.vec_apply) fw_apply<VEC>(p);
        else fw_apply<1>(p);
    }
}

extern "C" __global__ void __launch_bounds__(256) bn_bw_apply(const BnParams p) {
    if (p.channels_last) {
        if (p.vec_apply) apply_cl<true, VEC>(p);
        else apply_cl<true, 1>(p);
    } else {
        if (p.vec_apply) bw_apply<VEC>(p);
        else bw_apply<1>(p);
    }
}
