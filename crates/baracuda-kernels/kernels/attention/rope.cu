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
// Angles (rope_cos_sin, the same in both kernels): the product pos *
// inv_freq and its reduction to [-pi, pi] in f64, then sincos in f32 (f64
// for f64): exact to f32 rounding for positions far beyond 2^20.
//
// Work split:
//   rope_rows  16-byte vectors of VEC elements, for x and y with unit
//       element stride, 16-byte aligned bases and batch, seq and head
//       strides that are whole vectors, and rotary_dim / 2 (NeoX) or
//       rotary_dim (GPT-J) and d multiples of VEC. A row is one head of one
//       token; its `head_items` items are the rotated ones (NeoX: the vector
//       at e and the one at e + rotary_dim / 2; GPT-J: one vector of VEC / 2
//       pairs), then the pass-through vectors. A block takes a group of
//       rows: `tokens_per_cta` consecutive tokens with all their heads, or
//       `heads_per_cta` heads of one token (grid-stride over the groups). It
//       computes the cos and sin of its tokens' rotary_dim / 2 pairs once
//       into shared memory, every head reusing them. Each thread keeps one
//       item column and takes rows blockDim / head_items apart, up to
//       ROPE_ROWS_PER_THREAD of them per pass, their loads in flight while
//       the block computes the angles. 32-bit indices within the block,
//       64-bit element offsets. The host (rope.rs `row_split`) also keeps
//       head_items <= 256, one token's angles within 48 KiB of shared
//       memory and the tokens below 2^31.
//   rope  any strides, the fallback: one thread per pair (grid-stride,
//       64-bit indices), then one thread per pass-through element; each
//       thread computes its own angle.
// Traffic: reads x once and writes y once (the positions and tables are a
// few bytes per token, from L2); memory bound, judged by GB/s against the
// copy ceiling.
// Specialised by: BARACUDA_DTYPE (T, ACC).
#include "common/dtype.cuh"

// Rows one thread of rope_rows takes per pass (the host sizes the groups
// for it: src/attention/rope.rs ROWS_PER_THREAD).
#define ROPE_ROWS_PER_THREAD 4

// Mirrors `RopeParams` in src/attention/rope.rs.
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
    u64 n_pairs;        // rope: b * s * h * rotary_dim / 2
    u64 n_tail;         // rope: b * s * h * (d - rotary_dim)
    u64 n_groups;       // rope_rows: row groups (token groups x head groups)
    double log2_theta;
    double pos_scale;
    u32 rotary_dim;
    u32 gptj;
    u32 inverse;
    u32 tokens_per_cta; // rope_rows: tokens of a group (1 when heads split)
    u32 heads_per_cta;  // rope_rows: heads of a group
    u32 head_groups;    // rope_rows: groups of one token's heads
    u32 rot_items;      // rope_rows: rotated items of a head
    u32 head_items;     // rope_rows: rot_items + pass-through vectors
};

__device__ __forceinline__ void sincos_acc(float a, float* s, float* c) { sincosf(a, s, c); }
__device__ __forceinline__ void sincos_acc(double a, double* s, double* c) { sincos(a, s, c); }

// Position of token (b, s).
__device__ __forceinline__ i64 rope_position(const RopeParams& p, u64 b, u64 s) {
    return p.pos ? p.pos[(i64)b * p.sp[0] + (i64)s * p.sp[1]] : (i64)s;
}

// cos and sin of the angle of pair e at position pos (sin negated for the
// backward); both NaN for a position outside the tables.
__device__ __forceinline__ void rope_cos_sin(const RopeParams& p, i64 pos, u64 e, ACC* cs, ACC* sn) {
    if (p.cos) {
        if (pos < 0 || (u64)pos >= p.table_rows) {
            *cs = *sn = ACC(__int_as_float(0x7fc00000));
            return;
        }
        const i64 at = pos * p.sc[0] + (i64)e * p.sc[1];
        *cs = ACC(p.cos[at]);
        *sn = ACC(p.sin[at]);
    } else {
        // a = pos / pos_scale * theta^(-2e / rotary_dim), reduced mod 2 pi in f64
        const double inv = exp2(-2.0 * (double)e / (double)p.rotary_dim * p.log2_theta);
        const double a = (double)pos / p.pos_scale * inv;
        const double two_pi = 6.283185307179586476925286766559;
        const double red = a - rint(a / two_pi) * two_pi;
        sincos_acc(ACC(red), sn, cs);
    }
    if (p.inverse) *sn = -*sn;
}

// N accumulator values of the shared angle table; `at` is a multiple of N,
// so the copy is one or two aligned shared loads.
template <int N>
struct alignas(N * sizeof(ACC) < 16 ? N * sizeof(ACC) : 16) AccRun {
    ACC v[N];
};

template <int N>
__device__ __forceinline__ AccRun<N> acc_run(const ACC* table, u32 at) {
    return *reinterpret_cast<const AccRun<N>*>(table + at);
}

