// group_norm.cu: GroupNorm over x [N, C, spatial] (S = the product of the
// spatial dims), dense channels-first or channels-last, forward and
// backward, deterministic (no atomics).
//
// Group r = (n, g) holds channels g cg .. (g + 1) cg - 1 (cg = C / G) at
// every spatial position: M = cg S elements.
// FW  mean, var (biased) over the group, rstd = 1 / sqrt(var + eps),
//     y = (x - mean) rstd w[c] + b[c] (w = 1, b = 0 when absent).
// BW  per (n, c): A = sum_s dy xhat, B = sum_s dy;
//     per group: a = sum_c w A / M, k = sum_c w B / M;
//     dx = rstd (w dy - k - xhat a); dw[c] = sum_n A, db[c] = sum_n B.
//
// Kernels, in launch order:
//   gn_fw_partial  grid R * splits: block (r, k) takes elements
//                  [k chunk, (k + 1) chunk) of group r, each thread shifted
//                  sums of its strided elements (shift: its first element)
//                  turned into Welford moments, merged over the block with
//                  group_reduce and Chan's merge (common/reduce.cuh), into
//                  ws[r splits + k].
//   gn_fw_stats    a thread per group merges its splits in order into
//                  mean[r] and rstd[r].
//   gn_fw_apply    a block per contiguous line (channels-first: a channel
//                  of S elements; channels-last: a position of C
//                  channels) writes y.
//   gn_bw_reduce_cf / gn_bw_reduce_cl  A and B per (n, c) into
//                  ws[0, NC) and ws[NC, 2 NC): a block per (n, c)
//                  (channels-first), or a (32 x 8) block per 32 channels of
//                  one n (channels-last: 32 channels read together, 8 rows
//                  of positions summed in order).
//   gn_bw_params   a thread per group: a and k into ws[2 NC, 2 NC + 2R);
//                  a thread per channel: dw and db, summed over n in order.
//   gn_bw_apply    as gn_fw_apply, writes dx.
// Traffic: FW reads x twice and writes y; BW reads x and dy twice and
// writes dx. 16-byte vector loads where the host found every start
// aligned (vec_group: each group chunk, and for channels-last each
// position's cg channels; vec_line: each line); element loads otherwise.
// Offsets 64-bit; per-block element counts 32-bit (the host bounds chunk).
// Specialised by: BARACUDA_DTYPE (T, ACC).
#include "common/dtype.cuh"
#include "common/reduce.cuh"

// Mirrors `GnParams` in src/norm/group_norm.rs.
struct GnParams {
    const T* x;
    const T* dy;      // BW
    T* out;           // FW y, BW dx (null: not asked)
    const T* w;       // null: absent
    const T* b;       // FW, null: absent
    ACC* mean;        // FW writes, BW reads: [R]
    ACC* rstd;        // [R]
    ACC* ws;          // FW: [R splits] Welford states; BW: A, B, a, k
    T* dw;            // BW (null: not asked)
    T* db;
    u64 batch;
    u64 channels;
    u64 spatial;
    u64 groups;
    u64 cg;           // channels per group
    u64 chunk;        // FW elements per split (a multiple of cg)
    double eps;
    u32 splits;
    u32 channels_last;
    u32 vec_group;    // gn_fw_partial loads 16-byte vectors (host: aligned)
    u32 vec_line;     // the line kernels load 16-byte vectors
};

struct Wf {
    ACC n, mean, m2;
};

struct Two {
    ACC a, b;
};

__device__ __forceinline__ Wf wf_merge(Wf lo, Wf hi) {
    welford_merge(lo.n, lo.mean, lo.m2, hi.n, hi.mean, hi.m2);
    return lo;
}

// Offset of element i of group r's elements (channel-major for
// channels-first, position-major for channels-last).
__device__ __forceinline__ u64 group_base(const GnParams& p, u64 r) {
    const u64 n = r / p.groups, g = r % p.groups;
    return p.channels_last ? n * p.spatial * p.channels + g * p.cg
                           : (n * p.channels + g * p.cg) * p.spatial;
}

