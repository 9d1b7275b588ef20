// local_response_norm.cu: LocalResponseNorm across channels of x [N, C,
// spatial] (S = the product of the spatial dims), dense channels-first or
// channels-last, forward and backward (torch.nn.functional.
// local_response_norm).
//
// Window of channel c: W(c) = [c - size / 2, c + (size - 1) / 2] within
// [0, C) (PyTorch zero-pads and averages over size always).
// FW  d[c] = k + alpha / size * sum_{j in W(c)} x[j]^2,  y = x / d^beta
// BW  dx[j] = dy[j] d[j]^-beta
//             - 2 alpha beta / size * x[j] * sum_{c : j in W(c)} dy[c] x[c] d[c]^(-beta - 1)
//     (c runs over [j - (size - 1) / 2, j + size / 2] within [0, C)).
//
// A thread per element, in memory order (coalesced in either layout): its
// channel's neighbours sit `cs` elements apart (S channels-first, 1
// channels-last) and come from L1/L2. FW reads `size` values per element,
// BW `size` d's of `size` values each: O(size^2), fine for the usual
// sizes (2 to 5). f32 arithmetic (f64 for f64); deterministic.
// Specialised by: BARACUDA_DTYPE (T, ACC).
#include "common/dtype.cuh"

// Mirrors `LrnParams` in src/norm/local_response_norm.rs.
struct LrnParams {
    const T* x;
    const T* dy;    // BW
    T* out;         // FW y, BW dx
    u64 total;      // N C S
    u64 channels;
    u64 spatial;
    double alpha;
    double beta;
    double k;
    u32 size;
    u32 channels_last;
};

// The channel of element e and the stride between channels.
__device__ __forceinline__ void lrn_channel(const LrnParams& p, u64 e, i64& c, u64& cs) {
    if (p.channels_last) {
        c = (i64)(e % p.channels);
        cs = 1;
    } else {
        c = (i64)((e / p.spatial) % p.channels);
        cs = p.spatial;
    }
}

// d at channel c of the line through element `base` (channel 0 there).
__device__ __forceinline__ ACC lrn_d(const LrnParams& p, u64 base, u64 cs, i64 c) {
    const i64 lo = max(c - (i64)(p.size / 2), (i64)0);
    const i64 hi = min(c + (i64)((p.size - 1) / 2), (i64)p.channels - 1);
    ACC sq = 0;
    for (i64 j = lo; j <= hi; ++j) {
        const ACC v = to_acc(p.x[base + (u64)j * cs]);
        sq += v * v;
    }
    return ACC(p.k) + ACC(p.alpha) / ACC(p.size) * sq;
}

extern "C" __global__ void __launch_bounds__(256) lrn_fw(const LrnParams p) {
    const u64 step = (u64)gridDim.x * blockDim.x;
    for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < p.total; e += step) {
        i64 c;
        u64 cs;
        lrn_channel(p, e, c, cs);
        const u64 base = e - (u64)c * cs;
        const ACC d = lrn_d(p, base, cs, c);
        p.out[e] = from_acc(to_acc(p.x[e]) / m_pow(d, ACC(p.beta)));
    }
}

extern "C" __global__ void __launch_bounds__(256) lrn_bw(const LrnParams p) {
    const u64 step = (u64)gridDim.x * blockDim.x;
    const ACC beta = ACC(p.beta);
    for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < p.total; e += step) {
        i64 j;
        u64 cs;
        lrn_channel(p, e, j, cs);
        const u64 base = e - (u64)j * cs;
        const i64 lo = max(j - (i64)((p.size - 1) / 2), (i64)0);
        const i64 hi = min(j + (i64)(p.size / 2), (i64)p.channels - 1);
        ACC sum = 0, dj = 0;
        for (i64 c = lo; c <= hi; ++c) {
            const u64 o = base + (u64)c * cs;
            const ACC d = lrn_d(p, base, cs, c);
            if (c == j) dj = d;
            sum += to_acc(p.dy[o]) * to_acc(p.x[o]) * m_pow(d, -beta - ACC(1));
        }
        const ACC coef = ACC(2) * ACC(p.alpha) * beta / ACC(p.size);
        p.out[e] = from_acc(to_acc(p.dy[e]) * m_pow(dj, -beta) - coef * to_acc(p.x[e]) * sum);
    }
}