extern "C" __global__ void __launch_bounds__(256) rope_rows(const RopeParams p) {
    extern __shared__ __align__(16) unsigned char rope_smem[];
    const u32 half = p.rotary_dim / 2;
    const u32 tpc = p.tokens_per_cta;
    ACC* const cos_s = reinterpret_cast<ACC*>(rope_smem);  // [tokens_per_cta][half]
    ACC* const sin_s = cos_s + tpc * half;
    const u32 items = p.head_items;
    const u32 stride_rows = blockDim.x / items;  // rows one pass of the block covers
    const u32 k = threadIdx.x % items;           // this thread's item column
    const u32 r0 = threadIdx.x / items;
    const bool active = r0 < stride_rows;
    const u32 seq = (u32)p.shape[1];
    const u32 heads = (u32)p.shape[2];
    const u32 n_tok = (u32)(p.shape[0] * p.shape[1]);
    const bool rot = k < p.rot_items;
    const bool neox_pair = rot && !p.gptj;  // a second vector at col + half
    const u32 col = rot ? k * VEC : p.rotary_dim + (k - p.rot_items) * VEC;
    const u32 pair0 = p.gptj ? col / 2 : col;  // first pair of the item
    for (u64 g = blockIdx.x; g < p.n_groups; g += gridDim.x) {
        const u32 tok0 = (u32)(g / p.head_groups) * tpc;
        const u32 h0 = (u32)(g % p.head_groups) * p.heads_per_cta;
        const u32 n_t = min(tpc, n_tok - tok0);
        const u32 n_h = min(p.heads_per_cta, heads - h0);
        const u32 rows = n_t * n_h;  // row r: token tok0 + r / n_h, head h0 + r % n_h
        if (g != blockIdx.x) __syncthreads();  // the previous group's angles are read
        for (u32 c = 0; c < rows; c += ROPE_ROWS_PER_THREAD * stride_rows) {
            T a[ROPE_ROWS_PER_THREAD][VEC], b[ROPE_ROWS_PER_THREAD][VEC];
            i64 oy[ROPE_ROWS_PER_THREAD];
            u32 at[ROPE_ROWS_PER_THREAD];
#pragma unroll
            for (int j = 0; j < ROPE_ROWS_PER_THREAD; ++j) {
                const u32 r = c + r0 + j * stride_rows;
                if (active && r < rows) {
                    const u32 lt = r / n_h;
                    const u32 h = h0 + (r - lt * n_h);
                    const u32 t = tok0 + lt;
                    const u32 bi = t / seq, si = t - bi * seq;
                    const i64 ox = (i64)bi * p.sx[0] + (i64)si * p.sx[1] + (i64)h * p.sx[2] + col;
                    oy[j] = (i64)bi * p.sy[0] + (i64)si * p.sy[1] + (i64)h * p.sy[2] + col;
                    at[j] = lt * half + pair0;
                    load_vec(p.x + ox, 0, a[j]);
                    if (neox_pair) load_vec(p.x + ox + half, 0, b[j]);
                }
            }
            if (c == 0) {
                // the cos and sin of this group's tokens, while the loads fly
                for (u32 i = threadIdx.x; i < n_t * half; i += blockDim.x) {
                    const u32 lt = i / half;
                    const u32 t = tok0 + lt;
                    const u32 bi = t / seq;
                    ACC cs, sn;
                    rope_cos_sin(p, rope_position(p, bi, t - bi * seq), i - lt * half, &cs, &sn);
                    cos_s[i] = cs;
                    sin_s[i] = sn;
                }
                __syncthreads();
            }
#pragma unroll
            for (int j = 0; j < ROPE_ROWS_PER_THREAD; ++j) {
                const u32 r = c + r0 + j * stride_rows;
                if (!(active && r < rows)) continue;
                if (neox_pair) {
                    const AccRun<VEC> cv = acc_run<VEC>(cos_s, at[j]);
                    const AccRun<VEC> sv = acc_run<VEC>(sin_s, at[j]);
#pragma unroll
                    for (int v = 0; v < VEC; ++v) {
                        const ACC x0 = to_acc(a[j][v]), x1 = to_acc(b[j][v]);
                        a[j][v] = from_acc(x0 * cv.v[v] - x1 * sv.v[v]);
                        b[j][v] = from_acc(x1 * cv.v[v] + x0 * sv.v[v]);
                    }
                    store_vec(p.y + oy[j] + half, 0, b[j]);
                } else if (rot) {
                    const AccRun<VEC / 2> cv = acc_run<VEC / 2>(cos_s, at[j]);
                    const AccRun<VEC / 2> sv = acc_run<VEC / 2>(sin_s, at[j]);
#pragma unroll
                    for (int v = 0; v < VEC / 2; ++v) {
                        const ACC x0 = to_acc(a[j][2 * v]), x1 = to_acc(a[j][2 * v + 1]);
                        a[j][2 * v] = from_acc(x0 * cv.v[v] - x1 * sv.v[v]);
                        a[j][2 * v + 1] = from_acc(x1 * cv.v[v] + x0 * sv.v[v]);
                    }
                }
                store_vec(p.y + oy[j], 0, a[j]);
            }
        }
    }
}

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
        ACC sn, cs;
        rope_cos_sin(p, rope_position(p, b, s), e, &cs, &sn);
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
