// rope.cu: rotary position embedding of x [b, s, h, d] (any strides),
// forward and backward.
//
// Pair e of head (b, s, h) (e < rotary_dim / 2) holds elements
//   NeoX:  (e, e + rotary_dim / 2)      GPT-J: (2e, 2e + 1)
// and rotates by angle a = pos(b, s) * inv_freq(e):
//   y0 = x0 cos a - x1 sin a,   y1 = x1 cos a + x0 sin a
// with inv_freq(e) = theta^(-2e / rotary_dim) / pos_scale, or cos a and
// sin a read from tables [positions, rotary_dim / 2]. The backward is the
// rotation by -a (the rotation is orthogonal). Elements past rotary_dim
// are copied. pos(b, s) is positions[b, s], or s without positions. A
// position outside the tables writes NaN to its rotated elements (the
// report of an out-of-range index; run never synchronizes to raise it).
//
// Angles: the product pos * inv_freq and its reduction to [-pi, pi] in
// f64, then sincos in f32 (f64 for f64): exact to f32 rounding for
// positions far beyond 2^20.
//
// Work split: one thread per pair (grid-stride, 64-bit indices), then one
// thread per pass-through element. Memory bound: reads x once, writes y
// once.
// Specialised by: BARACUDA_DTYPE (T, ACC).
#include "common/dtype.cuh"

struct RopeParams {
    const T* x;
    T* y;
    const i64* pos;     // null: the position is s
    const float* cos;   // null: from theta
    const float* sin;
    u64 shape[4];       // b, s, h, d
    i64 sx[4], sy[4];
    i64 sp[2];          // positions strides [b, s]
    i64 sc[2];          // table strides [position, pair]
    u64 table_rows;
    u64 n_pairs;        // b * s * h * rotary_dim / 2
    u64 n_tail;         // b * s * h * (d - rotary_dim)
    double log2_theta;
    double pos_scale;
    u32 rotary_dim;
    u32 gptj;
    u32 inverse;
    u32 pad;
};

__device__ __forceinline__ void sincos_acc(float a, float* s, float* c) { sincosf(a, s, c); }
__device__ __forceinline__ void sincos_acc(double a, double* s, double* c) { sincos(a, s, c); }

extern "C" __global__ void __launch_bounds__(256) rope(const RopeParams p) {
    const u64 half = p.rotary_dim / 2;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x; t < p.n_pairs; t += stride) {
        u64 r = t;
        const u64 e = r % half;
        r /= half;
        const u64 h = r % p.shape[2];
        r /= p.shape[2];
        const u64 s = r % p.shape[1];
        const u64 b = r / p.shape[1];
        const u64 i0 = p.gptj ? 2 * e : e;
        const u64 i1 = p.gptj ? 2 * e + 1 : e + half;
        const i64 bx = (i64)b * p.sx[0] + (i64)s * p.sx[1] + (i64)h * p.sx[2];
        const i64 by = (i64)b * p.sy[0] + (i64)s * p.sy[1] + (i64)h * p.sy[2];
        const i64 pos = p.pos ? p.pos[(i64)b * p.sp[0] + (i64)s * p.sp[1]] : (i64)s;
        ACC sn, cs;
        if (p.cos) {
            if (pos < 0 || (u64)pos >= p.table_rows) {
                const ACC nan = ACC(__int_as_float(0x7fc00000));
                p.y[by + (i64)i0 * p.sy[3]] = from_acc(nan);
                p.y[by + (i64)i1 * p.sy[3]] = from_acc(nan);
                continue;
            }
            const i64 at = pos * p.sc[0] + (i64)e * p.sc[1];
            cs = ACC(p.cos[at]);
            sn = ACC(p.sin[at]);
        } else {
            // a = pos / pos_scale * theta^(-2e / rotary_dim), reduced mod 2 pi in f64
            const double inv = exp2(-2.0 * (double)e / (double)p.rotary_dim * p.log2_theta);
            const double a = (double)pos / p.pos_scale * inv;
            const double two_pi = 6.283185307179586476925286766559;
            const double red = a - rint(a / two_pi) * two_pi;
            sincos_acc(ACC(red), &sn, &cs);
        }
        if (p.inverse) sn = -sn;
        const ACC x0 = to_acc(p.x[bx + (i64)i0 * p.sx[3]]);
        const ACC x1 = to_acc(p.x[bx + (i64)i1 * p.sx[3]]);
        p.y[by + (i64)i0 * p.sy[3]] = from_acc(x0 * cs - x1 * sn);
        p.y[by + (i64)i1 * p.sy[3]] = from_acc(x1 * cs + x0 * sn);
    }
    const u64 tail = p.shape[3] - p.rotary_dim;
    for (u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x; t < p.n_tail; t += stride) {
        u64 r = t;
        const u64 k = p.rotary_dim + r % tail;
        r /= tail;
        const u64 h = r % p.shape[2];
        r /= p.shape[2];
        const u64 s = r % p.shape[1];
        const u64 b = r / p.shape[1];
        p.y[(i64)b * p.sy[0] + (i64)s * p.sy[1] + (i64)h * p.sy[2] + (i64)k * p.sy[3]] =
            p.x[(i64)b * p.sx[0] + (i64)s * p.sx[1] + (i64)h * p.sx[2] + (i64)k * p.sx[3]];
    }
}