extern "C" __global__ void __launch_bounds__(256) gn_fw_partial(const GnParams p) {
    __shared__ Wf smem[8];
    const u64 blocks = p.batch * p.groups * p.splits;
    const u64 m = p.cg * p.spatial;
    const u32 cg = (u32)p.cg;
    for (u64 blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const u64 r = blk / p.splits, k = blk % p.splits;
        const u64 lo = k * p.chunk;
        const u32 count = lo < m ? (u32)min(p.chunk, m - lo) : 0u;
        // Channels-last: the chunk starts at position lo / cg.
        const T* x = p.x + group_base(p, r) + (p.channels_last ? lo / cg * p.channels : lo);
        ACC shift = 0, s = 0, q = 0;
        u32 cnt = 0;
        auto push = [&](ACC v) {
            if (cnt == 0) shift = v;
            const ACC d = v - shift;
            s += d;
            q += d * d;
            ++cnt;
        };
        if (p.vec_group) {
            // count, cg (channels-last) and the chunk start are whole vectors
            const u32 cgv = cg / VEC;
#pragma unroll 4
            for (u32 i = threadIdx.x; i < count / VEC; i += blockDim.x) {
                const u64 off = p.channels_last ? (u64)(i / cgv) * p.channels + (u64)(i % cgv) * VEC
                                                : (u64)i * VEC;
                T t[VEC];
                load_vec(x + off, 0, t);
#pragma unroll
                for (int e = 0; e < VEC; ++e) push(to_acc(t[e]));
            }
        } else {
            for (u32 i = threadIdx.x; i < count; i += blockDim.x) {
                const u64 off = p.channels_last ? (u64)(i / cg) * p.channels + i % cg : (u64)i;
                push(to_acc(x[off]));
            }
        }
        Wf st{ACC(cnt), ACC(0), ACC(0)};
        if (cnt) {
            const ACC ds = s / ACC(cnt);
            st.mean = shift + ds;
            st.m2 = max(q - s * ds, ACC(0));
        }
        st = group_reduce(st, blockDim.x, wf_merge, smem);
        if (threadIdx.x == 0) {
            p.ws[blk * 3] = st.n;
            p.ws[blk * 3 + 1] = st.mean;
            p.ws[blk * 3 + 2] = st.m2;
        }
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(256) gn_fw_stats(const GnParams p) {
    const u64 groups = p.batch * p.groups;
    const u64 step = (u64)gridDim.x * blockDim.x;
    for (u64 r = (u64)blockIdx.x * blockDim.x + threadIdx.x; r < groups; r += step) {
        const ACC* w = p.ws + r * p.splits * 3;
        Wf acc{w[0], w[1], w[2]};
        for (u32 k = 1; k < p.splits; ++k) acc = wf_merge(acc, Wf{w[3 * k], w[3 * k + 1], w[3 * k + 2]});
        const ACC var = acc.m2 / ACC(p.cg * p.spatial);
        p.mean[r] = acc.mean;
        p.rstd[r] = ACC(1) / sqrt(var + ACC(p.eps));
    }
}

// The lines of gn_fw_apply and gn_bw_apply: channels-first N C lines of S
// elements (one channel each), channels-last N S lines of C channels.
__device__ __forceinline__ void line_shape(const GnParams& p, u64& lines, u64& len) {
    lines = p.batch * (p.channels_last ? p.spatial : p.channels);
    len = p.channels_last ? p.channels : p.spatial;
}

// The channel of element j of line `line`, and its group's statistics
// row. Channels-first: one per line; channels-last: C < 2^32 (the host
// checks), so the division is 32-bit.
__device__ __forceinline__ void line_channel(const GnParams& p, u64 line, u64 j, u64& c, u64& r) {
    if (p.channels_last) {
        c = j;
        r = line / p.spatial * p.groups + (u32)j / (u32)p.cg;
    } else {
        c = line % p.channels;
        r = line / p.channels * p.groups + c / p.cg;
    }
}

__device__ __forceinline__ ACC fw_elem(const GnParams& p, u64 line, u64 j, T xv) {
    u64 c, r;
    line_channel(p, line, j, c, r);
    ACC v = (to_acc(xv) - p.mean[r]) * p.rstd[r];
    if (p.w) v *= to_acc(p.w[c]);
    if (p.b) v += to_acc(p.b[c]);
    return v;
}

extern "C" __global__ void __launch_bounds__(256) gn_fw_apply(const GnParams p) {
    u64 lines, len;
    line_shape(p, lines, len);
    for (u64 line = blockIdx.x; line < lines; line += gridDim.x) {
        const T* x = p.x + line * len;
        T* y = p.out + line * len;
        if (p.vec_line) {
            // len is whole vectors, x and y 16-byte aligned
            for (u64 v = threadIdx.x; v < len / VEC; v += blockDim.x) {
                T t[VEC];
                load_vec(x, v, t);
#pragma unroll
                for (int e = 0; e < VEC; ++e) t[e] = from_acc(fw_elem(p, line, v * VEC + e, t[e]));
                store_vec(y, v, t);
            }
        } else {
            for (u64 j = threadIdx.x; j < len; j += blockDim.x) y[j] = from_acc(fw_elem(p, line, j, x[j]));
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) gn_bw_reduce_cf(const GnParams p) {
    __shared__ Two smem[8];
    const u64 nc = p.batch * p.channels;
    for (u64 line = blockIdx.x; line < nc; line += gridDim.x) {
        const u64 r = (line / p.channels) * p.groups + (line % p.channels) / p.cg;
        const ACC mean = p.mean[r];
        const T* x = p.x + line * p.spatial;
        const T* dy = p.dy + line * p.spatial;
        Two s{0, 0};
        if (p.vec_line) {
            // S is whole vectors, x and dy 16-byte aligned
            for (u64 v = threadIdx.x; v < p.spatial / VEC; v += blockDim.x) {
                T tx[VEC], td[VEC];
                load_vec(x, v, tx);
                load_vec(dy, v, td);
#pragma unroll
                for (int e = 0; e < VEC; ++e) {
                    const ACC d = to_acc(td[e]);
                    s.a += d * (to_acc(tx[e]) - mean);
                    s.b += d;
                }
            }
        } else {
            for (u64 j = threadIdx.x; j < p.spatial; j += blockDim.x) {
                const ACC d = to_acc(dy[j]);
                s.a += d * (to_acc(x[j]) - mean);
                s.b += d;
            }
        }
        s = group_reduce(s, blockDim.x, [](Two l, Two h) { return Two{l.a + h.a, l.b + h.b}; }, smem);
        if (threadIdx.x == 0) {
            p.ws[line] = s.a * p.rstd[r];
            p.ws[nc + line] = s.b;
        }
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(256) gn_bw_reduce_cl(const GnParams p) {
    __shared__ Two part[8][32];
    const u64 nc = p.batch * p.channels;
    const u64 tiles = (p.channels + 31) / 32;
    for (u64 blk = blockIdx.x; blk < p.batch * tiles; blk += gridDim.x) {
        const u64 n = blk / tiles;
        const u64 c = (blk % tiles) * 32 + threadIdx.x;
        Two s{0, 0};
        ACC mean = 0, rstd = 0;
        if (c < p.channels) {
            const u64 r = n * p.groups + c / p.cg;
            mean = p.mean[r];
            rstd = p.rstd[r];
            for (u64 pos = threadIdx.y; pos < p.spatial; pos += blockDim.y) {
                const u64 off = (n * p.spatial + pos) * p.channels + c;
                const ACC d = to_acc(p.dy[off]);
                s.a += d * (to_acc(p.x[off]) - mean);
                s.b += d;
            }
        }
        part[threadIdx.y][threadIdx.x] = s;
        __syncthreads();
        if (threadIdx.y == 0 && c < p.channels) {
            Two t{0, 0};
            for (u32 k = 0; k < blockDim.y; ++k) {
                t.a += part[k][threadIdx.x].a;
                t.b += part[k][threadIdx.x].b;
            }
            p.ws[n * p.channels + c] = t.a * rstd;
            p.ws[nc + n * p.channels + c] = t.b;
        }
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(256) gn_bw_params(const GnParams p) {
    const u64 nc = p.batch * p.channels;
    const u64 groups = p.batch * p.groups;
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const ACC* A = p.ws;
    const ACC* B = p.ws + nc;
    const u64 step = (u64)gridDim.x * blockDim.x;
    for (u64 i = t; p.out && i < groups; i += step) {
        const u64 n = i / p.groups, c0 = (i % p.groups) * p.cg;
        ACC sa = 0, sb = 0;
        for (u64 c = c0; c < c0 + p.cg; ++c) {
            const ACC w = p.w ? to_acc(p.w[c]) : ACC(1);
            sa += w * A[n * p.channels + c];
            sb += w * B[n * p.channels + c];
        }
        const ACC inv_m = ACC(1) / ACC(p.cg * p.spatial);
        p.ws[2 * nc + i] = sa * inv_m;
        p.ws[2 * nc + groups + i] = sb * inv_m;
    }
    for (u64 c = t; (p.dw || p.db) && c < p.channels; c += step) {
        ACC sw = 0, sb = 0;
        for (u64 n = 0; n < p.batch; ++n) {
            sw += A[n * p.channels + c];
            sb += B[n * p.channels + c];
        }
        if (p.dw) p.dw[c] = from_acc(sw);
        if (p.db) p.db[c] = from_acc(sb);
    }
}

__device__ __forceinline__ ACC bw_elem(const GnParams& p, const ACC* ca, const ACC* ck, u64 line, u64 j, T xv,
                                       T dyv) {
    u64 c, r;
    line_channel(p, line, j, c, r);
    const ACC rstd = p.rstd[r];
    const ACC xhat = (to_acc(xv) - p.mean[r]) * rstd;
    const ACC g = p.w ? to_acc(dyv) * to_acc(p.w[c]) : to_acc(dyv);
    return rstd * (g - ck[r] - xhat * ca[r]);
}

extern "C" __global__ void __launch_bounds__(256) gn_bw_apply(const GnParams p) {
    u64 lines, len;
    line_shape(p, lines, len);
    const u64 nc = p.batch * p.channels;
    const u64 groups = p.batch * p.groups;
    const ACC* ca = p.ws + 2 * nc;
    const ACC* ck = ca + groups;
    for (u64 line = blockIdx.x; line < lines; line += gridDim.x) {
        const T* x = p.x + line * len;
        const T* dy = p.dy + line * len;
        T* dx = p.out + line * len;
        if (p.vec_line) {
            // len is whole vectors, x, dy and dx 16-byte aligned
            for (u64 v = threadIdx.x; v < len / VEC; v += blockDim.x) {
                T tx[VEC], td[VEC];
                load_vec(x, v, tx);
                load_vec(dy, v, td);
#pragma unroll
                for (int e = 0; e < VEC; ++e) tx[e] = from_acc(bw_elem(p, ca, ck, line, v * VEC + e, tx[e], td[e]));
                store_vec(dx, v, tx);
            }
        } else {
            for (u64 j = threadIdx.x; j < len; j += blockDim.x)
                dx[j] = from_acc(bw_elem(p, ca, ck, line, j, x[j], dy[j]));
        }
    }
}
